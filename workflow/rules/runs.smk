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
    benchmark:
        "results/benchmarks/run_job/{dataset}/{algorithm}/{conversion}/eps~{eps}/seeds~{chunk}.tsv"
    # longest first, so that the short jobs fill the cores at the end of the run (docs/pipeline.md)
    priority: job_priority
    conda:
        "../../envs/dpnewton.yaml"
    threads: 1
    params:
        spec=job_spec,
        label=job_label,
    message:
        "{params.label}, seeds {wildcards.chunk}"
    script:
        "../scripts/run_job.py"
