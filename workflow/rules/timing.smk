rule time_updates:
    input:
        npz="results/data/{dataset}.npz",
        meta="results/data/{dataset}.json",
        optimum=OPTIMUM_NPZ,
    output:
        "results/timing/{dataset}.csv",
    log:
        "logs/timing/{dataset}.log",
    benchmark:
        "results/benchmarks/time_updates/{dataset}.tsv"
    conda:
        "../../envs/dpnewton.yaml"
    # every core of a local run, so that no other job runs beside the timed runs (BLAS stays on one
    # thread inside); under a cluster profile, the profile's cores
    threads: lambda wildcards: workflow.cores
    params:
        spec=timing_spec,
    message:
        "Timing lone runs on {wildcards.dataset}"
    script:
        "../scripts/time_updates.py"
