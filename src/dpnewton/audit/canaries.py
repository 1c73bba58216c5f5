"""The audit's shared types: canary pairs, the pinned-start generator and the audited mechanism (a card's row).

A base module of :mod:`dpnewton.audit`: it imports nothing else from the package, so the modules that
run and rebuild the releases (:mod:`.releases`, :mod:`.mechanisms`) import it one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..algorithms import AUDIT_CANARIES, AUDIT_LEVELS, AlgorithmSpec, AuditCase, build_config, get_algorithm
from ..loss import LogisticProblem
from ..privacy.plan import PrivacyPlan

CANARIES = AUDIT_CANARIES
LEVELS = AUDIT_LEVELS


class PinnedStartRng:
    """Generator stand-in: pinned first draw (the start w0), recorded later draws.

    ``start=None`` pins nothing (for methods that do not draw a start, e.g. one-shot methods). Gaussian
    draws are recorded in ``draws``, uniform draws (Poisson-subsampling masks) in ``uniforms``.
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

    def __getattr__(self, name):  # anything else (integers, ...) from the shared generator
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


def canary_pair(n: int = 50, d: int = 2, kind: str = "opposed") -> CanaryPair:
    """The canary pair of an audit (u = e_1 throughout; D' = D + one record z_c = +u).

    ``opposed`` (default): D = n records z = -u; w0 = -0.6 u + 0.8 e_2. The mean gradient moves by
    exactly u/(n+1) at every w; both SOIs are unchanged (:mod:`.mechanisms`).

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
    """One audited run: a row (:class:`~dpnewton.algorithms.AuditCase`) of the card of ``algorithm``."""

    name: str                  # row label (its seed is derived from it)
    algorithm: str             # registry name of the production optimizer
    iterations: int = 1
    hyper: dict = field(default_factory=dict)
    levels: tuple = ("output",)
    note: str = ""
    canary: str = "opposed"    # see canary_pair
    pin_start: bool = True     # pin the run's first Gaussian draw (its random start) to the pair's w0

    @classmethod
    def from_case(cls, algorithm: str, case: AuditCase) -> "AuditMechanism":
        return cls(case.name, algorithm, case.iterations, dict(case.hyper), tuple(case.levels), case.note,
                   case.canary, case.pin_start)

    @property
    def spec(self) -> AlgorithmSpec:
        return get_algorithm(self.algorithm)

    @property
    def calibration(self) -> str:
        """How the run's noise is calibrated: its card's ``calibration``
        (:data:`dpnewton.algorithms.registry.CALIBRATIONS`).

        ``zcdp-plan``: a zCDP privacy plan (``spec.plan``), every release charged to the ledger, which
        returns its sigma; ``one-shot``: objective perturbation calibrated to (epsilon, delta) by its own
        analysis, one ledger event (eps_obj, sigma_obj, sigma_out, ...); ``accountant``: noise multipliers
        of Poisson-subsampled Gaussians calibrated to (epsilon, delta) by the RDP accountant, one ledger event.
        """
        return self.spec.calibration

    def config(self):
        """The run's resolved configuration (the card's class built from ``hyper`` and the fixed fields,
        :func:`~dpnewton.algorithms.build_config`), or None if the card's runner has none."""
        cfg = self.spec.config
        return None if cfg is None else build_config(cfg[0], dict(self.hyper), cfg[1])

    def plan(self, n: int, d: int, rho: float = 1.0) -> PrivacyPlan:
        """The card's privacy plan of this run on n rows in dimension d (ValueError without one)."""
        spec = self.spec
        if not spec.zcdp:
            raise ValueError(f"{self.algorithm} has no privacy plan (its noise is calibrated to (epsilon, delta))")
        return spec.plan(dict(self.hyper), n, d, self.iterations, rho)
