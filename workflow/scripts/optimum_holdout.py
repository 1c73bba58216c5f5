"""Thin adapter: rule optimum_holdout -> dpnewton.problems.compute_optimum on the training split."""
from dpnewton.pipeline.jobs import setup_log, log
from dpnewton.problems import compute_optimum

setup_log(snakemake.log[0])
summary = compute_optimum(snakemake.input.npz, snakemake.output.npz, snakemake.output.json,
                          holdout=snakemake.params.holdout)
log.info("optimum of %s, training split (%d rows; %d test rows): loss*=%.12g ||grad||=%.3g after %d Newton steps; "
         "test accuracy %.4f, test log-loss %.6g", summary["dataset"], summary["n"], summary["n_test"],
         summary["loss_opt"], summary["grad_norm"], summary["newton_iterations"], summary["test_accuracy"],
         summary["test_log_loss"])
