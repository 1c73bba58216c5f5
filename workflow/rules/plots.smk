rule fig1_runtime:
    input:
        best="results/tables/best_T.parquet",
        curves="results/tables/best_curves.parquet",
        costs="results/tables/update_costs.parquet",
    output:
        [
            report(
                f"results/figures/fig1_runtime.{ext}",
                caption="../report/fig1_runtime.rst",
                category="Figures",
                labels={"figure": "Figure 1: excess loss vs runtime", "format": ext},
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/fig1_runtime.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure="fig1_runtime",
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
    message:
        "Figure 1: excess loss vs runtime"
    script:
        "../scripts/figure.py"


rule fig2_privacy_utility:
    input:
        best="results/tables/best_T.parquet",
        baseline="results/tables/baseline.parquet",
        floor="results/tables/floor.parquet",
    output:
        [
            report(
                f"results/figures/fig2_privacy_utility.{ext}",
                caption="../report/fig2_privacy_utility.rst",
                category="Figures",
                labels={"figure": "Figure 2: privacy-utility", "format": ext},
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/fig2_privacy_utility.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure="fig2_privacy_utility",
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
    message:
        "Figure 2: privacy-utility"
    script:
        "../scripts/figure.py"


rule fig3_convergence:
    input:
        best="results/tables/best_T.parquet",
        curves="results/tables/best_curves.parquet",
    output:
        [
            report(
                f"results/figures/fig3_convergence.{ext}",
                caption="../report/fig3_convergence.rst",
                category="Figures",
                labels={"figure": "Figure 3: convergence vs DP-GD-Oracle", "format": ext},
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/fig3_convergence.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure="fig3_convergence",
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
    message:
        "Figure 3: convergence vs DP-GD-Oracle"
    script:
        "../scripts/figure.py"


rule fig4_minibatch:
    input:
        best="results/tables/best_T.parquet",
        baseline="results/tables/baseline.parquet",
    output:
        [
            report(
                f"results/figures/fig4_minibatch.{ext}",
                caption="../report/fig4_minibatch.rst",
                category="Figures",
                labels={"figure": "Figure 4: minibatch vs DP-SGD", "format": ext},
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/fig4_minibatch.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure="fig4_minibatch",
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
    message:
        "Figure 4: minibatch vs DP-SGD"
    script:
        "../scripts/figure.py"


rule fig5_conversions:
    input:
        best="results/tables/best_T.parquet",
        baseline="results/tables/baseline.parquet",
    output:
        [
            report(
                f"results/figures/fig5_conversions.{ext}",
                caption="../report/fig5_conversions.rst",
                category="Figures",
                labels={"figure": "Figure 5: conversions", "format": ext},
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/fig5_conversions.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure="fig5_conversions",
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
    message:
        "Figure 5: conversions"
    script:
        "../scripts/figure.py"


rule fig7_frontier:
    input:
        frontier="results/tables/frontier.parquet",
        baseline="results/tables/baseline.parquet",
        floor="results/tables/floor.parquet",
    output:
        [
            report(
                f"results/figures/fig7_frontier.{ext}",
                caption="../report/fig7_frontier.rst",
                category="Figures",
                labels={"figure": "Figure 7: compute-budget frontier", "format": ext},
            )
            for ext in FORMATS
        ],
    log:
        "logs/figures/fig7_frontier.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        figure="fig7_frontier",
        figures=figure_config,
        conversion=primary,
        conversions=conversions,
        study=study,
        privacy_utility=privacy_utility_algorithms,
        minibatch=minibatch_algorithms,
    message:
        "Figure 7: compute-budget frontier"
    script:
        "../scripts/figure.py"


if HOLDOUT_ON:

    rule fig6_heldout:
        input:
            heldout="results/tables/heldout.parquet",
        output:
            [
                report(
                    f"results/figures/fig6_heldout.{ext}",
                    caption="../report/fig6_heldout.rst",
                    category="Figures",
                    labels={"figure": "Figure 6: held-out test metrics", "format": ext},
                )
                for ext in FORMATS
            ],
        log:
            "logs/figures/fig6_heldout.log",
        localrule: True
        conda:
            "../../envs/dpnewton.yaml"
        params:
            figure="fig6_heldout",
            figures=figure_config,
            conversion=primary,
            conversions=conversions,
            study=study,
            privacy_utility=privacy_utility_algorithms,
            minibatch=minibatch_algorithms,
        message:
            "Figure 6: held-out test metrics"
        script:
            "../scripts/figure.py"
