"""Thin adapter: rule browser -> dpnewton.pipeline.browser.build."""
from dpnewton.pipeline.browser import build
from dpnewton.pipeline.jobs import setup_log

setup_log(snakemake.log[0])
inputs = snakemake.input
build(snakemake.output[0], inputs.best_T, summary=inputs.summary, claims=getattr(inputs, "claims", None),
      floor=inputs.floor, protocol=inputs.protocol, source="results/tables")
