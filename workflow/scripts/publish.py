"""Thin adapter: rule publish -> copy results/figures/* to figures/ (atomic)."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.plots import publish

setup_log(snakemake.log[0])
publish(list(snakemake.input), list(snakemake.output))
