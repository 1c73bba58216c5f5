"""Thin adapter: rule resources -> dpnewton.pipeline.resources.write_resources."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.resources import write_resources

setup_log(snakemake.log[0])
write_resources(dict(snakemake.params.benchmarks), snakemake.output.parquet, snakemake.output.csv)
