"""Rebuilding what an audit level sees from a production run's transcript [docs/privacy_audit.md].

Each function returns one scalar per trial, from the recorded draws (:class:`~.canaries.PinnedStartRng`),
the noise scales the ledger handed out (:class:`~.variants.AuditLedger`), the run's ledger event and
result diagnostics. Which release a level reads comes from the card: its position in a step from the
privacy plan (:meth:`~.canaries.AuditMechanism.plan`, releases in charge order, one Gaussian draw each),
the regulariser and the SOI from the run's configuration (:meth:`~.canaries.AuditMechanism.config`).
"""

from __future__ import annotations

import numpy as np

from ..loss import LogisticProblem
from ..privacy.plan import PrivacyPlan
from .canaries import AuditMechanism, CanaryPair
from .variants import GRADIENT_QUANTITIES

#: ledger quantity a level reads; the gradient release is the plan's first gradient-type release
LEVEL_QUANTITIES = {"trace-release": "trace", "curvature-release": "curvature"}


def level_quantity(plan: PrivacyPlan, level: str) -> str:
    """The plan's quantity that ``level`` observes (``gradient-release``, ``inner-releases``: the first
    gradient-type release, :data:`~.variants.GRADIENT_QUANTITIES`)."""
    if level in LEVEL_QUANTITIES:
        return LEVEL_QUANTITIES[level]
    for r in plan.releases:
        if r.quantity in GRADIENT_QUANTITIES:
            return r.quantity
    raise ValueError(f"{plan.algorithm}'s plan has no gradient-type release for the level {level!r}")


def release_index(problem: LogisticProblem, mech: AuditMechanism, level: str, contexts) -> tuple[int, str]:
    """(k, quantity): the release ``level`` observes and its place k among a step's releases (the plan's
    charge order), checked against every run's ledger; draw k (after the pinned start) is its noise."""
    plan = mech.plan(problem.n, problem.d)
    quantity = level_quantity(plan, level)
    k = [r.quantity for r in plan.releases].index(quantity)
    for c in contexts:
        if len(c.ledger.entries) <= k or c.ledger.entries[k].quantity != quantity:
            raise RuntimeError(f"{mech.algorithm}: release {k} of the run is not its planned {quantity!r}")
    return k, quantity


def _first_gradient_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism, contexts,
                            results) -> np.ndarray:
    """<first released gradient, u> per trial, rebuilt from the recorded draws and noise scales.

    zCDP plan: grad(w0) + reg w0 + s_g xi_k, reg the configuration's ``reg`` (0 without one), k the
    gradient's place in the plan, s_g the sigma the ledger returned. Accountant-calibrated:
    (sum over the Poisson batch + z_g xi_0)/b_g, with the mask of the first uniform draw (q = b_g/n),
    b_g the run's expected gradient batch (diagnostics ``batch_grad``) and z_g the ``gradient``
    multiplier the run passed through its ledger.
    """
    out = np.empty(len(contexts))
    if mech.calibration == "accountant":
        for i, (c, r) in enumerate(zip(contexts, results)):
            if "batch_grad" not in r.diagnostics:
                raise RuntimeError(f"{mech.algorithm}: the run records no expected gradient batch (batch_grad)")
            b_g = float(r.diagnostics["batch_grad"])
            batch = problem.batch(np.flatnonzero(c.rng.uniforms[0] < b_g / problem.n))
            noisy = batch.grad_from_margins(batch.margins(pair.w0)) * batch.n \
                + c.ledger.noise_scale("gradient") * c.rng.draws[0]
            out[i] = (noisy @ pair.canary) / b_g
        return out
    k, quantity = release_index(problem, mech, "gradient-release", contexts)
    if quantity != "gradient":
        raise RuntimeError(f"{mech.algorithm}: its first gradient-type release is read from a transcript only "
                           "(audit it with the inner-releases level)")
    g = problem.grad(pair.w0) + float(getattr(mech.config(), "reg", 0.0)) * pair.w0
    for i, c in enumerate(contexts):
        out[i] = g @ pair.canary + c.ledger.returned[k] * (c.rng.draws[k] @ pair.canary)
    return out


