"""Thin adapter: rule optimum -> dpnewton.problems.compute_optimum."""
from dpnewton.pipeline.jobs import setup_log, log
from dpnewton.problems import compute_optimum

setup_log(snakemake.log[0])
summary = compute_optimum(snakemake.input.npz, snakemake.output.npz, snakemake.output.json)
log.info("optimum of %s: loss*=%.12g ||grad||=%.3g after %d Newton steps", summary["dataset"],
         summary["loss_opt"], summary["grad_norm"], summary["newton_iterations"])
