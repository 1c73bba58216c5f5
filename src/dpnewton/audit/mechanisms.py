"""Audited mechanisms: the production optimizers run on a canary pair (D, D') many times.

This module holds the canaries, the mechanism table, the trial runner and the claims; the broken
variants are in :mod:`.variants`, the rebuilding of a level's released quantity from a run's
transcript in :mod:`.releases` (their public names are re-exported here).

What runs is the *real* algorithm code (``get_algorithm(name).run``), fed with crafted
:class:`~dpnewton.algorithms.RunContext` objects:

* the ledger is an :class:`AuditLedger` (a :class:`~dpnewton.privacy.PrivacyLedger` that also
  remembers the sigma it handed out). For the zCDP-ledger methods a broken variant is the same
  ledger built with ``broken=...``, which changes only the sigma ``charge`` returns, by
  :func:`noise_factor`: ``half-noise`` sigma/2, ``tenth-noise`` sigma/10 (every release),
  ``wrong-sensitivity`` sigma/4 for the gradient (noise for the SOI bound 1/(4n) instead of 1/n).
  Methods whose noise does not come from ``charge`` get the same variants another way
  (:attr:`AuditMechanism.calibration`): hand-set noise multipliers for the accountant-calibrated
  minibatch methods, a scoped wrapper of the noise-scale function for AOP, objpert and cubic Newton
  (all in :mod:`.variants`). No production code path is modified (cubic Newton runs with its audit
  option ``record_releases``, which only keeps a copy of the inner releases);
* the random generator is a :class:`PinnedStartRng`: it returns a fixed starting point for the
  first draw (``random_unit_vector``) so every trial starts at the same w0, then serves - and
  records - the run's Gaussian and uniform draws from one shared generator.

Canary pairs (:func:`canary_pair`): ``opposed`` (the default: D = n records z_i = -u, D' = D + z_c
= +u; the mean gradient moves by exactly u/(n+1) at *every* w, i.e. by |grad l(w; z_c) - mean_D|
= 1 = L over n+1 (two records at an angle can exceed this slightly at ||w|| = 1 and more at larger
||w||); both SOIs are unchanged, so the SOI-based releases carry no signal), ``zero`` (zero records
+ the canary: for Poisson-subsampled sums) and ``zero-orthogonal`` (zero records + a canary
orthogonal to the start: it changes the SOI's trace by the trace sensitivity, exciting the trace
release of double-noise Newton).

Audit levels (stated per row of the results table):

``output``   the whole algorithm output w_T, statistic <w_T, u> (post-processing of all releases);
``gradient-release``  the first released noisy gradient g~_0 = grad(w0) (+ reg w0) + s_g xi,
             reconstructed from the recorded draw xi and the sigma the ledger returned (minibatch:
             also from the recorded Poisson coin flips; cubic Newton: the first inner model
             gradient), statistic -<g~_0, u>. Its own budget is only a share of the run's;
``trace-release``  the first noisy trace tr H(w0) + s_tr xi of the adaptive lambda;
``curvature-release``  precond-dp-gd: the released entry (1, 1) of B~ = Z^T Z/(4n) + S (the canary
             u = e_1's coordinate; S's upper triangle is i.i.d. N(0, s_B^2), so this entry carries
             all of the canary's signal), rebuilt from the recorded draw and the sigma the ledger
             returned; claim: the GDP epsilon of the curvature share precond_frac of rho;
``inner-releases``  cubic Newton: all N noisy model gradients of the (single) outer step, statistic
             the sum of their canary components minus D's model gradient (:func:`_cubic_inner_releases`);
``objective-release``  AOP: the perturbed minimiser before the output noise, statistic <theta^, u>
             (:func:`.releases._objective_release`), claim eps_obj; the same for objpert.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..algorithms import RunContext, get_algorithm
from ..algorithms.minibatch import MinibatchNewtonConfig, _expected_batch
from ..loss import LogisticProblem
from ..privacy import epsilon_to_rho, rho_to_epsilon
from ..privacy.accountant import accountant_epsilon, calibrate_two_mechanisms
from ..seeding import RunIdentity
from .releases import (_cubic_inner_releases, _first_curvature_release, _first_gradient_release,
                       _first_trace_release, _objective_release)
from .variants import (BROKEN_VARIANTS, GRADIENT_QUANTITIES, AuditLedger, _accountant_hyper, _check_broken,
                       _patched_noise, noise_factor)

class PinnedStartRng:
    """Generator stand-in: pinned first draw (the start w0), recorded later draws.

    ``start=None`` pins nothing (for methods that do not draw a start, e.g. AOP). Gaussian draws are
    recorded in ``draws``, uniform draws (Poisson-subsampling masks) in ``uniforms``.
    """

    def __init__(self, base: np.random.Generator, start: np.ndarray | None):
        self._base = base
        self._start = None if start is None else np.asarray(start, dtype=np.float64)
        self._pinned = start is None
        self.draws: list = []
        self.uniforms: list = []

    def standard_normal(self, size=None):
        if not self._pinned:
            if size != self._start.shape[0] and size != self._start.shape:
                raise RuntimeError(f"the first draw of a run must be the start (size {self._start.shape}); got {size}")
            self._pinned = True
            return self._start.copy()
        x = self._base.standard_normal(size)
        self.draws.append(x)
        return x

    def random(self, size=None):
        x = self._base.random(size)
        self.uniforms.append(x)
        return x

    def __getattr__(self, name):  # anything else (integers, random, ...) from the shared generator
        return getattr(self._base, name)


@dataclass(frozen=True)
class CanaryPair:
    D: LogisticProblem
    D_prime: LogisticProblem
    canary: np.ndarray          # unit vector u
    w0: np.ndarray              # common starting point (unit norm)
    delta: float                # 1/n^2 with n = |D|

    @property
    def n(self) -> int:
        return self.D.n


CANARIES = ("opposed", "zero", "zero-orthogonal")
LEVELS = ("output", "gradient-release", "trace-release", "inner-releases", "objective-release",
          "curvature-release")


def canary_pair(n: int = 50, d: int = 2, kind: str = "opposed") -> CanaryPair:
    """The canary pair of an audit (u = e_1 throughout; D' = D + one record z_c = +u).

    ``opposed`` (default): D = n records z = -u; w0 = -0.6 u + 0.8 e_2. The mean gradient moves by
    exactly u/(n+1) at every w; both SOIs are unchanged (see the module docstring).

    ``zero``: D = n zero records (they contribute nothing to any gradient, SOI or batch sum), w0 = -u.
    Made for Poisson-subsampled sums: the canary's gradient -sigma(-<u, w0>) u = -0.73 u is the only
    signal and D's random batch size adds no variance along u.

    ``zero-orthogonal``: as ``zero`` with w0 = e_2 (orthogonal to the canary, margin 0). The canary
    then adds the largest possible SOI weight 1/4 to the Hessian and to H_qu, so it changes the
    trace of the SOI by 1/(4(n+1)) - the trace sensitivity 1/(4n) up to the n/(n+1) of the mean -
    and the trace and direction releases of double-noise Newton carry signal (gradient: -u/(2(n+1))).
    """
    if n < 2 or d < 2:
        raise ValueError(f"need n >= 2 and d >= 2; got n={n}, d={d}")
    if kind not in CANARIES:
        raise ValueError(f"canary kind {kind!r} is unknown; choose one of {', '.join(CANARIES)}")
    u = np.zeros(d)
    u[0] = 1.0
    w0 = np.zeros(d)
    if kind == "opposed":
        Z = np.tile(-u, (n, 1))
        w0[0], w0[1] = -0.6, 0.8
    else:
        Z = np.zeros((n, d))
        if kind == "zero":
            w0[0] = -1.0
        else:
            w0[1] = 1.0
    return CanaryPair(LogisticProblem(Z, f"audit-D-{kind}"), LogisticProblem(np.vstack([Z, u]), f"audit-D'-{kind}"),
                      u, w0, 1.0 / float(n) ** 2)


@dataclass(frozen=True)
class AuditMechanism:
    name: str                  # row label
    algorithm: str             # registry name of the production optimizer
    iterations: int = 1
    hyper: dict = field(default_factory=dict)
    levels: tuple = ("output",)
    note: str = ""
    canary: str = "opposed"    # see canary_pair
    pin_start: bool = True     # pin the run's first Gaussian draw (its random start) to the pair's w0
    calibration: str = "ledger"  # "ledger" (zCDP ledger sigma), "accountant" (RDP-calibrated
    #                              multipliers), "aop", "objpert" or "cubic": how the broken variants are injected


def default_mechanisms() -> list[AuditMechanism]:
    mechs = [
        AuditMechanism("dp-gd", "dp-gd", 1, {}, ("output",), "T=1, step 4: one Gaussian release"),
        AuditMechanism("dp-gd-T5", "dp-gd", 5, {"step": 0.05}, ("output",),
                       "T=5, step 0.05 (small step keeps the canary's effect on w_T undamped)"),
    ]
    for name in ("hess-clip", "hess-add", "qu-clip", "qu-add"):
        mechs.append(AuditMechanism(name, name, 1, {}, ("output", "gradient-release"),
                                    "one full iteration: gradient, trace (adaptive lambda), direction"))
    mechs.append(AuditMechanism("damped-newton", "damped-newton", 1, {}, ("gradient-release", "output"),
                                "gradient + Hessian release; the damped step size is not private"))
    # --- SOI canary, subsampled methods, AOP and cubic Newton ------------------------------------
    # SOI canary (a record orthogonal to the start): excites the trace release of the adaptive
    # lambda; trace_frac = 0.9 (a production option) gives the trace enough budget to be auditable.
    for name in ("hess-clip", "qu-add"):
        mechs.append(AuditMechanism(f"{name}-soi", name, 1, {"trace_frac": 0.9}, ("trace-release", "output"),
                                    "SOI canary (zero records + one record orthogonal to w0); "
                                    "trace_frac 0.9; output = w0 - released direction",
                                    canary="zero-orthogonal"))
    # precond-dp-gd: opposed canary (B unchanged, +-u give the same u u^T: the output audits the
    # gradient release through P^-1) and the SOI canary, which moves B's entry (1, 1) by 1/(4(n+1));
    # precond_frac 0.9 (a production option) gives the curvature release enough budget to be auditable.
    mechs.append(AuditMechanism("precond-dp-gd", "precond-dp-gd", 1, {}, ("output", "gradient-release"),
                                "T=1, step 1: curvature release (unchanged by this canary) + one "
                                "gradient release through P^-1"))
    mechs.append(AuditMechanism("precond-dp-gd-soi", "precond-dp-gd", 1, {"precond_frac": 0.9},
                                ("curvature-release", "output"),
                                "SOI canary (zero records + one record orthogonal to w0); precond_frac 0.9",
                                canary="zero-orthogonal"))
    mechs.append(AuditMechanism("dp-sgd", "dp-sgd", 1, {}, ("output",),
                                "T=1, Poisson q = 5/51 (batch_frac 0.1), RDP-calibrated multiplier",
                                canary="zero", calibration="accountant"))
    mechs.append(AuditMechanism("dp-sgd-q1", "dp-sgd", 1, {"batch_frac": 1.0}, ("output",),
                                "T=1, batch_frac 1 (q = 1: no subsampling), RDP-calibrated multiplier",
                                canary="zero", calibration="accountant"))
    for name in ("minibatch-hess-clip", "minibatch-qu-add"):
        mechs.append(AuditMechanism(name, name, 1, {}, ("output", "gradient-release"),
                                    "T=1, Poisson q = 5/51 for gradient and SOI batches, RDP-calibrated pair",
                                    canary="zero", calibration="accountant"))
    # AOP: the output noise (sigma_out ~ 0.59 for n = 50) swamps the output; the perturbed minimiser
    # before it is the objective-perturbation release with its own claim eps_obj (docs/algorithms.md §4.2).
    mechs.append(AuditMechanism("aop", "aop", 1, {}, ("output", "objective-release"),
                                "approximate objective perturbation (Newton to 1/n^2 + output noise)",
                                pin_start=False, calibration="aop"))
    # objpert: the same two levels; its output noise is tiny (tolerance 1e-12), so the output level sees
    # the objective-perturbation release almost unblurred (docs/algorithms.md §15).
    mechs.append(AuditMechanism("objpert", "objpert", 1, {}, ("output", "objective-release"),
                                "objective perturbation, tight profile (Newton to 1e-12 + output noise)",
                                pin_start=False, calibration="objpert"))
    # Cubic Newton: ball diameter 0.1, where the model-gradient sensitivity bound (L0 + L1 D)/n =
    # 1.03/n is nearly attained by the opposed canary's change 1/(n+1) (at the default D = 10 the
    # bound is 3.65/n, 3.7x that change, and even half the noise is not refutable with this canary).
    mechs.append(AuditMechanism("cubic-newton", "cubic-newton", 1, {"max_inner": 20, "diameter": 0.1},
                                ("output", "gradient-release", "inner-releases"),
                                "T=1, 20 inner noisy model-gradient steps (max_inner 20), ball diameter 0.1",
                                calibration="cubic"))
    return mechs

@dataclass
class TrialBatch:
    W: np.ndarray                       # (trials, d) outputs
    grad_release_u: np.ndarray | None   # (trials,) <first gradient release, u> or None
    rho: float
    ledgers: list
    trace_release: np.ndarray | None = None   # (trials,) first released noisy trace or None
    hyper: dict = field(default_factory=dict)  # hyper-parameters actually run (broken variants)
    inner_releases: np.ndarray | None = None  # (trials,) cubic Newton: sum_i <g^_i - m_D(theta_i), u>
    objective_release: np.ndarray | None = None  # (trials,) AOP: <perturbed minimiser before output noise, u>
    curvature_release: np.ndarray | None = None  # (trials,) precond-dp-gd: released B~_11

def run_trials(pair: CanaryPair, mech: AuditMechanism, side: str, trials: int, epsilon: float,
               conversion: str = "gdp", broken: str = "none", seed: int = 0) -> TrialBatch:
    """Run the production optimizer ``trials`` times on D (side "D") or D' (side "D'")."""
    _check_broken(broken)
    if side not in ("D", "D'"):
        raise ValueError(f"side={side!r} must be 'D' or \"D'\"")
    if trials < 1:
        raise ValueError(f"trials={trials!r} must be >= 1")
    problem = pair.D if side == "D" else pair.D_prime
    spec = get_algorithm(mech.algorithm)
    rho = epsilon_to_rho(epsilon, pair.delta, conversion)
    base = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [seed, zlib.crc32(mech.name.encode()), 0 if side == "D" else 1, BROKEN_VARIANTS.index(broken), trials,
         mech.iterations])))
    ledger_broken = broken if mech.calibration == "ledger" else "none"   # the others: see _patched_noise
    hyper = (_accountant_hyper(mech, problem, float(epsilon), pair.delta, broken)
             if mech.calibration == "accountant" else dict(mech.hyper))
    cubic_releases = mech.calibration == "cubic" and bool({"gradient-release", "inner-releases"} & set(mech.levels))
    if cubic_releases:    # _cubic_inner_releases reads the inner releases from the runs' transcripts
        hyper["record_releases"] = True
    contexts = []
    for i in range(trials):
        ident = RunIdentity(problem.name, mech.algorithm, float(epsilon), i, mech.iterations)
        contexts.append(RunContext(ident, float(epsilon), pair.delta, conversion, rho, AuditLedger(rho, ledger_broken),
                                   PinnedStartRng(base, pair.w0 if mech.pin_start else None)))
    with threadpool_limits(1), _patched_noise(mech, broken):
        results = spec.run(problem, contexts, dict(hyper))
    W = np.stack([r.w for r in results])
    grad_u = trace = inner = objective = None
    if cubic_releases:
        grad_u, inner = _cubic_inner_releases(pair, mech, results)
    elif "gradient-release" in mech.levels:
        grad_u = _first_gradient_release(problem, pair, mech, hyper, contexts)
    if "trace-release" in mech.levels:
        trace = _first_trace_release(problem, pair, mech, contexts)
    if "objective-release" in mech.levels:
        objective = _objective_release(problem, pair, contexts, W)
    curvature = (_first_curvature_release(problem, pair, mech, contexts)
                 if "curvature-release" in mech.levels else None)
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


