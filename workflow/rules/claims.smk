rule claims:
    input:
        runs="results/tables/runs.parquet",
        summary="results/tables/summary.parquet",
        best="results/tables/best_T.parquet",
        baseline="results/tables/baseline.parquet",
        best_curves="results/tables/best_curves.parquet",
        costs="results/tables/update_costs.parquet",
        frontier="results/tables/frontier.parquet",
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
        "results/claims/claims.md",
    output:
        "figures/claims.md",
    log:
        "logs/publish_claims.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    message:
        "Copying the claims report to figures/"
    script:
        "../scripts/publish.py"
