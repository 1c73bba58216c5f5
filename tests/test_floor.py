"""The Gaussian ridge floor F* (dpnewton.floor; docs/algorithms.md §8.1): brute force, Monte Carlo,
limits, endpoints, zero eigenvalues, the CLI and the pipeline table/column.

The pipeline test (marked slow) reuses tests/workflow/test_determinism.py's session reference run (a 4-job
config up to rule aggregate), so in a full session it costs nothing extra; alone it takes ~1 min.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dpnewton.floor import (LABEL, MECHANISM_DRAWS, dataset_floor, floor_table, hessian_eigen, hessian_spectrum,
                            mechanism_draws, mechanism_excess_loss, noise_variance, ridge_floor, ridge_objective)
from dpnewton.privacy import epsilon_to_rho
from dpnewton.privacy.neighbouring import paper_delta


def _random_case(seed: int, d: int = 6, spread: float = 6.0):
    rng = np.random.default_rng(seed)
    l = 10.0 ** rng.uniform(-spread, 0.0, d) / 4
    b = rng.standard_normal(d) * 10.0 ** rng.uniform(-1, 1.5, d)
    return l, b


def _brute(l, b, s2, lo=-45.0, hi=25.0, m=700_001):
    """Dense grid in log lam (spacing 1e-4) plus both endpoints: the known answer."""
    lam = np.exp(np.linspace(lo, hi, m))
    v = ridge_objective(l, b, s2, lam)
    k = int(np.argmin(v))
    ends = [ridge_objective(l, b, s2, 0.0), ridge_objective(l, b, s2, math.inf)]
    return min(float(v[k]), *ends), float(lam[k])


def _strict_loads(text: str):
    def bad(token):
        raise ValueError(f"non-strict JSON token {token}")
    return json.loads(text, parse_constant=bad)


# ------------------------------------------------------------------------------------------------
# against a brute-force minimisation
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rho", [1e-4, 1e-1, 10.0])
def test_matches_dense_grid(seed, rho):
    l, b = _random_case(seed)
    n = 200
    F, lam = ridge_floor(l, b, rho, n)
    Fb, lamb = _brute(l, b, noise_variance(rho, n))
    assert F == pytest.approx(Fb, rel=1e-6)
    assert F <= Fb * (1 + 1e-12)  # Brent refines the grid point: never worse than the grid
    assert ridge_objective(l, b, noise_variance(rho, n), lam) == pytest.approx(F, rel=1e-12)


def test_bimodal_objective_finds_the_global_minimum():
    # phi has two local minima in log lam here (checked below): the grid scan must pick the lower one
    l = np.array([8.435712991091595e-06, 0.0011529739589349701, 7.311681248014116e-06])
    b = np.array([38.624122918561355, 0.24074932074760147, 0.04684571539832523])
    s2 = 1e-6
    grid = np.exp(np.linspace(-30, 10, 40001))
    v = ridge_objective(l, b, s2, grid)
    sgn = np.sign(np.diff(v))
    assert np.sum((sgn[:-1] < 0) & (sgn[1:] > 0)) >= 2
    n = 100
    rho = (1.0 / n) ** 2 / (2 * s2)
    F, _ = ridge_floor(l, b, rho, n)
    assert F == pytest.approx(_brute(l, b, s2)[0], rel=1e-6)


def test_one_dimension_closed_form():
    # 1-D: lam* = s2 / (l b^2) and F* = 1/2 s2 l b^2 / (l^2 b^2 + s2)
    l, b, n, rho = np.array([0.2]), np.array([1.5]), 50, 0.3
    s2 = noise_variance(rho, n)
    F, lam = ridge_floor(l, b, rho, n)
    assert lam == pytest.approx(s2 / (l[0] * b[0] ** 2), rel=1e-6)
    assert F == pytest.approx(0.5 * s2 * l[0] * b[0] ** 2 / (l[0] ** 2 * b[0] ** 2 + s2), rel=1e-12)


# ------------------------------------------------------------------------------------------------
# against Monte Carlo on a small quadratic problem
# ------------------------------------------------------------------------------------------------
def _quadratic_case():
    rng = np.random.default_rng(7)
    Q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    l = np.array([0.25, 0.06, 0.01, 0.002])
    H = Q @ np.diag(l) @ Q.T
    w_star = Q @ np.array([1.0, -2.0, 3.0, 0.5])
    return H, w_star


def _mc_excess(H, w_star, lam, s2, draws, seed):
    """Mean and the exact s.d. of 1/2 (w-w*)^T H (w-w*) for w = (H + lam I)^-1 (H w* + xi),
    xi ~ N(0, s2 I) (the formula's noise: the Gaussian mechanism's gradient noise)."""
    d = len(w_star)
    A = np.linalg.inv(H + lam * np.eye(d))
    xi = np.random.default_rng(seed).normal(0.0, math.sqrt(s2), (draws, d))
    W = (H @ w_star + xi) @ A.T
    E = W - w_star
    q = 0.5 * np.einsum("ij,jk,ik->i", E, H, E)
    # e ~ N(c, S) with c = -lam A w*, S = s2 A A^T; q = e^T M e, M = H/2:
    # Var q = 2 tr(M S M S) + 4 c^T M S M c
    c, S, M = -lam * A @ w_star, s2 * A @ A.T, 0.5 * H
    var = 2 * np.trace(M @ S @ M @ S) + 4 * c @ M @ S @ M @ c
    return float(q.mean()), math.sqrt(var), float(q.std())


def test_monte_carlo_matches_the_formula():
    """MC error bound: |MC mean - F*| <= 5 s / sqrt(N), s the exact s.d. of one draw's excess loss
    (the quadratic form of a Gaussian); a false failure has probability < 1e-6 (the seed is fixed)."""
    H, w_star = _quadratic_case()
    l, U = np.linalg.eigh(H)
    b = U.T @ w_star
    n, rho, draws = 40, 0.2, 200_000
    s2 = noise_variance(rho, n)
    F, lam = ridge_floor(l, b, rho, n)
    assert 0 < lam < math.inf and 0 < F < 0.5 * np.sum(l * b * b)
    mean, sd, sd_hat = _mc_excess(H, w_star, lam, s2, draws, seed=1)
    assert sd_hat == pytest.approx(sd, rel=0.05)
    assert abs(mean - F) <= 5 * sd / math.sqrt(draws)
    # the objective at other lam (including the lam = 0 endpoint of a full-rank H), and F* below them
    for other in (0.0, lam / 10, lam * 10):
        m_o, sd_o, _ = _mc_excess(H, w_star, other, s2, draws, seed=2)
        assert abs(m_o - ridge_objective(l, b, s2, other)) <= 5 * sd_o / math.sqrt(draws)
        assert ridge_objective(l, b, s2, other) > F


# ------------------------------------------------------------------------------------------------
# limits, endpoints, zero eigenvalues
# ------------------------------------------------------------------------------------------------
def test_limits_in_rho():
    l, b = _random_case(3)
    f0 = 0.5 * float(np.sum(l * b * b))  # f(0) - f(w*) on the quadratic model
    n = 100
    values = [ridge_floor(l, b, rho, n)[0] for rho in (1e-12, 1e-6, 1e-2, 1.0, 1e2, 1e6, 1e12)]
    assert all(x > y for x, y in zip(values, values[1:]))  # more budget, less noise: strictly lower
    assert values[0] <= f0 and values[0] == pytest.approx(f0, rel=1e-4)
    assert values[-1] < 1e-9 * f0
    assert ridge_floor(l, b, math.inf, n) == (0.0, 0.0)
    assert ridge_objective(l, b, 1.0, math.inf) == pytest.approx(f0, rel=1e-15)


def test_lambda_zero_endpoint():
    l, b = _random_case(4)
    s2 = 1e-5
    # full rank: phi(0) = 1/2 s2 sum 1/l (no bias), the limit lam -> 0+
    assert ridge_objective(l, b, s2, 0.0) == pytest.approx(0.5 * s2 * np.sum(1 / l), rel=1e-14)
    assert ridge_objective(l, b, s2, 1e-30) == pytest.approx(ridge_objective(l, b, s2, 0.0), rel=1e-9)
    # phi'(0+) < 0 when s2 > 0: the endpoint never wins; without noise it does (F* = 0 at lam = 0)
    F, lam = ridge_floor(l, b, 1.0, 10)
    assert lam > 0 and F < ridge_objective(l, b, noise_variance(1.0, 10), 0.0)
    assert ridge_objective(l, b, 0.0, 0.0) == 0.0
    with pytest.raises(ValueError):
        ridge_objective(l, b, s2, -1.0)


def test_zero_eigenvalues():
    l, b = _random_case(5, d=4)
    n, rho = 100, 0.05
    F, lam = ridge_floor(l, b, rho, n)
    # add directions of zero curvature (and rounding-size negative/positive eigenvalues) with any b
    l0 = np.concatenate([l, [0.0, 0.0, -1e-19, 1e-18]])
    b0 = np.concatenate([b, [5.0, -3.0, 2.0, 1.0]])
    F0, lam0 = ridge_floor(l0, b0, rho, n)
    assert F0 == pytest.approx(F, rel=1e-12) and lam0 == pytest.approx(lam, rel=1e-9)
    # lam = 0 is inadmissible there (H singular) when s2 > 0, admissible without noise
    s2 = noise_variance(rho, n)
    assert ridge_objective(l0, b0, s2, 0.0) == math.inf
    assert ridge_objective(l0, b0, 0.0, 0.0) == 0.0
    assert lam0 > 0 and F0 == pytest.approx(_brute(l0, b0, s2)[0], rel=1e-6)
    # all-zero Hessian, or w* in its null space: nothing to lose
    assert ridge_floor(np.zeros(3), np.ones(3), rho, n) == (0.0, math.inf)
    assert ridge_floor(l, np.zeros_like(b), rho, n) == (0.0, math.inf)
    with pytest.raises(ValueError, match="PSD"):
        ridge_floor(np.array([1.0, -0.5]), np.ones(2), rho, n)


def test_argument_errors():
    with pytest.raises(ValueError):
        ridge_floor(np.ones(2), np.ones(3), 1.0, 10)
    with pytest.raises(ValueError):
        ridge_floor(np.ones(2), np.ones(2), 0.0, 10)
    with pytest.raises(ValueError):
        ridge_floor(np.ones(2), np.array([1.0, np.nan]), 1.0, 10)


# ------------------------------------------------------------------------------------------------
# a logistic problem: dataset_floor
# ------------------------------------------------------------------------------------------------
def test_dataset_floor(toy_problem):
    p = toy_problem
    rec = dataset_floor(p, 1.0)
    delta = paper_delta(p.n)
    assert rec["delta"] == delta and rec["conversion"] == "bs16"
    assert rec["rho"] == epsilon_to_rho(1.0, delta, "bs16")
    l, b = hessian_spectrum(p)
    np.testing.assert_allclose(p.hessian(p.w_opt), (np.linalg.eigh(p.hessian(p.w_opt))[1] * l)
                               @ np.linalg.eigh(p.hessian(p.w_opt))[1].T, atol=1e-14)
    assert (rec["ridge_floor"], rec["ridge_lambda"]) == ridge_floor(l, b, rec["rho"], p.n)
    assert rec["trivial_excess_loss"] == pytest.approx(math.log(2) - p.loss_opt, rel=1e-15)
    assert 0 < rec["ridge_floor"] < rec["quadratic_trivial_excess_loss"]
    assert rec["n"] == p.n and rec["d"] == p.d and rec["label"] == LABEL and "not a lower bound" in LABEL
    # more epsilon, lower floor; another conversion gives its own rho
    assert dataset_floor(p, 10.0)["ridge_floor"] < rec["ridge_floor"] < dataset_floor(p, 0.1)["ridge_floor"]
    gdp = dataset_floor(p, 1.0, conversion="gdp")
    assert gdp["rho"] == epsilon_to_rho(1.0, delta, "gdp") and gdp["conversion"] == "gdp"


# ------------------------------------------------------------------------------------------------
# F*'s mechanism on the true logistic loss
# ------------------------------------------------------------------------------------------------
def _mechanism_by_hand(p, lam, s2, z):
    """The mechanism written out: xi = sqrt(s2) U z_k, w_k = (H + lam I)^-1 (H w* + xi), excess on the true loss
    mean log(1 + exp(-Z w_k)) - loss*, and the quadratic model's 1/2 (w_k - w*)^T H (w_k - w*)."""
    H = p.hessian(p.w_opt)
    l, U = np.linalg.eigh(H)
    true, model = [], []
    for zk in z:
        w = np.linalg.solve(H + lam * np.eye(p.d), H @ p.w_opt + math.sqrt(s2) * U @ zk)
        true.append(np.logaddexp(0.0, -(p.Z @ w)).mean() - p.loss_opt)
        e = w - p.w_opt
        model.append(0.5 * e @ H @ e)
    return np.array(true), np.array(model)


