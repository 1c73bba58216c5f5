"""Audited mechanisms: the production optimizers run on a canary pair (D, D') many times.

The mechanism table is read from the algorithm cards (:func:`default_mechanisms`: every card's
:class:`~dpnewton.algorithms.AuditCase` rows, in registry order, third-party cards included); this
module holds the trial runner, the statistics and the claims. The shared types are in the base modules
:mod:`.canaries` (canary pairs, :class:`PinnedStartRng`, :class:`AuditMechanism`) and :mod:`.variants`
(the broken variants, :class:`AuditLedger`); the rebuilding of a level's released quantity from a run's
transcript is in :mod:`.releases` (their public names are re-exported here).

What runs is the *real* algorithm code (``get_algorithm(name).run``), fed with crafted
:class:`~dpnewton.algorithms.RunContext` objects:

* the ledger is an :class:`AuditLedger` (a :class:`~dpnewton.privacy.PrivacyLedger` that also
  remembers the noise scales it handed out). A broken variant is the same ledger built with
  ``broken=...``, which changes only the scales it hands out, by :func:`noise_factor`: the sigma
  ``charge`` returns (zCDP releases) and the scale ``noise`` passes through (scales calibrated
  elsewhere: accountant multipliers, objective-perturbation sigmas, a method's own sigma).
  ``half-noise`` x1/2, ``tenth-noise`` x1/10 (every release), ``wrong-sensitivity`` x1/4 for the
  gradient-type releases (noise for the SOI bound 1/(4n) instead of 1/n). No production code path is
  modified (a level ``inner-releases`` runs with the audit option ``record_releases``, which only keeps
  a copy of the inner releases);
* the random generator is a :class:`PinnedStartRng`: it returns a fixed starting point for the
  first draw (``random_unit_vector``) so every trial starts at the same w0, then serves - and
  records - the run's Gaussian and uniform draws from one shared generator.

How a run's noise is calibrated is read from its card (:attr:`AuditMechanism.calibration`): a zCDP
privacy plan (``zcdp-plan``), an (epsilon, delta) objective perturbation (``one-shot``, not iterative) or
RDP-accountant noise multipliers (``accountant``).

Canary pairs (:func:`canary_pair`): ``opposed`` (the default: D = n records z_i = -u, D' = D + z_c
= +u; the mean gradient moves by exactly u/(n+1) at *every* w, i.e. by |grad l(w; z_c) - mean_D|
= 1 = L over n+1 (two records at an angle can exceed this slightly at ||w|| = 1 and more at larger
||w||); both SOIs are unchanged, so the SOI-based releases carry no signal), ``zero`` (zero records
+ the canary: for Poisson-subsampled sums) and ``zero-orthogonal`` (zero records + a canary
orthogonal to the start: it changes the SOI's trace by the trace sensitivity, exciting a trace release).

Audit levels (stated per row of the results table):

``output``   the whole algorithm output w_T, statistic <w_T, u> (post-processing of all releases);
``gradient-release``  the first released noisy gradient g~_0 = grad(w0) (+ reg w0) + s_g xi,
             reconstructed from the recorded draw xi and the sigma the ledger returned (accountant-
             calibrated: also from the recorded Poisson coin flips; with ``inner-releases``: the first
             inner model gradient), statistic -<g~_0, u>. Its own budget is only a share of the run's;
``trace-release``  the first noisy trace tr SOI(w0) + s_tr xi of an adaptive lambda;
``curvature-release``  the released entry (1, 1) of a curvature bound B~ = Z^T Z/(4n) + S (the canary
             u = e_1's coordinate; S's upper triangle is i.i.d. N(0, s_B^2), so this entry carries
             all of the canary's signal), rebuilt from the recorded draw and the sigma the ledger
             returned; claim: the GDP epsilon of the plan's curvature share of rho;
``inner-releases``  all N noisy model gradients of the (single) outer step of a cubic-regularised model,
             statistic the sum of their canary components minus D's model gradient (:func:`_inner_releases`);
``objective-release``  objective perturbation: the perturbed minimiser before the output noise, statistic
             <theta^, u> (:func:`.releases._objective_release`), claim eps_obj of the ledger event.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..algorithms import ALGORITHMS, RunContext
from ..privacy import epsilon_to_rho, rho_to_epsilon
from ..privacy.accountant import accountant_epsilon
from ..privacy.ledger import SubsampledGaussianEvent
from ..seeding import RunIdentity
from .canaries import CANARIES, LEVELS, AuditMechanism, CanaryPair, PinnedStartRng, canary_pair
from .releases import (_first_curvature_release, _first_gradient_release, _first_trace_release, _inner_releases,
                       _objective_release, level_quantity)
from .variants import BROKEN_VARIANTS, GRADIENT_QUANTITIES, AuditLedger, _check_broken, noise_factor


def default_mechanisms() -> list[AuditMechanism]:
    """Every registered card's audit rows (:attr:`~dpnewton.algorithms.AlgorithmSpec.audit`), in registry order."""
    return [AuditMechanism.from_case(spec.name, case) for spec in ALGORITHMS.values() for case in spec.audit]


