"""Per-run privacy budget ledger (zCDP).

Every noisy release of a run is charged here, one entry per released quantity: its name, the
iteration, its L2 sensitivity, its Gaussian noise scale and its rho. For the Gaussian mechanism
with L2 sensitivity Delta and noise N(0, sigma^2 I), rho = Delta^2 / (2 sigma^2) [BS16 Prop. 1.6];
zCDP composes additively (adaptively) [BS16 Lemma 2.3], so the run's total privacy cost is the sum
of the entries. Charging more than the run's budget raises :class:`PrivacyBudgetExceeded`.

:meth:`PrivacyLedger.dp_event` returns the run's releases as a ``dp_accounting.DpEvent``, so any
dp-accounting accountant (RDP, PLD) can account for the run independently of the rho bookkeeping.
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

    def dp_event(self, ignore_nonprivate: bool = False):
        """The run's privacy events as one ``dp_accounting.ComposedDpEvent``, in ledger order.

        * each zCDP entry (Gaussian release, L2 sensitivity Delta, noise std sigma):
          ``GaussianDpEvent(sigma / Delta)``. With z = sigma/Delta its RDP is alpha/(2 z^2) [Mironov
          2017, Gaussian mechanism], i.e. the zCDP rho = 1/(2 z^2) = Delta^2/(2 sigma^2) the entry was charged
          [BS16 Prop. 1.6] (z from the recorded sigma, the noise actually drawn). An entry with
          Delta = 0 releases nothing about the data: ``NoOpDpEvent``.
        * each subsampled-Gaussian accountant calibration (DP-SGD, minibatch Newton; events with
          ``accountant``, ``steps`` and ``q_<name>``/``noise_multiplier_<name>`` keys):
          ``SelfComposedDpEvent(ComposedDpEvent([PoissonSampledDpEvent(q_k, GaussianDpEvent(z_k)),
          ...]), steps)``, the mechanisms of one step composed, then the steps.
        * any other event (AOP: (epsilon, delta)-DP by its own analysis [Iyengar et al. 2019], not a
          composition of Gaussian releases): ``UnsupportedDpEvent``; dp-accounting's accountants
          refuse it (``UnsupportedEventError`` from ``compose``, ``supports`` is False).
        * a non-private part (``nonprivate`` not empty): ``NonPrivateDpEvent`` is appended, so
          accountants report epsilon = inf for the run as a whole (dp-accounting's convention).
          ``ignore_nonprivate=True`` leaves it out: the event of the noisy releases alone.

        Events are defined in dp-accounting's ``dp_event`` module (``GaussianDpEvent``:
        noise std / L2 sensitivity; ``PoissonSampledDpEvent``: add/remove-one Poisson sampling).
        """
        import dp_accounting  # imported on use: it costs 0.3 s at start-up

        parts: list = []
        for e in self.entries:
            if e.sensitivity == 0.0:
                parts.append(dp_accounting.NoOpDpEvent())
            else:
                parts.append(dp_accounting.GaussianDpEvent(e.sigma / e.sensitivity))
        for ev in self.events:
            parts.append(_accountant_dp_event(ev) or dp_accounting.UnsupportedDpEvent())
        if self.nonprivate and not ignore_nonprivate:
            parts.append(dp_accounting.NonPrivateDpEvent())
        return dp_accounting.ComposedDpEvent(parts)


def _accountant_dp_event(event: dict):
    """The subsampled-Gaussian DpEvent of an accountant calibration record, or None if ``event``
    is not one (no ``accountant``/``steps`` keys or no (q, noise multiplier) pair)."""
    import dp_accounting

    if "accountant" not in event or "steps" not in event:
        return None
    names = [k[len("q_"):] for k in event if k.startswith("q_")]
    if not names or any(f"noise_multiplier_{name}" not in event for name in names):
        return None
    step = dp_accounting.ComposedDpEvent([
        dp_accounting.PoissonSampledDpEvent(event[f"q_{name}"],
                                            dp_accounting.GaussianDpEvent(event[f"noise_multiplier_{name}"]))
        for name in names])
    return dp_accounting.SelfComposedDpEvent(step, int(event["steps"]))
