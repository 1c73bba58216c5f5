"""Thin adapter: rule figure -> dpnewton.pipeline.figures.draw_figure."""
from dpnewton.pipeline.figures import draw_figure
from dpnewton.pipeline.jobs import setup_log

setup_log(snakemake.log[0])
draw_figure(snakemake.params.figure, dict(snakemake.input.items()), list(snakemake.output),
            dict(snakemake.params.items()))
