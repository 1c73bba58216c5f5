"""Thin adapter: rule time_updates -> dpnewton.pipeline.timing.run_timing (per-update costs)."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.timing import run_timing

setup_log(snakemake.log[0])
run_timing(snakemake.input.npz, dict(snakemake.params.spec), snakemake.output[0])
