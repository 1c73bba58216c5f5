"""``precision="float32"``: float32 Z and products, float64 results, losses, optimum and noise; float64 unchanged."""

from __future__ import annotations

import copy
import json

import jsonschema
import numpy as np
import pytest
import scipy.sparse as sp

from dpnewton.data import prepare
from dpnewton.experiment import run_algorithm
from dpnewton.loss import LogisticProblem, row_block
from dpnewton.pipeline import config as pc
from dpnewton.pipeline import jobs
from dpnewton.problems import load_split_from_prepared
from tests.conftest import make_problem

U = 2.0 ** -24  # unit roundoff of float32
SEEDS = list(range(8))


def gamma(k: int) -> float:
    """gamma_k = k u / (1 - k u): the bound on the relative error of a float32 sum of k terms (Higham, Lemma 3.1)."""
    return k * U / (1 - k * U)


@pytest.fixture(scope="module")
def pair():
    p = make_problem(n=400, d=6, seed=2)
    return p, p.with_precision("float32")


def test_float64_is_the_default_bit_for_bit(pair):
    p, _ = pair
    explicit = LogisticProblem(p.Z, name=p.name, precision="float64")
    explicit.set_optimum(p.w_opt, p.loss_opt)
    assert p.precision == "float64" and p.Z.dtype == np.float64 and p.with_precision("float64") is p
    for alg in ("dp-gd", "hess-clip", "dp-sgd"):
        a = run_algorithm(p, "toy", alg, 1.0, [0, 1], [5])
        b = run_algorithm(explicit, "toy", alg, 1.0, [0, 1], [5])
        for x, y in zip(a, b):
            assert x.w.tobytes() == y.w.tobytes() and x.excess_loss.tobytes() == y.excess_loss.tobytes()


def test_float32_storage_and_float64_results(pair):
    p, q = pair
    assert q.precision == "float32" and q.Z.dtype == np.float32 and q.with_precision("float32") is q
    # rounded toward zero: no entry (so no row norm) grows, and the rows stay in the unit ball
    assert (np.abs(q.Z.astype(np.float64)) <= np.abs(p.Z)).all()
    assert np.abs(q.Z.astype(np.float64) - p.Z).max() <= 2 * U * np.abs(p.Z).max()
    assert q.w_opt is p.w_opt and q.loss_opt == p.loss_opt  # the float64 optimum, carried over
    w = np.linspace(-1.0, 1.0, q.d)
    M, G = q.margins_and_grads(np.stack([w, -w]))
    m, g, H = q.newton_pass(w, "qu")
    outputs = [q.margins(w), M, G, m, g, H, q.grad(w), q.hessian(w), q.losses(np.stack([w, w]))]
    assert all(a.dtype == np.float64 for a in outputs) and isinstance(q.loss(w), np.float64)
    assert q.batch(np.arange(10)).precision == "float32"


def test_one_dp_gd_step_is_within_the_float32_rounding_bound(pair):
    """T = 1 from the unit vector w0 with the same noise: the float32 and float64 excess losses differ by at
    most the bound of the rounding in the float32 pass.

    Margins m = Z w0 (d terms, w0 and Z rounded): |dm_i| <= (gamma_d + 2u) ||w0|| = gamma_d + 2u. The
    gradient (1/n) Z^T sigma(-m) over one block of b rows: sigma is 1/4-Lipschitz and its float32 value
    is within 2u, each z_i is rounded by u, and the block sum errs by gamma_b sum_i ||z_i|| <= gamma_b b,
    so ||dg|| <= gamma_b + (gamma_d + 2u)/4 + 3u; w1 = w0 - 4 (g + noise) moves by 4 ||dg||. The loss is
    1-Lipschitz in w (rows in the unit ball), and the float32 evaluation of l(w1) errs by (gamma_d + 2u) ||w1||.
    """
    p, q = pair
    b = min(p.n, row_block(p.d, itemsize=4))
    dm = gamma(p.d) + 2 * U
    step_bound = 4.0 * (gamma(b) + dm / 4 + 3 * U)
    for eps in (0.1, 10.0):
        r64 = run_algorithm(p, "toy", "dp-gd", eps, SEEDS, 1)
        r32 = run_algorithm(q, "toy", "dp-gd", eps, SEEDS, 1)
        for a, c in zip(r64, r32):
            assert np.linalg.norm(a.w - c.w) <= step_bound
            bound = step_bound + dm * np.linalg.norm(c.w)
            assert abs(a.final_excess_loss - c.final_excess_loss) <= bound
            # the same noise draws: every release has the same sigma and rho
            assert [(e.sigma, e.rho) for e in a.ledger.entries] == [(e.sigma, e.rho) for e in c.ledger.entries]


@pytest.mark.parametrize("alg, T", [("dp-gd", 30), ("hess-clip", 4), ("dp-sgd", 10)])
def test_float32_moves_mean_excess_loss_by_less_than_a_tenth_of_a_standard_error(pair, alg, T):
    """The acceptance rule of the precision option (benchmarks/float32.py), on the toy problem."""
    p, q = pair
    ex64 = np.array([r.released_excess_loss for r in run_algorithm(p, "toy", alg, 1.0, SEEDS, T)])
    runs32 = run_algorithm(q, "toy", alg, 1.0, SEEDS, T)
    ex32 = np.array([r.released_excess_loss for r in runs32])
    se = ex64.std(ddof=1) / np.sqrt(len(SEEDS))
    assert abs(ex32.mean() - ex64.mean()) < 0.1 * se
    assert all(r.w.dtype == np.float64 for r in runs32)


