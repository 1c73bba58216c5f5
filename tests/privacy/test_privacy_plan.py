"""Privacy plans (dpnewton.privacy.plan): every planned run's ledger is exactly its plan, plans sum
to rho, and a plan that overspends or a release charged against it wrongly raises."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from dpnewton.algorithms import ALGORITHMS
from dpnewton.algorithms.double_noise import CONSTANTS
from dpnewton.experiment import resolve_budget, run_algorithm
from dpnewton.privacy import PrivacyLedger
from dpnewton.privacy.ledger import PrivacyBudgetExceeded
from dpnewton.privacy.plan import PlannedRelease, PrivacyPlan
from tests.conftest import make_problem

CASES = [("dp-gd", {}), ("dp-gd", {"average": "tail"}), ("dp-gd-oracle", {}), ("hess-clip", {}),
         ("qu-add", {"constants": "v1"}), ("hess-add", {"grad_frac": 0.5, "trace_frac": 0.3}),
         ("qu-clip", {"lambda_mode": "fixed", "lambda0": 0.5}), ("damped-newton", {"grad_frac": 0.6}),
         ("precond-dp-gd", {}), ("precond-dp-gd", {"refresh": 3, "precond_frac": 0.3}),
         ("cubic-newton", {"max_inner": 20})]


@pytest.mark.parametrize("algorithm, hyper", CASES)
def test_the_ledger_is_the_plan(algorithm, hyper):
    problem = make_problem(n=600, d=5, seed=2)
    for T in (1, 7):
        (res,) = run_algorithm(problem, "x", algorithm, 1.0, [0], [T], hyper=hyper)
        plan = ALGORITHMS[algorithm].plan(hyper, problem.n, problem.d, T, res.ledger.budget_rho)
        assert plan.total_rho == pytest.approx(res.ledger.budget_rho, rel=1e-12)
        entries = res.ledger.entries
        assert Counter(e.quantity for e in entries) == {r.quantity: r.count for r in plan.releases}
        for e in entries:
            r = plan.release(e.quantity)
            assert e.rho == r.rho                                  # the very float the plan states
            if r.sensitivity is not None:
                assert e.sensitivity == r.sensitivity
        assert math.isclose(res.ledger.spent_rho, plan.total_rho, rel_tol=1e-12)


def test_known_plans():
    n, T, rho = 100, 4, 0.2
    gd = ALGORITHMS["dp-gd"].plan({}, n, 3, T, rho)
    assert [(r.quantity, r.rho, r.count, r.sensitivity) for r in gd.releases] == [("gradient", 0.05, 4, 0.01)]
    # the older code's constants: grad_frac 0.75, trace_frac 0.1 (what the audit once re-derived as 0.7)
    v1 = ALGORITHMS["hess-clip"].plan({"constants": "v1"}, n, 3, T, rho)
    assert CONSTANTS["v1"]["grad_frac"] == 0.75
    assert v1.share("gradient") == pytest.approx(0.75 / T)
    assert v1.share("trace") == pytest.approx(0.1 * 0.25 / T) and v1.share("direction") == pytest.approx(0.9 * 0.25 / T)
    assert v1.release("direction").sensitivity is None and "lambda" in v1.release("direction").sensitivity_rule
    fixed = ALGORITHMS["hess-clip"].plan({"lambda_mode": "fixed", "lambda0": 1.0}, n, 3, T, rho)
    assert [r.quantity for r in fixed.releases] == ["gradient", "direction"]
    pre = ALGORITHMS["precond-dp-gd"].plan({"refresh": 3}, n, 3, 7, rho)
    assert pre.release("curvature").count == 3 and pre.release("curvature").rho == pytest.approx(0.1 * rho / 3)
    assert pre.release("gradient").rho == pytest.approx(0.9 * rho / 7)
    cubic = ALGORITHMS["cubic-newton"].plan({"max_inner": 5}, n, 3, T, rho)
    assert cubic.release("model-gradient").count == T * 5 and cubic.total_rho == pytest.approx(rho)
    assert ALGORITHMS["cubic-newton"].plan({"noise": False}, n, 3, T, rho).releases == ()
    rows = pre.as_rows()
    assert rows[0]["rho_total"] == pytest.approx(0.1 * rho) and rows[0]["algorithm"] == "precond-dp-gd"


def test_unplanned_algorithms_have_no_plan():
    """Methods calibrated by an accountant or to (epsilon, delta) have no zCDP plan (their ledger holds
    an event); every other registered method has one."""
    unplanned = {name for name, spec in ALGORITHMS.items() if spec.plan is None}
    assert unplanned == {"aop", "objpert", "dp-sgd"} | {
        f"minibatch-{s}-{m}" for s in ("hess", "qu") for m in ("clip", "add")}


def test_overspending_plan_and_wrong_charges_raise():
    over = PrivacyPlan("x", 1.0, 2, (PlannedRelease("gradient", 0.6, 2, 0.1, "r"),))
    with pytest.raises(PrivacyBudgetExceeded, match="spends rho=1.2"):
        over.check()
    plan = PrivacyPlan("x", 1.0, 1, (PlannedRelease("gradient", 0.5, 1, 0.1, "r"),
                                     PlannedRelease("direction", 0.5, 1, None, "from lambda")))
    led = PrivacyLedger(1.0)
    with pytest.raises(ValueError, match="has a planned sensitivity"):
        plan.charge(led, 0, "gradient", 0.2)
    with pytest.raises(ValueError, match="needs its sensitivity at release time"):
        plan.charge(led, 0, "direction")
    with pytest.raises(KeyError, match="no release 'trace'"):
        plan.charge(led, 0, "trace")
    assert plan.charge(led, 0, "gradient") == pytest.approx(0.1 / np.sqrt(2 * 0.5))
    assert plan.charge(led, 0, "direction", 0.3) == pytest.approx(0.3)
    with pytest.raises(PrivacyBudgetExceeded):       # a release beyond the plan's count overspends the ledger
        plan.charge(led, 1, "gradient")


def test_plans_are_pure_functions_of_public_inputs():
    _, rho = resolve_budget(1.0, None, 1000, "bs16")
    a = ALGORITHMS["qu-clip"].plan({}, 1000, 8, 16, rho)
    b = ALGORITHMS["qu-clip"].plan({}, 1000, 8, 16, rho)
    assert a == b and hash(a) == hash(b)


def test_the_audit_reads_the_release_share_from_the_plan():
    from dpnewton.audit.mechanisms import AuditMechanism, release_rho_share

    v1 = AuditMechanism("hess-clip-v1", "hess-clip", 4, {"constants": "v1"}, ("gradient-release",))
    assert release_rho_share(v1, "gradient-release", 500, 4) == pytest.approx(0.75 / 4)   # not 0.7 / 4
    pre = AuditMechanism("precond", "precond-dp-gd", 2, {"precond_frac": 0.3}, ("gradient-release",))
    assert release_rho_share(pre, "gradient-release", 500, 4) == pytest.approx(0.7 / 2)
    assert release_rho_share(pre, "curvature-release", 500, 4) == pytest.approx(0.3)
    assert release_rho_share(v1, "output", 500, 4) == 1.0
