"""Batching must not change any bit of any run below the GEMM width (properties, never timings).

* The blocked pass (stacks narrower than ``loss.GEMM_MIN_RUNS``; forced at every width by the ``blocked_pass``
  fixture): DP-GD, DP-GD-Oracle and precond-dp-gd seeds run together == one by one == in shuffled order, also
  with runs of different T dropping out of the batch; Hess-clip likewise. A run's column of the stacked passes
  over Z (loss.LogisticProblem.margins / margins_and_grads) has the same bits whatever the stack size and the
  run's position in it, including across the row-block boundaries.
* The GEMM pass (stacks of at least ``GEMM_MIN_RUNS`` runs): margins and gradients equal plain numpy products
  and the blocked pass to the tolerance its docstring states (1e-13 of the run's largest entry in float64,
  1e-5 in float32), the width alone chooses the pass, and a wide DP-GD batch gives each run the result of the
  run alone to the rounding that tolerance lets through.
"""

from __future__ import annotations

import numpy as np
import pytest

from scipy import special

from dpnewton.experiment import run_algorithm
from dpnewton.loss import GEMM_MIN_RUNS, LogisticProblem, row_block

#: the stated agreement of the GEMM pass with the blocked one, relative to the run's largest entry
GEMM_RTOL = {"float64": 1e-13, "float32": 1e-5}


def _problem(n=1500, d=13, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.ones(d))), 1.0, -1.0)
    p = LogisticProblem.from_xy(X, y, name="toy")
    p.set_optimum(np.zeros(d))  # any reference point: only bit-equality is checked
    return p


@pytest.fixture(scope="module")
def problem():
    return _problem()


def _by_key(results):
    return {(r.identity.seed, r.identity.iterations): r for r in results}


def _assert_same(a, b, losses=False):
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k].w, b[k].w), f"w differs for {k}"
        assert a[k].resets == b[k].resets
        if losses:
            assert np.array_equal(a[k].excess_loss, b[k].excess_loss, equal_nan=True), f"loss differs for {k}"


CASES = [("dp-gd", [4, 9]), ("dp-gd-oracle", [3, 5]), ("precond-dp-gd", [4, 9]), ("hess-clip", [2, 3])]


def _three_ways(problem, algorithm, Ts):
    seeds = [0, 1, 2, 3, 4]
    together = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, seeds, Ts))
    alone = {}
    for s in seeds:
        for T in Ts:
            alone.update(_by_key(run_algorithm(problem, "toy", algorithm, 1.0, [s], T)))
    shuffled = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, [3, 0, 4, 2, 1], Ts[::-1]))
    return together, alone, shuffled


@pytest.mark.usefixtures("blocked_pass")
@pytest.mark.parametrize("algorithm,Ts", CASES)
def test_batch_iterates_equal_sequential_and_shuffled(problem, algorithm, Ts):
    together, alone, shuffled = _three_ways(problem, algorithm, Ts)
    _assert_same(together, alone)
    _assert_same(together, shuffled)


@pytest.mark.usefixtures("blocked_pass")
@pytest.mark.parametrize("algorithm,Ts", CASES)
def test_batch_losses_equal_sequential_and_shuffled(problem, algorithm, Ts):
    together, alone, shuffled = _three_ways(problem, algorithm, Ts)
    _assert_same(together, alone, losses=True)
    _assert_same(together, shuffled, losses=True)


LOSS_CASES = [("dp-gd", {}), ("dp-gd", {"average": "tail"}), ("precond-dp-gd", {}), ("hess-clip", {}),
              ("damped-newton", {}), ("dp-sgd", {}), ("minibatch-qu-clip", {})]


