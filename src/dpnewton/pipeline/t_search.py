"""The T search of a run job: each member's T grid, extended while its best mean-over-seeds T is at an
edge of the grid (:class:`TSearch`, :func:`next_extension`), capped by the dataset's pass budget
(:func:`pass_capped`); the optional probe of a proposed T by the first seed (:func:`probe_passes`).
Non-private, like the whole best-T selection (the paper's protocol)."""

from __future__ import annotations

import json
import logging
import math

import pandas as pd

from ..experiment import MAX_ITERATIONS
from .frontier import pass_equivalents
from .jobspec import Member
from .selection import best_t, mean_per_t

#: the per-run lines of a job (:func:`dpnewton.pipeline.jobs.setup_log`)
run_log = logging.getLogger("dpnewton.pipeline.runs")


class TSearch:
    """One member configuration's T grid in a job: the declared grid, extended while its best
    mean-over-seeds T is at an edge (:func:`next_extension`, the extension rule ``ext``).

    With ``probe_first_seed`` in the rule, the job's first seed runs a proposed T alone first: if its
    released excess loss there is above every seed's at the current best T (:func:`probe_passes`), the
    search stops without the other seeds running it (the probe's run is logged, not a row;
    ``probe_rejected_T`` records it).
    Non-private, like the whole best-T selection. ``name`` is the member's configuration, ``path`` the
    trajectory whose runs release its model (:func:`~.plan.trajectories`; the job's runs are keyed
    (trajectory, seed, T))."""

    def __init__(self, member: Member, ext: dict | None):
        self.name, self.average, self.hyper, self.ext = member.algorithm, member.average, member.hyper, ext
        self.path = member.trajectory
        self.grid = [int(t) for t in member.iterations]
        self.joined = {t: 0 for t in self.grid}
        self.probe = bool(ext and ext.get("probe_first_seed"))
        self.rejected = 0
        self.done = False

    def rows(self, runs: dict, seeds: list[int]) -> list[dict]:
        """The member's released-model rows of every (seed, T) of its grid so far."""
        return [released_row(runs[(self.path, s, T)]["row"], self.average) for s in seeds for T in self.grid]

    def next_T(self, runs: dict, seeds: list[int]) -> int | None:
        if self.done:
            return None
        new = next_extension(self.rows(runs, seeds), self.grid, self.ext)
        self.done = not new
        return new[0] if new else None

    def extend(self, T: int, grid_round: int, runs: dict, seeds: list[int]) -> None:
        """Accept T into the grid, unless the first seed's probe says it is already worse (then stop)."""
        if self.probe and len(seeds) > 1:
            best, _ = best_mean_t(self.rows(runs, seeds))
            at_best = [released_row(runs[(self.path, s, best)]["row"], self.average)["excess_loss"] for s in seeds]
            at_new = released_row(runs[(self.path, seeds[0], T)]["row"], self.average)["excess_loss"]
            if not probe_passes(at_new, at_best):
                run_log.info("%s: seed %d at T=%d (%.6g) is above every seed's loss at the best T=%d (at most %.6g): "
                         "the T search stops there", self.name, seeds[0], T, at_new, best, max(at_best))
                self.rejected, self.done = T, True
                return
        self.grid.append(T)
        self.joined[T] = grid_round

    def outputs(self, runs: dict, seeds: list[int]) -> tuple[list[dict], list, list]:
        """The member's rows, curves and ledger frames, labelled with its configuration name."""
        rows, curves, ledgers = [], [], []
        extended = any(self.joined.values())
        for s in seeds:
            for T in self.grid:
                run = runs[(self.path, s, T)]
                row = released_row(run["row"], self.average)
                row.update({"algorithm": self.name, "hyper": json.dumps(self.hyper, sort_keys=True, default=str),
                            "grid_round": self.joined[T], "grid_extended": extended,
                            "probe_rejected_T": self.rejected})
                rows.append(row)
                if run["curve"] is not None:
                    curves.append(run["curve"].assign(algorithm=self.name))
                if run["ledger"] is not None:
                    ledgers.append(run["ledger"].astype({"algorithm": "object"}).assign(algorithm=self.name))
        return rows, curves, ledgers


def probe_passes(at_new: float, at_best: list[float]) -> bool:
    """The first seed's run at a proposed T lets the other seeds run it unless its excess loss there is
    above every seed's at the current best T (``at_best``; a non-finite probe never passes). Replayed
    on a full claims run's recorded losses (benchmarks/results/t_search_replay.md) against two stricter
    tests (its own loss at the best T, the mean there), it keeps the best T of the most cells."""
    return bool(at_new <= max(at_best))


def released_row(row: dict, average: str) -> dict:
    """A run's row for the model it released with ``average`` (one trajectory, several released
    models: the unit's rows keep each one's excess loss, accuracy and held-out metrics in ``released``)."""
    out = {k: v for k, v in row.items() if k != "released"}
    out.update(row["released"][average])
    return out


def best_mean_t(rows: list[dict]) -> tuple[int | None, list[int]]:
    """(best T of the rows so far, sorted grid): :func:`dpnewton.pipeline.selection.best_t`, the
    argmin over T of the mean excess loss over seeds; non-finite means never win."""
    means = mean_per_t(pd.DataFrame(rows)[["iterations", "excess_loss"]].astype(float))
    return best_t(means), [int(t) for t in means.index]


def pass_capped(ext: dict | None, algorithm: str, n: int, d: int, hyper: dict | None = None) -> dict | None:
    """The extension rule with its ``max_passes`` (the dataset's cap in pass-equivalents per run) turned
    into iterations: ``max_iterations`` becomes the smaller of itself and the largest T with
    first + (T - 1) x per <= max_passes (:func:`.frontier.pass_equivalents`; at least 1). Unchanged
    without a pass cap, or for an algorithm without a pass count (one-shot methods)."""
    if not ext or "max_passes" not in ext:
        return ext
    first, per = pass_equivalents(algorithm, n, d, hyper)
    if not (math.isfinite(first) and math.isfinite(per) and per > 0):
        return ext
    by_passes = max(1, int(math.floor((ext["max_passes"] - first) / per)) + 1)
    return {**ext, "max_iterations": min(int(ext["max_iterations"]), by_passes)}


def next_extension(rows: list[dict], grid: list[int], ext: dict | None) -> list[int]:
    """New T values to run when the best mean-over-seeds T is at an edge of the grid so far.

    Upwards: the largest T x ``factor`` while that stays <= ``max_iterations`` and the runs' public cap
    :data:`dpnewton.experiment.MAX_ITERATIONS`. Downwards: the
    smallest T // ``factor`` (at least 1) while the smallest T is above 1, so that a best T at the
    bottom of a grid such as DP-GD's {10, 30, ...} is made interior or reaches T = 1, the smallest
    admissible T. [] when there is nothing to extend (interior best T, all means non-finite, the cap
    or T = 1 reached).
    """
    if not ext or len(grid) < 2:
        return []
    best, seen = best_mean_t(rows)
    if best is None:
        return []
    factor = int(ext["factor"])
    if best == max(seen):
        nxt = int(best * factor)
        return [nxt] if nxt <= min(int(ext["max_iterations"]), MAX_ITERATIONS) and nxt not in seen else []
    if best == min(seen) and best > 1:
        nxt = max(1, best // factor)
        return [nxt] if nxt not in seen else []
    return []
