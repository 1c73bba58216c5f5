"""Thin adapter: rule claims -> dpnewton.pipeline.claims.write_claims."""
from dpnewton.pipeline.claims import write_claims
from dpnewton.pipeline.jobs import setup_log

setup_log(snakemake.log[0])
write_claims(dict(snakemake.input.items()), dict(snakemake.output.items()), dict(snakemake.params.claims),
             dict(snakemake.params.protocol), dict(snakemake.params.tracks), dict(snakemake.params.benchmarks))
