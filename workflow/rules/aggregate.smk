rule aggregate:
    input:
        rows=all_job_rows,
        curves=all_job_curves,
        optima=all_optima,
        timings=all_timings,
        # prepared data for the Gaussian ridge floor (H* at w*; dpnewton.floor)
        prepared=all_prepared,
    output:
        **{f"{t}_parquet": f"results/tables/{t}.parquet" for t in TABLES},
        **(
            {
                "heldout_csv": report(
                    "results/tables/heldout.csv",
                    caption="../report/heldout.rst",
                    category="Tables",
                    labels={"table": "held-out metrics at best T"},
                )
            }
            if HOLDOUT_ON
            else {}
        ),
        runs_csv="results/tables/runs.csv",
        summary_csv="results/tables/summary.csv",
        best_T_csv=report(
            "results/tables/best_T.csv",
            caption="../report/best_T.rst",
            category="Tables",
            labels={"table": "best T per cell"},
        ),
        baseline_csv=report(
            "results/tables/baseline.csv",
            caption="../report/baseline.rst",
            category="Tables",
            labels={"table": "trivial baseline"},
        ),
        update_costs_csv=report(
            "results/tables/update_costs.csv",
            caption="../report/update_costs.rst",
            category="Tables",
            labels={"table": "per-update cost of lone runs"},
        ),
        table1_csv=report(
            "results/tables/table1.csv",
            caption="../report/table1.rst",
            category="Tables",
            labels={"table": "Table 1"},
        ),
        table1_long_csv="results/tables/table1_long.csv",
        table1_md="results/tables/table1.md",
        edges_md="results/tables/best_T_edges.md",
        protocol="results/tables/protocol.json",
        protocol_md=report(
            "results/tables/protocol.md",
            caption="../report/protocol.rst",
            category="Protocol",
            labels={"table": "protocol of this run"},
        ),
        best_curves="results/tables/best_curves.parquet",
        floor_parquet="results/tables/floor.parquet",
        floor_csv=report(
            "results/tables/floor.csv",
            caption="../report/floor.rst",
            category="Tables",
            labels={"table": "Gaussian ridge floor (local quadratic model), not a lower bound"},
        ),
        frontier_parquet="results/tables/frontier.parquet",
        frontier_csv=report(
            "results/tables/frontier.csv",
            caption="../report/frontier.rst",
            category="Tables",
            labels={"table": "compute-budget frontier"},
        ),
        # with a holdout: held-out metrics at best T (heldout_parquet comes with TABLES)
    log:
        "logs/aggregate.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        protocol=protocol_summary,
        table1=table1_config,
        conversion=primary,
        holdout=holdout,
    message:
        "Aggregating the run rows into tables"
    script:
        "../scripts/aggregate.py"