def release_rho_share(mech: AuditMechanism, level: str, n: int, d: int) -> float:
    """Share of the run's rho spent on what the statistic sees: all of it for the output, else one
    release of the algorithm's privacy plan (:mod:`dpnewton.privacy.plan`): the gradient of one step."""
    if level == "output":
        return 1.0
    quantity = {"gradient-release": "gradient", "trace-release": "trace", "curvature-release": "curvature"}[level]
    return get_algorithm(mech.algorithm).plan(mech.hyper, n, d, mech.iterations, 1.0).share(quantity)


def claimed_epsilon_of_share(rho: float, share: float, delta: float) -> float:
    """epsilon at delta of a share of rho for a composition of Gaussians (exact GDP conversion)."""
    return rho_to_epsilon(rho * share, delta, "gdp") if share > 0 else 0.0


def claimed_epsilon_of_level(mech: AuditMechanism, level: str, batch: TrialBatch, pair: CanaryPair,
                             epsilon: float) -> float:
    """The claim that covers what the statistic of ``level`` sees (same delta as the run).

    ``output``: the run's epsilon (for zCDP-ledger methods via the exact GDP conversion of its rho,
    which is the claimed epsilon itself when the run's conversion is ``gdp``). A single release of a
    ledger method: the exact GDP epsilon of that release's rho (read from the correct ledger). The
    first gradient release of a minibatch method: the RDP accountant's epsilon of that one
    subsampled Gaussian (its q and calibrated multiplier, one step). Cubic Newton's N inner releases of
    one outer step: the GDP epsilon of rho/T. AOP's perturbed minimiser: eps_obj of AOP's split (its
    guarantee holds at delta_obj < delta, so a lower bound computed at delta that exceeds eps_obj
    refutes it as well, epsilon(delta) being non-increasing in delta).
    """
    if level == "output":
        if mech.calibration in ("accountant", "aop", "objpert"):
            return float(epsilon)
        return claimed_epsilon_of_share(batch.rho, 1.0, pair.delta)
    if level == "objective-release":
        return float(batch.ledgers[0].events[0]["eps_obj"])
    if level == "inner-releases":
        return claimed_epsilon_of_share(batch.rho, 1.0 / mech.iterations, pair.delta)
    if mech.calibration == "accountant":
        cfg = MinibatchNewtonConfig(**{k: v for k, v in mech.hyper.items()
                                       if k in ("batch_grad", "batch_hess", "batch_frac", "grad_frac")})
        n = pair.D.n
        b_g = _expected_batch(cfg.batch_grad, n, cfg.batch_frac, "batch_grad")
        b_h = _expected_batch(cfg.batch_hess, n, cfg.batch_frac, "batch_hess")
        z_g = calibrate_two_mechanisms(b_g / n, b_h / n, mech.iterations, epsilon, pair.delta,
                                       cfg.grad_frac).multipliers[0]
        return float(accountant_epsilon([b_g / n], [z_g], 1, pair.delta))
    if mech.calibration == "ledger" and level == "gradient-release":
        return claimed_epsilon_of_share(batch.rho, release_rho_share(mech, level, pair.D.n, pair.D.d), pair.delta)
    index = {"gradient-release": 0, "trace-release": 1, "curvature-release": 0}[level]
    entry = batch.ledgers[0].entries[index]
    return claimed_epsilon_of_share(batch.rho, entry.rho / batch.rho, pair.delta)


__all__ = ["AuditLedger", "BROKEN_VARIANTS", "GRADIENT_QUANTITIES", "noise_factor", "PinnedStartRng", "CanaryPair",
           "canary_pair", "AuditMechanism", "default_mechanisms", "run_trials", "statistic", "TrialBatch",
           "claimed_epsilon_of_level", "CANARIES", "LEVELS"]
