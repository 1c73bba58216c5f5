"""Holdout split and accuracies: known answers and properties (no Snakemake)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpnewton.experiment import result_record, run_algorithm
from dpnewton.holdout import heldout_metrics, holdout_fraction, holdout_split, split_problems
from dpnewton.loss import LogisticProblem
from dpnewton.problems import compute_optimum, load_split_from_prepared, optimum_paths

from tests.conftest import make_problem


# ---- the split -------------------------------------------------------------------------------

@pytest.mark.parametrize("n,fraction", [(10, 0.2), (1000, 0.2), (2001, 0.25), (37, 0.5), (400, 0.05)])
def test_split_is_disjoint_covering_and_sized(n, fraction):
    train, test = holdout_split("synthetic", fraction, n)
    assert len(test) == round(fraction * n) and len(train) == n - len(test)
    assert np.intersect1d(train, test).size == 0
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)   # original row order kept


def test_split_is_a_pure_function_of_dataset_fraction_and_n():
    a = holdout_split("a1a", 0.2, 5000)
    b = holdout_split("a1a", 0.2, 5000)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # another dataset name gives another split; a larger fraction holds out a superset
    assert not np.array_equal(holdout_split("adult", 0.2, 5000)[1], a[1])
    assert set(holdout_split("a1a", 0.1, 5000)[1]) < set(a[1])


def test_split_does_not_touch_the_global_rng():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    holdout_split("synthetic", 0.3, 100)
    assert np.array_equal(np.random.get_state()[1], before)


def test_holdout_setting_values():
    assert holdout_fraction(None) is None and holdout_fraction(0) is None and holdout_fraction(0.0) is None
    assert holdout_fraction(0.2) == 0.2
    for bad in (1, 1.0, -0.1, 1.5, True, "0.2"):
        with pytest.raises(ValueError, match="holdout"):
            holdout_fraction(bad)
    with pytest.raises(ValueError, match="at least one row"):
        holdout_split("synthetic", 0.01, 20)         # round(0.2) = 0 test rows


def test_split_problems_are_the_rows_of_the_full_problem():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 4)) * 2.0                 # rows longer than 1: projection matters
    y = np.where(rng.random(300) < 0.5, 1.0, -1.0)
    full = LogisticProblem.from_xy(X, y)
    train, test = split_problems(X, y, "custom", 0.3)
    tr, te = holdout_split("custom", 0.3, 300)
    assert np.array_equal(train.Z, full.Z[tr]) and np.array_equal(test.Z, full.Z[te])
    assert split_problems(X, y, "custom", None)[1] is None


def test_heldout_metrics_known_answers():
    test = LogisticProblem(np.array([[0.5, 0.0], [0.0, -0.5], [-0.3, 0.4], [0.0, 0.0]]))
    w = np.array([2.0, 1.0])
    m = np.array([1.0, -0.5, -0.2, 0.0])                    # the last row is a tie: counted wrong
    out = heldout_metrics(test, w)
    assert out["test_accuracy"] == 0.25
    assert out["test_log_loss"] == pytest.approx(np.mean(np.log1p(np.exp(-m))), rel=1e-14)
    assert heldout_metrics(test, np.zeros(2)) == {"test_accuracy": 0.0, "test_log_loss": pytest.approx(np.log(2))}


# ---- train_accuracy of the optimizers ---------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["dp-gd", "hess-clip", "minibatch-qu-clip", "aop", "cubic-newton"])
def test_train_accuracy_is_the_share_of_positive_margins(algorithm):
    problem = make_problem(n=500, d=5, seed=3)
    results = run_algorithm(problem, "toy", algorithm, 1.0, [0, 1], [1, 3])
    assert len(results) == 4
    for res in results:
        expect = float(np.mean(problem.Z @ res.w > 0))
        assert res.train_accuracy == expect
        assert result_record(res, "bs16", 1.0, 1e-6)["train_accuracy"] == expect


def test_batched_train_accuracy_does_not_depend_on_the_batch():
    problem = make_problem(n=500, d=5, seed=3)
    alone = run_algorithm(problem, "toy", "dp-gd", 1.0, [0], [7])[0]
    batch = [r for r in run_algorithm(problem, "toy", "dp-gd", 1.0, [0], [2, 7, 9]) if r.identity.iterations == 7][0]
    assert alone.train_accuracy == batch.train_accuracy and np.array_equal(alone.w, batch.w)


# ---- the cached optimum of a split -------------------------------------------------------------

def _prepared(tmp_path):
    from dpnewton.data import prepare

    return prepare("synthetic", out=tmp_path / "synthetic.npz", n=600, d=4, seed=0).path


def test_split_optimum_is_cached_apart_from_the_full_one(tmp_path):
    prepared = _prepared(tmp_path)
    full_npz, _ = optimum_paths(prepared)
    split_npz, split_json = optimum_paths(prepared, 0.25)
    assert (split_npz.name == "synthetic.holdout~0.25.optimum.npz"
            and optimum_paths(prepared, 0) == optimum_paths(prepared))
    summary = compute_optimum(prepared, holdout=0.25)
    assert split_npz.exists() and not full_npz.exists()
    assert summary["n"] == 450 and summary["n_test"] == 150 and json.loads(split_json.read_text())["holdout"] == 0.25
    train, test = load_split_from_prepared(prepared, holdout=0.25)
    assert (train.n, test.n) == (450, 150) and train.loss_opt == summary["loss_opt"]
    z_test = test.Z
    assert summary["test_log_loss"] == pytest.approx(np.mean(np.logaddexp(0.0, -(z_test @ train.w_opt))), rel=1e-12)
    assert summary["test_accuracy"] == np.mean(z_test @ train.w_opt > 0)
    # the full data's optimum is another file and another loss*; neither cache is taken for the other
    full, none = load_split_from_prepared(prepared)
    assert none is None and full.n == 600 and full_npz.exists() and full.loss_opt != train.loss_opt
    assert "holdout" not in json.loads(optimum_paths(prepared)[1].read_text())
