"""Thin adapter: rule publish_claims -> dpnewton.pipeline.claims.bundle.write_bundle."""
from dpnewton.pipeline.claims.bundle import write_bundle
from dpnewton.pipeline.jobs import setup_log

setup_log(snakemake.log[0])
write_bundle(snakemake.input.md, [*snakemake.input.claims, *snakemake.input.tables, *snakemake.input.figures],
             snakemake.input.protocol, snakemake.input.runs, snakemake.output.md, snakemake.output.bundle,
             dict(snakemake.params.benchmarks),
             (snakemake.input.summary_figure, snakemake.output.summary_figure))
