"""Beyond the paper: per cell, the best private method, its distance to the Gaussian ridge floor,
and the best second-order method against it (not a claim of the paper; read from the best-T table).

Per (dataset, epsilon) at one conversion, over every declared configuration at its best T
(non-private selection, as everywhere in the oracle-tuned track), leaving out the configurations with
a non-private step (the cards' role "non-private step", and the explosion reset):

* the best method, its mean excess loss, its ratio to the Gaussian ridge floor F* (local quadratic
  model; **not a lower bound**, :mod:`dpnewton.floor`) and last-iterate DP-GD's ratio to it;
* averaged DP-GD (the best configuration with ``average`` != none) and the best second-order method
  (:data:`dpnewton.pipeline.frontier.SECOND_ORDER`, with or without averaging): whether the latter
  matches the best loss within one combined standard error, and its iterations, runtime and pass
  ratios against averaged DP-GD at their best T.

Targets (:data:`TARGETS`): the best method within ``floor_ratio`` x F* in every cell with epsilon
>= ``floor_min_epsilon``; a second-order method within one s.e. of the best with at least
``iterations_ratio`` x fewer iterations and ``runtime_ratio`` x less runtime than averaged DP-GD in
at least ``cells_share`` of the cells. They are measurements to report, not verdict thresholds of the paper.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..frontier import SECOND_ORDER, hyper_dict, role, run_passes
from ..timing import lone_runtime
from .cells import base_of, is_averaged, is_reset

TARGETS = {"floor_ratio": 1.25, "floor_min_epsilon": 0.1, "iterations_ratio": 5.0, "runtime_ratio": 3.0,
           "cells_share": 0.75}

COLUMNS = ["dataset", "epsilon", "best", "best_T", "best_edge", "best_excess", "best_se", "ridge_floor",
           "best_over_floor", "dp_gd", "dp_gd_excess", "dp_gd_over_best", "averaged", "averaged_T", "averaged_edge",
           "averaged_excess", "second_order", "second_order_T", "second_order_excess", "second_order_se",
           "second_order_over_best", "second_order_within_se", "iterations_ratio", "runtime_ratio", "passes_ratio",
           "floor_target_met", "speed_target_met"]


def _argmin(rows: pd.DataFrame):
    m = rows["excess_loss_mean"].astype(float)
    m = m[np.isfinite(m)]
    return None if m.empty else rows.loc[m.idxmin()]


def beyond_table(best: pd.DataFrame, conversion: str, costs: dict, dims: dict, baseline: str) -> pd.DataFrame:
    """One row per (dataset, epsilon) of ``best`` (the best-T table) at ``conversion``; ``costs`` is the
    timing stage's lookup (:func:`dpnewton.pipeline.timing.cost_lookup`), ``dims`` {dataset: (n, d)}
    for the pass counts, ``baseline`` the claims' first-order baseline (its last iterate and its best
    averaged configuration are the DP-GD columns)."""
    b = best[best["conversion"] == conversion].assign(base=lambda f: base_of(f))
    b = b[~is_reset(b) & ~b["base"].map(role).eq("non-private step")]
    b = b.assign(averaged=is_averaged(b))
    rows = []
    for (ds, eps), cell in b.groupby(["dataset", "epsilon"], sort=True):
        top = _argmin(cell)
        if top is None:
            continue
        gd = _argmin(cell[(cell["base"] == baseline) & ~cell["averaged"]])
        avg = _argmin(cell[(cell["base"] == baseline) & cell["averaged"]])
        so = _argmin(cell[cell["base"].isin(SECOND_ORDER)])
        floor = float(top.get("ridge_floor", float("nan")))
        rec = {"dataset": ds, "epsilon": float(eps), "best": top["algorithm"], "best_T": int(top["best_T"]),
               "best_edge": str(top.get("edge", "")),
               "best_excess": float(top["excess_loss_mean"]), "best_se": float(top["excess_loss_se"]),
               "ridge_floor": floor,
               "best_over_floor": float(top["excess_loss_mean"]) / floor if floor > 0 else float("nan")}
        rec["floor_target_met"] = bool(rec["best_over_floor"] <= TARGETS["floor_ratio"])
        if gd is not None:
            rec.update(dp_gd=gd["algorithm"], dp_gd_excess=float(gd["excess_loss_mean"]),
                       dp_gd_over_best=float(gd["excess_loss_mean"]) / rec["best_excess"])
        if avg is not None:
            rec.update(averaged=avg["algorithm"], averaged_T=int(avg["best_T"]), averaged_edge=str(avg.get("edge", "")),
                       averaged_excess=float(avg["excess_loss_mean"]))
        if so is not None:
            gap = float(so["excess_loss_mean"]) - rec["best_excess"]
            rec.update(second_order=so["algorithm"], second_order_T=int(so["best_T"]),
                       second_order_excess=float(so["excess_loss_mean"]),
                       second_order_se=float(so["excess_loss_se"]),
                       second_order_over_best=float(so["excess_loss_mean"]) / rec["best_excess"],
                       second_order_within_se=bool(gap <= math.hypot(float(so["excess_loss_se"]), rec["best_se"])))
        if so is not None and avg is not None:
            rec["iterations_ratio"] = int(avg["best_T"]) / int(so["best_T"])
            t_avg = lone_runtime(costs, ds, avg["algorithm"], avg["best_T"])
            t_so = lone_runtime(costs, ds, so["algorithm"], so["best_T"])
            rec["runtime_ratio"] = t_avg / t_so if t_so > 0 else float("nan")
            n, d = dims.get(ds, (None, None))
            if n:
                p_avg = run_passes(baseline, n, d, avg["best_T"], hyper_dict(avg["hyper"]))
                p_so = run_passes(so["base"], n, d, so["best_T"], hyper_dict(so["hyper"]))
                rec["passes_ratio"] = p_avg / p_so if p_so > 0 else float("nan")
            rec["speed_target_met"] = not speed_misses(rec)
        rows.append(rec)
    return pd.DataFrame(rows, columns=COLUMNS)


def speed_misses(row: dict) -> list[str]:
    """Why a cell misses the second-order target: each of its conditions that fails (empty if met).
    ``row``: a row of :func:`beyond_table` as a dict."""
    if not isinstance(row.get("second_order"), str):
        return ["no second-order method"]
    if not isinstance(row.get("averaged"), str):
        return ["no averaged DP-GD"]
    out = [] if row.get("second_order_within_se") is True else [
        f"{float(row['second_order_over_best']):.2f}x the best, beyond one s.e."]
    for key, label in (("iterations_ratio", "iterations"), ("runtime_ratio", "runtime")):
        x = float(row.get(key, float("nan")))
        if not math.isfinite(x):
            out.append(f"{label} ratio n/a")
        elif x < TARGETS[key]:
            out.append(f"{label} ratio {x:.2f}x < {TARGETS[key]:g}x")
    return out


def target_counts(table: pd.DataFrame) -> dict:
    """How many cells meet each target, and of how many."""
    floor_cells = table[table["epsilon"] >= TARGETS["floor_min_epsilon"]]
    speed = table["speed_target_met"].astype(object).eq(True)
    return {"floor_met": int(floor_cells["floor_target_met"].astype(object).eq(True).sum()),
            "floor_cells": len(floor_cells),
            "within_se": int(table["second_order_within_se"].astype(object).eq(True).sum()),
            "speed_met": int(speed.sum()), "cells": len(table),
            "speed_needed": math.ceil(TARGETS["cells_share"] * len(table))}
