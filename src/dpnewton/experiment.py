"""Running optimizers on a problem: budgets, seeding and one result record per run.

:func:`run_algorithm` runs every (seed, T) pair of one (dataset, algorithm, epsilon) as one batch;
:func:`budgeted_group` checks a group's arguments and computes its budget once (the CLI, the estimator and the
pipeline's jobs all build their groups there); :func:`run_groups` runs several groups of runs
(:class:`RunGroup`: a configuration at a budget) of one dataset and algorithm as one batch, which a
``lockstep`` card steps together. Each run gets

* rho from (epsilon, delta) through the named ``conversion`` (:mod:`dpnewton.privacy`), with
  delta from the neighbouring relation unless given (n^-2 when n is public [P section 6]);
* the noise of its ``neighbouring`` relation (:mod:`dpnewton.privacy.neighbouring`): under
  ``add-remove`` a zCDP run first releases its row count from its own stream ("count") and
  calibrates every later release to it; the pipeline runs the paper's ``add-remove-public-n``;
* its own ``numpy.random.Generator``: seeded from (dataset, algorithm, epsilon, seed, T) for an
  integer seed (benchmarking), from fresh OS entropy for ``seed=None`` (:mod:`dpnewton.seeding`);
* its own privacy ledger, checked to sum to rho after the run.

BLAS runs single-threaded inside (threadpoolctl): the paper's runtimes are single-thread CPU
numbers, and the bits of a BLAS product depend on its thread count.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import ThreadpoolController

from .algorithms import (ALGORITHMS, AlgorithmSpec, RunContext, RunResult, build_config, configured_nonprivate,
                         get_algorithm)
from .io import to_json
from .loss import LogisticProblem
from .privacy import (DEFAULT_CONVERSION, PrivacyLedger, check_conversion, check_epsilon_delta, epsilon_to_rho,
                      official_fsolve_failed, rho_to_epsilon)
from .privacy.conversions import OVERSPENDING_CONVERSIONS, pure_rho
from .privacy.neighbouring import (BENCHMARK_RELATION, COUNT_SENSITIVITY, LIBRARY_RELATION, check_delta_for_rows,
                                   check_relation, count_rho, delta_without_n, released_count, resolve_delta)
from .seeding import RunIdentity, validate_seed

LEDGER_TOLERANCE = 1e-9
#: T -> the iterates of 0..T whose loss a run records (RunContext.loss_iterates)
LossIterates = Callable[[int], np.ndarray]


def last_iterate_only(T: int) -> np.ndarray:
    """``loss_iterates`` of a caller that reads only the released model (w_T's loss is always evaluated)."""
    return np.zeros(0, dtype=int)


MAX_ITERATIONS = 10**6
"""Public cap on a run's number of updates T at every entry point: checked before any allocation, so a
mistyped T is a clear error rather than hours of work (the largest T any shipped config uses is 76,800)."""


def validate_iterations(iterations) -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise ValueError(f"iterations={iterations!r} must be an integer >= 1")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"iterations={iterations!r} is above the cap of {MAX_ITERATIONS:,} updates "
                         "(dpnewton.experiment.MAX_ITERATIONS); use fewer iterations (a full-batch method "
                         "reaches its accuracy in far fewer)")
    return int(iterations)


