rule resources:
    input:
        # after every benchmarked job: the aggregate tables need all of them
        "results/tables/protocol.json",
    output:
        parquet=RESOURCE_TABLES[0],
        csv=RESOURCE_TABLES[1],
    log:
        "logs/resources.log",
    localrule: True
    conda:
        "../../envs/dpnewton.yaml"
    params:
        benchmarks=all_benchmarks,
    message:
        "Resource use per rule from the benchmark files"
    script:
        "../scripts/resources.py"
