rule optimum:
    input:
        npz="results/data/{dataset}.npz",
        meta="results/data/{dataset}.json",
    output:
        # beside the prepared file, where dpnewton.problems looks for the cached optimum
        npz="results/data/{dataset}.optimum.npz",
        json="results/data/{dataset}.optimum.json",
    log:
        "logs/optimum/{dataset}.log",
    benchmark:
        "results/benchmarks/optimum/{dataset}.tsv"
    priority: data_priority
    conda:
        "../../envs/dpnewton.yaml"
    message:
        "Non-private optimum of {wildcards.dataset}"
    script:
        "../scripts/optimum.py"


if HOLDOUT_ON:

    rule optimum_holdout:
        input:
            npz="results/data/{dataset}.npz",
            meta="results/data/{dataset}.json",
        output:
            # the training split's optimum, in files whose names hold the split (dpnewton.problems.optimum_paths)
            npz=OPTIMUM_NPZ,
            json=OPTIMUM_JSON,
        log:
            "logs/optimum_holdout/{dataset}.log",
        benchmark:
            "results/benchmarks/optimum_holdout/{dataset}.tsv"
        priority: data_priority
        conda:
            "../../envs/dpnewton.yaml"
        params:
            holdout=holdout,
        message:
            "Non-private optimum of the training split of {wildcards.dataset} (holdout {params.holdout})"
        script:
            "../scripts/optimum_holdout.py"
