# Every figure of dpnewton.pipeline.figures.SPECS (its tables, draw function, caption and when it is made);
# which of them a config makes: figure_names in common.smk.
rule figure:
    input:
        unpack(figure_inputs),
    output:
        [
            report(
                f"results/figures/{{fig}}.{ext}",
                caption="../report/figure.rst",
                category="Figures",
                labels=figure_labels(ext),
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/{fig}.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure=lambda wildcards: wildcards.fig,
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
        methods=style_order,
        caption=figure_caption,
    message:
        "Figure {wildcards.fig}"
    script:
        "../scripts/figure.py"
