"""Running optimizers on a problem: budgets, seeding and one result record per run.

:func:`run_algorithm` runs every (seed, T) pair of one (dataset, algorithm, epsilon) as one batch.
Each run gets

* rho from (epsilon, delta) through the named ``conversion`` (:mod:`dpnewton.privacy`), with
  delta = n^-2 unless given [P section 6];
* its own ``numpy.random.Generator``: seeded from (dataset, algorithm, epsilon, seed, T) for an
  integer seed (benchmarking), from fresh OS entropy for ``seed=None`` (:mod:`dpnewton.seeding`);
* its own privacy ledger, checked to sum to rho after the run.

BLAS runs single-threaded inside (threadpoolctl): the paper's runtimes are single-thread CPU
numbers, and the bits of a BLAS product depend on its thread count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from .algorithms import RunContext, RunResult, get_algorithm
from .io import to_json
from .loss import LogisticProblem
from .privacy import (CONVERSIONS, PrivacyLedger, check_epsilon_delta, default_delta, epsilon_to_rho,
                      official_fsolve_failed, rho_to_epsilon)
from .seeding import RunIdentity, validate_seed

DEFAULT_CONVERSION = "bs16"
LEDGER_TOLERANCE = 1e-9
#: T -> the iterates of 0..T whose loss a run records (RunContext.loss_iterates)
LossIterates = Callable[[int], np.ndarray]


def last_iterate_only(T: int) -> np.ndarray:
    """``loss_iterates`` of a caller that reads only the released model (w_T's loss is always evaluated)."""
    return np.zeros(0, dtype=int)


def validate_iterations(iterations) -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise ValueError(f"iterations={iterations!r} must be an integer >= 1")
    return int(iterations)


def validate_run_arguments(epsilon: float, delta: float | None, iterations: int, conversion: str) -> None:
    """Check a run's privacy and length arguments without touching data (ValueError names them)."""
    check_epsilon_delta(epsilon, 0.5 if delta is None else delta)
    validate_iterations(iterations)
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion={conversion!r} is unknown; choose one of {', '.join(CONVERSIONS)}")


def resolve_budget(epsilon: float, delta: float | None, n: int, conversion: str) -> tuple[float, float]:
    """(delta, rho) for a target epsilon: delta defaults to n^-2; rho via ``conversion``."""
    if conversion not in CONVERSIONS:
        raise ValueError(f"conversion={conversion!r} is unknown; choose one of {', '.join(CONVERSIONS)}")
    delta = default_delta(n) if delta is None else delta
    check_epsilon_delta(epsilon, delta)
    return delta, epsilon_to_rho(epsilon, delta, conversion)


def make_contexts(dataset: str, algorithm: str, epsilon: float, delta: float, conversion: str, rho: float,
                  runs: Iterable[tuple[int, int]], loss_iterates: LossIterates | None = None) -> list[RunContext]:
    contexts = []
    for seed, T in runs:
        ident = RunIdentity(dataset, algorithm, float(epsilon), validate_seed(seed), validate_iterations(T))
        contexts.append(RunContext(ident, float(epsilon), float(delta), conversion, float(rho),
                                   PrivacyLedger(float(rho)), ident.generator(),
                                   None if loss_iterates is None else loss_iterates(ident.iterations)))
    return contexts


def check_ledger(result: RunResult) -> None:
    """The ledger of a finished run must spend its budget: no more (raised earlier) and no less."""
    ledger = result.ledger
    if ledger.entries:
        spent = ledger.spent_rho
        if not math.isclose(spent, ledger.budget_rho, rel_tol=LEDGER_TOLERANCE):
            raise AssertionError(f"run {result.identity} spent rho={spent!r} of {ledger.budget_rho!r}")
    for event in ledger.events:  # accountant-calibrated runs (subsampled Gaussian)
        if "accountant_epsilon" in event and event["accountant_epsilon"] > event["target_epsilon"]:
            raise AssertionError(f"run {result.identity}: accountant epsilon {event['accountant_epsilon']!r} "
                                 f"exceeds the target {event['target_epsilon']!r}")


def run_algorithm(problem: LogisticProblem, dataset: str, algorithm: str, epsilon: float,
                  seeds: Sequence[int | None], iterations: Sequence[int] | int, delta: float | None = None,
                  conversion: str = DEFAULT_CONVERSION, hyper: dict | None = None,
                  blas_threads: int = 1, loss_iterates: LossIterates | None = None) -> list[RunResult]:
    """Run ``algorithm`` for every (seed, T) in seeds x iterations; one batch, one result per run.
    ``loss_iterates(T)``: the iterates whose loss a run of T iterations records
    (:attr:`~dpnewton.algorithms.base.RunContext.loss_iterates`; default all)."""
    spec = get_algorithm(algorithm)
    Ts = [iterations] if isinstance(iterations, (int, np.integer)) else list(iterations)
    if not Ts:
        raise ValueError("iterations must not be empty")
    for T in Ts:
        validate_iterations(T)
    delta, rho = resolve_budget(epsilon, delta, problem.n, conversion)
    return run_at_rho(problem, dataset, algorithm, epsilon, delta, conversion, rho,
                      [(s, T) for s in seeds for T in Ts], hyper, blas_threads, loss_iterates)


def run_at_rho(problem: LogisticProblem, dataset: str, algorithm: str, epsilon: float, delta: float,
               conversion: str, rho: float, runs: Iterable[tuple[int | None, int]], hyper: dict | None = None,
               blas_threads: int = 1, loss_iterates: LossIterates | None = None) -> list[RunResult]:
    """Run ``algorithm`` once per (seed, T) of ``runs`` with a given zCDP budget ``rho`` (the
    second half of :func:`run_algorithm`, which derives rho from epsilon). ``epsilon``, ``delta``
    and ``conversion`` label the runs (identity, seeding, records); only the accountant-calibrated
    methods (DP-SGD, minibatch Newton, AOP) read epsilon instead of rho. Used by
    :func:`dpnewton.tuning.private_select`, whose candidates get a rho calibrated for the whole
    selection."""
    spec = get_algorithm(algorithm)
    contexts = make_contexts(dataset, algorithm, epsilon, delta, conversion, rho, list(runs), loss_iterates)
    with threadpool_limits(blas_threads):
        results = spec.run(problem, contexts, dict(hyper or {}))
    for res in results:
        check_ledger(res)
    return results


def result_record(result: RunResult, conversion: str, epsilon: float, delta: float) -> dict:
    """A flat, JSON-ready record of one run (the row the pipeline writes).

    ``excess_loss`` (what the pipeline selects T on) and ``train_accuracy`` are those of the
    released model ``result.w``: with iterate averaging (``average`` = uniform | tail) the averaged
    iterate, else the last iterate; ``last_iterate_excess_loss`` is always w_T's.
    """
    ident = result.identity
    ledger = result.ledger
    rho = ledger.budget_rho
    record = {
        "dataset": ident.dataset, "algorithm": ident.algorithm, "epsilon": ident.epsilon,
        "delta": delta, "conversion": conversion, "rho": rho,
        # the epsilon the zCDP ledger really spends (tight CKS); NaN for accountant/AOP runs
        "epsilon_spent_cks": rho_to_epsilon(rho, delta, "cks") if ledger.entries else float("nan"),
        "conversion_failed": bool(conversion == "official-fsolve" and official_fsolve_failed(epsilon, delta)),
        "iterations": ident.iterations, "seed": ident.seed,
        # excess loss of the released model w: the averaged iterate when average != none, else w_T;
        # last_iterate_excess_loss is always w_T's (equal to excess_loss when average == none)
        "excess_loss": result.released_excess_loss, "last_iterate_excess_loss": result.final_excess_loss,
        "average": result.average, "runtime_s": result.runtime_s,
        # share of training rows with <z_i, w> > 0 for the released w (a margin of exactly 0 counts as wrong)
        "train_accuracy": float("nan") if result.train_accuracy is None else float(result.train_accuracy),
        # zCDP-ledger runs: the sum of per-release rho. Accountant-calibrated runs (amplification by
        # subsampling is not rho-additive) have no rho entries: NaN, and accountant_epsilon instead.
        "ledger_rho_total": ledger.spent_rho if ledger.entries else float("nan"),
        "accountant_epsilon": next((e["accountant_epsilon"] for e in ledger.events
                                    if "accountant_epsilon" in e), float("nan")),
        "n_releases": len(ledger.entries), "resets": result.resets,
        "diverged": bool(result.diagnostics.get("diverged", False)),
        "nonprivate": "; ".join(ledger.nonprivate),
    }
    record["accounting_events"] = to_json(ledger.events) if ledger.events else ""
    return record
