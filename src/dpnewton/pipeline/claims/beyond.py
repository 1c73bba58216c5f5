"""Beyond the paper: per cell, the best private method beside the Gaussian ridge floor, and the best
second-order method of the paper and of this project against it (not a claim of the paper; read from
the best-T table).

Per (dataset, epsilon) at one conversion, over every declared configuration at its best T
(non-private selection, as everywhere in the oracle-tuned track), leaving out the configurations with
a non-private step (the cards' role "non-private step", and the explosion reset):

* the best method, its mean excess loss and last-iterate DP-GD's ratio to it;
* beside them the Gaussian ridge floor F* and the excess loss of F*'s own mechanism (one Gaussian
  release of the whole budget, then ridge) on the true logistic loss (:mod:`dpnewton.floor`; the
  floor table's ``mechanism_excess_loss``, when the best-T rows carry it). F* illustrates what a local
  quadratic model at w* predicts at this budget: it is **not a target and not a lower bound**, and its
  own mechanism on the true loss lies well above it;
* averaged DP-GD (the best configuration with ``average`` != none) and, for each side of
  :data:`WHOSE` (the paper's second-order methods, cards with ``paper``, and this project's), the best
  second-order configuration of that side (:data:`dpnewton.pipeline.frontier.SECOND_ORDER`, with or
  without averaging): whether it matches the best loss within one combined standard error, and its
  iterations, runtime and pass ratios against averaged DP-GD at their best T.

Target (:data:`TARGETS`), counted per side: a second-order method within one s.e. of the best with at
least ``iterations_ratio`` x fewer iterations and ``runtime_ratio`` x less runtime than averaged DP-GD
in at least ``cells_share`` of the cells. A measurement to report, not a verdict threshold of the paper.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..frontier import SECOND_ORDER, hyper_dict, role, run_passes
from ..timing import lone_runtime
from .cells import base_of, is_averaged, is_paper_method, is_reset

TARGETS = {"iterations_ratio": 5.0, "runtime_ratio": 3.0, "cells_share": 0.75}
#: whose second-order methods are counted apart: the paper's (cards with ``paper``) and this project's
WHOSE = ("paper", "project")
#: the per-side columns, each prefixed ``<side>_``
SIDE_FIELDS = ["second_order", "second_order_T", "second_order_excess", "second_order_se", "over_best",
               "within_se", "iterations_ratio", "runtime_ratio", "passes_ratio", "speed_target_met"]
COLUMNS = (["dataset", "epsilon", "best", "best_T", "best_edge", "best_excess", "best_se", "ridge_floor",
            "mechanism_excess_loss", "best_over_floor", "mechanism_over_floor", "dp_gd", "dp_gd_excess",
            "dp_gd_over_best", "averaged", "averaged_T", "averaged_edge", "averaged_excess"]
           + [f"{side}_{f}" for side in WHOSE for f in SIDE_FIELDS])


def with_floor_mechanism(best: pd.DataFrame, floor: pd.DataFrame) -> pd.DataFrame:
    """``best`` with the floor table's ``mechanism_excess_loss`` (F*'s mechanism on the true loss,
    :mod:`dpnewton.floor`) of each row's (dataset, conversion, epsilon); NaN where the table has none."""
    key = ["dataset", "conversion", "epsilon"]
    if "mechanism_excess_loss" not in floor:
        return best
    out = best.drop(columns=[c for c in ("mechanism_excess_loss",) if c in best])
    return out.merge(floor[key + ["mechanism_excess_loss"]].drop_duplicates(key), on=key, how="left")


def _argmin(rows: pd.DataFrame):
    m = rows["excess_loss_mean"].astype(float)
    m = m[np.isfinite(m)]
    return None if m.empty else rows.loc[m.idxmin()]


def _ratio(x: float, floor: float) -> float:
    return x / floor if floor > 0 and math.isfinite(x) else float("nan")


