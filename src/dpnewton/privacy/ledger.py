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
from typing import Union

import numpy as np

from .neighbouring import BENCHMARK_RELATION
from .norm_laplace import norm_laplace

# Relative slack for floating-point round-off when per-step budgets (rho/T * fractions) are summed.
ROUNDING_SLACK = 1e-9


class PrivacyBudgetExceeded(RuntimeError):
    """Raised when a run tries to spend more rho than it was granted."""


def gaussian_sigma(sensitivity: float, rho: float) -> float:
    """Noise scale of the Gaussian mechanism that is rho-zCDP: sigma = Delta / sqrt(2 rho) [BS16 Prop. 1.6]."""
    if not rho > 0:
        raise ValueError(f"rho={rho!r} must be > 0 for a Gaussian release")
    if not sensitivity >= 0:
        raise ValueError(f"sensitivity={sensitivity!r} must be >= 0")
    return sensitivity / math.sqrt(2.0 * rho)


GAUSSIAN, NORM_LAPLACE, LAPLACE = "gaussian", "norm-laplace", "laplace"
"""The noise laws of :meth:`PrivacyLedger.draw_noise`."""


def gaussian_noise(quantity: str, value, sigma: float, rng, sensitivity: float | None = None, size=None):
    """sigma xi, xi ~ N(0, I) of ``value``'s shape (or ``size``; a scalar value: one float): the noise of
    one Gaussian release of ``value`` (the caller adds it). ``quantity`` and ``sensitivity`` are not read
    here; :meth:`PrivacyLedger.draw_noise` is this draw behind a ledger, where a subclass may record them
    (the grey-box audit, :mod:`dpnewton.audit.greybox`). Called directly only where a step runs without a
    ledger (unit tests of one step)."""
    if size is None:   # as the draws were written: no size for a scalar, an int for a vector
        shape = np.shape(value)
        size = None if shape == () else shape[0] if len(shape) == 1 else shape
    return sigma * rng.standard_normal(size)


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


@dataclass(frozen=True)
class Calibration:
    """Noise multipliers that make ``steps`` rounds of Poisson-subsampled Gaussian releases
    (epsilon, delta)-DP: release k has sampling rate ``qs[k]`` and noise multiplier
    ``multipliers[k]`` (noise std / L2 sensitivity), found by the RDP accountant
    (:mod:`dpnewton.privacy.accountant`) so that ``accountant_epsilon`` <= ``target_epsilon`` at ``delta``."""

    qs: tuple[float, ...]
    multipliers: tuple[float, ...]
    steps: int
    target_epsilon: float
    delta: float
    accountant_epsilon: float
    optimal_order: float
    weights: tuple[float, ...]
    order_at_grid_edge: bool


@dataclass(frozen=True)
class SubsampledGaussianEvent:
    """A :class:`Calibration` as a ledger event, one name per release (q_<name>, noise_multiplier_<name>
    in the record). ``extra``: further (key, value) pairs of the record (e.g. the minibatch Newton's
    ``grad_frac``)."""

    mechanism: str
    names: tuple[str, ...]
    calibration: Calibration
    orders: str                       # description of the order grid
    accountant: str = "rdp"
    extra: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        c = self.calibration
        if not len(self.names) == len(c.qs) == len(c.multipliers) >= 1:
            raise ValueError("names, qs and noise multipliers must be non-empty and of equal length")

    def as_dict(self) -> dict:
        c = self.calibration
        out = {"mechanism": self.mechanism, "accountant": self.accountant, "orders": self.orders,
               "steps": c.steps, "target_epsilon": c.target_epsilon, "delta": c.delta,
               "accountant_epsilon": c.accountant_epsilon, "optimal_order": c.optimal_order,
               "order_at_grid_edge": c.order_at_grid_edge}
        for name, q, z in zip(self.names, c.qs, c.multipliers):
            out[f"q_{name}"] = q
            out[f"noise_multiplier_{name}"] = z
        out.update(self.extra)
        return out

    def dp_event(self):
        """``SelfComposedDpEvent(ComposedDpEvent([PoissonSampledDpEvent(q_k, GaussianDpEvent(z_k)),
        ...]), steps)``: the releases of one round composed, then the rounds."""
        import dp_accounting  # imported on use: dp_accounting costs ~0.4 s at start-up

        step = dp_accounting.ComposedDpEvent([
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
            for q, z in zip(self.calibration.qs, self.calibration.multipliers)])
        return dp_accounting.SelfComposedDpEvent(step, int(self.calibration.steps))