@dataclass
class TrialBatch:
    W: np.ndarray                       # (trials, d) outputs
    grad_release_u: np.ndarray | None   # (trials,) <first gradient release, u> or None
    rho: float
    ledgers: list
    trace_release: np.ndarray | None = None   # (trials,) first released noisy trace or None
    hyper: dict = field(default_factory=dict)  # hyper-parameters actually run
    inner_releases: np.ndarray | None = None  # (trials,) inner releases: sum_i <g^_i - m_D(theta_i), u>
    objective_release: np.ndarray | None = None  # (trials,) <perturbed minimiser before output noise, u>
    curvature_release: np.ndarray | None = None  # (trials,) released B~_11


def run_trials(pair: CanaryPair, mech: AuditMechanism, side: str, trials: int, epsilon: float,
               conversion: str = "gdp", broken: str = "none", seed: int = 0) -> TrialBatch:
    """Run the production optimizer ``trials`` times on D (side "D") or D' (side "D'")."""
    _check_broken(broken)
    if side not in ("D", "D'"):
        raise ValueError(f"side={side!r} must be 'D' or \"D'\"")
    if trials < 1:
        raise ValueError(f"trials={trials!r} must be >= 1")
    problem = pair.D if side == "D" else pair.D_prime
    spec = mech.spec
    rho = epsilon_to_rho(epsilon, pair.delta, conversion)
    base = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [seed, zlib.crc32(mech.name.encode()), 0 if side == "D" else 1, BROKEN_VARIANTS.index(broken), trials,
         mech.iterations])))
    hyper = dict(mech.hyper)
    transcript = "inner-releases" in mech.levels
    if transcript:    # _inner_releases reads the inner releases from the runs' transcripts
        hyper["record_releases"] = True
    contexts = []
    for i in range(trials):
        ident = RunIdentity(problem.name, mech.algorithm, float(epsilon), i, mech.iterations)
        contexts.append(RunContext(ident, float(epsilon), pair.delta, conversion, rho, AuditLedger(rho, broken),
                                   PinnedStartRng(base, pair.w0 if mech.pin_start else None)))
    with threadpool_limits(1):
        results = spec.run(problem, contexts, dict(hyper))
    W = np.stack([r.w for r in results])
    grad_u = trace = inner = objective = curvature = None
    if transcript:
        grad_u, inner = _inner_releases(pair, mech, results)
    elif "gradient-release" in mech.levels:
        grad_u = _first_gradient_release(problem, pair, mech, contexts, results)
    if "trace-release" in mech.levels:
        trace = _first_trace_release(problem, pair, mech, contexts)
    if "objective-release" in mech.levels:
        objective = _objective_release(problem, pair, contexts, W)
    if "curvature-release" in mech.levels:
        curvature = _first_curvature_release(problem, pair, mech, contexts)
    return TrialBatch(W, grad_u, rho, [c.ledger for c in contexts], trace, hyper, inner, objective, curvature)