def beyond_table(best: pd.DataFrame, conversion: str, costs: dict, dims: dict, baseline: str) -> pd.DataFrame:
    """One row per (dataset, epsilon) of ``best`` (the best-T table) at ``conversion``; ``costs`` is the
    timing stage's lookup (:func:`dpnewton.pipeline.timing.cost_lookup`), ``dims`` {dataset: (n, d)}
    for the pass counts, ``baseline`` the claims' first-order baseline (its last iterate and its best
    averaged configuration are the DP-GD columns)."""
    b = best[best["conversion"] == conversion].assign(base=lambda f: base_of(f))
    b = b[~is_reset(b) & ~b["base"].map(role).eq("non-private step")]
    b = b.assign(averaged=is_averaged(b), _paper=b["base"].map(is_paper_method).astype(bool))
    rows = []
    for (ds, eps), cell in b.groupby(["dataset", "epsilon"], sort=True):
        top = _argmin(cell)
        if top is None:
            continue
        gd = _argmin(cell[(cell["base"] == baseline) & ~cell["averaged"]])
        avg = _argmin(cell[(cell["base"] == baseline) & cell["averaged"]])
        floor = float(top.get("ridge_floor", float("nan")))
        mechanism = float(top.get("mechanism_excess_loss", float("nan")))
        rec = {"dataset": ds, "epsilon": float(eps), "best": top["algorithm"], "best_T": int(top["best_T"]),
               "best_edge": str(top.get("edge", "")),
               "best_excess": float(top["excess_loss_mean"]), "best_se": float(top["excess_loss_se"]),
               "ridge_floor": floor, "mechanism_excess_loss": mechanism,
               "best_over_floor": _ratio(float(top["excess_loss_mean"]), floor),
               "mechanism_over_floor": _ratio(mechanism, floor)}
        if gd is not None:
            rec.update(dp_gd=gd["algorithm"], dp_gd_excess=float(gd["excess_loss_mean"]),
                       dp_gd_over_best=float(gd["excess_loss_mean"]) / rec["best_excess"])
        if avg is not None:
            rec.update(averaged=avg["algorithm"], averaged_T=int(avg["best_T"]), averaged_edge=str(avg.get("edge", "")),
                       averaged_excess=float(avg["excess_loss_mean"]))
        second = cell[cell["base"].isin(SECOND_ORDER)]
        for side in WHOSE:
            so = _argmin(second[second["_paper"] == (side == "paper")])
            if so is not None:
                rec.update({f"{side}_{k}": v for k, v in _second_order(so, avg, rec, costs, dims, baseline).items()})
        rows.append(rec)
    return pd.DataFrame(rows, columns=COLUMNS)


TIGHT_COLUMNS = ["dataset", "epsilon", "configurations", "protocol_best", "protocol_excess", "tight_best",
                 "tight_excess", "tight_se", "runner_up", "runner_up_excess", "changed"]


def tight_ranking(best: pd.DataFrame, protocol: str, tight: str) -> pd.DataFrame:
    """Accounting on equal terms: per (dataset, epsilon), the best configuration when every method is
    accounted under ``tight`` (the claims' tight conversion) beside the best under ``protocol``, both over
    the same configurations (those with rows under both; excluded as in :func:`beyond_table`: non-private
    steps and the explosion reset), with the runner-up of another method under ``tight`` and whether the
    winner changed. A method calibrated by its own tight (epsilon, delta) profile (objective perturbation)
    has the same rows under both: its competitors gain, it does not."""
    b = best.assign(base=lambda f: base_of(f))
    b = b[~is_reset(b) & ~b["base"].map(role).eq("non-private step")]
    both = set(b.loc[b["conversion"] == tight, "algorithm"]) & set(b.loc[b["conversion"] == protocol, "algorithm"])
    b = b[b["algorithm"].isin(both)]
    rows = []
    for (ds, eps), cell in b.groupby(["dataset", "epsilon"], sort=True):
        p, t = _argmin(cell[cell["conversion"] == protocol]), _argmin(cell[cell["conversion"] == tight])
        if p is None or t is None:
            continue
        others = cell[(cell["conversion"] == tight) & (cell["base"] != t["base"])]
        r = _argmin(others)
        rows.append({"dataset": ds, "epsilon": float(eps), "configurations": int(cell["algorithm"].nunique()),
                     "protocol_best": p["algorithm"], "protocol_excess": float(p["excess_loss_mean"]),
                     "tight_best": t["algorithm"], "tight_excess": float(t["excess_loss_mean"]),
                     "tight_se": float(t["excess_loss_se"]), "runner_up": None if r is None else r["algorithm"],
                     "runner_up_excess": float("nan") if r is None else float(r["excess_loss_mean"]),
                     "changed": p["base"] != t["base"]})
    return pd.DataFrame(rows, columns=TIGHT_COLUMNS)