@pytest.mark.parametrize("algorithm,hyper", LOSS_CASES)
def test_recording_fewer_losses_changes_nothing_else(problem, algorithm, hyper):
    """loss_iterates (the pipeline passes its curve's points): the kept iterates' losses are the full
    curve's, the others NaN and w_T's always there; the models, the ledger and the timings' length do
    not move. Runs of 7 and 12 iterations share one batch, so a step scores only some of its runs."""
    keep = {7: np.array([0, 3]), 12: np.array([0, 1, 5, 11])}
    full = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, [0, 1], [7, 12], hyper=hyper))
    some = _by_key(run_algorithm(problem, "toy", algorithm, 1.0, [0, 1], [7, 12], hyper=hyper,
                                 loss_iterates=keep.get))
    _assert_same(full, some)
    for key, a in full.items():
        b = some[key]
        idx = np.union1d(keep[key[1]], [key[1]])
        assert np.isnan(np.delete(b.excess_loss, idx)).all() and np.isfinite(b.excess_loss[idx]).all()
        if algorithm.startswith(("dp-sgd", "minibatch")):
            # minibatch losses come from one matrix product over the kept iterates (gemm): last bits may move
            np.testing.assert_allclose(b.excess_loss[idx], a.excess_loss[idx], rtol=1e-12, atol=1e-15)
        else:
            assert np.array_equal(b.excess_loss[idx], a.excess_loss[idx])
        assert a.ledger.spent_rho == b.ledger.spent_rho and len(a.elapsed) == len(b.elapsed)
        assert a.averaged_excess_loss == b.averaged_excess_loss


def test_loss_iterates_outside_the_run_are_rejected(problem):
    with pytest.raises(ValueError, match="loss_iterates must lie in 0..T = 0..4"):
        run_algorithm(problem, "toy", "dp-gd", 1.0, [0], 4, loss_iterates=lambda T: np.array([0, 5]))


@pytest.mark.usefixtures("blocked_pass")
def test_batch_of_many_runs(problem):
    """A batch of 19 runs and a sub-batch of it in another position."""
    seeds = list(range(19))
    big = _by_key(run_algorithm(problem, "toy", "dp-gd", 0.5, seeds, 6))
    part = _by_key(run_algorithm(problem, "toy", "dp-gd", 0.5, seeds[5:8], 6))
    _assert_same({k: big[k] for k in part}, part)


def _stack_independent(problem, rng, sizes):
    """Each run's margins and gradient in a stack equal those of the run alone, bit for bit."""
    W = rng.standard_normal((max(sizes), problem.d))
    alone = [problem.margins_and_grads(W[[j]]) for j in range(len(W))]
    for S in sizes:
        for order in (list(range(S)), list(range(S))[::-1], list(rng.permutation(S))):
            M, G = problem.margins_and_grads(W[order])
            M2 = problem.margins(W[order])
            for pos, j in enumerate(order):
                same = (np.array_equal(M[:, pos], alone[j][0][:, 0]) and np.array_equal(G[pos], alone[j][1][0])
                        and np.array_equal(M2[:, pos], alone[j][0][:, 0]))
                if not same:
                    return False, (S, pos, j)
    return True, None


@pytest.mark.usefixtures("blocked_pass")
@pytest.mark.parametrize("n,d", [(6000, 13), (1001, 124), (2048, 75), (9000, 2), (9000, 1), (300, 900)])
def test_stacked_passes_are_batch_independent(n, d):
    rng = np.random.default_rng(n + d)
    Z = rng.standard_normal((n, d))
    p = LogisticProblem(Z / np.linalg.norm(Z, axis=1, keepdims=True))
    assert n > row_block(d)  # several row blocks, so block boundaries are exercised
    ok, where = _stack_independent(p, rng, [1, 2, 3, 7, 8, 9, 19])
    assert ok, f"run bits depend on the stack (S, pos, run) = {where}"


def test_stacked_passes_match_plain_products():
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((3000, 20))
    p = LogisticProblem(Z / np.linalg.norm(Z, axis=1, keepdims=True))
    W = rng.standard_normal((5, 20))
    M, G = p.margins_and_grads(W)
    np.testing.assert_allclose(M, p.Z @ W.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p.margins(W), M, rtol=1e-15, atol=0)
    np.testing.assert_allclose(G, np.stack([p.grad(w) for w in W]), rtol=1e-11, atol=1e-14)


