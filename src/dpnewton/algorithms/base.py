"""What every optimizer shares: the run context, the result record and the iteration drivers.

An optimizer is a function ``run(problem, contexts, hyper) -> list[RunResult]`` over a batch of
independent runs (:class:`RunContext`) of one dataset and algorithm. Each run owns its Generator, its
privacy ledger (its epsilon, conversion and rho) and its starting point, so a run's noise never depends
on the other runs in its batch. A batched optimizer whose card is ``lockstep`` also takes one
configuration per run (:func:`per_run`; the driver's ``reset`` and ``average`` likewise), so runs of
several configurations and budgets step together and share every pass over Z.

Timing [docs/algorithms.md §9.3]: only the update steps are timed (``time.perf_counter``); evaluating the
loss of each iterate is not. The margins Z w_t that an update computes anyway are reused for the
loss of w_t, so evaluation costs no extra pass over Z except for the last iterate, whose margins
also give the run's training accuracy. Minibatch
updates compute no full margins; their iterates are kept and evaluated together at the end
(:meth:`LogisticProblem.losses`: matrix products instead of one matrix-vector pass per iterate).
A run evaluates only the iterates its context asks for (:attr:`RunContext.loss_iterates`; the
pipeline's curve points), w_T's always.

Iterate averaging [docs/algorithms.md §2.6] is an argument of both drivers, ``average`` in
:data:`AVERAGES`: ``"none"`` releases the last iterate w_T; otherwise the released model is the
mean of the window w_a..w_T of :func:`average_window`. It is post-processing of iterates the run
releases anyway, so the ledger (entries, rho, sensitivities, noise draws) is unchanged. One
trajectory serves every average: a context's :attr:`RunContext.averages` asks for further released
models, and :meth:`RunResult.released_as` gives the run as if it had been configured with one of
them (the same bits as a run of that configuration: the same iterates and the same running sums).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..loss import LogisticProblem
from ..privacy import PrivacyLedger
from ..seeding import RunIdentity
from .progress import Progress


RESET_NONPRIVATE = "explosion reset (uses the non-private optimum)"
"""The non-private part a ``reset=True`` configuration switches on (its ``nonprivate_parts``)."""

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
    #: the iterates of 0..T whose loss enters ``RunResult.excess_loss`` (None: all); the others are NaN
    #: and w_T's is always evaluated. The loss is post-processing, outside the timer, but not free: on
    #: adult and protein it costs about a fifth of a DP-GD step, and a full pass per iterate for the
    #: minibatch methods. The pipeline asks only for the points its curves keep.
    loss_iterates: np.ndarray | None = None
    #: the released row count N that replaces n in every mean and sensitivity (None: n is public)
    count: float | None = None
    #: further models to release from the same trajectory, by average (:data:`AVERAGES`): post-processing
    #: of the iterates, read back with :meth:`RunResult.released_as`
    averages: tuple[str, ...] = ()
    #: the runner's own per-run state (its configuration, plan, preconditioner, momentum, ...), set afresh
    #: by the runner when it starts: a batched step gets the active runs' contexts, so each run's state
    #: travels with it as runs drop out; the drivers never read it
    state: dict = field(default_factory=dict)

    @property
    def iterations(self) -> int:
        return self.identity.iterations

    @property
    def neighbouring(self) -> str:
        """The relation the run's noise is calibrated for (its ledger's)."""
        return self.ledger.neighbouring

    def rows(self, problem: LogisticProblem) -> float:
        """N: the row count the run's means and sensitivities use (the released count, else n)."""
        return problem.n if self.count is None else self.count

    def rescale(self, mean: np.ndarray, problem: LogisticProblem) -> np.ndarray:
        """A mean over the n rows as the run's mean sum / N (``mean`` itself when n is public)."""
        return mean if self.count is None else mean * (problem.n / self.count)

    def loss_mask(self) -> np.ndarray:
        """Which of the iterates 0..T get their loss evaluated (``loss_iterates``, and always T)."""
        T = self.iterations
        if self.loss_iterates is None:
            return np.ones(T + 1, dtype=bool)
        idx = np.asarray(self.loss_iterates, dtype=int).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() > T):
            raise ValueError(f"loss_iterates must lie in 0..T = 0..{T}; got {idx.min()}..{idx.max()}")
        mask = np.zeros(T + 1, dtype=bool)
        mask[idx] = True
        mask[T] = True
        return mask


