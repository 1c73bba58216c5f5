"""Audited mechanisms: the production optimizers run on a canary pair (D, D') many times.

What runs is the *real* algorithm code (``get_algorithm(name).run``), fed with crafted
:class:`~dpnewton.algorithms.RunContext` objects:

* the ledger is an :class:`AuditLedger` (a :class:`~dpnewton.privacy.PrivacyLedger` that also
  remembers the sigma it handed out). The broken variants are ledger subclasses that change only the
  noise-scaling hook ``charge``: ``half-noise`` returns sigma/2, ``wrong-sensitivity`` calibrates
  the gradient release with the SOI bound 1/(4n) instead of 1/n (i.e. sigma/4 for the gradient);
  no production code path is modified;
* the random generator is a :class:`PinnedStartRng`: it returns a fixed starting point for the
  first draw (``random_unit_vector``) so every trial starts at the same w0, then serves - and
  records - the run's Gaussian draws from one shared generator.

Canary pair (:func:`canary_pair`): D = n records z_i = -u (feature u, label -1) and
D' = D + one record z_c = +u (same feature, label +1). Because sigma(m) + sigma(-m) = 1, the mean
gradient moves by exactly u/(n+1) at *every* w (the canary's gradient and the others' mean point
in opposite directions along u), the largest change a record can make under the add/remove
relation with the code's normalisation; both SOIs are unchanged (their weights are even in the
margin), so the SOI-based releases carry no signal for this canary.

Audit levels (stated per row of the results table):

``output``   the whole algorithm output w_T, statistic <w_T, u> (post-processing of all releases);
``gradient-release``  the first released noisy gradient g~_0 = grad(w0) (+ reg w0) + s_g xi,
             reconstructed from the recorded draw xi and the sigma the ledger returned, statistic
             -<g~_0, u>. Its own budget is only the gradient share of the run's rho.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ..algorithms import RunContext, get_algorithm
from ..loss import LogisticProblem
from ..privacy import PrivacyLedger, epsilon_to_rho, rho_to_epsilon
from ..seeding import RunIdentity

BROKEN_VARIANTS = ("none", "half-noise", "wrong-sensitivity")


class AuditLedger(PrivacyLedger):
    """The production ledger; it also keeps the sigma each ``charge`` returned (``returned``)."""

    def __init__(self, budget_rho: float):
        super().__init__(budget_rho)
        self.returned: list[float] = []

    def charge(self, step: int, quantity: str, sensitivity: float, rho: float) -> float:
        sigma = self._sigma(step, quantity, sensitivity, rho)
        self.returned.append(sigma)
        return sigma

    def _sigma(self, step, quantity, sensitivity, rho) -> float:
        return PrivacyLedger.charge(self, step, quantity, sensitivity, rho)


class HalfNoiseLedger(AuditLedger):
    """Broken: every release gets half the noise it is charged for."""

    def _sigma(self, step, quantity, sensitivity, rho) -> float:
        return 0.5 * PrivacyLedger.charge(self, step, quantity, sensitivity, rho)


class WrongSensitivityLedger(AuditLedger):
    """Broken: the gradient is calibrated with the SOI bound 1/(4n) instead of its 1/n."""

    def _sigma(self, step, quantity, sensitivity, rho) -> float:
        if quantity == "gradient":
            sensitivity = sensitivity / 4.0
        return PrivacyLedger.charge(self, step, quantity, sensitivity, rho)


LEDGERS = {"none": AuditLedger, "half-noise": HalfNoiseLedger, "wrong-sensitivity": WrongSensitivityLedger}


class PinnedStartRng:
    """Generator stand-in: pinned first draw (the start w0), recorded later draws."""

    def __init__(self, base: np.random.Generator, start: np.ndarray):
        self._base = base
        self._start = np.asarray(start, dtype=np.float64)
        self._pinned = False
        self.draws: list = []

    def standard_normal(self, size=None):
        if not self._pinned:
            if size != self._start.shape[0] and size != self._start.shape:
                raise RuntimeError(f"the first draw of a run must be the start (size {self._start.shape}); got {size}")
            self._pinned = True
            return self._start.copy()
        x = self._base.standard_normal(size)
        self.draws.append(x)
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


def canary_pair(n: int = 50, d: int = 2) -> CanaryPair:
    """D = n records z = -u, D' = D + z_c = +u (see the module docstring); w0 = -0.6 u + 0.8 e_2."""
    if n < 2 or d < 2:
        raise ValueError(f"need n >= 2 and d >= 2; got n={n}, d={d}")
    u = np.zeros(d)
    u[0] = 1.0
    Z = np.tile(-u, (n, 1))
    w0 = np.zeros(d)
    w0[0], w0[1] = -0.6, 0.8
    return CanaryPair(LogisticProblem(Z, "audit-D"), LogisticProblem(np.vstack([Z, u]), "audit-D'"),
                      u, w0, 1.0 / float(n) ** 2)