def _inner_releases(pair: CanaryPair, mech: AuditMechanism, results) -> tuple[np.ndarray, np.ndarray]:
    """The N inner releases of one outer step of a cubic-regularised model, read from the run's
    transcript [docs/algorithms.md §5].

    Algorithm 2 releases g^_i = m(theta_i) + sigma xi_i, m(theta) = g + H(theta - theta0)
    + (L2/2)||theta - theta0||(theta - theta0) the model gradient of this side's data, and moves to
    theta_{i+1} = Proj_W(theta_i - eta_i g^_i). The runs were made with ``record_releases`` (set by
    :func:`~.mechanisms.run_trials` for this level), so each result's ``diagnostics["inner_releases"]``
    holds the points theta_i and the releases g^_i exactly as the production code computed them (with
    the broken variant's sigma); checked: one outer step of N = ``diagnostics["inner_steps"]`` releases,
    as many as the ledger was charged for.
    Returns per trial <g^_0, u> (the first release) and the transcript statistic
    sum_i <g^_i - m_D(theta_i), u>, m_D the model gradient of D (regulariser ``diagnostics["mu"]``,
    ``diagnostics["L2"]``) at the released theta_i (theta_0 = the run's start): a fixed function of the
    released transcript (theta_i are post-processing of earlier releases). On D it is
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
            raise RuntimeError(f"{mech.algorithm}: expected one outer step of N = {N} recorded and charged releases")
        thetas, releases = steps[0]
        theta0, mu, L2 = thetas[0], diag["mu"], diag["L2"]
        m = pair.D.margins(theta0)     # D's cubic model at the run's start
        g_D = pair.D.grad_from_margins(m) + mu * theta0
        H_D = pair.D.soi_from_margins(m, "hessian") + mu * np.eye(theta0.size)
        stat = 0.0
        for theta, released in zip(thetas, releases):
            u = theta - theta0
            model = g_D + H_D @ u + (0.5 * L2 * float(np.linalg.norm(u))) * u
            stat += float((released - model) @ pair.canary)
        first[k] = float(releases[0] @ pair.canary)
        total[k] = stat
    return first, total


def _objective_release(problem: LogisticProblem, pair: CanaryPair, contexts, W: np.ndarray) -> np.ndarray:
    """Objective perturbation: <theta^, u> for the perturbed minimiser theta^ before the output noise
    [docs/algorithms.md §4.2, §15].

    theta^ = output - sigma_out xi_out (the last recorded draw; sigma_out the ``output`` scale the run
    passed through its ledger, i.e. the broken variant's). Checked: ||grad J(theta^)|| <= the tolerance
    gamma of the ledger event, J(theta) = l(theta) + Lambda/(2n)||theta||^2 + <b, theta> (mean form,
    Lambda from the event), b = sigma_obj times the second-to-last draw (the ``objective`` noise, drawn once).
    """
    out = np.empty(len(contexts))
    n = problem.n
    for k, c in enumerate(contexts):
        event = c.ledger.events[0]
        if event["returned_zero"]:
            raise RuntimeError("the objective perturbation returned theta = 0 (epsilon too large): nothing to audit")
        theta_hat = W[k] - c.ledger.noise_scale("output") * c.rng.draws[-1]
        b = c.ledger.noise_scale("objective") * c.rng.draws[-2]
        grad = problem.grad(theta_hat) + (event["Lambda"] / n) * theta_hat + b
        if float(np.linalg.norm(grad)) > event["gamma"] * (1.0 + 1e-6):
            raise RuntimeError("objective perturbation: the rebuilt minimiser does not meet the run's tolerance")
        out[k] = float(theta_hat @ pair.canary)
    return out


def _first_trace_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism, contexts) -> np.ndarray:
    """The first released noisy trace tr SOI(w0) + s_tr xi per trial (adaptive lambda), SOI = the
    configuration's ``soi``, at the trace's place in the plan."""
    k, _ = release_index(problem, mech, "trace-release", contexts)
    tr = float(np.trace(problem.soi_from_margins(problem.margins(pair.w0), mech.config().soi)))
    out = np.empty(len(contexts))
    for i, c in enumerate(contexts):
        out[i] = tr + c.ledger.returned[k] * float(c.rng.draws[k])
    return out


def _first_curvature_release(problem: LogisticProblem, pair: CanaryPair, mech: AuditMechanism,
                             contexts) -> np.ndarray:
    """The first released curvature bound B~ = B + S at the canary's coordinate, B = Z^T Z/(4n) of this
    side (Böhning's bound) and S's upper triangle one draw: u = e_1 gives entry (1, 1), the draw's first
    value, B_11 + s_B xi_0, per trial."""
    j = int(np.flatnonzero(pair.canary)[0])
    if pair.canary[j] != 1.0 or j != 0:
        raise RuntimeError("the curvature statistic assumes the canary u = e_1")
    k, _ = release_index(problem, mech, "curvature-release", contexts)
    b11 = float(problem.weighted_gram(np.full(problem.n, 0.25))[0, 0])
    out = np.empty(len(contexts))
    for i, c in enumerate(contexts):
        out[i] = b11 + c.ledger.returned[k] * float(c.rng.draws[k][0])
    return out
