"""Thin adapter: rule run_job -> dpnewton.pipeline.jobs.run_job (one job chunk, rows + curves)."""
from dpnewton.pipeline.jobs import run_job, setup_log, workflow_source_dir
from dpnewton.pipeline.jobspec import JobSpec

setup_log(snakemake.log[0])
# params carry the serialised spec (JobSpec.to_dict); from_dict checks it before any data is read
run_job(snakemake.input.npz, JobSpec.from_dict(dict(snakemake.params.spec)), snakemake.output.rows,
        snakemake.output.curves, source_dir=workflow_source_dir(snakemake.scriptdir))