@dataclass(frozen=True)
class AuditMechanism:
    name: str                  # row label
    algorithm: str             # registry name of the production optimizer
    iterations: int = 1
    hyper: dict = field(default_factory=dict)
    levels: tuple = ("output",)
    note: str = ""


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
    return mechs


@dataclass
class TrialBatch:
    W: np.ndarray                       # (trials, d) outputs
    grad_release_u: np.ndarray | None   # (trials,) <g~_0, u> or None
    rho: float
    ledgers: list


def run_trials(pair: CanaryPair, mech: AuditMechanism, side: str, trials: int, epsilon: float,
               conversion: str = "gdp", broken: str = "none", seed: int = 0) -> TrialBatch:
    """Run the production optimizer ``trials`` times on D (side "D") or D' (side "D'")."""
    if broken not in LEDGERS:
        raise ValueError(f"broken={broken!r} is unknown; choose one of {', '.join(BROKEN_VARIANTS)}")
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
    ledger_cls = LEDGERS[broken]
    contexts = []
    for i in range(trials):
        ident = RunIdentity(problem.name, mech.algorithm, float(epsilon), i, mech.iterations)
        contexts.append(RunContext(ident, float(epsilon), pair.delta, conversion, rho, ledger_cls(rho),
                                   PinnedStartRng(base, pair.w0)))
    with threadpool_limits(1):
        results = spec.run(problem, contexts, dict(mech.hyper))
    W = np.stack([r.w for r in results])
    grad_u = None
    if "gradient-release" in mech.levels:
        g = problem.grad(pair.w0)
        reg = float(mech.hyper.get("reg", 1e-8)) if mech.algorithm != "dp-gd" else 0.0
        g = g + reg * pair.w0
        grad_u = np.empty(trials)
        for i, c in enumerate(contexts):
            if not c.ledger.entries or c.ledger.entries[0].quantity != "gradient":
                raise RuntimeError(f"{mech.algorithm}: the first release is not the gradient")
            grad_u[i] = g @ pair.canary + c.ledger.returned[0] * (c.rng.draws[0] @ pair.canary)
    return TrialBatch(W, grad_u, rho, [c.ledger for c in contexts])


def statistic(batch: TrialBatch, pair: CanaryPair, level: str) -> np.ndarray:
    """Per-trial scalar, larger on D' in expectation (the canary pulls w towards +u)."""
    if level == "output":
        return batch.W @ pair.canary
    if level == "gradient-release":
        return -batch.grad_release_u
    raise ValueError(f"level={level!r} is unknown; choose 'output' or 'gradient-release'")


def release_rho_share(mech: AuditMechanism, level: str) -> float:
    """Share of the run's rho spent on what the statistic sees (gradient share of step 0 for releases)."""
    if level == "output" or mech.algorithm in ("dp-gd", "dp-gd-oracle"):
        return 1.0 if level == "output" else 1.0 / mech.iterations
    gf = float(mech.hyper.get("grad_frac", 0.7))
    return gf / mech.iterations


def claimed_epsilon_of_share(rho: float, share: float, delta: float) -> float:
    """epsilon at delta of a share of rho for a composition of Gaussians (exact GDP conversion)."""
    return rho_to_epsilon(rho * share, delta, "gdp") if share > 0 else 0.0


__all__ = ["AuditLedger", "HalfNoiseLedger", "WrongSensitivityLedger", "LEDGERS", "BROKEN_VARIANTS",
           "PinnedStartRng", "CanaryPair", "canary_pair", "AuditMechanism", "default_mechanisms",
           "run_trials", "statistic", "TrialBatch", "math"]