def test_mechanism_on_the_true_loss_known_answers(toy_problem):
    p = toy_problem
    l, U = hessian_eigen(p)
    z = mechanism_draws("toy", p.d, 8)
    rho = epsilon_to_rho(1.0, paper_delta(p.n), "bs16")
    F, lam = ridge_floor(l, U.T @ p.w_opt, rho, p.n)
    s2 = noise_variance(rho, p.n)
    mean, se = mechanism_excess_loss(p, l, U, lam, s2, z)
    true, model = _mechanism_by_hand(p, lam, s2, z)
    assert mean == pytest.approx(true.mean(), rel=1e-9)
    assert se == pytest.approx(true.std(ddof=1) / math.sqrt(8), rel=1e-7)
    assert mean > 0
    # almost no noise: the quadratic model is exact near w*, so the true excess of the same draws is the model's
    s2_small = noise_variance(1e10, p.n)
    F_small, lam_small = ridge_floor(l, U.T @ p.w_opt, 1e10, p.n)
    mean_small, _ = mechanism_excess_loss(p, l, U, lam_small, s2_small, z)
    _, model_small = _mechanism_by_hand(p, lam_small, s2_small, z)
    assert mean_small == pytest.approx(model_small.mean(), rel=1e-3)
    # lam = inf is the output w = 0 (its excess ln 2 - loss*, no spread); the draws are the dataset's own
    assert mechanism_excess_loss(p, l, U, math.inf, s2, z) == (math.log(2) - p.loss_opt, 0.0)
    np.testing.assert_array_equal(z, mechanism_draws("toy", p.d, 8))
    assert not np.array_equal(z, mechanism_draws("other", p.d, 8))
    np.testing.assert_array_equal(mechanism_draws("toy", p.d)[:8], z)         # more draws extend the same stream


