"""What every optimizer shares: the run context, the result record and the iteration drivers.

An optimizer is a function ``run(problem, contexts, hyper) -> list[RunResult]`` over a batch of
independent runs (:class:`RunContext`) that share (dataset, algorithm, epsilon). Each run owns its
Generator, its privacy ledger and its starting point, so a run's numbers never depend on the other
runs in its batch.

Timing [docs/algorithms.md §9.3]: only the update steps are timed (``time.perf_counter``); evaluating the
loss of each iterate is not. The margins Z w_t that an update computes anyway are reused for the
loss of w_t, so evaluation costs no extra pass over Z except for the last iterate, whose margins
also give the run's training accuracy. Minibatch
updates compute no full margins; their iterates are kept and evaluated together at the end
(:meth:`LogisticProblem.losses`: matrix products instead of one matrix-vector pass per iterate).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..loss import LogisticProblem
from ..privacy import PrivacyLedger
from ..seeding import RunIdentity


@dataclass
class RunContext:
    """One run: its identity, privacy budget and randomness."""

    identity: RunIdentity
    epsilon: float
    delta: float
    conversion: str
    rho: float
    ledger: PrivacyLedger
    rng: np.random.Generator

    @property
    def iterations(self) -> int:
        return self.identity.iterations


@dataclass
class RunResult:
    identity: RunIdentity
    w: np.ndarray
    excess_loss: np.ndarray          # excess loss of w_0 .. w_T (length T+1; 2 for one-shot methods)
    elapsed: np.ndarray              # cumulative update time after k updates, seconds (same length)
    ledger: PrivacyLedger
    resets: int = 0
    diagnostics: dict = field(default_factory=dict)
    #: share of training rows with margin <z_i, w_T> > 0 (ties wrong: :meth:`LogisticProblem.accuracy_from_margins`);
    #: the full-batch drivers take it from the final margins, the registry fills it in for the others
    train_accuracy: float | None = None

    @property
    def runtime_s(self) -> float:
        return float(self.elapsed[-1])

    @property
    def final_excess_loss(self) -> float:
        return float(self.excess_loss[-1])


def random_unit_vector(rng: np.random.Generator, d: int) -> np.ndarray:
    """w0 = u/||u||, u ~ N(0, I_d): the official code's initialisation (docs/algorithms.md §2.5)."""
    u = rng.standard_normal(d)
    return u / np.linalg.norm(u)


def reset_cutoff(problem: LogisticProblem, w0: np.ndarray) -> float:
    """The official "Stop Things Exploding" radius 100||w*|| + 100||w0|| + 100 (docs/algorithms.md §2.5).

    It uses the non-private optimum, so it is data-dependent and not accounted: off by default.
    """
    if problem.w_opt is None:
        raise ValueError("the explosion reset needs the optimum attached to the problem")
    return 100.0 * float(np.linalg.norm(problem.w_opt)) + 100.0 * float(np.linalg.norm(w0)) + 100.0


def _loss_opt(problem: LogisticProblem) -> float:
    """loss* for excess losses; NaN when no optimum is attached (then excess losses are NaN)."""
    return np.nan if problem.loss_opt is None else problem.loss_opt


StepFn = Callable[[np.ndarray, int], "np.ndarray | tuple[np.ndarray, np.ndarray]"]


