"""Privacy accounting: (epsilon, delta) <-> rho conversions and the per-run budget ledger."""

from .conversions import (CONVERSIONS, check_epsilon_delta, default_delta, epsilon_to_rho,
                          official_fsolve_failed, rho_to_epsilon)
from .ledger import LedgerEntry, PrivacyBudgetExceeded, PrivacyLedger, gaussian_sigma

__all__ = ["CONVERSIONS", "check_epsilon_delta", "default_delta", "epsilon_to_rho", "rho_to_epsilon",
           "official_fsolve_failed", "PrivacyLedger", "LedgerEntry", "PrivacyBudgetExceeded",
           "gaussian_sigma"]