def test_fused_newton_pass_matches_separate_passes():
    rng = np.random.default_rng(6)
    Z = rng.standard_normal((2500, 30))
    p = LogisticProblem(Z / np.linalg.norm(Z, axis=1, keepdims=True))
    w = rng.standard_normal(30)
    for kind in ("hessian", "qu"):
        m, g, H = p.newton_pass(w, kind)
        np.testing.assert_allclose(m, p.margins(w), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(g, p.grad(w), rtol=1e-11, atol=1e-15)
        np.testing.assert_allclose(H, p.soi_from_margins(p.margins(w), kind), rtol=1e-11, atol=1e-15)
        assert np.array_equal(H, H.T)


def _unit_rows(rng, n, d):
    Z = rng.standard_normal((n, d))
    return Z / np.linalg.norm(Z, axis=1, keepdims=True)


def _close(a, b, rtol):
    """|a - b| within rtol of the largest |b| of each run (columns of margins, rows of gradients)."""
    return bool(np.all(np.abs(a - b) <= rtol * np.max(np.abs(b), axis=tuple(range(b.ndim - 1)) or None,
                                                      keepdims=True)))


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("n,d", [(3000, 20), (20001, 7)])
def test_wide_stacks_match_plain_numpy_products(n, d, precision):
    """The GEMM pass against the textbook products on the stored Z (cast up): M = Z W^T and
    G = -(1/n) sigma(-M)^T Z, at the threshold width and above it (several GEMM blocks for n = 20001)."""
    rng = np.random.default_rng(n + d)
    p = LogisticProblem(_unit_rows(rng, n, d), precision=precision)
    Z = p.Z.astype(np.float64)
    for S in (GEMM_MIN_RUNS, 3 * GEMM_MIN_RUNS + 1):
        W = rng.standard_normal((S, d)).astype(p.Z.dtype).astype(np.float64)
        M, G = p.margins_and_grads(W)
        assert M.dtype == G.dtype == np.float64 and M.shape == (n, S) and G.shape == (S, d)
        M_ref = Z @ W.T
        G_ref = -(special.expit(-M_ref).T @ Z) / n
        assert _close(M, M_ref, GEMM_RTOL[precision]) and _close(G.T, G_ref.T, GEMM_RTOL[precision])


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_the_width_chooses_the_pass_and_both_agree(precision):
    """Below GEMM_MIN_RUNS the blocked pass (a run's bits those of the run alone), from it on the GEMM
    pass, which agrees with the blocked pass to the stated tolerance, at every position in the stack."""
    rng = np.random.default_rng(11)
    p = LogisticProblem(_unit_rows(rng, 5000, 30), precision=precision)
    W = rng.standard_normal((2 * GEMM_MIN_RUNS + 3, 30))
    alone = [p.margins_and_grads(W[[j]]) for j in range(len(W))]
    narrow = p.margins_and_grads(W[:GEMM_MIN_RUNS - 1])
    for j in range(GEMM_MIN_RUNS - 1):
        assert np.array_equal(narrow[0][:, j], alone[j][0][:, 0]) and np.array_equal(narrow[1][j], alone[j][1][0])
    for S in (GEMM_MIN_RUNS, len(W)):
        order = rng.permutation(S)
        M, G = p.margins_and_grads(W[order])
        gemm = p._gemm_pass(p._in(W[order]))
        assert np.array_equal(M, gemm[0]) and np.array_equal(G, gemm[1])
        for pos, j in enumerate(order):
            assert _close(M[:, pos], alone[j][0][:, 0], GEMM_RTOL[precision])
            assert _close(G[pos], alone[j][1][0], GEMM_RTOL[precision])


def test_a_wide_dp_gd_batch_gives_each_run_its_result_alone_to_rounding(problem):
    """2 x GEMM_MIN_RUNS runs in one batch (the GEMM pass until the short runs leave) against each run alone
    (the blocked pass): the same ledger and noise, models and losses within the rounding of the products."""
    seeds = list(range(GEMM_MIN_RUNS))
    together = _by_key(run_algorithm(problem, "toy", "dp-gd", 1.0, seeds, [3, 9]))
    for (s, T), res in together.items():
        (lone,) = run_algorithm(problem, "toy", "dp-gd", 1.0, [s], T)
        assert res.ledger.entries == lone.ledger.entries
        np.testing.assert_allclose(res.w, lone.w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(res.excess_loss, lone.excess_loss, rtol=1e-10, atol=1e-14)


LOCKSTEP_GROUPS = {
    "dp-gd": [({"step": 4.0}, 1.0, "bs16"), ({"step": 16.0, "average": "tail"}, 0.5, "gdp"),
              ({"step": 2.0, "reset": True}, 1.0, "bs16")],
    "dp-gd-oracle": [({}, 1.0, "bs16"), ({"line_search": "exact", "reg": 1e-4, "average": "uniform"}, 2.0, "cks")],
    "precond-dp-gd": [({}, 1.0, "bs16"), ({"step": 2.0, "precond_frac": 0.3, "refresh": 2}, 0.5, "gdp"),
                      ({"lambda_mode": "adaptive", "average": "tail"}, 1.0, "bs16")],
}


@pytest.mark.usefixtures("blocked_pass")
@pytest.mark.parametrize("algorithm", sorted(LOCKSTEP_GROUPS))
def test_a_lockstep_batch_gives_each_configuration_its_own_runs(problem, algorithm):
    """Groups of other configurations, epsilons and conversions in one batch (experiment.run_groups): every
    run equals, bit for bit, the run of its group alone, ledger and diagnostics included."""
    from dpnewton.experiment import RunGroup, resolve_budget, run_groups

    groups = []
    for hyper, eps, conversion in LOCKSTEP_GROUPS[algorithm]:
        delta, rho = resolve_budget(eps, None, problem.n, conversion)
        groups.append(RunGroup(eps, delta, conversion, rho, ((0, 3), (1, 5), (0, 5)), hyper, ("uniform",)))
    together = run_groups(problem, "toy", algorithm, groups)
    for group, results in zip(groups, together):
        (alone,) = run_groups(problem, "toy", algorithm, [group])
        for a, b in zip(results, alone):
            assert a.identity == b.identity and a.ledger.entries == b.ledger.entries
            assert a.ledger.nonprivate == b.ledger.nonprivate
            assert np.array_equal(a.w, b.w) and np.array_equal(a.excess_loss, b.excess_loss, equal_nan=True)
            assert a.released_as("uniform").released_excess_loss == b.released_as("uniform").released_excess_loss
            assert {k: v for k, v in a.diagnostics.items() if k != "batch_size"} == \
                {k: v for k, v in b.diagnostics.items() if k != "batch_size"}


def test_only_lockstep_cards_mix_configurations(problem):
    from dpnewton.experiment import RunGroup, run_groups

    groups = [RunGroup(1.0, 1e-6, "bs16", 0.1, ((0, 2),), hyper) for hyper in ({}, {"grad_frac": 0.5})]
    with pytest.raises(ValueError, match="runs one configuration per batch"):
        run_groups(problem, "toy", "hess-clip", groups)


@pytest.mark.parametrize("threads", [1, 2])
def test_runs_see_the_blas_thread_limit_they_ask_for(problem, monkeypatch, threads):
    """The batch runs with ``blas_threads`` BLAS threads (the one controller is found once per process)."""
    from threadpoolctl import threadpool_info

    from dpnewton import experiment
    from dpnewton.experiment import RunGroup, run_groups

    if not any(i.get("user_api") == "blas" for i in threadpool_info()):
        pytest.fail("threadpoolctl finds no BLAS library under numpy")
    card = experiment.get_algorithm("dp-gd")
    seen = []

    class Recording:
        lockstep = card.lockstep

        def run(self, *args):
            seen.append({i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"})
            return card.run(*args)

    monkeypatch.setattr(experiment, "get_algorithm", lambda name: Recording())
    outside = {i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"}
    run_groups(problem, "toy", "dp-gd", [RunGroup(1.0, 1e-6, "bs16", 0.1, ((0, 2),))], blas_threads=threads)
    assert seen == [{threads}]
    assert {i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"} == outside