def check_run(algorithm: str, epsilon: float, delta: float | None, iterations, conversion: str = DEFAULT_CONVERSION,
              neighbouring: str = BENCHMARK_RELATION, hyper: dict | None = None, convert: bool = True) -> AlgorithmSpec:
    """Every check of a run's arguments that needs no data, in one place; returns the algorithm's card.

    ValueError naming the argument for: an unknown algorithm, a relation its card does not cover, a
    configuration its ``validated()`` rejects (``hyper``, built as the runner builds it), epsilon and
    delta out of range, T not an integer >= 1 (one T or a list), an unknown conversion, and - when delta
    is known without n (given, or the relation's public default) - an epsilon the conversion cannot
    represent (``convert``; :func:`budgeted_group`, which converts next, skips it). What needs n (the n^-2
    default, delta < 1/n) is :func:`resolve_budget`'s.
    """
    spec = get_algorithm(algorithm)
    check_relation_supported(spec, neighbouring)
    Ts = [iterations] if isinstance(iterations, (int, np.integer, bool)) else list(iterations)
    if not Ts:
        raise ValueError("iterations must not be empty")
    for T in Ts:
        validate_iterations(T)
    check_conversion(conversion)
    known = delta if delta is not None else delta_without_n(neighbouring)
    if known is not None and not isinstance(known, bool) and known == 0:
        if not spec.pure_dp:
            pure = sorted(name for name, other in ALGORITHMS.items() if other.pure_dp)
            raise ValueError(f"delta={known!r} (pure epsilon-DP) needs an algorithm with a pure mechanism "
                             f"({', '.join(pure)}); algorithm={algorithm!r} needs a delta > 0")
        known = None
        pure_rho(epsilon)                            # epsilon checked; no conversion at delta = 0
    check_epsilon_delta(epsilon, 0.5 if known is None else known)
    if spec.config is not None:
        cls, fixed = spec.config
        build_config(cls, dict(hyper or {}), fixed)
    if known is not None and convert:
        epsilon_to_rho(epsilon, known, conversion)   # representable (a clear error, never a hang)
    return spec


def check_guarantee(algorithm: str, conversion: str, hyper: dict | None = None) -> None:
    """Refuse, before any data, a library run whose output would not carry its (epsilon, delta): a
    conversion that can overspend (:data:`~dpnewton.privacy.conversions.OVERSPENDING_CONVERSIONS`) or a
    protocol with a non-private part (the card's, or one its configuration switches on:
    :func:`~dpnewton.algorithms.registry.configured_nonprivate`). The library's entry points
    (``dpnewton.fit``, ``dpnewton run``, ``DPLogisticRegression``) call it; the benchmark pipeline keeps
    both under the paper's convention and labels them in its reports."""
    if conversion in OVERSPENDING_CONVERSIONS:
        raise ValueError(f"conversion={conversion!r} is refused here: {OVERSPENDING_CONVERSIONS[conversion]}; "
                         f"use {DEFAULT_CONVERSION!r} (the default). The benchmark pipeline keeps it to reproduce "
                         "the paper's numbers")
    parts = configured_nonprivate(get_algorithm(algorithm), hyper)
    if parts:
        raise ValueError(f"algorithm={algorithm!r} with hyper-parameters {dict(hyper or {})!r} is not private "
                         f"({'; '.join(parts)}); the library releases private models only: drop that setting "
                         "or choose another algorithm")


def resolve_budget(epsilon: float, delta: float | None, n: int, conversion: str,
                   neighbouring: str = BENCHMARK_RELATION) -> tuple[float, float]:
    """(delta, rho) for a target epsilon: delta defaults by the relation
    (:func:`~dpnewton.privacy.neighbouring.resolve_delta`) and, with n public, must be below 1/n
    (:func:`~dpnewton.privacy.neighbouring.check_delta_for_rows`: nothing reads n under ``add-remove``);
    rho via ``conversion``."""
    delta = resolve_delta(delta, neighbouring, n)
    if delta == 0.0:                                 # pure epsilon-DP (check_run: a pure_dp card)
        return 0.0, pure_rho(epsilon)
    rho = epsilon_to_rho(epsilon, delta, conversion)  # checks epsilon and delta
    check_delta_for_rows(delta, n, neighbouring)
    return delta, rho


def budgeted_group(algorithm: str, n: int, epsilon: float, delta: float | None, conversion: str,
                   runs: Iterable[tuple[int | None, int]], hyper: dict | None = None,
                   neighbouring: str = BENCHMARK_RELATION, averages: Sequence[str] = (),
                   loss_iterates: LossIterates | None = None) -> RunGroup:
    """The runs (seed, T) of one configuration at one target budget, checked and budgeted once: every
    data-free check (:func:`check_run`, without its trial conversion), the released ``averages``
    against the card, then (delta, rho) for the ``n`` rows (:func:`resolve_budget`: the one conversion).
    :func:`run_algorithm` (the CLI, the estimator) and the pipeline's jobs build their groups here."""
    runs = tuple(runs)
    spec = check_run(algorithm, epsilon, delta, [T for _, T in runs], conversion, neighbouring, hyper, convert=False)
    if averages and not spec.averaging:
        raise ValueError(f"algorithm={algorithm!r} releases no averaged iterates (its configuration has no "
                         f"'average'); drop averages={list(averages)!r}")
    delta, rho = resolve_budget(epsilon, delta, n, conversion, neighbouring)
    return RunGroup(float(epsilon), delta, conversion, rho, runs, dict(hyper or {}), tuple(averages), loss_iterates)