def test_floor_table_has_the_mechanism_beside_f_star(toy_problem):
    p = toy_problem
    delta = paper_delta(p.n)
    cells = [("toy", "bs16", 0.1, delta), ("toy", "bs16", 10.0, delta)]
    table = floor_table({"toy": p}, cells)
    l, U = hessian_eigen(p)
    z = mechanism_draws("toy", p.d)
    for r in table.itertuples(index=False):
        assert r.mechanism_draws == MECHANISM_DRAWS
        mean, se = mechanism_excess_loss(p, l, U, r.ridge_lambda, r.noise_variance, z)
        assert (r.mechanism_excess_loss, r.mechanism_excess_loss_se) == (mean, se)
    pd.testing.assert_frame_equal(table, floor_table({"toy": p}, cells))       # deterministic


# ------------------------------------------------------------------------------------------------
# the CLI
# ------------------------------------------------------------------------------------------------
def test_cli_floor_json(tmp_path, capsys):
    from dpnewton.cli import main
    from dpnewton.problems import load_problem_from_prepared, prepare_source

    cache = str(tmp_path / "cache")
    assert main(["floor", "--dataset", "synthetic", "--epsilon", "1", "--cache-dir", cache, "--json"]) == 0
    rec = _strict_loads(capsys.readouterr().out)
    for key in ("ridge_floor", "ridge_lambda", "rho", "trivial_excess_loss", "loss_opt", "n", "d", "label"):
        assert key in rec, key
    prepared = prepare_source(dataset="synthetic", cache_dir=cache)
    p = load_problem_from_prepared(prepared.path)
    ref = dataset_floor(p, 1.0)
    assert rec["ridge_floor"] == ref["ridge_floor"] and rec["n"] == p.n and rec["d"] == p.d
    assert rec["delta"] == paper_delta(p.n) and rec["conversion"] == "bs16"
    assert rec["trivial_excess_loss"] > rec["ridge_floor"] > 0
    # explicit delta and conversion; the human-readable form names what it is
    assert main(["floor", "--dataset", "synthetic", "--epsilon", "1", "--delta", "1e-6", "--conversion", "cks",
                 "--cache-dir", cache, "--json"]) == 0
    rec2 = _strict_loads(capsys.readouterr().out)
    assert rec2["rho"] == epsilon_to_rho(1.0, 1e-6, "cks") and rec2["delta"] == 1e-6
    assert main(["floor", "--dataset", "synthetic", "--epsilon", "1", "--cache-dir", cache]) == 0
    text = capsys.readouterr().out
    assert "not a lower bound" in text and "trivial w=0" in text
    # bad arguments: exit status 2, one line
    assert main(["floor", "--dataset", "synthetic", "--epsilon", "-1", "--cache-dir", cache]) == 2
    assert main(["floor", "--dataset", "synthetic", "--epsilon", "1", "--delta", "2", "--cache-dir", cache]) == 2


