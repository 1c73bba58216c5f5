"""The non-private optimum, checked against scipy and against a1a reference values."""

import numpy as np
import pytest
from scipy import optimize

from dpnewton.algorithms.optimum import SETTLE_STEPS, SETTLED_REL, find_optimum
from dpnewton.loss import LogisticProblem
from tests.conftest import make_problem


def test_optimum_matches_scipy():
    p = make_problem(n=300, d=5, seed=11, scale=2.0)
    opt = find_optimum(p)
    ref = optimize.minimize(p.loss, np.zeros(p.d), jac=p.grad, hess=p.hessian, method="trust-exact",
                            options={"gtol": 1e-12})
    assert opt.converged and opt.grad_norm <= 1e-10
    assert opt.loss == pytest.approx(ref.fun, rel=1e-12)
    np.testing.assert_allclose(opt.w, ref.x, rtol=1e-6)


def test_optimum_with_singular_hessian():
    """Duplicated columns make the Hessian singular; the pseudo-inverse Newton still converges."""
    p0 = make_problem(n=300, d=4, seed=5)
    Z = np.hstack([p0.Z, p0.Z[:, :1]]) / np.sqrt(2.0)
    p = LogisticProblem(Z)
    opt = find_optimum(p)
    assert opt.converged
    assert opt.loss == pytest.approx(find_optimum(LogisticProblem(p0.Z)).loss, abs=1e-12)


def test_a_gradient_below_its_floor_stops_when_the_loss_has_settled():
    """With a tolerance no float64 gradient reaches, the settled-loss rule stops Newton: at the loss of the
    gradient-converged run, SETTLE_STEPS steps after the loss stopped moving; with the default tolerance
    the gradient rule stops it first."""
    p = make_problem(n=300, d=5, seed=11, scale=2.0)
    ref = find_optimum(p)
    assert ref.converged and ref.criterion == "gradient"
    opt = find_optimum(p, tol=1e-30)
    assert opt.converged and opt.criterion == "settled" and opt.grad_norm > 1e-30
    assert opt.loss == pytest.approx(ref.loss, rel=1e-14)
    assert ref.iterations < opt.iterations <= ref.iterations + SETTLE_STEPS + 2
    losses = [e["loss"] for e in opt.log[-SETTLE_STEPS:]]
    assert max(losses) - min(losses) <= SETTLED_REL * abs(opt.loss)


def test_a_moving_loss_is_not_settled():
    """The rule needs SETTLE_STEPS steps of history: with an unreachable tolerance and fewer Newton steps
    allowed, the run reports no convergence."""
    p = make_problem(n=300, d=5, seed=11, scale=2.0)
    opt = find_optimum(p, tol=1e-30, max_iter=SETTLE_STEPS - 1)
    assert not opt.converged and opt.criterion == ""


@pytest.fixture(scope="module")
def a1a_problem(shared_datasets, tmp_path_factory):
    from dpnewton.data import prepare

    cache = tmp_path_factory.mktemp("a1a")
    out = {}
    for prep in ("v2", "v1"):
        ds = prepare("a1a", data_dir=shared_datasets, out=cache / f"a1a-{prep}.npz", prep=prep)
        out[prep] = LogisticProblem.from_xy(ds.X, ds.y, name="a1a")
    return out


def test_a1a_known_answers_v2(a1a_problem):
    """docs/algorithms.md §10: min loss 0.3256182817, tr H(w*) = 0.10374, lambda_max H(w*) = 0.00901."""
    p = a1a_problem["v2"]
    assert (p.n, p.d) == (30956, 124)
    assert p.loss(np.zeros(p.d)) == pytest.approx(np.log(2.0), rel=1e-14)
    H0 = p.hessian(np.zeros(p.d))
    assert np.trace(H0) == pytest.approx(0.25, rel=1e-12)
    assert np.linalg.eigvalsh(H0).max() == pytest.approx(0.01807, abs=1e-5)
    opt = find_optimum(p)
    assert opt.converged
    assert opt.loss == pytest.approx(0.3256182817, abs=1e-10)
    H = p.hessian(opt.w)
    assert np.trace(H) == pytest.approx(0.10374, abs=1e-5)
    assert np.linalg.eigvalsh(H).max() == pytest.approx(0.00901, abs=1e-5)
    assert p.accuracy(opt.w) == pytest.approx(0.8480, abs=1e-4)


def test_a1a_known_answers_v1(a1a_problem):
    p = a1a_problem["v1"]
    opt = find_optimum(p)
    assert opt.loss == pytest.approx(0.3254823847, abs=1e-10)
    assert np.linalg.eigvalsh(p.hessian(np.zeros(p.d))).max() == pytest.approx(0.12527, abs=1e-5)