@dataclass(frozen=True)
class Release:
    """One model a run releases from its trajectory: w, its excess loss and its training accuracy."""

    w: np.ndarray
    excess_loss: float
    train_accuracy: float | None


@dataclass
class RunResult:
    identity: RunIdentity
    w: np.ndarray                    # the released model: w_T, or the averaged iterate (``average``)
    excess_loss: np.ndarray          # excess loss of w_0 .. w_T (length T+1; 2 for one-shot methods;
                                     # NaN where RunContext.loss_iterates leaves an iterate out)
    elapsed: np.ndarray              # cumulative update time after k updates, seconds (same length)
    ledger: PrivacyLedger
    resets: int = 0
    diagnostics: dict = field(default_factory=dict)
    #: share of training rows with margin <z_i, w> > 0 for the released w (ties wrong:
    #: :meth:`LogisticProblem.accuracy_from_margins`); the full-batch drivers take it from the final
    #: (or averaged) margins, the registry fills it in for the others
    train_accuracy: float | None = None
    #: the averaging of the released model (:data:`AVERAGES`)
    average: str = "none"
    #: excess loss of the released averaged iterate; None when ``average == "none"``
    averaged_excess_loss: float | None = None
    #: the last iterate w_T when ``w`` is an average; None when ``w`` is w_T itself
    w_last: np.ndarray | None = None
    #: every model released from the trajectory, by average (the drivers fill it: w_T as ``"none"``, the
    #: configured ``average`` and the context's :attr:`RunContext.averages`)
    releases: dict[str, Release] = field(default_factory=dict)

    def released_as(self, average: str) -> "RunResult":
        """This run as a run configured with ``average``: the same trajectory, ledger and timing, with
        that released model as ``w`` (ValueError when the run did not release it)."""
        if average == self.average:
            return self
        if average not in self.releases:
            raise ValueError(f"run {self.identity} released no {average!r} model (it released "
                             f"{', '.join(self.releases) or 'only w'}); ask for it with RunContext.averages")
        rel = self.releases[average]
        averaged = average != "none"
        return dataclasses.replace(self, w=rel.w, train_accuracy=rel.train_accuracy, average=average,
                                   averaged_excess_loss=rel.excess_loss if averaged else None,
                                   w_last=self.last_iterate if averaged else None)

    @property
    def runtime_s(self) -> float:
        return float(self.elapsed[-1])

    @property
    def final_excess_loss(self) -> float:
        """Excess loss of the last iterate w_T (the end of the ``excess_loss`` curve)."""
        return float(self.excess_loss[-1])

    @property
    def last_iterate(self) -> np.ndarray:
        """w_T, whether or not the released ``w`` is an average."""
        return self.w if self.w_last is None else self.w_last

    @property
    def released_excess_loss(self) -> float:
        """Excess loss of the released model ``w``: the averaged iterate's, else w_T's."""
        return self.final_excess_loss if self.averaged_excess_loss is None else float(self.averaged_excess_loss)


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


AVERAGES = ("none", "uniform", "tail")


def check_average(average) -> str:
    """``average`` if it is one of :data:`AVERAGES`, else ValueError naming the allowed values."""
    if not isinstance(average, str) or average not in AVERAGES:
        raise ValueError(f"average={average!r} is unknown; choose one of {', '.join(AVERAGES)}")
    return average


