"""Thin adapter: rule aggregate -> dpnewton.pipeline.tables.write_all."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.tables import write_all

setup_log(snakemake.log[0])
write_all(rows=list(snakemake.input.rows), curves=list(snakemake.input.curves),
          optima=list(snakemake.input.optima), timings=list(snakemake.input.timings),
          out=dict(snakemake.output.items()),
          protocol=dict(snakemake.params.protocol), table1=dict(snakemake.params.table1),
          conversion=snakemake.params.conversion,
          prepared=list(getattr(snakemake.input, "prepared", [])), holdout=getattr(snakemake.params, "holdout", None))
