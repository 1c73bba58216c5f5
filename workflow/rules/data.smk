rule prepare_data:
    output:
        npz="results/data/{dataset}.npz",
        meta="results/data/{dataset}.json",
    log:
        "logs/prepare_data/{dataset}.log",
    benchmark:
        "results/benchmarks/prepare_data/{dataset}.tsv"
    priority: data_priority
    conda:
        "../../envs/dpnewton.yaml"
    params:
        options=dataset_options,
        data_dir=data_dir,
        allow_download=allow_download,
    message:
        "Preparing dataset {wildcards.dataset}"
    script:
        "../scripts/prepare_data.py"