def statistic(batch: TrialBatch, pair: CanaryPair, level: str) -> np.ndarray:
    """Per-trial scalar, larger on D' in expectation (the canary pulls w towards +u)."""
    if level == "output":
        return batch.W @ pair.canary
    if level == "gradient-release":
        return -batch.grad_release_u
    if level == "trace-release":     # the canary adds SOI weight: larger trace on D'
        return batch.trace_release
    if level == "inner-releases":    # the canary lowers every inner model gradient along u
        return -batch.inner_releases
    if level == "objective-release":  # the canary pulls the perturbed minimiser towards +u
        return batch.objective_release
    if level == "curvature-release":  # the canary adds u u^T/(4n) to B: larger B~_11 on D'
        return batch.curvature_release
    raise ValueError(f"level={level!r} is unknown; choose one of {', '.join(LEVELS)}")


def release_rho_share(mech: AuditMechanism, level: str, n: int, d: int, rho: float = 1.0) -> float:
    """Share of the run's rho spent on what the statistic sees, from the card's privacy plan
    (:mod:`dpnewton.privacy.plan`) of a run with budget ``rho`` (a plan's split may depend on it): all of
    it for the output; one release of the level's quantity (:func:`.releases.level_quantity`:
    rho_each/rho); ``inner-releases``: the releases of one outer step, rho_each count/(T rho)."""
    if level == "output":
        return 1.0
    plan = mech.plan(n, d, rho)
    release = plan.release(level_quantity(plan, level))
    if level == "inner-releases":
        return release.rho * release.count / (plan.iterations * plan.rho)
    return release.rho / plan.rho


def claimed_epsilon_of_share(rho: float, share: float, delta: float) -> float:
    """epsilon at delta of a share of rho for a composition of Gaussians (exact GDP conversion)."""
    return rho_to_epsilon(rho * share, delta, "gdp") if share > 0 else 0.0


def claimed_epsilon_of_level(mech: AuditMechanism, level: str, batch: TrialBatch, pair: CanaryPair,
                             epsilon: float) -> float:
    """The claim that covers what the statistic of ``level`` sees (same delta as the run).

    zCDP plan (:attr:`AuditMechanism.calibration` ``zcdp-plan``): the exact GDP epsilon of the level's
    share of the run's rho (:func:`release_rho_share`; the output: all of it, which is the claimed
    epsilon itself when the run's conversion is ``gdp``). The other methods are calibrated to
    (epsilon, delta) directly, their output claims the run's epsilon, and a release's claim is read
    from the correct run's ledger event (a broken variant changes only the scales handed out, never the
    event): the first gradient release of an accountant-calibrated run, the RDP accountant's epsilon of
    that one subsampled Gaussian (the event's first rate q and multiplier z, one step); the perturbed
    minimiser of objective perturbation, the event's eps_obj (its guarantee holds at delta_obj < delta,
    so a lower bound computed at delta that exceeds eps_obj refutes it as well, epsilon(delta) being
    non-increasing in delta).
    """
    if mech.calibration == "zcdp-plan":
        share = release_rho_share(mech, level, pair.D.n, pair.D.d, batch.rho)
        return claimed_epsilon_of_share(batch.rho, share, pair.delta)
    if level == "output":
        return float(epsilon)
    ledger = batch.ledgers[0]
    if level == "objective-release":
        return float(ledger.events[0]["eps_obj"])
    if level == "gradient-release" and mech.calibration == "accountant":
        event = next((e for e in ledger.accounting_events if isinstance(e, SubsampledGaussianEvent)), None)
        if event is None:
            raise ValueError(f"{mech.name}: the run records no calibration (hand-set noise multipliers claim nothing)")
        return float(accountant_epsilon(event.calibration.qs[:1], event.calibration.multipliers[:1], 1, pair.delta))
    raise ValueError(f"{mech.name}: no claim for the level {level!r} of a {mech.calibration}-calibrated run")


__all__ = ["AuditLedger", "BROKEN_VARIANTS", "GRADIENT_QUANTITIES", "noise_factor", "PinnedStartRng", "CanaryPair",
           "canary_pair", "AuditMechanism", "default_mechanisms", "run_trials", "statistic", "TrialBatch",
           "claimed_epsilon_of_level", "release_rho_share", "CANARIES", "LEVELS"]
