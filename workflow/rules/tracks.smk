# The private-selection and fixed-rule tracks (dpnewton.pipeline.tracks; config key `tracks`).


rule run_track:
    input:
        npz="results/data/{dataset}.npz",
        meta="results/data/{dataset}.json",
        optimum=OPTIMUM_NPZ,
        optimum_json=OPTIMUM_JSON,
    output:
        rows="results/tracks/{track}/{dataset}/{method}/eps~{eps}.csv",
        # the released models' privacy ledger (dpnewton.pipeline.run_ledger.ledger_path of the rows)
        ledger="results/tracks/{track}/{dataset}/{method}/eps~{eps}.ledger.parquet",
    log:
        "logs/tracks/{track}/{dataset}/{method}/eps~{eps}.log",
    benchmark:
        "results/benchmarks/run_track/{track}/{dataset}/{method}/eps~{eps}.tsv"
    wildcard_constraints:
        track="private-selection|fixed-rule",
        method=r"[^/]+",
    conda:
        "../../envs/dpnewton.yaml"
    threads: 1
    params:
        spec=track_spec,
    message:
        "{wildcards.track}: {wildcards.method} on {wildcards.dataset}, eps={wildcards.eps}"
    script:
        "../scripts/run_track.py"


rule tracks_table:
    input:
        rows=lambda wildcards: all_track_rows(),
    output:
        private_selection=multiext("results/tables/private_selection", ".parquet", ".csv"),
        fixed_rule=multiext("results/tables/fixed_rule", ".parquet", ".csv"),
    log:
        "logs/tables/tracks.log",
    conda:
        "../../envs/dpnewton.yaml"
    script:
        "../scripts/tracks_table.py"
