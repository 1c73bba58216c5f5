"""Per-update cost of lone runs, measured in one process: the runtimes of Table 1 and of Figure 1.

Why a separate stage. In the run jobs a run's recorded time is not a lone run's time: DP-GD runs
its whole T grid as one batch (one pass over Z serves every active run, and a run is charged its
share of the batched step, :func:`dpnewton.algorithms.base.iterate_batched`), and jobs share the
machine with other jobs. Both change from cell to cell, so ratios of recorded times carried up to
~2x noise and a bias against the unbatched Newton methods. The paper's Table 1 and Figure 1
compare lone runs [P section 6; docs/algorithms.md §9.1, §9.3: update steps timed, loss evaluation not].

The stage. For every dataset, each timed configuration runs alone (one seed, one T, BLAS on one
thread as in the run jobs), ``repeats`` rounds in round-robin order, the order rotated by one each
round so that no configuration always runs first. In a round each configuration makes a run of
one update and then a run of ``steps`` updates, with ``steps`` chosen from untimed warm-up runs so
that its updates after the first last about ``seconds_per_run`` (:func:`warm_up_steps`). Times are
the library's own update timer. The first update of a run can cost more than the others (set-up, a
cold cache after other work: up to ~1 ms more in the claims run's timing, benchmarks/README.md
section 3d; precond-dp-gd's curvature release: 40x a DP-GD step on fashion-mnist), which matters
for best T of 1-10, so a run is modelled as

    runtime(T) = first + (T - 1) x cost        (runtime(0) = 0)

with ``first`` the median over rounds of the one-update run and ``cost`` the median over rounds of
(long run - one-update run) / (steps - 1). The rule claims all cores of a local run, so no other
job runs beside it.

An update's arithmetic does not depend on epsilon, the seed or the step size (only the noise scale
and the constants change), so one (first, cost) pair serves every cell of a configuration on a
dataset; the configuration's own hyper-parameters are used, because some change the cost (a
minibatch size). These are timings: they are not bit-reproducible, unlike every loss and noise draw.

The problem is the run jobs': the training split with a holdout, and the config's ``precision``
(float32 Z and products: about 1.6-2x cheaper passes, benchmarks/results/float32.md), which like the
holdout enters the spec only when it is not the default (:func:`timing_spec`).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_info

from ..experiment import last_iterate_only, run_algorithm
from ..io import atomic_write_csv, read_csv
from ..problems import load_problem_from_prepared

log = logging.getLogger("dpnewton.pipeline")

RAW_COLUMNS = ["dataset", "algorithm", "base_algorithm", "round", "position", "steps", "update_s",
               "first_update_s", "s_per_update"]
COST_COLUMNS = ["dataset", "algorithm", "base_algorithm", "steps", "rounds", "first_update_s", "s_per_update",
                "s_per_update_min", "s_per_update_max", "spread"]
WARMUP_STEPS = 2
MAX_STEPS = 100_000
#: the seed index of every timed run (the numbers it computes are not used)
TIMING_SEED = 0


def configurations_to_time(algorithms: dict[str, dict], anchors) -> list[str]:
    """Every configured algorithm whose base algorithm is the base of one of ``anchors``.

    ``algorithms`` maps configuration names to ``{'base': ..., 'hyper': ...}`` (the expanded
    config); ``anchors`` are the configurations Table 1 and the runtime figure name. Tuned variants
    of an anchor (another step size, gradient share, ...) are timed too: they can be a cell's choice.
    """
    bases = {algorithms[a]["base"] for a in anchors if a in algorithms}
    return [name for name, entry in algorithms.items() if entry["base"] in bases]


def steps_for(seconds_per_update: float, seconds_per_run: float) -> int:
    """Updates per timed run: about ``seconds_per_run`` of updates, at least 2, at most MAX_STEPS."""
    if not math.isfinite(seconds_per_update) or seconds_per_update <= 0:
        return MAX_STEPS
    return int(min(MAX_STEPS, max(WARMUP_STEPS, round(seconds_per_run / seconds_per_update))))


def warm_up_steps(run, seconds_per_run: float) -> int:
    """Updates per timed run of one configuration, from untimed warm-up runs: ``run(k)`` = seconds of
    a run of k updates. The first update can cost far more than the others (precond-dp-gd releases and
    factors its curvature bound in it), so the cost of the others is measured apart from it: a run of
    one update, then runs of k = WARMUP_STEPS, 2 WARMUP_STEPS, ... updates until their k - 1 further
    updates take a quarter of ``seconds_per_run`` (or k = MAX_STEPS), and
    :func:`steps_for` of (run(k) - run(1)) / (k - 1)."""
    first, k = run(1), WARMUP_STEPS
    while True:
        extra = run(k) - first
        if extra >= seconds_per_run / 4 or k >= MAX_STEPS:
            return steps_for(extra / (k - 1), seconds_per_run)
        k = min(2 * k, MAX_STEPS)


def rotated(names: list[str], k: int) -> list[str]:
    """``names`` rotated left by k: the round-robin order of round k."""
    if not names:
        return []
    k %= len(names)
    return names[k:] + names[:k]


def measure_update_costs(problem, dataset: str, configurations: dict[str, dict], repeats: int,
                         seconds_per_run: float, epsilon: float, conversion: str,
                         delta: float | None = None) -> pd.DataFrame:
    """Raw timings (RAW_COLUMNS): ``repeats`` rounds x every configuration, lone runs, round-robin.

    ``configurations`` maps names to ``{'base': registered algorithm, 'hyper': dict}``. Per round
    and configuration: ``first_update_s`` (a run of one update), ``update_s`` (a run of ``steps``
    updates) and ``s_per_update`` = (update_s - first_update_s) / (steps - 1).
    """
    if repeats < 1:
        raise ValueError(f"timing repeats={repeats!r} must be >= 1")

    def one_run(name: str, steps: int) -> float:
        entry = configurations[name]
        res = run_algorithm(problem, dataset, entry["base"], epsilon, [TIMING_SEED], steps, delta=delta,
                            conversion=conversion, hyper=dict(entry["hyper"]), loss_iterates=last_iterate_only)[0]
        return res.runtime_s

    names = list(configurations)
    steps = {}
    for name in names:
        steps[name] = warm_up_steps(lambda k, name=name: one_run(name, k), seconds_per_run)
        log.info("timing %s/%s: warm-up -> %d updates per timed run", dataset, name, steps[name])
    rows = []
    for k in range(repeats):
        for position, name in enumerate(rotated(names, k)):
            first = one_run(name, 1)
            took = one_run(name, steps[name])
            rows.append({"dataset": dataset, "algorithm": name, "base_algorithm": configurations[name]["base"],
                         "round": k, "position": position, "steps": steps[name], "update_s": took,
                         "first_update_s": first, "s_per_update": (took - first) / (steps[name] - 1)})
        log.info("timing %s: round %d/%d done", dataset, k + 1, repeats)
    return pd.DataFrame(rows, columns=RAW_COLUMNS)


def summarize_costs(raw: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, configuration): median first-update time and per-update cost over rounds, the
    cost's range and relative spread."""
    if raw.empty:
        return pd.DataFrame(columns=COST_COLUMNS)
    out = raw.groupby(["dataset", "algorithm", "base_algorithm"], sort=True).agg(
        steps=("steps", "max"), rounds=("round", "nunique"), first_update_s=("first_update_s", "median"),
        s_per_update=("s_per_update", "median"),
        s_per_update_min=("s_per_update", "min"), s_per_update_max=("s_per_update", "max")).reset_index()
    out["spread"] = (out["s_per_update_max"] - out["s_per_update_min"]) / out["s_per_update"]
    return out[COST_COLUMNS]


