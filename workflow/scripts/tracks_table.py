"""Thin adapter: rule tracks_table -> dpnewton.pipeline.tracks.write_track_table."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.tracks import write_track_table

setup_log(snakemake.log[0])
write_track_table(snakemake.input.rows, snakemake.output.parquet, snakemake.output.csv)
