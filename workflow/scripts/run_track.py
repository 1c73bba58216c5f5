"""Thin adapter: rule run_track -> dpnewton.pipeline.tracks.run_track_job (all repetitions of one cell)."""
from dpnewton.pipeline.jobs import setup_log, workflow_source_dir
from dpnewton.pipeline.tracks import run_track_job

setup_log(snakemake.log[0])
run_track_job(snakemake.input.npz, dict(snakemake.params.spec), snakemake.output.rows,
              source_dir=workflow_source_dir(snakemake.scriptdir), ledger_out=snakemake.output.ledger)
