"""Iterate averaging (``hyper average=none|uniform|tail``; docs/algorithms.md §2.6).

* Known answers: with stubbed steps, both drivers release the mean of the stated window of the
  recorded iterates (uniform: w_1..w_T; tail: w_{floor(T/2)+1}..w_T), and its excess loss equals
  l(w_bar) - loss* computed independently with an extra pass over Z.
* Post-processing (dp-gd, dp-gd-oracle, the four double-noise variants, damped-newton and
  precond-dp-gd): an averaged run spends exactly the ledger of the same run with average=none
  (entries, rho, sensitivities, sigmas, generator state) and has bit-identical iterates.
* Batch independence of averaged DP-GD / DP-GD-Oracle runs; bad values; the result record.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpnewton.algorithms import get_algorithm
from dpnewton.algorithms.base import AVERAGES, average_window, iterate_batched, iterate_single
from dpnewton.api import fit
from dpnewton.experiment import make_contexts, result_record, run_algorithm
from dpnewton.loss import LogisticProblem

ALGORITHMS = ["dp-gd", "dp-gd-oracle", "hess-clip", "hess-add", "qu-clip", "qu-add", "damped-newton",
              "precond-dp-gd"]


def _problem(n=300, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.ones(d))), 1.0, -1.0)
    p = LogisticProblem.from_xy(X, y, name="toy")
    p.set_optimum(np.zeros(d), 0.25)  # any reference loss*: the test compares l(w) - loss*
    return p


@pytest.fixture(scope="module")
def problem():
    return _problem()


def _contexts(problem, algorithm, runs):
    return make_contexts("toy", algorithm, 1.0, 1e-5, "bs16", 1.0, runs)


# ---- the window -----------------------------------------------------------------------------

@pytest.mark.parametrize("T,uniform,tail", [(1, [1], [1]), (2, [1, 2], [2]), (3, [1, 2, 3], [2, 3]),
                                            (4, [1, 2, 3, 4], [3, 4]), (7, list(range(1, 8)), [4, 5, 6, 7])])
def test_window(T, uniform, tail):
    assert average_window(T, "none") is None
    assert list(range(average_window(T, "uniform"), T + 1)) == uniform
    assert list(range(average_window(T, "tail"), T + 1)) == tail


# ---- known answers with stubbed steps -----------------------------------------------------------

def _window_mean(iterates, T, average):
    a = {"uniform": 1, "tail": T // 2 + 1}[average]
    return np.mean(np.asarray(iterates)[a:T + 1], axis=0)


@pytest.mark.parametrize("average", ["uniform", "tail"])
@pytest.mark.parametrize("T", [1, 2, 5, 8])
@pytest.mark.parametrize("full_margins", [True, False])
def test_single_driver_known_answer(problem, average, T, full_margins):
    shift = np.linspace(-1.0, 1.0, problem.d)

    def run(avg):
        (ctx,) = _contexts(problem, "stub", [(0, T)])
        iterates = []

        def step(w, t):
            iterates.append(w.copy())
            w_next = 0.7 * w + 0.3 * (t + 1) * shift
            if t == T - 1:
                iterates.append(w_next.copy())
            return (w_next, problem.margins(w)) if full_margins else w_next

        return iterate_single(problem, ctx, step, full_margins=full_margins, average=avg), iterates

    res, iterates = run(average)
    base, iterates_none = run("none")
    assert len(iterates) == T + 1 and np.array_equal(np.asarray(iterates), np.asarray(iterates_none))
    w_bar = _window_mean(iterates, T, average)
    np.testing.assert_allclose(res.w, w_bar, rtol=1e-13, atol=1e-15)
    expected = float(problem.loss(w_bar)) - problem.loss_opt  # independent extra pass over Z
    assert res.averaged_excess_loss == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert res.released_excess_loss == res.averaged_excess_loss
    assert res.average == average
    # the last iterate and its curve are the un-averaged run's
    assert np.array_equal(res.w_last, iterates[-1]) and np.array_equal(res.last_iterate, base.w)
    assert np.array_equal(res.excess_loss, base.excess_loss)
    assert base.averaged_excess_loss is None and base.w_last is None and base.average == "none"
    if full_margins:
        assert res.train_accuracy == np.mean(problem.Z @ w_bar > 0)


@pytest.mark.parametrize("average", ["uniform", "tail"])
def test_batched_driver_known_answer(problem, average):
    Ts = [1, 2, 5, 8]
    contexts = _contexts(problem, "stub", [(0, T) for T in Ts])
    iterates = {c.identity: [] for c in contexts}

    def step(W, M, G, ctxs, t):
        W_next = W - 2.0 * G + 0.01 * (t + 1)
        for j, c in enumerate(ctxs):
            if t == 0:
                iterates[c.identity].append(W[j].copy())
            iterates[c.identity].append(W_next[j].copy())
        return W_next

    results = iterate_batched(problem, contexts, step, average=average)
    for res, T in zip(results, Ts):
        its = iterates[res.identity]
        assert len(its) == T + 1
        w_bar = _window_mean(its, T, average)
        np.testing.assert_allclose(res.w, w_bar, rtol=1e-13, atol=1e-15)
        expected = float(problem.loss(w_bar)) - problem.loss_opt
        assert res.averaged_excess_loss == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert np.array_equal(res.w_last, its[-1])
        assert res.train_accuracy == np.mean(problem.Z @ w_bar > 0)


def test_start_is_never_averaged(problem):
    """uniform leaves w_0 out: with a step that returns 0, w_bar = 0 for every T."""
    (ctx,) = _contexts(problem, "stub", [(0, 3)])
    res = iterate_single(problem, ctx, lambda w, t: (np.zeros_like(w), problem.margins(w)), average="uniform")
    assert np.array_equal(res.w, np.zeros(problem.d))
    assert res.averaged_excess_loss == pytest.approx(np.log(2) - problem.loss_opt, rel=1e-14)


# ---- post-processing: same ledger, same iterates -------------------------------------------------

def _run_contexts(problem, algorithm, runs, hyper):
    contexts = _contexts(problem, algorithm, runs)
    results = get_algorithm(algorithm).run(problem, contexts, hyper)
    return contexts, results


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("average", ["uniform", "tail"])
def test_ledger_and_iterates_unchanged(problem, algorithm, average):
    runs = [(0, 3), (1, 4)]
    ctx_none, res_none = _run_contexts(problem, algorithm, runs, {})
    ctx_avg, res_avg = _run_contexts(problem, algorithm, runs, {"average": average})
    for a, b, ca, cb in zip(res_none, res_avg, ctx_none, ctx_avg):
        assert a.identity == b.identity
        assert a.ledger.as_records() == b.ledger.as_records()  # steps, quantities, sensitivities, sigma, rho
        assert a.ledger.spent_rho == b.ledger.spent_rho and a.ledger.budget_rho == b.ledger.budget_rho
        assert a.ledger.nonprivate == b.ledger.nonprivate and a.ledger.events == b.ledger.events
        assert ca.rng.bit_generator.state == cb.rng.bit_generator.state  # the same noise draws
        assert np.array_equal(a.w, b.w_last) and np.array_equal(a.w, b.last_iterate)
        assert np.array_equal(a.excess_loss, b.excess_loss)
        assert a.resets == b.resets
        assert b.average == average and np.isfinite(b.averaged_excess_loss)
        assert b.averaged_excess_loss == pytest.approx(problem.excess_loss(b.w), rel=1e-10, abs=1e-14)


def test_none_is_the_default_bit_for_bit(problem):
    for algorithm in ("dp-gd", "hess-clip"):
        (a,) = run_algorithm(problem, "toy", algorithm, 1.0, [0], 4)
        (b,) = run_algorithm(problem, "toy", algorithm, 1.0, [0], 4, hyper={"average": "none"})
        assert np.array_equal(a.w, b.w) and np.array_equal(a.excess_loss, b.excess_loss)
        assert a.train_accuracy == b.train_accuracy and b.w_last is None


# ---- batch independence --------------------------------------------------------------------------

def _by_key(results):
    return {(r.identity.seed, r.identity.iterations): r for r in results}


@pytest.mark.usefixtures("blocked_pass")   # the property of the blocked pass (batches below GEMM_MIN_RUNS)
@pytest.mark.parametrize("algorithm,Ts", [("dp-gd", [4, 9]), ("dp-gd-oracle", [3, 5]), ("hess-clip", [2, 3]),
                                          ("precond-dp-gd", [3, 6])])
@pytest.mark.parametrize("average", ["uniform", "tail"])
def test_averaged_runs_do_not_depend_on_their_batch(problem, algorithm, Ts, average):
    hyper = {"average": average}
    seeds = [0, 1, 2, 3]
    together = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, seeds, Ts, hyper=hyper))
    alone = {}
    for s in seeds:
        for T in Ts:
            alone.update(_by_key(run_algorithm(problem, "toy", algorithm, 1.0, [s], T, hyper=hyper)))
    shuffled = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, [2, 0, 3, 1], Ts[::-1], hyper=hyper))
    for other in (alone, shuffled):
        assert together.keys() == other.keys()
        for k, a in together.items():
            b = other[k]
            assert np.array_equal(a.w, b.w), k
            assert np.array_equal(a.w_last, b.w_last), k
            assert a.averaged_excess_loss == b.averaged_excess_loss, k
            assert a.train_accuracy == b.train_accuracy, k
            assert np.array_equal(a.excess_loss, b.excess_loss), k


# ---- bad values ----------------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_bad_average_names_the_allowed_values(problem, algorithm):
    with pytest.raises(ValueError, match="average='foo' is unknown; choose one of none, uniform, tail"):
        run_algorithm(problem, "toy", algorithm, 1.0, [0], 2, hyper={"average": "foo"})


def test_drivers_reject_bad_average(problem):
    (ctx,) = _contexts(problem, "stub", [(0, 2)])
    with pytest.raises(ValueError, match="none, uniform, tail"):
        iterate_single(problem, ctx, lambda w, t: (w, problem.margins(w)), average="last")
    with pytest.raises(ValueError, match="none, uniform, tail"):
        iterate_batched(problem, _contexts(problem, "stub", [(0, 2)]), lambda W, M, G, c, t: W, average=None)
    assert AVERAGES == ("none", "uniform", "tail")


def test_methods_without_averaging_reject_it(problem):
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        run_algorithm(problem, "toy", "aop", 1.0, [0], 1, hyper={"average": "tail"})


# ---- the record and the released model --------------------------------------------------------------

def test_record_columns(problem):
    (avg,) = run_algorithm(problem, "toy", "dp-gd", 1.0, [0], 6, hyper={"average": "tail"})
    rec = result_record(avg, "bs16", 1.0, 1e-5)
    assert rec["excess_loss"] == avg.averaged_excess_loss
    assert rec["last_iterate_excess_loss"] == avg.final_excess_loss == avg.excess_loss[-1]
    assert rec["average"] == "tail" and rec["train_accuracy"] == avg.train_accuracy
    (last,) = run_algorithm(problem, "toy", "dp-gd", 1.0, [0], 6)
    rec = result_record(last, "bs16", 1.0, 1e-5)
    assert rec["excess_loss"] == rec["last_iterate_excess_loss"] == last.excess_loss[-1]
    assert rec["average"] == "none"


def test_fit_releases_the_average():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 4))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    out = fit(X, y, "precond-dp-gd", 1.0, iterations=6, seed=0, average="uniform", excess_loss=True)
    last = fit(X, y, "precond-dp-gd", 1.0, iterations=6, seed=0, excess_loss=True)     # the same trajectory
    assert not np.array_equal(out.weights, last.weights) and out.ledger.entries == last.ledger.entries
    assert out.evaluation["last_iterate_excess_loss"] == last.evaluation["excess_loss"]
    assert out.evaluation["excess_loss"] != last.evaluation["excess_loss"]


def test_estimator_releases_the_average_with_the_same_privacy_record():
    import warnings

    from dpnewton import DPLogisticRegression

    rng = np.random.default_rng(4)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 1] > 0, 1, 0)
    kw = dict(epsilon=1.0, algorithm="precond-dp-gd", iterations=6, random_state=0, data_norm=5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        last = DPLogisticRegression(**kw).fit(X, y)
        tail = DPLogisticRegression(**kw, hyper={"average": "tail"}).fit(X, y)
    assert tail.privacy_record_ == last.privacy_record_
    assert not np.array_equal(tail.coef_, last.coef_)


# ---- one trajectory, every released model -------------------------------------------------------

@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("primary", ["none", "tail"])
def test_one_trajectory_releases_every_average_with_the_bits_of_its_own_run(problem, algorithm, primary):
    """A run asked for further averages (RunContext.averages) gives, through released_as, exactly the
    run configured with that average: released w, its excess loss and accuracy, w_T, the curve and
    the ledger, bit for bit (post-processing of one trajectory)."""
    seeds, Ts = [0, 1], [1, 4, 7]
    others = tuple(a for a in AVERAGES if a != primary)
    shared = run_algorithm(problem, "toy", algorithm, 1.0, seeds, Ts, delta=1e-5, hyper={"average": primary},
                           averages=others)
    for average in AVERAGES:
        alone = run_algorithm(problem, "toy", algorithm, 1.0, seeds, Ts, delta=1e-5, hyper={"average": average})
        for one, res in zip(alone, shared):
            got = res.released_as(average)
            assert got.identity == one.identity and got.average == average
            assert np.array_equal(got.w, one.w) and np.array_equal(got.last_iterate, one.last_iterate)
            assert got.released_excess_loss == one.released_excess_loss
            assert got.train_accuracy == one.train_accuracy
            assert np.array_equal(got.excess_loss, one.excess_loss, equal_nan=True)
            assert [(e.sigma, e.rho) for e in got.ledger.entries] == [(e.sigma, e.rho) for e in one.ledger.entries]
            rec, ref = (result_record(r, "bs16", 1.0, 1e-5) for r in (got, one))
            del rec["runtime_s"], ref["runtime_s"]  # measured, not computed
            same = {k: rec[k] == ref[k] or (rec[k] != rec[k] and ref[k] != ref[k]) for k in ref}  # NaN == NaN
            assert rec.keys() == ref.keys() and all(same.values()), [k for k, ok in same.items() if not ok]


def test_an_average_that_was_not_released_is_an_error(problem):
    res = run_algorithm(problem, "toy", "dp-gd", 1.0, [0], [3], delta=1e-5)[0]
    assert res.released_as("none") is res and set(res.releases) == {"none"}
    with pytest.raises(ValueError, match="released no 'tail' model"):
        res.released_as("tail")
    with pytest.raises(ValueError, match="releases no averaged iterates"):
        run_algorithm(problem, "toy", "aop", 1.0, [0], [1], delta=1e-5, averages=("tail",))
    with pytest.raises(ValueError, match="average='middle' is unknown"):
        run_algorithm(problem, "toy", "dp-gd", 1.0, [0], [3], delta=1e-5, averages=("middle",))