# ------------------------------------------------------------------------------------------------
# the figure (unit) and the pipeline table/column
# ------------------------------------------------------------------------------------------------
def test_fig2_has_the_floor_line(tmp_path, monkeypatch):
    from dpnewton.pipeline import plots

    best = pd.DataFrame({"dataset": ["s", "s"], "algorithm": ["dp-gd", "dp-gd"], "conversion": ["bs16"] * 2,
                         "epsilon": [0.1, 1.0], "excess_loss_mean": [0.05, 0.01], "excess_loss_se": [0.0, 0.0]})
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.1]})
    floor = pd.DataFrame({"dataset": ["s", "s"], "conversion": ["bs16"] * 2, "epsilon": [0.1, 1.0],
                          "ridge_floor": [0.02, 0.002]})
    seen = {}

    def fake_save(fig, paths):
        seen["labels"] = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        ax = fig.axes[0]
        seen["lines"] = {ln.get_label(): (ln.get_linestyle(), list(ln.get_ydata())) for ln in ax.get_lines()}
        plots.plt.close(fig)

    monkeypatch.setattr(plots, "save", fake_save)
    plots.privacy_utility(best, baseline, ["dp-gd"], "bs16", [tmp_path / "f.png"], floor=floor)
    assert LABEL in seen["labels"] and "trivial w=0 (ln 2 - loss*)" in seen["labels"]
    style, y = seen["lines"][LABEL]
    assert style == ":" and y == [0.02, 0.002]             # dotted: the floor is no method (plots.LINES)