def _second_order(so, avg, rec: dict, costs: dict, dims: dict, baseline: str) -> dict:
    """The per-side fields (:data:`SIDE_FIELDS`) of one cell's best second-order configuration ``so``
    against the cell's best (``rec``) and averaged DP-GD (``avg``, None if the cell has none)."""
    gap = float(so["excess_loss_mean"]) - rec["best_excess"]
    out = {"second_order": so["algorithm"], "second_order_T": int(so["best_T"]),
           "second_order_excess": float(so["excess_loss_mean"]), "second_order_se": float(so["excess_loss_se"]),
           "over_best": float(so["excess_loss_mean"]) / rec["best_excess"],
           "within_se": bool(gap <= math.hypot(float(so["excess_loss_se"]), rec["best_se"]))}
    if avg is None:
        return out
    ds = rec["dataset"]
    out["iterations_ratio"] = int(avg["best_T"]) / int(so["best_T"])
    t_avg = lone_runtime(costs, ds, avg["algorithm"], avg["best_T"])
    t_so = lone_runtime(costs, ds, so["algorithm"], so["best_T"])
    out["runtime_ratio"] = t_avg / t_so if t_so > 0 else float("nan")
    n, d = dims.get(ds, (None, None))
    if n:
        p_avg = run_passes(baseline, n, d, avg["best_T"], hyper_dict(avg["hyper"]))
        p_so = run_passes(so["base"], n, d, so["best_T"], hyper_dict(so["hyper"]))
        out["passes_ratio"] = p_avg / p_so if p_so > 0 else float("nan")
    out["speed_target_met"] = not _misses(out, True)
    return out


def speed_misses(row: dict, side: str) -> list[str]:
    """Why a cell misses the second-order target for ``side`` (one of :data:`WHOSE`): each of its
    conditions that fails (empty if met). ``row``: a row of :func:`beyond_table` as a dict."""
    fields = {f: row.get(f"{side}_{f}") for f in SIDE_FIELDS}
    if not isinstance(fields["second_order"], str):
        return ["no second-order method"]
    return _misses(fields, isinstance(row.get("averaged"), str))


def _misses(fields: dict, averaged: bool) -> list[str]:
    if not averaged:
        return ["no averaged DP-GD"]
    out = [] if fields.get("within_se") is True else [
        f"{float(fields['over_best']):.2f}x the best, beyond one s.e."]
    for key, label in (("iterations_ratio", "iterations"), ("runtime_ratio", "runtime")):
        x = fields.get(key)
        x = float("nan") if x is None else float(x)
        if not math.isfinite(x):
            out.append(f"{label} ratio n/a")
        elif x < TARGETS[key]:
            out.append(f"{label} ratio {x:.2f}x < {TARGETS[key]:g}x")
    return out


def target_counts(table: pd.DataFrame) -> dict:
    """Per side of :data:`WHOSE`: in how many cells it has a second-order method (``cells``), one within one
    s.e. of the best (``within_se``) and one that meets the target (``speed_met``); and the run's cell
    count (``cells``) and the target's cell count (``speed_needed``)."""
    out: dict = {"cells": len(table), "speed_needed": math.ceil(TARGETS["cells_share"] * len(table))}
    for side in WHOSE:
        out[side] = {"cells": int(table[f"{side}_second_order"].map(lambda x: isinstance(x, str)).sum()),
                     "within_se": int(table[f"{side}_within_se"].astype(object).eq(True).sum()),
                     "speed_met": int(table[f"{side}_speed_target_met"].astype(object).eq(True).sum())}
    return out
