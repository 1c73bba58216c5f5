"""End-to-end pipeline run with ``holdout`` on (tiny synthetic config, in a tmp dir).

Checks the held-out table and Figure 7, that runs, optimum, excess loss and timing used the
training split only, and recomputes the held-out numbers independently (from the prepared file,
the saved optimum and replayed runs). Select with ``pytest -m slow tests/workflow/test_holdout_pipeline.py``.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import yaml

from dpnewton.experiment import run_algorithm
from dpnewton.holdout import holdout_split
from dpnewton.loss import LogisticProblem
from tests.workflow.test_determinism import PIPELINE_CONFIG
from tests.workflow.test_pipeline import snakemake

pytestmark = pytest.mark.slow

HOLDOUT = 0.25
N = PIPELINE_CONFIG["datasets"]["synthetic"]["options"]["n"]
N_TEST = round(HOLDOUT * N)
CONFIG = {**copy.deepcopy(PIPELINE_CONFIG), "holdout": HOLDOUT, "timing": {"repeats": 1, "seconds_per_run": 0.02}}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    wd = tmp_path_factory.mktemp("holdout_pipeline")
    cfg = wd / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    res = snakemake(wd, "--cores", "2", config=cfg)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return wd


def _rows(wd):
    """Signed, projected rows of the prepared file, computed here: z_i = y_i x_i / max(1, ||x_i||)."""
    with np.load(wd / "results/data/synthetic.npz") as f:
        X, y = f["X"], f["y"]
    Z = (y / np.maximum(1.0, np.linalg.norm(X, axis=1)))[:, None] * X
    train, test = holdout_split("synthetic", HOLDOUT, len(y))
    return Z[train], Z[test]


def test_training_split_everywhere(run_dir):
    data = run_dir / "results/data"
    assert not (data / "synthetic.optimum.npz").exists()          # the full data's optimum is not made
    opt = json.loads((data / f"synthetic.holdout~{HOLDOUT!r}.optimum.json").read_text())
    assert (opt["n"], opt["n_test"], opt["holdout"]) == (N - N_TEST, N_TEST, HOLDOUT)
    runs = pd.read_parquet(run_dir / "results/tables/runs.parquet")
    assert (runs["n"] == N - N_TEST).all() and (runs["n_test"] == N_TEST).all() and (runs["holdout"] == HOLDOUT).all()
    assert np.allclose(runs["delta"], float(N - N_TEST) ** -2, rtol=1e-15, atol=0)
    assert (runs["loss_opt"] == opt["loss_opt"]).all()
    assert runs["train_accuracy"].between(0, 1).all() and runs["test_accuracy"].between(0, 1).all()
    assert (runs["test_log_loss"] > 0).all()
    assert "timing on synthetic (n=%d," % (N - N_TEST) in (run_dir / "logs/timing/synthetic.log").read_text()
    protocol = json.loads((run_dir / "results/tables/protocol.json").read_text())
    assert protocol["holdout"]["fraction"] == HOLDOUT


def test_optimum_reference_is_recomputed(run_dir):
    z_train, z_test = _rows(run_dir)
    with np.load(run_dir / f"results/data/synthetic.holdout~{HOLDOUT!r}.optimum.npz") as f:
        w_opt, loss_opt = f["w"], float(f["loss"])
    assert loss_opt == pytest.approx(np.mean(np.logaddexp(0.0, -(z_train @ w_opt))), rel=1e-12)
    # w* minimises the training loss: its gradient there vanishes
    grad = -(z_train.T @ (1.0 / (1.0 + np.exp(z_train @ w_opt)))) / len(z_train)
    assert np.linalg.norm(grad) < 1e-8
    heldout = pd.read_parquet(run_dir / "results/tables/heldout.parquet")
    assert heldout["optimum_test_log_loss"].eq(heldout["optimum_test_log_loss"].iloc[0]).all()
    r = heldout.iloc[0]
    assert r["optimum_test_log_loss"] == pytest.approx(np.mean(np.logaddexp(0.0, -(z_test @ w_opt))), rel=1e-12)
    assert r["optimum_test_accuracy"] == np.mean(z_test @ w_opt > 0)
    assert r["optimum_train_accuracy"] == np.mean(z_train @ w_opt > 0)
    assert (r["n_train"], r["n_test"]) == (N - N_TEST, N_TEST)


@pytest.mark.parametrize("algorithm", ["hess-clip", "dp-gd", "dp-sgd"])
def test_row_metrics_equal_a_replayed_run(run_dir, algorithm):
    """Replay a job's runs on the training rows (same identities and T grid as the job) and compute
    the metrics from the replayed weights by hand (rel 1e-14: the rows went through CSV text)."""
    z_train, z_test = _rows(run_dir)
    with np.load(run_dir / f"results/data/synthetic.holdout~{HOLDOUT!r}.optimum.npz") as f:
        w_opt, loss_opt = f["w"], float(f["loss"])
    problem = LogisticProblem(z_train, name="synthetic")
    problem.set_optimum(w_opt, loss_opt)
    runs = pd.read_parquet(run_dir / "results/tables/runs.parquet")
    mine = runs[runs["algorithm"] == algorithm]
    grid = sorted(PIPELINE_CONFIG["grids"]["g"])
    for seed in sorted(mine["seed"].unique()):
        for res in run_algorithm(problem, "synthetic", algorithm, 1.0, [int(seed)], grid):
            row = mine[(mine["seed"] == seed) & (mine["iterations"] == res.identity.iterations)].iloc[0]
            assert row["excess_loss"] == pytest.approx(res.final_excess_loss, rel=1e-14)
            assert row["train_accuracy"] == pytest.approx(np.mean(z_train @ res.w > 0), rel=1e-14)
            assert row["test_accuracy"] == pytest.approx(np.mean(z_test @ res.w > 0), rel=1e-14)
            assert row["test_log_loss"] == pytest.approx(np.mean(np.logaddexp(0.0, -(z_test @ res.w))), rel=1e-12)


def test_heldout_table_at_best_T(run_dir):
    heldout = pd.read_parquet(run_dir / "results/tables/heldout.parquet")
    pd.testing.assert_frame_equal(heldout, pd.read_csv(run_dir / "results/tables/heldout.csv"), check_dtype=False)
    best = pd.read_parquet(run_dir / "results/tables/best_T.parquet")
    runs = pd.read_parquet(run_dir / "results/tables/runs.parquet")
    key = ["dataset", "algorithm", "conversion", "epsilon"]
    assert len(heldout) == len(best) == len(PIPELINE_CONFIG["algorithms"])
    assert heldout["selection"].str.contains("non-private").all()
    for _, h in heldout.iterrows():
        b = best[(best[key] == h[key].values).all(axis=1)].iloc[0]
        assert h["best_T"] == b["best_T"] and h["excess_loss_mean"] == b["excess_loss_mean"]
        # best T is the argmin of the training excess loss, whatever the test metrics say
        cell = runs[(runs[key] == h[key].values).all(axis=1)]
        means = cell.groupby("iterations")["excess_loss"].mean()
        assert h["best_T"] == means.idxmin()
        at = cell[cell["iterations"] == h["best_T"]]
        for col in ("train_accuracy", "test_accuracy", "test_log_loss"):
            assert h[f"{col}_mean"] == pytest.approx(at[col].mean(), rel=1e-15), col
        assert h["test_log_loss_se"] == pytest.approx(np.std(at["test_log_loss"], ddof=1) / np.sqrt(len(at)))
    summary = pd.read_parquet(run_dir / "results/tables/summary.parquet")
    assert {"train_accuracy_mean", "test_accuracy_mean", "test_accuracy_se", "test_log_loss_mean",
            "test_log_loss_se"} <= set(summary.columns)


def test_figure_and_report(run_dir):
    for fig in ("fig2_privacy_utility", "fig7_heldout"):
        p = run_dir / "results/figures" / f"{fig}.png"
        assert p.exists() and p.stat().st_size > 1000, p
    res = snakemake(run_dir, "--report", "report.html", config=run_dir / "cfg.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    html = (run_dir / "report.html").read_text(errors="replace")
    assert "fig7_heldout" in html and "heldout.csv" in html and "training excess loss" in html
