"""Thin adapter: rule tracks_table -> dpnewton.pipeline.tracks.write_track_tables."""
from dpnewton.pipeline.jobs import setup_log
from dpnewton.pipeline.tracks import write_track_tables

setup_log(snakemake.log[0])
write_track_tables(snakemake.input.rows, {"private-selection": snakemake.output.private_selection,
                                          "fixed-rule": snakemake.output.fixed_rule})