def cost_lookup(costs: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """{(dataset, configuration): (seconds of the first update, seconds per further update)}."""
    return {(r.dataset, r.algorithm): (float(r.first_update_s), float(r.s_per_update)) for r in costs.itertuples()}


def lone_runtime(costs: dict[tuple[str, str], tuple[float, float]], dataset: str, algorithm: str,
                 iterations) -> float:
    """runtime(T) = first + (T - 1) x cost, runtime(0) = 0: a lone run of T updates (NaN if the
    configuration was not timed)."""
    c = costs.get((dataset, algorithm))
    if c is None or iterations is None or pd.isna(iterations):
        return float("nan")
    first, per_update = c
    return 0.0 if iterations <= 0 else first + (float(iterations) - 1.0) * per_update


def timing_spec(cfg: dict, dataset: str, configurations: dict[str, dict], holdout: float | None = None) -> dict:
    """The timing rule's spec for one dataset of a filled config: ``configurations`` (name ->
    ``{'base', 'hyper'}``), the ``timing`` settings, the primary conversion and delta; ``holdout`` (the
    plan's fraction) and ``precision`` only when they are not the default (off, float64), so that the
    spec of a config without them stays as it was."""
    spec = {
        "dataset": dataset,
        "configurations": configurations,
        "repeats": cfg["timing"]["repeats"],
        "seconds_per_run": cfg["timing"]["seconds_per_run"],
        "epsilon": cfg["timing"]["epsilon"],
        "conversion": cfg["conversion"],
        "delta": cfg["delta"],
    }
    if holdout is not None:
        spec["holdout"] = holdout
    precision = cfg.get("precision", "float64")      # no schema default (absent = float64), as in plan.expand
    if precision != "float64":
        spec["precision"] = precision
    return spec


def timing_problem(prepared: str | Path, spec: dict):
    """The problem the timing rule times on: the run jobs' (the training split when ``spec`` has a
    ``holdout``, Z in ``spec['precision']``, default float64)."""
    return load_problem_from_prepared(Path(prepared), holdout=spec.get("holdout"),
                                      precision=spec.get("precision", "float64"))


def run_timing(prepared: str | Path, spec: dict, out_csv: str | Path) -> pd.DataFrame:
    """Entry point of the timing rule: time ``spec['configurations']`` on one prepared dataset
    (:func:`timing_problem`: the run jobs' problem). Returns the raw rows as written (with their
    ``file_rows`` column)."""
    problem = timing_problem(prepared, spec)
    blas = sorted({f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info()})
    log.info("timing on %s (n=%d, d=%d, %s): %s, %d rounds, ~%.2g s per timed run, epsilon %g (%s); BLAS %s",
             spec["dataset"], problem.n, problem.d, problem.precision, ", ".join(spec["configurations"]),
             spec["repeats"], spec["seconds_per_run"], spec["epsilon"], spec["conversion"], "; ".join(blas))
    raw = measure_update_costs(problem, spec["dataset"], spec["configurations"], int(spec["repeats"]),
                               float(spec["seconds_per_run"]), float(spec["epsilon"]), spec["conversion"],
                               spec["delta"])
    for r in summarize_costs(raw).itertuples():
        log.info("cost %s/%s: first update %.4g ms, then %.4g ms per update (medians of %d; range %.4g-%.4g ms, "
                 "spread %.1f%%)", r.dataset, r.algorithm, 1e3 * r.first_update_s, 1e3 * r.s_per_update, r.rounds,
                 1e3 * r.s_per_update_min, 1e3 * r.s_per_update_max, 100 * r.spread)
    return atomic_write_csv(out_csv, raw)  # with its row count (dpnewton.io.check_csv)


#: the fix of a damaged timing file
TIMING_FIX = ("delete it and run `snakemake {path}` (the target before your other options): rule time_updates "
              "recomputes it")


def load_costs(paths) -> pd.DataFrame:
    """Per-update costs (COST_COLUMNS) from the timing rule's raw CSV files, each verified first
    (:func:`dpnewton.io.check_csv`: complete, its row count, at least one row; a damaged file raises
    :class:`dpnewton.io.DamagedFileError` naming it and the fix)."""
    frames = [read_csv(p, min_rows=1, fix=TIMING_FIX, dtype={"dataset": str, "algorithm": str, "base_algorithm": str})
              for p in paths]
    frames = [f for f in frames if len(f)]
    return summarize_costs(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RAW_COLUMNS))


def runtime_column(frame: pd.DataFrame, costs: dict[tuple[str, str], float], iterations: str = "best_T") -> np.ndarray:
    """Lone-run runtime of every row of ``frame`` (dataset, algorithm, ``iterations`` columns)."""
    return np.array([lone_runtime(costs, d, a, t) for d, a, t in
                     zip(frame["dataset"], frame["algorithm"], frame[iterations])], dtype=float)
