"""Per-run privacy budget ledger (zCDP).

Every noisy release of a run is charged here, one entry per released quantity: its name, the
iteration, its L2 sensitivity, its Gaussian noise scale and its rho. For the Gaussian mechanism
with L2 sensitivity Delta and noise N(0, sigma^2 I), rho = Delta^2 / (2 sigma^2) [BS16 Prop. 1.6];
zCDP composes additively (adaptively) [BS16 Lemma 2.3], so the run's total privacy cost is the sum
of the entries. Charging more than the run's budget raises :class:`PrivacyBudgetExceeded`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Relative slack for floating-point round-off when per-step budgets (rho/T * fractions) are summed.
_ROUNDING_SLACK = 1e-9


class PrivacyBudgetExceeded(RuntimeError):
    """Raised when a run tries to spend more rho than it was granted."""


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Noise scale of the Gaussian mechanism that is rho-zCDP: sigma = Delta / sqrt(2 rho) [BS16 Prop. 1.6]."""
    if not rho > 0:
        raise ValueError(f"rho={rho!r} must be > 0 for a Gaussian release")
    if not sensitivity >= 0:
        raise ValueError(f"sensitivity={sensitivity!r} must be >= 0")
    return sensitivity / math.sqrt(2.0 * rho)


@dataclass
class LedgerEntry:
    step: int
    quantity: str
    sensitivity: float
    sigma: float
    rho: float

    def as_dict(self) -> dict:
        return {"step": self.step, "quantity": self.quantity, "sensitivity": self.sensitivity,
                "sigma": self.sigma, "rho": self.rho}


@dataclass
class PrivacyLedger:
    """Budget ledger of one run with a total zCDP budget ``budget_rho``.

    ``events`` holds non-Gaussian-entry accounting records (e.g. a subsampled-Gaussian accountant's
    calibration) and ``nonprivate`` names the parts of a protocol that are not private by design.
    """

    budget_rho: float
    entries: list[LedgerEntry] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    nonprivate: list[str] = field(default_factory=list)
    _spent: float = 0.0

    @property
    def spent_rho(self) -> float:
        return math.fsum(e.rho for e in self.entries)

    @property
    def remaining_rho(self) -> float:
        return self.budget_rho - self._spent

    def charge(self, step: int, quantity: str, sensitivity: float, rho: float) -> float:
        """Record one Gaussian release and return its noise scale sigma = sensitivity/sqrt(2 rho)."""
        sigma = gaussian_sigma(sensitivity, rho)
        new_total = self._spent + rho
        if new_total > self.budget_rho * (1.0 + _ROUNDING_SLACK):
            raise PrivacyBudgetExceeded(
                f"release {quantity!r} at step {step} needs rho={rho:.6g} but only "
                f"{self.budget_rho - self._spent:.6g} of rho={self.budget_rho:.6g} is left")
        self._spent = new_total
        self.entries.append(LedgerEntry(step, quantity, float(sensitivity), float(sigma), float(rho)))
        return sigma

    def charge_event(self, description: dict, rho_equivalent: float | None = None) -> None:
        """Record an accountant-level event (e.g. calibrated subsampled Gaussian)."""
        if rho_equivalent is not None:
            new_total = self._spent + rho_equivalent
            if new_total > self.budget_rho * (1.0 + _ROUNDING_SLACK):
                raise PrivacyBudgetExceeded(f"event {description} exceeds rho={self.budget_rho:.6g}")
            self._spent = new_total
        self.events.append(dict(description))

    def mark_nonprivate(self, part: str) -> None:
        if part not in self.nonprivate:
            self.nonprivate.append(part)

    def rho_by_quantity(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e.quantity] = out.get(e.quantity, 0.0) + e.rho
        return out

    def summary(self) -> dict:
        return {"budget_rho": self.budget_rho, "ledger_rho_total": self.spent_rho,
                "rho_by_quantity": self.rho_by_quantity(), "n_releases": len(self.entries),
                "events": self.events, "nonprivate": list(self.nonprivate)}

    def as_records(self) -> list[dict]:
        return [e.as_dict() for e in self.entries]
