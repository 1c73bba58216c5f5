"""The tie rule: whether two means over seeds differ by more than seed noise.

The tables hold, per (configuration, T), the mean excess loss over ``n_seeds`` seeds and its standard
error; no per-seed values are published, and seeds are not shared across methods (each run's noise is
seeded from its own identity), so the test is unpaired: Welch's two-sample t-test from the summary
statistics (mean, s.e. x sqrt(n) as the standard deviation, n; :func:`scipy.stats.ttest_ind_from_stats`,
``equal_var=False``). Two means tie when its two-sided p-value is at least :data:`ALPHA`. The claims
report's tie sets (:mod:`dpnewton.pipeline.claims.ties`) and the frontier's winner by compute budget
(:func:`dpnewton.pipeline.frontier.crossover`) both apply it.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

#: significance level of the tie rule
ALPHA = 0.05
TIE_RULE = (f"a method ties with the lowest mean when Welch's t-test on the two means (standard errors over "
            f"seeds; no per-seed values are published) gives a two-sided p >= {ALPHA:g}")
#: the sentence a report section states the rule with (a ranked section that states it tests its ranking)
STATED = f"Tie rule: {TIE_RULE}."


def welch_p(mean_a, se_a, n_a, mean_b, se_b, n_b) -> float:
    """Two-sided p-value of Welch's t-test from summary statistics (standard deviation = s.e. x sqrt(n)).
    Two equal means give 1; a difference with both standard errors 0 gives 0."""
    if mean_a == mean_b:
        return 1.0
    if se_a == 0 and se_b == 0:
        return 0.0
    t = stats.ttest_ind_from_stats(mean_a, se_a * np.sqrt(n_a), int(n_a), mean_b, se_b * np.sqrt(n_b), int(n_b),
                                   equal_var=False)
    return float(t.pvalue)
