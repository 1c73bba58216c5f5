"""Threshold distinguisher: pick a threshold on one half of the trials, bound epsilon on the other.

The statistic of each trial is a scalar (e.g. the projection of the output onto the canary
direction), larger on D' than on D in expectation. On the *selection* half of each side, every
candidate threshold tau (quantiles of the pooled selection statistics) and both directions of the
epsilon bound are scored with the Clopper-Pearson bound; the best (tau, direction) is then applied
once to the held-out *evaluation* half, whose Clopper-Pearson bound is the reported lower bound.
Using disjoint halves keeps the reported bound a valid 95% lower bound despite the search.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .bounds import epsilon_lower_bound


@dataclass
class AuditOutcome:
    epsilon_lb: float            # 95% lower bound on epsilon from the evaluation half
    threshold: float
    direction: str               # "fpr" or "fnr": which inequality gave the bound
    false_pos: int               # evaluation half: trials on D with statistic > threshold
    n_neg: int
    false_neg: int               # evaluation half: trials on D' with statistic <= threshold
    n_pos: int
    selection_epsilon_lb: float  # the best score on the selection half (optimistic; not reported)

    def as_dict(self) -> dict:
        return asdict(self)


def _counts(sorted_neg: np.ndarray, sorted_pos: np.ndarray, taus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    fp = sorted_neg.size - np.searchsorted(sorted_neg, taus, side="right")   # neg > tau
    fn = np.searchsorted(sorted_pos, taus, side="right")                      # pos <= tau
    return fp, fn


def _halves(stat_neg, stat_pos, rng: np.random.Generator | None):
    """(selection D, evaluation D, selection D', evaluation D'), each sorted: a random half of each side's
    trials for choosing the test, the other half for counting its errors (``rng`` None: seed 0)."""
    stat_neg = np.asarray(stat_neg, dtype=np.float64).ravel()
    stat_pos = np.asarray(stat_pos, dtype=np.float64).ravel()
    if stat_neg.size < 4 or stat_pos.size < 4:
        raise ValueError("need at least 4 trials per side")
    if not (np.isfinite(stat_neg).all() and np.isfinite(stat_pos).all()):
        raise ValueError("statistics contain NaN or inf")
    rng = np.random.default_rng(0) if rng is None else rng
    neg = stat_neg[rng.permutation(stat_neg.size)]
    pos = stat_pos[rng.permutation(stat_pos.size)]
    hn, hp = neg.size // 2, pos.size // 2
    return np.sort(neg[:hn]), np.sort(neg[hn:]), np.sort(pos[:hp]), np.sort(pos[hp:])


def threshold_audit(stat_neg: np.ndarray, stat_pos: np.ndarray, delta: float, alpha: float = 0.05,
                    rng: np.random.Generator | None = None, n_thresholds: int = 400) -> AuditOutcome:
    """Lower-bound epsilon from statistics on D (``stat_neg``) and D' (``stat_pos``)."""
    sel_neg, ev_neg, sel_pos, ev_pos = _halves(stat_neg, stat_pos, rng)
    pooled = np.concatenate([sel_neg, sel_pos])
    taus = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, n_thresholds)))
    fp, fn = _counts(sel_neg, sel_pos, taus)
    best = (-1.0, 0.0, "fpr")
    for direction in ("fpr", "fnr"):
        scores = epsilon_lower_bound(fp, sel_neg.size, fn, sel_pos.size, delta, alpha, direction)
        i = int(np.argmax(scores))
        if scores[i] > best[0]:
            best = (float(scores[i]), float(taus[i]), direction)
    sel_score, tau, direction = best
    fp_e, fn_e = _counts(ev_neg, ev_pos, np.array([tau]))
    eps = epsilon_lower_bound(int(fp_e[0]), ev_neg.size, int(fn_e[0]), ev_pos.size, delta, alpha, direction)
    return AuditOutcome(float(eps), tau, direction, int(fp_e[0]), int(ev_neg.size), int(fn_e[0]),
                        int(ev_pos.size), sel_score)