def average_window(T: int, average: str) -> int | None:
    """First index a of the averaging window w_a, ..., w_T of a run of T updates (None: no averaging).

    * ``"uniform"``: a = 1, the mean of w_1..w_T (T iterates; the random start w_0 is left out);
    * ``"tail"``: a = floor(T/2) + 1, the mean of the last ceil(T/2) iterates w_{floor(T/2)+1}..w_T
      (T = 1: w_1; T = 2: w_2; T = 3: w_2, w_3; T = 4: w_3, w_4).

    The released model is (1/(T - a + 1)) sum_{s=a}^{T} w_s.
    """
    check_average(average)
    if average == "none":
        return None
    return 1 if average == "uniform" else T // 2 + 1


def released_averages(average: str, ctx: RunContext) -> tuple[str, ...]:
    """The averages a run releases: its configured ``average`` first, then the context's others."""
    wanted = (check_average(average),) + tuple(check_average(a) for a in ctx.averages)
    return tuple(dict.fromkeys(wanted))


class WindowSums:
    """Running sums of the iterates w_s, and of their margins m_s = Z w_s, over the averaging windows
    of one run of T updates (:func:`average_window`), one per average; elementwise and untimed, so
    an average has the same bits whichever other averages or runs share the trajectory."""

    def __init__(self, T: int, averages, d: int, n: int | None):
        self.T = T
        self.first = {a: average_window(T, a) for a in averages if a != "none"}
        self.w = {a: np.zeros(d) for a in self.first}
        self.m = {a: np.zeros(n) for a in self.first} if n is not None else None

    def add(self, t: int, w: np.ndarray, m: np.ndarray | None = None) -> None:
        """Add iterate w_t (and its margins) to every window that holds t."""
        for a, first in self.first.items():
            if t >= first:
                self.w[a] += w
                if self.m is not None:
                    self.m[a] += m

    def releases(self, problem: LogisticProblem) -> dict[str, "Release"]:
        """Each window's mean w_bar with l(w_bar) - loss* and its accuracy, from the mean margins."""
        out = {}
        for a, first in self.first.items():
            count = self.T - first + 1
            m_bar = self.m[a] / count
            out[a] = Release(self.w[a] / count, float(problem.loss_from_margins(m_bar)) - _loss_opt(problem),
                             float(problem.accuracy_from_margins(m_bar)))
        return out


def with_releases(res: "RunResult", releases: dict[str, "Release"], average: str) -> "RunResult":
    """``res`` (w = w_T) with its released models, the configured ``average`` as its primary one."""
    res.releases = {"none": Release(res.w, res.final_excess_loss, res.train_accuracy), **releases}
    if average == "none":
        return res
    rel = releases[average]
    res.average, res.w_last, res.w = average, res.w, rel.w
    res.averaged_excess_loss, res.train_accuracy = rel.excess_loss, rel.train_accuracy
    return res


StepFn = Callable[[np.ndarray, int], "np.ndarray | tuple[np.ndarray, np.ndarray]"]


