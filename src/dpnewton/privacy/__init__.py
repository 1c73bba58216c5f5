"""Privacy accounting: (epsilon, delta) <-> rho conversions, the per-run budget ledger and its events."""

from .conversions import (CONVERSIONS, DEFAULT_CONVERSION, check_conversion, check_epsilon_delta, epsilon_to_rho,
                          official_fsolve_failed, rho_to_epsilon)
from .ledger import (LedgerEntry, ObjectivePerturbationEvent, PrivacyBudgetExceeded, PrivacyLedger,
                     SubsampledGaussianEvent, gaussian_sigma)

__all__ = ["CONVERSIONS", "DEFAULT_CONVERSION", "check_conversion", "check_epsilon_delta", "epsilon_to_rho",
           "rho_to_epsilon", "official_fsolve_failed", "PrivacyLedger", "LedgerEntry", "PrivacyBudgetExceeded",
           "gaussian_sigma", "SubsampledGaussianEvent", "ObjectivePerturbationEvent"]
