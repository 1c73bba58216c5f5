"""Thin adapter: rules fig* -> dpnewton.pipeline.plots (make_figure)."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.plots import make_figure

setup_log(snakemake.log[0])
make_figure(snakemake.params.figure, dict(snakemake.input.items()), list(snakemake.output),
            dict(snakemake.params.items()))
