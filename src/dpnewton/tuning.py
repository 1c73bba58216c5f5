"""End-to-end private hyper-parameter and T selection (Papernot & Steinke 2022).

:func:`private_select` is the selection procedure of docs/algorithms.md §14, over this package's
zCDP optimizers:

1. K, the number of candidates, is drawn from ``distribution`` (Poisson(mu) or TNB(eta, gamma),
   :mod:`dpnewton.privacy.selection`) with the selection's own Generator, before any data is
   touched; so are every candidate's configuration (uniform over the expanded ``grid``) and seed.
2. Candidate i runs ``method`` at its configuration (T, hyper) with rho_opt = (1 - score_frac) rho
   (:func:`dpnewton.experiment.run_at_rho`) and releases the private score
   s_i = (1/n) sum_j min(l_j(w_i), C) + N(0, sigma^2), sigma = (C/n)/sqrt(2 rho_score),
   rho_score = score_frac rho: the mean per-example logistic loss clipped to [0, C]
   (L2 sensitivity C/n under add/remove-one with public n, docs/algorithms.md §6.1). Candidate i
   is thus rho-zCDP (BS16 Lemma 2.3); its ledger holds the optimizer's releases and the score.
3. The output is the candidate with the lowest noisy score (ties: the first drawn; a tie has
   probability 0 under Gaussian noise), i.e. its model, its configuration and its score. K = 0
   (Poisson only) outputs the fixed default ``fallback`` (w = 0 unless given; it must not depend on
   the data), with no configuration and a NaN score, as PS22 Thm. 6 assumes.
4. rho is calibrated so that the whole procedure is (epsilon, delta)-DP (PS22 Thm. 2 / Thm. 6,
   then CKS20 Prop. 12): :func:`dpnewton.privacy.selection.calibrate_candidate_rho`.

What may be released: the model, configuration and score of the selected candidate, and the
public accounting (``SelectionRecord.public()``). K, the losing candidates, their scores and their
ledgers (``SelectionRecord.secret()``) are NOT covered by the guarantee: PS22's analysis relies on K
being hidden. They are kept for tests and audits only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .algorithms import get_algorithm
from .experiment import last_iterate_only, run_at_rho, validate_iterations
from .loss import LogisticProblem
from .margin_functions import logistic_loss_terms
from .privacy import PrivacyLedger, check_epsilon_delta
from .privacy.neighbouring import BENCHMARK_RELATION, resolve_delta
from .privacy.selection import (PoissonCount, SelectionAccounting, TruncatedNegativeBinomialCount,
                                calibrate_candidate_rho, make_distribution)
from .seeding import RunIdentity, validate_seed

DEFAULT_SCORE_FRAC = 0.1
#: C = 5, the loss of an example misclassified at margin about 5: a C barely above ln 2 (the loss of
#: w = 0) ranks a model confidently wrong on a few rows as a good one (docs/algorithms.md §14.1)
DEFAULT_SCORE_CLIP = 5.0
CONVERSION_LABEL = "private-selection"


def expand_grid(grid) -> tuple[tuple[int, dict], ...]:
    """The configurations (T, hyper) of ``grid``: either a list of {"iterations": T, "hyper": {...}}
    or {"iterations": [T, ...], "hyper": {name: [values, ...]}} (cartesian product, in the
    order given). Duplicates are kept: each listed configuration has equal probability."""
    if isinstance(grid, dict):
        Ts = grid.get("iterations")
        Ts = [Ts] if isinstance(Ts, (int, np.integer)) else list(Ts or [])
        hyper = dict(grid.get("hyper") or {})
        names = list(hyper)
        values = [list(v) if isinstance(v, (list, tuple)) else [v] for v in hyper.values()]
        configs = [(validate_iterations(T), dict(zip(names, combo)))
                   for T in Ts for combo in itertools.product(*values)]
    else:
        configs = [(validate_iterations(c["iterations"]), dict(c.get("hyper") or {})) for c in grid]
    if not configs:
        raise ValueError("grid must hold at least one configuration (iterations >= 1)")
    return tuple(configs)


def check_method(method: str):
    """The spec of ``method`` if it can be a candidate: a zCDP method (its card's calibration
    "zcdp-plan", not one calibrated to (epsilon, delta) by an accountant or its own analysis) with no
    non-private part."""
    spec = get_algorithm(method)
    if not spec.zcdp:
        raise ValueError(f"method={method!r} is calibrated to (epsilon, delta) by its own accountant or analysis, "
                         "not to a zCDP rho; private selection needs a full-batch zCDP method")
    if spec.nonprivate:
        raise ValueError(f"method={method!r} has a non-private part ({spec.nonprivate}); it cannot be a "
                         "candidate of a private selection")
    return spec


def private_score(problem: LogisticProblem, w: np.ndarray, clip: float, rho: float, ledger: PrivacyLedger,
                  rng: np.random.Generator, step: int = 0) -> float:
    """mean_j min(log(1 + exp(-<z_j, w>)), clip) + N(0, sigma^2), charged to ``ledger`` with
    sensitivity clip/n and ``rho`` (sigma = (clip/n)/sqrt(2 rho))."""
    if not (math.isfinite(clip) and clip > 0):
        raise ValueError(f"score_clip={clip!r} must be a finite number > 0")
    sigma = ledger.charge(step, "selection score", clip / problem.n, rho)
    value = float(np.minimum(logistic_loss_terms(problem.margins(w)), clip).mean())
    return value + sigma * float(rng.standard_normal())


@dataclass
class SelectionRecord:
    """The record of one private selection: the public accounting, then the secret part."""

    accounting: SelectionAccounting
    method: str
    n_configurations: int
    score_frac: float
    score_clip: float
    rho_optimizer: float
    rho_score: float
    seed: int | None
    # --- secret: not covered by the privacy guarantee (PS22 needs K hidden) ---
    realised_k: int = 0
    candidates: list = field(default_factory=list)    # dicts: index, iterations, hyper, seed, score
    ledgers: list = field(default_factory=list)       # one PrivacyLedger per candidate
    selected: int | None = None                       # index of the output candidate; None if K = 0

    @property
    def ledger_rho_total(self) -> float:
        return float(sum(led.spent_rho for led in self.ledgers))

    def public(self) -> dict:
        return {**self.accounting.as_dict(), "method": self.method, "n_configurations": self.n_configurations,
                "score_frac": self.score_frac, "score_clip": self.score_clip,
                "rho_optimizer": self.rho_optimizer, "rho_score": self.rho_score}

    def secret(self) -> dict:
        return {"realised_k": self.realised_k, "selected": self.selected, "candidates": list(self.candidates),
                "ledger_rho_total": self.ledger_rho_total}


@dataclass
class PrivateSelectionResult:
    w: np.ndarray
    config: tuple[int, dict] | None      # (T, hyper) of the selected candidate; None if K = 0
    score: float                         # its private score; NaN if K = 0
    record: SelectionRecord


def private_select(problem: LogisticProblem, method: str, grid, epsilon: float, delta: float | None = None,
                   distribution=("tnb", {"eta": 1.0, "mean": 10.0}), seed: int | None = None,
                   score_frac: float = DEFAULT_SCORE_FRAC, score_clip: float = DEFAULT_SCORE_CLIP,
                   fallback: np.ndarray | None = None, dataset: str | None = None,
                   blas_threads: int = 1) -> PrivateSelectionResult:
    """Papernot-Steinke private selection of (T, hyper) for ``method`` at total (epsilon, delta).

    ``distribution``: a :class:`PoissonCount` / :class:`TruncatedNegativeBinomialCount`, or
    (name, params) for :func:`~dpnewton.privacy.selection.make_distribution`, e.g. ("poisson",
    {"mu": 10}), ("tnb", {"eta": 0.5, "mean": 10}), ("geometric", {"mean": 10}). Default: geometric
    with E[K] = 10. ``delta`` defaults to n^-2. ``seed``: None draws everything from fresh OS
    entropy; an integer makes the whole procedure replayable (benchmarking only).
    """
    check_method(method)
    seed = validate_seed(seed)
    delta = resolve_delta(delta, BENCHMARK_RELATION, problem.n)
    check_epsilon_delta(epsilon, delta)
    if not (isinstance(score_frac, (int, float)) and 0 < score_frac < 1):
        raise ValueError(f"score_frac={score_frac!r} must lie in the open interval (0, 1)")
    if not (isinstance(distribution, (PoissonCount, TruncatedNegativeBinomialCount))):
        name, params = distribution
        distribution = make_distribution(name, **dict(params))
    configs = expand_grid(grid)
    dataset = problem.name if dataset is None else dataset
    w_default = np.zeros(problem.d) if fallback is None else np.array(fallback, dtype=np.float64, copy=True)
    if w_default.shape != (problem.d,):
        raise ValueError(f"fallback must have shape ({problem.d},), got {w_default.shape}")

    # accounting: a public function of (epsilon, delta, distribution)
    acc = calibrate_candidate_rho(float(epsilon), delta, distribution)
    rho = acc.candidate_rho
    rho_score = score_frac * rho
    rho_opt = rho - rho_score

    # all randomness that does not touch the data, drawn first: K, configurations, candidate seeds
    ident = RunIdentity(dataset, f"private-selection:{method}", float(epsilon), seed, 1)
    rng = ident.generator("selection")
    k = distribution.sample(rng)
    picks = [int(rng.integers(len(configs))) for _ in range(k)]
    cand_seeds = [None if seed is None else int(rng.integers(2**62)) for _ in range(k)]

    record = SelectionRecord(acc, method, len(configs), float(score_frac), float(score_clip), rho_opt,
                             rho_score, seed, realised_k=k)
    best_w, best_config, best_score = w_default, None, float("nan")
    for i, (pick, cseed) in enumerate(zip(picks, cand_seeds)):
        T, hyper = configs[pick]
        (res,) = run_at_rho(problem, dataset, method, float(epsilon), delta, CONVERSION_LABEL, rho_opt,
                            [(cseed, T)], hyper, blas_threads, last_iterate_only)
        led = res.ledger
        if not led.entries or led.accounting_events or led.nonprivate:
            raise RuntimeError(f"candidate {i} of {method!r} is not a pure zCDP run (events "
                               f"{led.events}, non-private {led.nonprivate})")
        ledger = PrivacyLedger(rho)
        for e in led.entries:
            ledger.charge(e.step, e.quantity, e.sensitivity, e.rho)
        cident = RunIdentity(dataset, method, float(epsilon), cseed, T)
        score = private_score(problem, res.w, float(score_clip), rho_score, ledger,
                              cident.generator("selection-score"), step=T)
        if not math.isclose(ledger.spent_rho, rho, rel_tol=1e-9):
            raise AssertionError(f"candidate {i} spent rho={ledger.spent_rho!r} of {rho!r}")
        record.ledgers.append(ledger)
        record.candidates.append({"index": i, "iterations": T, "hyper": dict(hyper), "seed": cseed,
                                  "score": score})
        if best_config is None or score < best_score:
            best_w, best_config, best_score, record.selected = res.w, (T, dict(hyper)), score, i
    return PrivateSelectionResult(np.array(best_w, copy=True), best_config, best_score, record)