@dataclass(frozen=True)
class ObjectivePerturbationEvent:
    """One approximate-objective-perturbation release [Iyengar et al. 2019], (epsilon, delta)-DP
    by its own analysis; ``parameters``: the (key, value) pairs of its calibration, in order.

    ``gradient_norm`` and ``solver_iterations`` are read off the exact data, and the parameters named in
    ``withheld`` are functions of the private n (e.g. a mean-form noise scale sigma/n): the benchmark's
    records keep them (:meth:`as_dict`), a released record never does (:meth:`released`)."""

    target_epsilon: float
    delta: float
    parameters: tuple[tuple[str, object], ...]
    gradient_norm: float
    solver_iterations: int
    mechanism: str = "approximate objective perturbation"
    withheld: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"mechanism": self.mechanism, "target_epsilon": self.target_epsilon, "delta": self.delta,
                **dict(self.parameters), "gradient_norm": self.gradient_norm,
                "solver_iterations": self.solver_iterations}

    def released(self) -> dict:
        """:meth:`as_dict` without the solver's diagnostics and the ``withheld`` parameters."""
        drop = {"gradient_norm", "solver_iterations", *self.withheld}
        return {k: v for k, v in self.as_dict().items() if k not in drop}

    def dp_event(self):
        """``UnsupportedDpEvent``: not a composition of Gaussian releases, so no accountant of
        dp-accounting can account for it; its privacy is the (epsilon, delta) of its calibration."""
        import dp_accounting  # imported on use: dp_accounting costs ~0.4 s at start-up

        return dp_accounting.UnsupportedDpEvent()


AccountingEvent = Union[SubsampledGaussianEvent, ObjectivePerturbationEvent, dict]