@pytest.mark.slow
def test_pipeline_floor_table_and_best_t_column(tmp_path_factory):
    from tests.workflow.test_determinism import reference_run

    from dpnewton.problems import load_problem_from_prepared

    wd = reference_run(tmp_path_factory)
    tables = wd / "results" / "tables"
    floor = pd.read_parquet(tables / "floor.parquet")
    mirror = pd.read_csv(tables / "floor.csv")
    assert len(floor) == len(mirror) > 0
    for col in ("dataset", "conversion", "epsilon", "rho", "ridge_floor", "ridge_lambda", "trivial_excess_loss",
                "quadratic_trivial_excess_loss", "n", "d", "label"):
        assert col in floor, col
    assert (floor["label"] == LABEL).all()
    best = pd.read_parquet(tables / "best_T.parquet")
    cells = best[["dataset", "conversion", "epsilon"]].drop_duplicates()
    assert len(cells) == len(floor)
    # one independent recomputation per row, from the prepared file and its cached optimum
    for r in floor.itertuples(index=False):
        p = load_problem_from_prepared(wd / "results" / "data" / f"{r.dataset}.npz")
        ref = dataset_floor(p, r.epsilon, None, r.conversion)
        assert r.ridge_floor == ref["ridge_floor"] and r.rho == ref["rho"] and r.n == p.n
        assert 0 < r.ridge_floor < r.quadratic_trivial_excess_loss
    # the runs used the same rho; the best-T column is the ratio
    m = best.merge(floor[["dataset", "conversion", "epsilon", "rho", "ridge_floor"]],
                   on=["dataset", "conversion", "epsilon"], suffixes=("", "_floor"))
    assert len(m) == len(best)
    np.testing.assert_allclose(m["rho"], m["rho_floor"], rtol=1e-12)
    np.testing.assert_array_equal(best["ridge_floor"], m["ridge_floor_floor"])
    np.testing.assert_allclose(best["excess_over_floor"], best["excess_loss_mean"] / best["ridge_floor"],
                               rtol=1e-15)