def test_double_noise_ledger_keeps_its_budget(pair):
    """rho and the fixed-sensitivity sigmas are equal; the direction's sigma is set from the released ||g~||
    and lambda, so it follows their float32 rounding."""
    p, q = pair
    (a,), (c,) = run_algorithm(p, "toy", "hess-clip", 1.0, [0], 4), run_algorithm(q, "toy", "hess-clip", 1.0, [0], 4)
    assert [e.rho for e in a.ledger.entries] == [e.rho for e in c.ledger.entries]
    for e, f in zip(a.ledger.entries, c.ledger.entries):
        assert e.quantity == f.quantity
        if e.quantity == "direction":
            assert f.sigma == pytest.approx(e.sigma, rel=1e-5)
        else:
            assert (e.sigma, e.sensitivity) == (f.sigma, f.sensitivity)


def test_sparse_input():
    rng = np.random.default_rng(4)
    X = sp.random(300, 12, density=0.25, random_state=5, format="csr")
    y = np.where(rng.random(300) < 0.5, 1.0, -1.0)
    dense = LogisticProblem.from_xy(X.toarray(), y, precision="float32")
    sparse = LogisticProblem.from_xy(X, y, precision="float32")
    assert sparse.is_sparse and sparse.Z.dtype == np.float32
    np.testing.assert_allclose(sparse.Z.toarray(), dense.Z, rtol=2 * U, atol=0)
    w = rng.standard_normal(12)
    # two float32 products of 12 terms with |z_ij| <= 1, from entries equal up to one rounding each
    bound = 2 * (gamma(12) + 2 * U) * np.abs(w).sum()
    np.testing.assert_allclose(sparse.margins(w), dense.margins(w), rtol=0, atol=bound)
    np.testing.assert_allclose(sparse.grad(w), dense.grad(w), rtol=0, atol=2 * gamma(300) + bound)
    np.testing.assert_allclose(sparse.qu(w), dense.qu(w), rtol=0, atol=gamma(300))
    res = run_algorithm(sparse, "sp", "hess-clip", 1.0, [0], 3)[0]
    assert res.w.dtype == np.float64 and np.isfinite(res.w).all()


def test_bad_precision_is_one_error():
    with pytest.raises(ValueError, match="precision='float16' is unknown; choose float64 or float32"):
        LogisticProblem(np.zeros((2, 2)), precision="float16")


SMALL = {"datasets": {"synthetic": {"options": {"n": 200, "d": 4, "seed": 0}}}, "epsilons": [1], "seeds": 2,
         "algorithms": {"dp-gd": {"iterations": [8, 16]}}}


def _hashes(extra: dict) -> list[str]:
    plan = pc.expand(pc.load_config({**copy.deepcopy(SMALL), **extra}), check_data=False)
    return [pc.config_hash(j.spec) for j in plan.jobs]


def test_config_key_validates_and_enters_the_job_spec_hash():
    with pytest.raises(jsonschema.ValidationError) as err:
        pc.load_config({**copy.deepcopy(SMALL), "precision": "float16"})
    assert "\n" not in str(err.value.message) and str(err.value.message).startswith("config key precision:")
    assert _hashes({}) == _hashes({"precision": "float64"})     # absent = float64: the hashes stay
    assert set(_hashes({"precision": "float32"})).isdisjoint(_hashes({}))
    plan = pc.expand(pc.load_config({**copy.deepcopy(SMALL), "precision": "float32"}), check_data=False)
    assert {j.spec["precision"] for j in plan.jobs} == {"float32"}


def test_the_job_loads_its_problem_in_the_spec_precision(tmp_path, monkeypatch):
    prepared = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "s.npz", n=300, d=4, seed=1).path
    reference, _ = load_split_from_prepared(prepared)
    seen = []
    real = jobs.run_groups

    def spy(problem, *args, **kwargs):
        seen.append((problem.precision, problem.loss_opt))
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(jobs, "run_groups", spy)
    spec = {"dataset": "synthetic", "dataset_options": {}, "algorithm": "dp-gd", "base_algorithm": "dp-gd",
            "conversion": "bs16", "primary": True, "eps_label": "1", "epsilon": 1.0,
            "seeds": [0], "iterations": [2], "delta": None, "hyper": {}, "curves_max_points": 0, "extend": None}
    rows = {}
    for prec in ("float64", "float32"):
        s = spec if prec == "float64" else {**spec, "precision": prec}
        rows[prec] = jobs.run_job(prepared, s, tmp_path / prec / "rows.csv", tmp_path / prec / "curves.parquet")
    assert seen == [("float64", reference.loss_opt), ("float32", reference.loss_opt)]
    assert rows["float64"]["config_hash"][0] != rows["float32"]["config_hash"][0]



def test_cli_run_takes_precision(tmp_path, capsys):
    from dpnewton.cli import main
    from dpnewton.privacy.neighbouring import LIBRARY_RELATION
    from dpnewton.problems import load_problem_from_prepared, prepare_source

    records = {}
    for prec in ("float64", "float32"):
        assert main(["run", "--dataset", "synthetic", "--algorithm", "dp-gd", "--epsilon", "1", "-T", "3",
                     "--seed", "0", "--json", "--cache-dir", str(tmp_path), "--precision", prec]) == 0
        records[prec] = json.loads(capsys.readouterr().out)
    prepared = prepare_source(dataset="synthetic", cache_dir=str(tmp_path)).path
    for prec, record in records.items():
        problem = load_problem_from_prepared(prepared, precision=prec)
        (res,) = run_algorithm(problem, "synthetic", "dp-gd", 1.0, [0], [3], neighbouring=LIBRARY_RELATION)
        # the CLI ran the problem of its --precision
        assert record["evaluation"]["excess_loss"] == res.released_excess_loss
    assert records["float64"]["evaluation"]["excess_loss"] != records["float32"]["evaluation"]["excess_loss"]
