rule publish:
    input:
        figure_files(),
    output:
        figure_files("figures"),
    log:
        "logs/publish.log",
    localrule: True
    message:
        "Copying the final figures to figures/"
    conda:
        "../../envs/dpnewton.yaml"
    script:
        "../scripts/publish.py"
