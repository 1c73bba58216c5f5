rule publish:
    input:
        figure_files(),
    output:
        figure_files("figures"),
    log:
        "logs/publish.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    message:
        "Copying the final figures to figures/"
    script:
        "../scripts/publish.py"
