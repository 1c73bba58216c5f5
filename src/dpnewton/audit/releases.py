"""Rebuilding what an audit level sees from a production run's transcript [docs/privacy_audit.md].

Each function returns one scalar per trial, from the recorded draws (:class:`~.mechanisms.PinnedStartRng`),
the sigma the ledger returned (:class:`~.variants.AuditLedger`) or the run's ledger event: the first
gradient release, cubic Newton's inner releases, the objective-perturbation minimiser (AOP, objpert), the
first trace release and the first curvature release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..algorithms.aop import aop_objective
from ..algorithms.cubic_newton import model_gradient
from ..algorithms.minibatch import MinibatchNewtonConfig, _expected_batch, gradient_sum
from ..algorithms.precond import bohning_bound
from ..loss import LogisticProblem

if TYPE_CHECKING:  # type hints only: dpnewton.audit.mechanisms imports this module (cycle)
    from .mechanisms import AuditMechanism, CanaryPair


def _first_gradient_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism, hyper: dict,
                            contexts) -> np.ndarray:
    """<first released gradient, u> per trial, rebuilt from the recorded draws and noise scales."""
    out = np.empty(len(contexts))
    if mech.calibration == "accountant":   # minibatch Newton: (sum over the Poisson batch + z_g xi)/b_g
        cfg = MinibatchNewtonConfig(**{k: v for k, v in hyper.items()
                                       if k in ("batch_grad", "batch_hess", "batch_frac", "grad_frac")})
        b_g = _expected_batch(cfg.batch_grad, problem.n, cfg.batch_frac, "batch_grad")
        for i, c in enumerate(contexts):
            z_g = (hyper["noise_multipliers"][0] if "noise_multipliers" in hyper
                   else float(c.ledger.events[0]["noise_multiplier_grad"]))
            idx = np.flatnonzero(c.rng.uniforms[0] < b_g / problem.n)
            noisy = gradient_sum(problem.batch(idx), pair.w0) + z_g * c.rng.draws[0]
            out[i] = (noisy @ pair.canary) / b_g
        return out
    g = problem.grad(pair.w0)
    reg = float(hyper.get("reg", 1e-8)) if mech.algorithm not in ("dp-gd", "precond-dp-gd") else 0.0
    g = g + reg * pair.w0
    # precond-dp-gd releases its curvature first: its first gradient is the second release (and draw)
    k = 1 if mech.algorithm == "precond-dp-gd" else 0
    for i, c in enumerate(contexts):
        if len(c.ledger.entries) <= k or c.ledger.entries[k].quantity != "gradient":
            raise RuntimeError(f"{mech.algorithm}: release {k} is not the gradient")
        out[i] = g @ pair.canary + c.ledger.returned[k] * (c.rng.draws[k] @ pair.canary)
    return out


def _cubic_inner_releases(pair: CanaryPair, mech: AuditMechanism, results) -> tuple[np.ndarray, np.ndarray]:
    """Cubic Newton (T = 1): the N inner releases, read from the production run's transcript [docs/algorithms.md §5].

    Algorithm 2 releases g^_i = m(theta_i) + sigma xi_i, m(theta) = g + H(theta - theta0)
    + (L2/2)||theta - theta0||(theta - theta0) the model gradient of this side's data, and moves to
    theta_{i+1} = Proj_W(theta_i - eta_i g^_i). The runs were made with ``record_releases`` (set by
    :func:`run_trials`), so each result's ``diagnostics["inner_releases"]`` holds the points theta_i
    and the releases g^_i exactly as the production code computed them (with the broken variant's
    sigma when patched); checked: one outer step of N = ``diagnostics["inner_steps"]`` releases, as
    many as the ledger was charged for.
    Returns per trial <g^_0, u> (the first release) and the transcript statistic
    sum_i <g^_i - m_D(theta_i), u>, where m_D (:func:`~dpnewton.algorithms.cubic_newton.model_gradient`)
    is the model gradient of D at the released theta_i (theta_0 = the run's start): a fixed function
    of the released transcript (theta_i are post-processing of earlier releases). On D it is
    sigma sum_i <xi_i, u>; on D' each term is shifted by the canary's change of the model gradient
    (-1/(n+1) for every i with the ``opposed`` canary: D and D' have the same Hessian), so for a
    constant shift it is the Neyman-Pearson statistic of the whole step's N releases (composition of
    N Gaussians, each at rho~/N).
    """
    if mech.iterations != 1:
        raise ValueError("the inner-release statistic covers T = 1 (one outer step)")
    first, total = np.empty(len(results)), np.empty(len(results))
    for k, r in enumerate(results):
        diag = r.diagnostics
        steps, N = diag["inner_releases"], diag["inner_steps"]
        shapes = {a.shape for a in steps[0]} if len(steps) == 1 else set()
        if shapes != {(N, pair.w0.size)} or len(r.ledger.entries) != N:
            raise RuntimeError(f"cubic Newton: expected one outer step of N = {N} recorded and charged releases")
        thetas, releases = steps[0]
        theta0, mu = thetas[0], diag["mu"]
        m = pair.D.margins(theta0)     # D's cubic model at the run's start
        g_D = pair.D.grad_from_margins(m) + mu * theta0
        H_D = pair.D.soi_from_margins(m, "hessian") + mu * np.eye(theta0.size)
        stat = 0.0
        for theta, released in zip(thetas, releases):
            stat += float((released - model_gradient(g_D, H_D, theta0, diag["L2"], theta)) @ pair.canary)
        first[k] = float(releases[0] @ pair.canary)
        total[k] = stat
    return first, total


def _objective_release(problem: LogisticProblem, pair: CanaryPair, contexts, W: np.ndarray) -> np.ndarray:
    """AOP: <theta^, u> for the perturbed minimiser theta^ before the output noise [docs/algorithms.md §4.2].

    theta^ = output - sigma_out xi_out (the last recorded draw; sigma_out from the ledger event, i.e.
    the broken variant's when patched). Checked: ||grad J(theta^)|| <= the tolerance gamma the run met,
    with b = sigma_obj times the second-to-last draw (the objective noise, drawn once).
    """
    out = np.empty(len(contexts))
    for k, c in enumerate(contexts):
        event = c.ledger.events[0]
        if event["returned_zero"]:
            raise RuntimeError("AOP returned theta = 0 (epsilon >= 10.1): nothing to audit")
        theta_hat = W[k] - event["sigma_out"] * c.rng.draws[-1]
        b = event["sigma_obj"] * c.rng.draws[-2]
        _, grad = aop_objective(problem, event["Lambda"], b)(theta_hat)
        if float(np.linalg.norm(grad)) > event["gamma"] * (1.0 + 1e-6):
            raise RuntimeError("AOP: the rebuilt minimiser does not meet the run's tolerance")
        out[k] = float(theta_hat @ pair.canary)
    return out


def _first_trace_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism, contexts) -> np.ndarray:
    """The first released noisy trace tr H(w0) + s_tr xi per trial (double-noise, adaptive lambda)."""
    soi = "qu" if mech.algorithm.startswith("qu") else "hessian"
    tr = float(np.trace(problem.soi_from_margins(problem.margins(pair.w0), soi)))
    out = np.empty(len(contexts))
    for i, c in enumerate(contexts):
        if len(c.ledger.entries) < 2 or c.ledger.entries[1].quantity != "trace":
            raise RuntimeError(f"{mech.algorithm}: the second release is not the trace")
        out[i] = tr + c.ledger.returned[1] * float(c.rng.draws[1])
    return out


def _first_curvature_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism,
                             contexts) -> np.ndarray:
    """precond-dp-gd: the released B~ entry at the canary's coordinate (u = e_1: entry (1, 1), the
    first of the upper-triangle draw), B_11 + s_B xi_0, per trial; B = Z^T Z/(4n) of this side."""
    k = int(np.flatnonzero(pair.canary)[0])
    if pair.canary[k] != 1.0 or k != 0:
        raise RuntimeError("the curvature statistic assumes the canary u = e_1")
    b11 = float(bohning_bound(problem)[0, 0])
    out = np.empty(len(contexts))
    for i, c in enumerate(contexts):
        if not c.ledger.entries or c.ledger.entries[0].quantity != "curvature":
            raise RuntimeError(f"{mech.algorithm}: the first release is not the curvature")
        out[i] = b11 + c.ledger.returned[0] * float(c.rng.draws[0][0])
    return out