def check_relation_supported(spec: AlgorithmSpec, neighbouring: str) -> None:
    """ValueError unless the card's calibration covers the relation (its ``relations``)."""
    if check_relation(neighbouring) not in spec.relations:
        covered = sorted(name for name, other in ALGORITHMS.items() if neighbouring in other.relations)
        raise ValueError(f"algorithm={spec.name!r} is calibrated only for neighbouring="
                         f"{' or '.join(spec.relations)}, not {neighbouring!r}; pass neighbouring="
                         f"{spec.relations[0]!r} (--neighbouring {spec.relations[0]} on the command line) or use one "
                         f"of {', '.join(covered)}")


def make_contexts(dataset: str, algorithm: str, epsilon: float, delta: float, conversion: str, rho: float,
                  runs: Iterable[tuple[int, int]], loss_iterates: LossIterates | None = None,
                  neighbouring: str = BENCHMARK_RELATION, n: int | None = None,
                  averages: Sequence[str] = ()) -> list[RunContext]:
    """One context per (seed, T). Under ``add-remove`` a card that ``releases_count`` releases the row
    count ``n`` first (:func:`release_count`), so ``n`` is then required. ``averages``: further
    models each run releases from its trajectory (:attr:`~dpnewton.algorithms.base.RunContext.averages`)."""
    counts = False
    if check_relation(neighbouring) != BENCHMARK_RELATION:  # every method covers the benchmark's
        spec = get_algorithm(algorithm)
        check_relation_supported(spec, neighbouring)
        counts = spec.releases_count
    if counts and n is None:
        raise ValueError("the add-remove relation needs the row count n to release it")
    contexts = []
    for seed, T in runs:
        ident = RunIdentity(dataset, algorithm, float(epsilon), validate_seed(seed), validate_iterations(T))
        ctx = RunContext(ident, float(epsilon), float(delta), conversion, float(rho),
                         PrivacyLedger(float(rho), neighbouring=neighbouring), ident.generator(),
                         None if loss_iterates is None else loss_iterates(ident.iterations),
                         averages=tuple(averages))
        if counts:
            release_count(ctx, n)
        contexts.append(ctx)
    return contexts


def release_count(ctx: RunContext, n: int) -> None:
    """Release N = max(n + N(0, s^2), 1), s = 1/sqrt(2 rho_N), rho_N = COUNT_SHARE rho (sensitivity 1
    under add/remove; :mod:`dpnewton.privacy.neighbouring`), from the run's own stream "count"; the
    run's methods get the rest of rho (``ctx.rho``) and use N for every mean and sensitivity."""
    rho_count = count_rho(ctx.rho)
    sigma = ctx.ledger.charge(0, "count", COUNT_SENSITIVITY, rho_count)
    ctx.count = released_count(n, ctx.ledger.draw_noise("count", n, sigma, ctx.identity.generator("count")))
    ctx.rho = ctx.rho - rho_count


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
                  blas_threads: int = 1, loss_iterates: LossIterates | None = None,
                  neighbouring: str = BENCHMARK_RELATION, averages: Sequence[str] = ()) -> list[RunResult]:
    """Run ``algorithm`` for every (seed, T) in seeds x iterations; one batch, one result per run.
    ``loss_iterates(T)``: the iterates whose loss a run of T iterations records
    (:attr:`~dpnewton.algorithms.base.RunContext.loss_iterates`; default all). ``neighbouring``: the
    relation the noise is calibrated for (default the benchmark's, n public). ``averages``: further
    models every run releases from its one trajectory (:meth:`~dpnewton.algorithms.base.RunResult.released_as`;
    only for an algorithm whose configuration has ``average``)."""
    Ts = [iterations] if isinstance(iterations, (int, np.integer, bool)) else list(iterations)
    if not Ts:
        raise ValueError("iterations must not be empty")
    group = budgeted_group(algorithm, problem.n, epsilon, delta, conversion, [(s, T) for s in seeds for T in Ts],
                           hyper, neighbouring, averages, loss_iterates)
    return run_groups(problem, dataset, algorithm, [group], blas_threads, neighbouring)[0]


