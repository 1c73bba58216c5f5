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
    message:
        "Non-private optimum of {wildcards.dataset}"
    conda:
        "../../envs/dpnewton.yaml"
    script:
        "../scripts/optimum.py"