def iterate_single(problem: LogisticProblem, ctx: RunContext, step: StepFn, reset: bool = False,
                   diagnostics: dict | None = None, full_margins: bool = True,
                   average: str = "none", start: Callable[[np.ndarray], np.ndarray] | None = None,
                   loss_of: Callable[[np.ndarray, np.ndarray], float] | None = None,
                   loss_ref: float | None = None) -> RunResult:
    """Run T updates of one run: ``w_{t+1} = step(w_t, t)``.

    * ``full_margins=True`` (full-batch updates): the step computes the margins m_t = Z w_t in its
      own fused pass and returns ``(w_{t+1}, m_t)``; they are reused, untimed, for the loss of w_t.
    * ``full_margins=False`` (minibatch updates, which touch only their batch rows): the step
      returns ``w_{t+1}``; the iterates are kept and their losses evaluated together after the
      last update (:meth:`LogisticProblem.losses`), outside the timer.
    * Only the iterates of ``ctx.loss_mask()`` get a loss (:attr:`RunContext.loss_iterates`).
    * ``average`` (:data:`AVERAGES`): with a window w_a..w_T (:func:`average_window`) the released
      ``w`` is w_bar = (1/(T-a+1)) sum_{s=a}^T w_s and ``averaged_excess_loss`` is l(w_bar) - loss*.
      Margins are linear in w, so Z w_bar is the running mean of the margins m_s the run computes
      anyway (n + d floats of running sums, untimed, no extra pass over Z; minibatch updates take
      w_bar from their kept iterates and pay one pass for its loss). This is post-processing of
      the iterates: the ledger and every iterate are those of ``average="none"``.
      ``excess_loss`` stays the curve of w_0..w_T, ``w_last`` is w_T, ``train_accuracy`` is w_bar's.
    * ``start`` maps the random unit vector to w_0 (default: w_0 is that vector); ``loss_of(m, w)``
      is the loss of w from its margins m = Z w (default l(w)) and ``loss_ref`` its reference value
      in the excess loss (default loss*): cubic Newton's regularised loss over a ball. Both only
      with ``full_margins=True`` and ``average="none"``.
    """
    T = ctx.iterations
    averages = released_averages(average, ctx)
    if (loss_of is not None or loss_ref is not None) and (averages != ("none",) or not full_margins):
        raise ValueError("loss_of and loss_ref need full_margins=True and average='none'")
    loss_of = loss_of or (lambda m, w: problem.loss_from_margins(m))
    w0 = random_unit_vector(ctx.rng, problem.d)
    if start is not None:
        w0 = start(w0)
    cutoff = reset_cutoff(problem, w0) if reset else np.inf
    if reset:
        ctx.ledger.mark_nonprivate(RESET_NONPRIVATE)
    w = w0
    wanted = ctx.loss_mask()
    losses = np.full(T + 1, np.nan)
    iterates = None if full_margins else np.empty((T + 1, problem.d))
    elapsed = np.zeros(T + 1)
    resets = 0
    total = 0.0
    sums = WindowSums(T, averages, problem.d, problem.n) if full_margins else None
    progress = Progress(ctx.identity.label(), T)
    for t in range(T):
        progress.step(t)
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
            if wanted[t]:
                losses[t] = loss_of(m, w)
            sums.add(t, w, m)
        else:
            iterates[t] = w
        elapsed[t + 1] = total
        w = w_next
    accuracy = None
    if full_margins:
        m = problem.margins(w)
        losses[T] = loss_of(m, w)
        accuracy = problem.accuracy_from_margins(m)
        sums.add(T, w, m)
        releases = sums.releases(problem)
    else:
        iterates[T] = w
        losses[wanted] = problem.losses(iterates[wanted])
        releases = {}
        for a in averages:
            if a == "none":
                continue
            first = average_window(T, a)
            w_bar = iterates[first:].sum(axis=0) / (T - first + 1)
            # minibatch updates computed no margins: one pass for l(w_bar)
            releases[a] = Release(w_bar, float(problem.loss(w_bar)) - _loss_opt(problem), None)
    diag = dict(diagnostics or {})
    diag["diverged"] = bool(not np.isfinite(w).all())
    ref = _loss_opt(problem) if loss_ref is None else loss_ref
    res = RunResult(ctx.identity, w, losses - ref, elapsed, ctx.ledger, resets, diag, train_accuracy=accuracy)
    return with_releases(res, releases, averages[0])


