# The copies of the final figures in figures/: one job per figure (all its formats), since which
# figures a config makes is known only once the job plan is built; `snakemake publish` makes them all.
rule publish_figure:
    input:
        expand("results/figures/{{fig}}.{ext}", ext=FORMATS),
    output:
        expand("figures/{{fig}}.{ext}", ext=FORMATS),
    log:
        "logs/publish/{fig}.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    message:
        "Copying {wildcards.fig} to figures/"
    script:
        "../scripts/publish.py"


rule publish:
    input:
        published_figures,
    localrule: True
