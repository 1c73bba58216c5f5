"""The report's side tables: split-seed robustness, divergence, configurations tried, code versions."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...algorithms import ALGORITHMS
from ..selection import best_t, mean_per_t
from .cells import GROUP, base_of, is_reset

CODE_COLUMNS = ["git_revision", "package_version", "numpy_version"]


def split_seed_selection(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell: best T chosen on the first half of the seeds, its mean on the second half.

    Columns: GROUP, select_seeds, report_seeds, best_T_select, heldout_mean, best_T_all, all_mean.
    """
    seeds = sorted(runs["seed"].unique())
    if len(seeds) < 2:
        return pd.DataFrame(columns=GROUP + ["best_T_select", "heldout_mean", "best_T_all", "all_mean"])
    half = len(seeds) // 2
    sel, rep = set(seeds[:half]), set(seeds[half:])
    rows = []
    for key, g in runs.groupby(GROUP, sort=True):
        means_sel = mean_per_t(g[g["seed"].isin(sel)])
        means_rep = mean_per_t(g[g["seed"].isin(rep)])
        means_all = mean_per_t(g)
        t_sel, t_all = best_t(means_sel), best_t(means_all)
        rows.append({**dict(zip(GROUP, key)), "select_seeds": " ".join(map(str, sorted(sel))),
                     "report_seeds": " ".join(map(str, sorted(rep))),
                     "best_T_select": t_sel, "heldout_mean": means_rep.get(t_sel, np.nan) if t_sel else np.nan,
                     "best_T_all": t_all, "all_mean": means_all.get(t_all, np.nan) if t_all else np.nan})
    out = pd.DataFrame(rows)
    out["same_T"] = out["best_T_select"] == out["best_T_all"]
    return out


def heldout_cells(robust: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """best-T-like frame whose excess_loss_mean is the held-out mean (selection on the other half)."""
    return best.drop(columns=["excess_loss_mean"]).merge(
        robust[GROUP + ["heldout_mean"]].rename(columns={"heldout_mean": "excess_loss_mean"}), on=GROUP, how="left")


def divergence_table(runs: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, algorithm, conversion, epsilon): fraction of runs (all T) that diverged
    (non-finite) or ended worse than the trivial output w = 0; fraction of runs with >= 1 reset and
    fraction of iterations that reset."""
    triv = dict(zip(baseline["dataset"], baseline["trivial_excess_loss"]))
    r = runs.copy()
    ex = r["excess_loss"].astype(float)
    r["_nonfinite"] = ~np.isfinite(ex) | r["diverged"].astype(str).str.lower().eq("true")
    r["_worse"] = r["_nonfinite"] | (ex >= r["dataset"].map(triv).astype(float))
    r["_reset_run"] = r["resets"].astype(float) > 0
    out = r.groupby(GROUP, sort=True).agg(
        n_runs=("seed", "size"), diverged_fraction=("_nonfinite", "mean"),
        worse_than_trivial_fraction=("_worse", "mean"), runs_with_reset_fraction=("_reset_run", "mean"),
        resets=("resets", "sum"), iterations=("iterations", "sum")).reset_index()
    out["reset_iteration_fraction"] = out["resets"] / out["iterations"].clip(lower=1)
    return out


def configurations(summary: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """Per registered algorithm: configurations (entries), mean T values per cell, configurations tried."""
    s = summary.copy()
    s["base"] = base_of(s)
    s = s[~is_reset(s)] if "hyper" in s else s
    per_cell = s.groupby(["base", "dataset", "conversion", "epsilon"]).agg(
        variants=("algorithm", "nunique"), tried=("iterations", "size")).reset_index()
    b = best.copy()
    b["base"] = base_of(b)
    b = b[~is_reset(b)] if "hyper" in b else b
    b["_ext"] = b["grid_extended"].astype(bool) if "grid_extended" in b else False
    b["_edge"] = b["at_edge"].astype(bool)
    cc = b.groupby("base").agg(config_cells=("algorithm", "size"), ext=("_ext", "sum"), edge=("_edge", "sum"))
    out = per_cell.groupby("base").agg(max_variants=("variants", "max"), mean_tried_per_cell=("tried", "mean"),
                                       max_tried_per_cell=("tried", "max"), cells=("tried", "size")).reset_index()
    out["config_cells"] = out["base"].map(cc["config_cells"]).fillna(0).astype(int)
    out["cells_grid_extended"] = out["base"].map(cc["ext"]).fillna(0).astype(int)
    out["cells_at_edge"] = out["base"].map(cc["edge"]).fillna(0).astype(int)
    return out


def code_versions(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows and cells per code version that computed them (the provenance columns of the job CSVs).

    A run resumed after a code change mixes versions: a unit reloaded from its checkpoint keeps the
    version of the attempt that computed it. Columns missing from ``runs`` are left out.
    """
    cols = [c for c in CODE_COLUMNS if c in runs]
    if not cols or runs.empty:
        return pd.DataFrame(columns=CODE_COLUMNS + ["rows", "cells"])
    keyed = runs.assign(**{c: runs[c].fillna("").astype(str) for c in cols})
    rows = keyed.groupby(cols).size().rename("rows")
    cells = keyed.drop_duplicates(cols + GROUP).groupby(cols).size().rename("cells")
    return pd.concat([rows, cells], axis=1).reset_index().sort_values("rows", ascending=False, ignore_index=True)


def accounting_share(paper: float, a: float, b: float) -> float:
    """Share of the log gap between the paper and setting a that the official rho (setting b) closes."""
    if not all(math.isfinite(x) and x > 0 for x in (paper, a, b)) or math.isclose(a, paper):
        return float("nan")
    return (math.log(a) - math.log(b)) / (math.log(a) - math.log(paper))


def privacy_plans(variants: dict) -> pd.DataFrame:
    """The privacy plan (:mod:`dpnewton.privacy.plan`) of every declared configuration that has one:
    per released quantity, its share of the run's rho (summed over the run; the same for every T),
    when it is released, and its sensitivity. ``variants``: configuration -> {algorithm, hyper}."""
    rows = []
    for name, v in variants.items():
        spec = ALGORITHMS.get(v["algorithm"])
        if spec is None or not spec.zcdp:
            continue
        plan = spec.plan(v["hyper"], 1000, 10, 8, 1.0)
        for r in plan.releases:
            rows.append({"configuration": name, "algorithm": v["algorithm"], "quantity": r.quantity,
                         "share_of_rho": r.rho * r.count, "when": r.when, "sensitivity": r.sensitivity_rule})
    return pd.DataFrame(rows, columns=["configuration", "algorithm", "quantity", "share_of_rho", "when", "sensitivity"])
