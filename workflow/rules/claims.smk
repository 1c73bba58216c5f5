rule claims:
    input:
        runs="results/tables/runs.parquet",
        summary="results/tables/summary.parquet",
        best="results/tables/best_T.parquet",
        baseline="results/tables/baseline.parquet",
        best_curves="results/tables/best_curves.parquet",
        costs="results/tables/update_costs.parquet",
        frontier="results/tables/frontier.parquet",
        # F*'s mechanism on the true loss, beside F* in "Beyond the paper" (dpnewton.floor)
        floor="results/tables/floor.parquet",
        tracks=lambda wildcards: track_tables("parquet"),
    output:
        md=report(
            "results/claims/claims.md",
            caption="../report/claims.rst",
            category="Claims",
            labels={"table": "claims of the paper: verdicts"},
        ),
        csv=report(
            "results/claims/claims.csv",
            caption="../report/claims.rst",
            category="Claims",
            labels={"table": "claims of the paper: verdicts (CSV)"},
        ),
        robustness="results/claims/robustness.csv",
        divergence="results/claims/divergence.csv",
        # the summary heat map (dpnewton.pipeline.claims.summary.heatmap), published beside claims.md
        summary_figure="results/claims/claims_summary.png",
    log:
        "logs/claims.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        claims=claims_config,
        protocol=protocol_summary,
        tracks=lambda wildcards: conf().get("tracks") or {},
        benchmarks=all_benchmarks,
    message:
        "Checking the paper's claims"
    script:
        "../scripts/claims.py"


rule publish_claims:
    input:
        md="results/claims/claims.md",
        summary_figure="results/claims/claims_summary.png",
        claims=claims_files()[1:],
        tables=lambda wildcards: claims_bundle_tables(),
        figures=lambda wildcards: figure_files(),
        protocol="results/tables/protocol.json",
        runs="results/tables/runs.parquet",
    output:
        md="figures/claims.md",
        summary_figure="figures/claims_summary.png",
        bundle=directory("figures/claims"),
    log:
        "logs/publish_claims.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        benchmarks=all_benchmarks,
    message:
        "Publishing the claims report and its figures and tables to figures/"
    script:
        "../scripts/publish_claims.py"