@dataclass
class PrivacyLedger:
    """Budget ledger of one run with a total zCDP budget ``budget_rho``.

    ``accounting_events`` holds the accounting records that are not zCDP entries, typed
    (:class:`SubsampledGaussianEvent`, :class:`ObjectivePerturbationEvent`; a plain dict is kept
    as given); ``events`` is their dict view (the ``accounting_events`` JSON column of result
    rows). ``nonprivate`` names the parts of a protocol that are not private by design.
    ``neighbouring`` is the relation the run's noise is calibrated for
    (:mod:`dpnewton.privacy.neighbouring`).
    """

    budget_rho: float
    entries: list[LedgerEntry] = field(default_factory=list)
    accounting_events: list[AccountingEvent] = field(default_factory=list)
    nonprivate: list[str] = field(default_factory=list)
    _spent: float = 0.0
    neighbouring: str = BENCHMARK_RELATION

    @property
    def events(self) -> list[dict]:
        """The accounting events as dicts (copies), in the order they were charged."""
        return [dict(e) if isinstance(e, dict) else e.as_dict() for e in self.accounting_events]

    def released_events(self) -> list[dict]:
        """:attr:`events` as a released record shows them: an event's ``released()`` view where it has one
        (no field computed from the exact data or the private n), else its dict."""
        return [dict(e) if isinstance(e, dict) else getattr(e, "released", e.as_dict)()
                for e in self.accounting_events]

    @property
    def spent_rho(self) -> float:
        return math.fsum(e.rho for e in self.entries)

    def charge(self, step: int, quantity: str, sensitivity: float, rho: float) -> float:
        """Record one Gaussian release and return its noise scale sigma = sensitivity/sqrt(2 rho)."""
        sigma = gaussian_sigma(sensitivity, rho)
        new_total = self._spent + rho
        if new_total > self.budget_rho * (1.0 + ROUNDING_SLACK):
            raise PrivacyBudgetExceeded(
                f"release {quantity!r} at step {step} needs rho={rho:.6g} but only "
                f"{self.budget_rho - self._spent:.6g} of rho={self.budget_rho:.6g} is left")
        self._spent = new_total
        self.entries.append(LedgerEntry(step, quantity, float(sensitivity), float(sigma), float(rho)))
        return sigma

    def noise(self, quantity: str, sigma: float) -> float:
        """The scale of a noise draw that does not come from :meth:`charge`: ``sigma`` itself.

        A method whose noise scale is calibrated elsewhere (an accountant's noise multiplier z = std/L2
        sensitivity, an objective-perturbation sigma, a scale it computes itself) passes it through here
        where it draws, naming the released ``quantity``. An identity in production (the same float, so
        no number changes); a subclass may record or rescale it (the privacy audit's broken variants,
        :class:`dpnewton.audit.variants.AuditLedger`). Nothing is charged: the privacy cost of such a
        release is recorded by its own entry or event.
        """
        return sigma

    def draw_noise(self, quantity: str, value, sigma: float, rng, sensitivity: float | None = None, size=None,
                   law: str = GAUSSIAN):
        """The noise sigma xi of one Gaussian release of ``value`` (:func:`gaussian_noise`): every noisy
        release of an optimizer draws here, where it adds the noise to its un-noised input ``value``.
        ``law`` = :data:`NORM_LAPLACE`: a pure epsilon-DP release instead, noise of density proportional to
        exp(-||v|| / sigma) (:func:`~dpnewton.privacy.norm_laplace.norm_laplace`; ``value`` a vector);
        :data:`LAPLACE`: i.i.d. Laplace(0, sigma) per entry of ``value`` (the Laplace mechanism, whose
        ``sensitivity`` is an L1 sensitivity).

        ``sensitivity``: the release's L2 sensitivity when it is not charged through :meth:`charge`
        (accountant- or objective-perturbation-calibrated scales); None: that of the entry just charged
        for ``quantity``. ``size``: the draw's shape when it is not ``value``'s (a symmetric matrix
        released through its upper triangle). In production neither ``value`` nor ``sensitivity`` is
        read and the draw is the caller's former ``sigma * rng.standard_normal(shape)``, bit for bit; a
        subclass records them (the grey-box sensitivity audit's replay, :mod:`dpnewton.audit.greybox`).
        """
        if law == NORM_LAPLACE:
            return norm_laplace(rng, int(np.size(value)), sigma)
        if law == LAPLACE:
            return rng.laplace(0.0, sigma, np.shape(value))
        if law != GAUSSIAN:
            raise ValueError(f"law={law!r} must be {GAUSSIAN!r}, {NORM_LAPLACE!r} or {LAPLACE!r}")
        return gaussian_noise(quantity, value, sigma, rng, sensitivity, size)

    def charge_event(self, event: AccountingEvent) -> None:
        """Record an accountant-level event (e.g. calibrated subsampled Gaussian); a dict is copied."""
        self.accounting_events.append(dict(event) if isinstance(event, dict) else event)

    def mark_nonprivate(self, part: str) -> None:
        if part not in self.nonprivate:
            self.nonprivate.append(part)

    def rho_by_quantity(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e.quantity] = out.get(e.quantity, 0.0) + e.rho
        return out

    def summary(self) -> dict:
        return {"neighbouring": self.neighbouring, "budget_rho": self.budget_rho, "ledger_rho_total": self.spent_rho,
                "rho_by_quantity": self.rho_by_quantity(), "n_releases": len(self.entries),
                "events": self.events, "nonprivate": list(self.nonprivate)}

    def as_records(self) -> list[dict]:
        return [e.as_dict() for e in self.entries]

    def dp_event(self, ignore_nonprivate: bool = False):
        """The run's privacy events as one ``dp_accounting.ComposedDpEvent``: entries, then events.

        * each zCDP entry (Gaussian release, L2 sensitivity Delta, recorded noise std sigma):
          ``GaussianDpEvent(sigma / Delta)``. Its RDP is alpha/(2 z^2) with z = sigma/Delta
          [Mironov 2017, Gaussian mechanism], i.e. rho = 1/(2 z^2) = Delta^2/(2 sigma^2), the rho the
          entry was charged [BS16 Prop. 1.6]. An entry with Delta = 0 or sigma = inf (a diverged Newton
          step's direction) reveals nothing: ``NoOpDpEvent``.
        * each :class:`SubsampledGaussianEvent` (DP-SGD, minibatch Newton): its ``dp_event()``,
          ``SelfComposedDpEvent(ComposedDpEvent([PoissonSampledDpEvent(q_k, GaussianDpEvent(z_k)),
          ...]), steps)``; a dict laid out as its ``as_dict()`` is read the same way.
        * any other event, e.g. :class:`ObjectivePerturbationEvent` (AOP, (epsilon, delta)-DP by
          its own analysis [Iyengar et al. 2019], not a composition of Gaussian releases):
          ``UnsupportedDpEvent``; dp-accounting's accountants refuse it (``supports`` is False,
          ``compose`` raises ``UnsupportedEventError``).
        * a non-private part (``nonprivate`` not empty): ``NonPrivateDpEvent`` is appended, so an
          accountant reports epsilon = inf for the run as a whole (dp-accounting's convention);
          ``ignore_nonprivate=True`` leaves it out: the event of the noisy releases alone.

        Event semantics: dp-accounting's ``dp_event`` module (``GaussianDpEvent``: noise std / L2
        sensitivity; ``PoissonSampledDpEvent``: Poisson sampling, add/remove-one neighbours).
        """
        import dp_accounting  # imported on use: dp_accounting costs ~0.4 s at start-up

        parts: list = []
        for e in self.entries:
            if e.sensitivity == 0.0 or math.isinf(e.sigma):
                parts.append(dp_accounting.NoOpDpEvent())
            else:
                parts.append(dp_accounting.GaussianDpEvent(e.sigma / e.sensitivity))
        for ev in self.accounting_events:
            sub = _accountant_dp_event(ev) if isinstance(ev, dict) else ev.dp_event()
            parts.append(sub or dp_accounting.UnsupportedDpEvent())
        if self.nonprivate and not ignore_nonprivate:
            parts.append(dp_accounting.NonPrivateDpEvent())
        return dp_accounting.ComposedDpEvent(parts)


def _accountant_dp_event(event: dict):
    """The subsampled-Gaussian DpEvent of an untyped (dict) calibration record laid out as
    :meth:`SubsampledGaussianEvent.as_dict`, or None if ``event`` is not one."""
    if "accountant" not in event or "steps" not in event:
        return None
    names = tuple(k[len("q_"):] for k in event if k.startswith("q_"))
    if not names or any(f"noise_multiplier_{name}" not in event for name in names):
        return None
    calibration = Calibration(
        tuple(event[f"q_{k}"] for k in names), tuple(event[f"noise_multiplier_{k}"] for k in names),
        int(event["steps"]), event.get("target_epsilon", math.nan), event.get("delta", math.nan),
        event.get("accountant_epsilon", math.nan), event.get("optimal_order", math.nan), (),
        bool(event.get("order_at_grid_edge", False)))
    return SubsampledGaussianEvent(str(event.get("mechanism", "")), names, calibration,
                                   str(event.get("orders", ""))).dp_event()
