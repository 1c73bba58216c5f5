"""What a library run releases beside its weights: one allow-list for ``privacy_record_``, model files
and ``dpnewton run`` output.

Under ``add-remove`` (n private, :mod:`dpnewton.privacy.neighbouring`) a released field may be a
function of the run's public arguments (algorithm, epsilon, delta, conversion, T, hyper-parameters,
seed) and of its noisy releases only, never of the exact data or of n outside a mechanism. The fields
of a run's record (:func:`dpnewton.experiment.result_record`) that qualify are
:data:`RELEASED_FIELDS`; evaluation fields (excess loss, training accuracy, runtime) and the solver's
diagnostics (gradient norm, Newton steps) are withheld, and so is every accounting parameter a
mechanism names as n-dependent (:meth:`dpnewton.privacy.ledger.ObjectivePerturbationEvent.released`).
Fields that do not apply to the run's mechanism (the rho of an (epsilon, delta)-calibrated method,
which spends none) are left out rather than shown as NaN.
"""

from __future__ import annotations

import copy
import math

from ..io import to_json
from .ledger import PrivacyLedger

RELEASED_FIELDS = ("algorithm", "epsilon", "delta", "conversion", "rho", "neighbouring", "epsilon_spent_cks",
                   "conversion_failed", "iterations", "seed", "ledger_rho_total", "n_releases", "nonprivate",
                   "accounting_events")
"""The fields of a run's record that a library release carries (module docstring)."""

ZCDP_FIELDS = ("rho", "epsilon_spent_cks", "ledger_rho_total")
"""Released only when the run spends a zCDP budget (its ledger has entries)."""


def released_record(record: dict, ledger: PrivacyLedger) -> dict:
    """The allow-listed fields of ``record`` (a :func:`~dpnewton.experiment.result_record` row of the run
    whose ledger is ``ledger``), the accounting events in their released form."""
    zcdp = bool(ledger.entries)
    out = {}
    for key in RELEASED_FIELDS:
        if key not in record or (key in ZCDP_FIELDS and not zcdp):
            continue
        value = record[key]
        if isinstance(value, float) and math.isnan(value):
            continue
        out[key] = value
    events = ledger.released_events()
    out["accounting_events"] = to_json(events) if events else ""
    if not out.get("nonprivate"):
        out.pop("nonprivate", None)
    return out


def released_ledger(ledger: PrivacyLedger) -> PrivacyLedger:
    """A copy of ``ledger`` whose accounting events are their released dicts (:func:`released_record`)."""
    out = copy.copy(ledger)
    out.entries = list(ledger.entries)
    out.accounting_events = ledger.released_events()
    out.nonprivate = list(ledger.nonprivate)
    return out


__all__ = ["RELEASED_FIELDS", "ZCDP_FIELDS", "released_ledger", "released_record"]