def run_at_rho(problem: LogisticProblem, dataset: str, algorithm: str, epsilon: float, delta: float,
               conversion: str, rho: float, runs: Iterable[tuple[int | None, int]], hyper: dict | None = None,
               blas_threads: int = 1, loss_iterates: LossIterates | None = None,
               neighbouring: str = BENCHMARK_RELATION, averages: Sequence[str] = ()) -> list[RunResult]:
    """Run ``algorithm`` once per (seed, T) of ``runs`` with a given zCDP budget ``rho`` (where
    :func:`run_algorithm` derives rho from epsilon, :func:`budgeted_group`). ``epsilon``, ``delta``
    and ``conversion`` label the runs (identity, seeding, records); only the accountant-calibrated
    methods (DP-SGD, minibatch Newton, AOP) read epsilon instead of rho. Used by
    :func:`dpnewton.tuning.private_select`, whose candidates get a rho calibrated for the whole
    selection. One :class:`RunGroup` of :func:`run_groups`."""
    group = RunGroup(epsilon, delta, conversion, rho, tuple(runs), dict(hyper or {}), tuple(averages), loss_iterates)
    return run_groups(problem, dataset, algorithm, [group], blas_threads, neighbouring)[0]


@functools.cache
def blas_controller() -> ThreadpoolController:
    """The process's BLAS and OpenMP thread pools, found once: threadpoolctl scans the loaded libraries
    whenever a controller is built (milliseconds, a sixth of a fit on 10,000 x 70 rows), and numpy's BLAS
    is loaded before any run."""
    return ThreadpoolController()


@dataclass(frozen=True)
class RunGroup:
    """Runs of one configuration at one budget inside a batch (:func:`run_groups`): the (seed, T) pairs,
    their epsilon, delta, conversion and rho, the configuration's ``hyper``, the further ``averages`` each
    run releases and the iterates whose loss it records (:func:`run_algorithm`'s arguments)."""

    epsilon: float
    delta: float
    conversion: str
    rho: float
    runs: tuple[tuple[int | None, int], ...]
    hyper: dict = field(default_factory=dict)
    averages: tuple[str, ...] = ()
    loss_iterates: LossIterates | None = None


def run_groups(problem: LogisticProblem, dataset: str, algorithm: str, groups: Sequence[RunGroup],
               blas_threads: int = 1, neighbouring: str = BENCHMARK_RELATION) -> list[list[RunResult]]:
    """Run every group's runs as one batch; one list of results per group, in its runs' order.

    Each run's context (:func:`make_contexts`) is the one it gets alone: its identity, and so its
    generator, names (dataset, algorithm, epsilon, seed, T), its ledger its group's rho. Groups of several
    configurations (``hyper``) need a ``lockstep`` card, whose runner takes one configuration per run;
    the runs then step together, each with its own configuration (:mod:`dpnewton.algorithms.base`)."""
    spec = get_algorithm(algorithm)
    hypers = [dict(g.hyper or {}) for g in groups]
    distinct = {json.dumps(h, sort_keys=True, default=str) for h in hypers}
    if len(distinct) > 1 and not spec.lockstep:
        raise ValueError(f"algorithm={algorithm!r} runs one configuration per batch (its card is not lockstep); "
                         f"got {len(distinct)}")
    contexts = [make_contexts(dataset, algorithm, g.epsilon, g.delta, g.conversion, g.rho, list(g.runs),
                              g.loss_iterates, neighbouring, problem.n, g.averages) for g in groups]
    batch = [c for group in contexts for c in group]
    hyper = hypers[0] if len(distinct) == 1 else [h for h, group in zip(hypers, contexts) for _ in group]
    with blas_controller().limit(limits=blas_threads):
        results = spec.run(problem, batch, hyper)
    for res in results:
        check_ledger(res)
    out, start = [], 0
    for group in contexts:
        out.append(results[start:start + len(group)])
        start += len(group)
    return out


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
        "delta": delta, "conversion": conversion, "rho": rho, "neighbouring": ledger.neighbouring,
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
