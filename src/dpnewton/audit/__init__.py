"""Empirical privacy audit of the optimizers: every registered algorithm card's audit rows
(:attr:`~dpnewton.algorithms.AlgorithmSpec.audit`, third-party cards included).

:func:`audit_mechanism` runs the production optimizer on a canary pair (D, D' = D + one record)
many times per side (:mod:`.mechanisms`), applies a threshold distinguisher chosen on half of the
trials (:mod:`.distinguisher`) and turns its error rates on the other half into a 95%
Clopper-Pearson lower bound on epsilon (:mod:`.bounds`); for the Gaussian (zCDP-planned) mechanisms a second
test, at a threshold where both error rates are moderate, gives a mu-GDP lower bound and its epsilon at
the run's delta (:mod:`.gdp`). A correct mechanism must give a lower
bound <= its claimed epsilon; a deliberately broken one (``half-noise``, ``wrong-sensitivity``,
``tenth-noise``, :mod:`.variants`) should exceed it where the canary attains the calibrated sensitivity
(docs/privacy_audit.md states which variants are detectable per mechanism, and why not).

:mod:`.greybox` is the grey-box complement: each card run on D and on a neighbour with the same seed, the
neighbour replaying D's releases, every release's input checked against its sensitivity; :mod:`.greybox_softmax`
and :mod:`.greybox_preprocessing` run it on the softmax fit and on the private feature ranges.

The library's mechanisms outside the cards have their own black-box audits, each with a pilot that fixes
the threshold and broken variants that must be caught: :mod:`.small_n` (the estimator at n = 3 vs 4),
:mod:`.small_n_preprocessing` (the private feature ranges) and :mod:`.multinomial` (the softmax fit for
K > 2 classes).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from .bounds import (clopper_pearson_interval, clopper_pearson_lower, clopper_pearson_upper,
                     epsilon_lower_bound)
from .canaries import AuditMechanism, CanaryPair, canary_pair
from .distinguisher import AuditOutcome, threshold_audit
from .gdp import GdpOutcome, gdp_audit, gdp_mu_lower_bound
from .mechanisms import claimed_epsilon_of_level, default_mechanisms, release_rho_share, run_trials, statistic
from .variants import BROKEN_VARIANTS


@dataclass
class AuditRow:
    mechanism: str
    algorithm: str
    level: str
    broken: str
    epsilon: float               # claimed epsilon of the whole run
    delta: float
    rho: float
    epsilon_audited_part: float  # claimed epsilon of what the statistic sees (GDP-exact, same delta)
    epsilon_lb: float            # 95% lower bound
    trials_per_side: int
    n: int
    d: int
    iterations: int
    false_pos: int
    false_neg: int
    n_eval: int
    threshold: float
    direction: str
    note: str
    mu_claimed: float = float("nan")          # mu-GDP of the whole run, sqrt(2 rho) (Gaussian mechanisms only)
    mu_audited_part: float = float("nan")     # mu-GDP of what the statistic sees, sqrt(2 rho share)
    mu_lb: float = float("nan")               # 95% mu-GDP lower bound (:mod:`.gdp`)
    epsilon_lb_gdp: float = float("nan")      # epsilon(delta) of mu_lb-GDP

    @property
    def violates_claim(self) -> bool:
        return self.epsilon_lb > self.epsilon

    @property
    def violates_part_claim(self) -> bool:
        """Lower bound above the claim of the audited release itself (its own calibration is wrong)."""
        return self.epsilon_lb > self.epsilon_audited_part

    @property
    def violates_gdp_claim(self) -> bool:
        """mu lower bound above the whole run's mu-GDP claim (False where no GDP test applies)."""
        return self.mu_lb > self.mu_claimed

    @property
    def violates_gdp_part_claim(self) -> bool:
        return self.mu_lb > self.mu_audited_part

    def as_dict(self) -> dict:
        out = asdict(self)
        for key in ("violates_claim", "violates_part_claim", "violates_gdp_claim", "violates_gdp_part_claim"):
            out[key] = getattr(self, key)
        return out


def find_mechanism(name: str) -> AuditMechanism:
    for m in default_mechanisms():
        if m.name == name:
            return m
    names = ", ".join(m.name for m in default_mechanisms())
    raise ValueError(f"no audit mechanism {name!r}; choose one of {names}")


def audit_mechanism(mech: AuditMechanism | str, trials: int = 10_000, epsilon: float = 3.0,
                    n: int = 50, d: int = 2, broken: str = "none", conversion: str = "gdp",
                    seed: int = 0, alpha: float = 0.05) -> list[AuditRow]:
    """One row per audit level of ``mech`` for one (broken) variant."""
    mech = find_mechanism(mech) if isinstance(mech, str) else mech
    pair = canary_pair(n, d, mech.canary)
    neg = run_trials(pair, mech, "D", trials, epsilon, conversion, broken, seed)
    pos = run_trials(pair, mech, "D'", trials, epsilon, conversion, broken, seed)
    rows = []
    gaussian = mech.calibration == "zcdp-plan"   # zCDP plan: Gaussian releases, a mu-GDP claim
    for k, level in enumerate(mech.levels):
        neg_stat, pos_stat = statistic(neg, pair, level), statistic(pos, pair, level)
        out = threshold_audit(neg_stat, pos_stat, pair.delta, alpha, rng=np.random.default_rng([seed, 7, k]))
        part = claimed_epsilon_of_level(mech, level, neg, pair, epsilon)
        rho = neg.rho if gaussian else float("nan")  # zCDP-calibrated or not
        row = AuditRow(mech.name, mech.algorithm, level, broken, float(epsilon), pair.delta, rho,
                       part, out.epsilon_lb, trials, n, d, mech.iterations, out.false_pos,
                       out.false_neg, out.n_neg, out.threshold, out.direction, mech.note)
        if gaussian:
            gdp = gdp_audit(neg_stat, pos_stat, pair.delta, alpha, rng=np.random.default_rng([seed, 7, k]))
            share = release_rho_share(mech, level, pair.D.n, pair.D.d, rho)
            row.mu_claimed, row.mu_audited_part = math.sqrt(2.0 * rho), math.sqrt(2.0 * rho * share)
            row.mu_lb, row.epsilon_lb_gdp = gdp.mu_lb, gdp.epsilon_lb
        rows.append(row)
    return rows


__all__ = ["AuditRow", "audit_mechanism", "find_mechanism", "default_mechanisms", "AuditMechanism",
           "CanaryPair", "canary_pair", "threshold_audit", "AuditOutcome", "epsilon_lower_bound",
           "clopper_pearson_upper", "clopper_pearson_lower", "clopper_pearson_interval", "BROKEN_VARIANTS",
           "GdpOutcome", "gdp_audit", "gdp_mu_lower_bound"]
