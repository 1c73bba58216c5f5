rule run_job:
    input:
        npz="results/data/{dataset}.npz",
        meta="results/data/{dataset}.json",
        optimum=OPTIMUM_NPZ,
        optimum_json=OPTIMUM_JSON,
    output:
        rows="results/runs/{dataset}/{algorithm}/{conversion}/eps~{eps}/seeds~{chunk}.csv",
        curves="results/runs/{dataset}/{algorithm}/{conversion}/eps~{eps}/seeds~{chunk}.curves.parquet",
    log:
        "logs/runs/{dataset}/{algorithm}/{conversion}/eps~{eps}/seeds~{chunk}.log",
    params:
        spec=job_spec,
    threads: 1
    message:
        "{wildcards.algorithm} on {wildcards.dataset}, eps={wildcards.eps} ({wildcards.conversion}), seeds {wildcards.chunk}"
    conda:
        "../../envs/dpnewton.yaml"
    script:
        "../scripts/run_job.py"