def per_run(value, contexts: list[RunContext]) -> list:
    """``value`` for each of ``contexts``: a list or tuple holds one value per run (a lockstep batch: one
    configuration, reset flag or average per run); anything else is every run's."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(contexts):
            raise ValueError(f"{len(value)} per-run values for {len(contexts)} runs")
        return list(value)
    return [value] * len(contexts)


BatchStepFn = Callable[[np.ndarray, np.ndarray, np.ndarray, list[RunContext], int], np.ndarray]


def iterate_batched(problem: LogisticProblem, contexts: list[RunContext], step: BatchStepFn,
                    reset: bool | list[bool] = False, average: str | list[str] = "none") -> list[RunResult]:
    """Run a batch of runs together: ``W_{t+1} = step(W_t, M_t, G_t, active_contexts, t)``.

    W has one row per active run; the margins M = Z W^T and the mean gradients G come from one
    blocked pass over Z that serves every run (:meth:`LogisticProblem.margins_and_grads`: a run's bits
    are those of the run alone while fewer than ``GEMM_MIN_RUNS`` runs are active, equal to rounding
    from that width on). Runs with smaller T drop out of the batch when done. A run's update time is
    the batch step time divided by the number of runs in the step.

    ``reset`` (the explosion reset of :func:`iterate_single`) and ``average`` are every run's, or one per
    run (:func:`per_run`). ``average`` as in :func:`iterate_single`: each run's window w_a..w_T follows its
    own T (:func:`average_window`); its running sums of w_s and of its margin column m_s (d + n floats
    per run, untimed, elementwise, so a run's average has the same bits whatever its batch) give
    the released w_bar and l(w_bar) without another pass over Z. Post-processing: the ledger and
    the iterates are those of ``average="none"``. Only the iterates of each run's
    :meth:`RunContext.loss_mask` get a loss.
    """
    S = len(contexts)
    d = problem.d
    averages = [released_averages(a, c) for a, c in zip(per_run(average, contexts), contexts)]
    resetting = per_run(reset, contexts)
    W = np.stack([random_unit_vector(c.rng, d) for c in contexts]) if S else np.zeros((0, d))
    W0 = W.copy()
    Ts = np.array([c.iterations for c in contexts], dtype=int)
    cutoffs = np.array([reset_cutoff(problem, W0[i]) if resetting[i] else np.inf for i in range(S)])
    for c, r in zip(contexts, resetting):
        if r:
            c.ledger.mark_nonprivate(RESET_NONPRIVATE)
    wanted = [c.loss_mask() for c in contexts]
    losses = [np.full(T + 1, np.nan) for T in Ts]
    elapsed = [np.zeros(T + 1) for T in Ts]
    totals = np.zeros(S)
    resets = np.zeros(S, dtype=int)
    sums = [WindowSums(int(Ts[i]), averages[i], d, problem.n) for i in range(S)]
    progress = Progress(contexts[0].identity.label() if S == 1 else f"{S} runs of {contexts[0].identity.algorithm}"
                        if S else "", int(Ts.max()) if S else 0)
    for t in range(int(Ts.max()) if S else 0):
        progress.step(t)
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
        step_share = (time.perf_counter() - start) / len(active)
        scored = [j for j, i in enumerate(active) if wanted[i][t]]
        if scored:
            # each run's terms are summed as its own row: the same bits whichever columns are scored
            for j, loss in zip(scored, problem.loss_from_margins(M[:, scored])):
                losses[active[j]][t] = loss
        for i in active:
            totals[i] += step_share
            elapsed[i][t + 1] = totals[i]
        for j, i in enumerate(active):
            sums[i].add(t, Wa[j], M[:, j])
        W[active] = W_next
    results = []
    final_margins = problem.margins(W) if S else None
    final_losses = problem.loss_from_margins(final_margins) if S else []
    accuracies = problem.accuracy_from_margins(final_margins) if S else []
    for i, c in enumerate(contexts):
        losses[i][Ts[i]] = final_losses[i]
        res = RunResult(c.identity, W[i].copy(), losses[i] - _loss_opt(problem), elapsed[i],
                        c.ledger, int(resets[i]),
                        {"diverged": bool(not np.isfinite(W[i]).all()), "batch_size": S},
                        train_accuracy=float(accuracies[i]))
        sums[i].add(int(Ts[i]), W[i], final_margins[:, i])
        results.append(with_releases(res, sums[i].releases(problem), averages[i][0]))
    return results