def iterate_single(problem: LogisticProblem, ctx: RunContext, step: StepFn, reset: bool = False,
                   diagnostics: dict | None = None, full_margins: bool = True) -> RunResult:
    """Run T updates of one run: ``w_{t+1} = step(w_t, t)``.

    * ``full_margins=True`` (full-batch updates): the step computes the margins m_t = Z w_t in its
      own fused pass and returns ``(w_{t+1}, m_t)``; they are reused, untimed, for the loss of w_t.
    * ``full_margins=False`` (minibatch updates, which touch only their batch rows): the step
      returns ``w_{t+1}``; the iterates are kept and their losses evaluated together after the
      last update (:meth:`LogisticProblem.losses`), outside the timer.
    """
    T = ctx.iterations
    w0 = random_unit_vector(ctx.rng, problem.d)
    cutoff = reset_cutoff(problem, w0) if reset else np.inf
    if reset:
        ctx.ledger.mark_nonprivate("explosion reset (uses the non-private optimum)")
    w = w0
    losses = np.empty(T + 1)
    iterates = None if full_margins else np.empty((T + 1, problem.d))
    elapsed = np.zeros(T + 1)
    resets = 0
    total = 0.0
    for t in range(T):
        start = time.perf_counter()
        if full_margins:
            w_next, m = step(w, t)
        else:
            w_next = step(w, t)
        if np.linalg.norm(w_next) > cutoff:
            w_next = w0.copy()
            resets += 1
        total += time.perf_counter() - start
        if full_margins:
            losses[t] = problem.loss_from_margins(m)
        else:
            iterates[t] = w
        elapsed[t + 1] = total
        w = w_next
    accuracy = None
    if full_margins:
        m = problem.margins(w)
        losses[T] = problem.loss_from_margins(m)
        accuracy = problem.accuracy_from_margins(m)
    else:
        iterates[T] = w
        losses = problem.losses(iterates)
    diag = dict(diagnostics or {})
    diag["diverged"] = bool(not np.isfinite(w).all())
    return RunResult(ctx.identity, w, losses - _loss_opt(problem), elapsed, ctx.ledger, resets, diag,
                     train_accuracy=accuracy)


BatchStepFn = Callable[[np.ndarray, np.ndarray, np.ndarray, list[RunContext], int], np.ndarray]


def iterate_batched(problem: LogisticProblem, contexts: list[RunContext], step: BatchStepFn,
                    reset: bool = False) -> list[RunResult]:
    """Run a batch of runs together: ``W_{t+1} = step(W_t, M_t, G_t, active_contexts, t)``.

    W has one row per active run; the margins M = Z W^T and the mean gradients G come from one
    blocked pass over Z that serves every run (:meth:`LogisticProblem.margins_and_grads`). Runs with smaller T drop out of the batch when done. A run's
    update time is the batch step time divided by the number of runs in the step.
    """
    S = len(contexts)
    d = problem.d
    W = np.stack([random_unit_vector(c.rng, d) for c in contexts]) if S else np.zeros((0, d))
    W0 = W.copy()
    Ts = np.array([c.iterations for c in contexts], dtype=int)
    cutoffs = np.array([reset_cutoff(problem, W0[i]) if reset else np.inf for i in range(S)])
    if reset:
        for c in contexts:
            c.ledger.mark_nonprivate("explosion reset (uses the non-private optimum)")
    losses = [np.empty(T + 1) for T in Ts]
    elapsed = [np.zeros(T + 1) for T in Ts]
    totals = np.zeros(S)
    resets = np.zeros(S, dtype=int)
    for t in range(int(Ts.max()) if S else 0):
        active = np.flatnonzero(Ts > t)
        start = time.perf_counter()
        Wa = W[active]
        M, G = problem.margins_and_grads(Wa)
        W_next = step(Wa, M, G, [contexts[i] for i in active], t)
        norms = np.linalg.norm(W_next, axis=1)
        blown = norms > cutoffs[active]
        if blown.any():
            W_next[blown] = W0[active[blown]]
            resets[active[blown]] += 1
        per_run = (time.perf_counter() - start) / len(active)
        step_losses = problem.loss_from_margins(M)
        for j, i in enumerate(active):
            totals[i] += per_run
            losses[i][t] = step_losses[j]
            elapsed[i][t + 1] = totals[i]
        W[active] = W_next
    results = []
    final_margins = problem.margins(W) if S else None
    final_losses = problem.loss_from_margins(final_margins) if S else []
    accuracies = problem.accuracy_from_margins(final_margins) if S else []
    for i, c in enumerate(contexts):
        losses[i][Ts[i]] = final_losses[i]
        results.append(RunResult(c.identity, W[i].copy(), losses[i] - _loss_opt(problem), elapsed[i],
                                 c.ledger, int(resets[i]),
                                 {"diverged": bool(not np.isfinite(W[i]).all()), "batch_size": S},
                                 train_accuracy=float(accuracies[i])))
    return results
