"""Broken variants of the audited mechanisms: too little noise, injected through the ledger alone.

One factor table, :func:`noise_factor`, applied by one ledger, :class:`AuditLedger`, at the two places
a production run takes a noise scale from its ledger: the sigma :meth:`~dpnewton.privacy.PrivacyLedger.charge`
returns (zCDP releases) and the scale :meth:`~dpnewton.privacy.PrivacyLedger.noise` passes through
(scales calibrated elsewhere: accountant noise multipliers, objective-perturbation sigmas, a method's own
sigma). No production code path is changed or patched. A base module of :mod:`dpnewton.audit`: it
imports nothing else from the package.
"""

from __future__ import annotations

from ..privacy import PrivacyLedger

BROKEN_VARIANTS = ("none", "half-noise", "wrong-sensitivity", "tenth-noise")
#: releases whose noise is calibrated to a gradient's sensitivity (``wrong-sensitivity`` divides it by 4): a
#: gradient, an inner model gradient, the objective noise b of objective perturbation
GRADIENT_QUANTITIES = ("gradient", "model-gradient", "objective")


def _check_broken(broken: str) -> str:
    """``broken`` itself if it names a variant of :data:`BROKEN_VARIANTS`, else a ValueError."""
    if broken not in BROKEN_VARIANTS:
        raise ValueError(f"broken={broken!r} is unknown; choose one of {', '.join(BROKEN_VARIANTS)}")
    return broken


def noise_factor(broken: str, quantity: str) -> float:
    """Factor a broken variant applies to the noise scale of one release (1 for ``none``).

    ``half-noise`` 1/2 and ``tenth-noise`` 1/10 for every release; ``wrong-sensitivity`` 1/4 for the
    gradient-type releases (:data:`GRADIENT_QUANTITIES`: noise for the SOI bound 1/(4n) instead of
    the gradient's 1/n, docs/algorithms.md §6.1), other releases untouched.
    """
    if _check_broken(broken) == "wrong-sensitivity":
        return 0.25 if quantity in GRADIENT_QUANTITIES else 1.0
    return {"none": 1.0, "half-noise": 0.5, "tenth-noise": 0.1}[broken]


class AuditLedger(PrivacyLedger):
    """The production ledger that also keeps the noise scales it handed out.

    ``returned``: the sigma of each ``charge`` (aligned with ``entries``); ``noised``: (quantity, scale)
    of each ``noise`` call, in call order. ``broken`` (one of :data:`BROKEN_VARIANTS`, default ``"none"``)
    scales both by :func:`noise_factor` of the release's quantity (the only change a broken variant
    makes); entries and events are recorded as the production ledger records them, so they keep the
    correct calibration (the claim).
    """

    def __init__(self, budget_rho: float, broken: str = "none"):
        super().__init__(budget_rho)
        self.broken = _check_broken(broken)
        self.returned: list[float] = []
        self.noised: list[tuple[str, float]] = []

    def charge(self, step: int, quantity: str, sensitivity: float, rho: float) -> float:
        sigma = noise_factor(self.broken, quantity) * PrivacyLedger.charge(self, step, quantity, sensitivity, rho)
        self.returned.append(sigma)
        return sigma

    def noise(self, quantity: str, sigma: float) -> float:
        scale = noise_factor(self.broken, quantity) * PrivacyLedger.noise(self, quantity, sigma)
        self.noised.append((quantity, scale))
        return scale

    def noise_scale(self, quantity: str) -> float:
        """The first scale :meth:`noise` returned for ``quantity`` (RuntimeError if there is none)."""
        for name, scale in self.noised:
            if name == quantity:
                return scale
        raise RuntimeError(f"the run passed no {quantity!r} noise scale through its ledger "
                           f"(it passed {', '.join(q for q, _ in self.noised) or 'none'})")
