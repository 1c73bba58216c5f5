"""Thin adapter: rule tracks_table -> dpnewton.pipeline.tracks.write_track_tables."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.tracks import TABLE_NAMES, write_track_tables

setup_log(snakemake.log[0])
write_track_tables(snakemake.input.rows, {track: snakemake.output[name] for track, name in TABLE_NAMES.items()})
