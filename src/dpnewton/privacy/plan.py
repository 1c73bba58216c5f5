"""Privacy plans: what a run releases, with which sensitivity and which share of rho, stated as data.

A plan is a pure function of an algorithm's configuration and of (n, d, T, rho), fixed before any
data is read (docs/algorithms.md §6.2). The run charges every release through its plan
(:meth:`PrivacyPlan.charge`), so its ledger holds exactly the plan's releases; the privacy audit
reads the rho of the release it attacks from the plan, and the report prints the plans. A release
whose sensitivity depends on earlier released values (the double-noise direction: ||g~||/(4 n
lambda^2 -/+ lambda), lambda from the released trace) has ``sensitivity=None`` in the plan and its
formula in ``sensitivity_rule``; the step passes the value, which the ledger records.

Composition: zCDP adds up (BS16 Lemma 2.3), so a plan's total is sum(rho x count) over its
releases, and :meth:`PrivacyPlan.check` raises :class:`~.ledger.PrivacyBudgetExceeded` when that
exceeds the run's rho.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ledger import ROUNDING_SLACK, PrivacyBudgetExceeded, PrivacyLedger


@dataclass(frozen=True)
class PlannedRelease:
    """One released quantity: ``count`` Gaussian releases of ``rho`` each, at the steps ``when`` says."""

    quantity: str                  # the ledger's name of the release
    rho: float                     # zCDP budget of one release
    count: int                     # releases of this quantity in the run
    sensitivity: float | None      # L2 sensitivity, or None when it is set at release time
    sensitivity_rule: str          # its formula and source
    when: str = "every step"

    def as_dict(self) -> dict:
        return {"quantity": self.quantity, "rho_each": self.rho, "count": self.count,
                "rho_total": self.rho * self.count, "sensitivity": self.sensitivity,
                "sensitivity_rule": self.sensitivity_rule, "when": self.when}


@dataclass(frozen=True)
class PrivacyPlan:
    """The releases of one run of ``algorithm`` with T = ``iterations`` and budget ``rho``."""

    algorithm: str
    rho: float
    iterations: int
    releases: tuple[PlannedRelease, ...]

    @property
    def total_rho(self) -> float:
        return float(sum(r.rho * r.count for r in self.releases))

    def release(self, quantity: str) -> PlannedRelease:
        for r in self.releases:
            if r.quantity == quantity:
                return r
        raise KeyError(f"{self.algorithm}'s plan has no release {quantity!r} "
                       f"(it has {', '.join(r.quantity for r in self.releases)})")

    def share(self, quantity: str) -> float:
        """rho of one release of ``quantity`` as a share of the run's rho."""
        return self.release(quantity).rho / self.rho

    def check(self) -> "PrivacyPlan":
        if self.total_rho > self.rho * (1.0 + ROUNDING_SLACK):
            raise PrivacyBudgetExceeded(f"{self.algorithm}: the plan spends rho={self.total_rho!r} of {self.rho!r}")
        return self

    def charge(self, ledger: PrivacyLedger, step: int, quantity: str, sensitivity: float | None = None) -> float:
        """Charge one planned release of ``quantity`` to ``ledger``; returns its noise std (the
        ledger's sigma = sensitivity / sqrt(2 rho)). ``sensitivity`` is required exactly when the plan
        leaves it to release time."""
        r = self.release(quantity)
        if (r.sensitivity is None) == (sensitivity is None):
            raise ValueError(f"{self.algorithm}: release {quantity!r} "
                             + ("needs its sensitivity at release time" if sensitivity is None
                                else "has a planned sensitivity; do not pass one"))
        return ledger.charge(step, quantity, r.sensitivity if sensitivity is None else sensitivity, r.rho)

    def as_rows(self) -> list[dict]:
        return [{"algorithm": self.algorithm, **r.as_dict()} for r in self.releases]