def test_floor_frame_uses_the_training_split_with_a_holdout(tmp_path):
    from dpnewton.pipeline import aggregate as agg
    from dpnewton.pipeline.tables import floor_frame
    from dpnewton.problems import compute_optimum, load_problem_from_prepared, prepare_source

    prepared = prepare_source(dataset="synthetic", cache_dir=str(tmp_path), n=400, d=5, seed=0).path
    compute_optimum(prepared, holdout=0.25)
    train = load_problem_from_prepared(prepared, holdout=0.25)
    assert train.n == 300
    delta = paper_delta(train.n)
    best = pd.DataFrame({"dataset": ["synthetic"] * 3, "algorithm": ["b", "a", "a"], "conversion": ["bs16"] * 3,
                         "epsilon": [1.0, 1.0, 0.1], "delta": [delta] * 3, "excess_loss_mean": [0.02, 0.01, 0.05]})
    cells = agg.floor_cells(best)
    assert cells == [("synthetic", "bs16", 0.1, delta), ("synthetic", "bs16", 1.0, delta)]
    table = floor_frame([prepared], cells, holdout=0.25)
    assert list(table["epsilon"]) == [0.1, 1.0] and (table["n"] == 300).all()
    for r in table.itertuples(index=False):
        ref = dataset_floor(train, r.epsilon, delta, "bs16")
        assert r.ridge_floor == ref["ridge_floor"] and r.loss_opt == train.loss_opt
    out = agg.add_floor_ratio(best, table)
    pd.testing.assert_frame_equal(out[best.columns], best)  # rows, order and old columns unchanged
    F = dict(zip(table["epsilon"], table["ridge_floor"]))
    np.testing.assert_array_equal(out["excess_over_floor"],
                                  best["excess_loss_mean"] / best["epsilon"].map(F))
    with pytest.raises(ValueError, match="no prepared file"):
        floor_frame([prepared], [("a1a", "bs16", 1.0, delta)])
