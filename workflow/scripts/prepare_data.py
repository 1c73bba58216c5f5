"""Thin adapter: rule prepare_data -> dpnewton.data.prepare."""
from dpnewton.data import prepare
from dpnewton.pipeline.jobs import setup_log, log

setup_log(snakemake.log[0])
options = dict(snakemake.params.options or {})
prepared = prepare(snakemake.wildcards.dataset, data_dir=snakemake.params.data_dir, out=snakemake.output.npz,
                   allow_download=snakemake.params.allow_download, **options)
log.info("prepared %s -> %s", prepared.summary(), snakemake.output.npz)
