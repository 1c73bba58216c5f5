"""Every claim under every setting: the verdict rows and the tables they were read from.

Runtimes are lone-run runtimes from the timing stage's costs (:mod:`dpnewton.pipeline.timing`).
Each verdict is also evaluated with every capped cell continued and with the baseline's costs moved
by the timing tolerance (:mod:`.sensitivity`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ...privacy import epsilon_to_rho
from ..frontier import crossover, dims_from_baseline, to_long
from ..timing import cost_lookup, runtime_column
from .beyond import beyond_table
from .cells import (SETTING_CONVERSION, SETTINGS, base_of, cell_row, is_paper_configuration, is_reset,
                    setting_cells)
from .paper import PAPER_TABLE1, paper_claim
from .rules import (verdict_best_loss, verdict_damped, verdict_fig1, verdict_oracle, verdict_qu, verdict_speedup,
                    verdict_table1_cell, winner_by_budget)
from .sensitivity import (continued_past_cap, scaled_costs, table1_cell_within_timing, with_cap_check,
                          with_timing_check)
from .tables import code_versions, configurations, divergence_table, heldout_cells, split_seed_selection
from .verdict import NA, Verdict


def official_rho(epsilon: float, delta: float) -> float:
    return float(epsilon_to_rho(epsilon, delta, "official-fsolve"))


def evaluate(runs, summary, best, baseline, curves, costs, claims: dict,
             official=official_rho) -> tuple[pd.DataFrame, dict]:
    """All claims under all settings -> (verdict rows, extra tables; ``extra['methods']``: the base
    algorithms of ``best``, the methods the report names).

    ``claims`` is the filled config's ``claims`` section (:func:`dpnewton.pipeline.config.load_config`
    or ``fill_defaults``: every key the schema gives a default is present). ``costs`` are the timing
    stage's (first update, per-update) costs: a cell's runtime is that of a
    lone run of best T updates, a curve's runtime at iterate k that of k updates
    (:func:`dpnewton.pipeline.timing.lone_runtime`; NaN for a configuration that was not timed).
    The verdicts are evaluated on the measured cells, with every capped cell continued
    (:func:`continued_past_cap`; :func:`with_cap_check`), and with the baseline's per-update costs
    ``claims['timing_tolerance']`` (relative) higher and lower (:func:`with_timing_check`): a runtime
    verdict that moves within that band rests on timing noise.
    """
    full = best.assign(base=base_of(best))
    # the paper's claims are checked on the paper's methods at their last iterate
    best = full[is_paper_configuration(full)]
    robust = split_seed_selection(runs)

    def verdicts_with(cost_table, transform=lambda cells: cells):
        lookup = cost_lookup(cost_table)
        cells = best.assign(runtime_s=runtime_column(best, lookup))
        c = curves.assign(runtime_s=runtime_column(curves, lookup, "iterate"))
        return _verdicts(summary, transform(cells), transform(heldout_cells(robust, cells)), baseline, c, claims,
                         official)

    verdicts, extra = verdicts_with(costs)
    capped = "edge" in best and best["edge"].astype(str).eq("high").any()
    continued = verdicts_with(costs, continued_past_cap)[0] if capped else verdicts
    tol = float(claims["timing_tolerance"])
    base_alg = claims["baseline"]
    timed = [verdicts_with(scaled_costs(costs, base_alg, f))[0] for f in (1 + tol, 1 / (1 + tol))]
    extra.update({"robustness": robust, "divergence": divergence_table(runs, baseline),
                  "configurations": configurations(summary, full), "code_versions": code_versions(runs),
                  "methods": tuple(full["base"].unique()),
                  "timing_tolerance": tol, "tuning_budget": tuning_budget(best, claims["protocol_conversion"]),
                  "beyond": beyond_table(full, claims["protocol_conversion"], cost_lookup(costs),
                                         dims_from_baseline(baseline))})
    return with_timing_check(with_cap_check(verdicts, continued), timed), extra


def tuning_budget(best: pd.DataFrame, conversion: str) -> dict[str, int]:
    """Setting a-tuned's tuning budget: base algorithm -> number of declared configurations of the
    paper's methods at ``conversion`` (reset variants excluded; settings a, b and c use one each)."""
    b = best[(best["conversion"] == conversion) & ~is_reset(best)]
    return {str(k): int(v) for k, v in b.groupby("base")["algorithm"].nunique().sort_index().items()}


def _table1_row(setting: str, ds: str, e: float, g, o, tol: float) -> dict:
    """One Table 1 cell: DP-GD's best-T cell ``g`` against ours' ``o``, with its verdict."""
    ratio = float(g["runtime_s"]) / float(o["runtime_s"]) if float(o["runtime_s"]) > 0 else float("nan")
    paper = PAPER_TABLE1.get(ds, {}).get(float(e))
    res = verdict_table1_cell(ratio, paper, float(o["excess_loss_mean"]), float(g["excess_loss_mean"]))
    return {"setting": setting, "dataset": ds, "epsilon": float(e), "ratio": ratio, "paper": paper,
            "dp_gd_config": g["algorithm"], "dp_gd_T": g["best_T"], "dp_gd_runtime_s": float(g["runtime_s"]),
            "dp_gd_excess": float(g["excess_loss_mean"]), "ours_config": o["algorithm"],
            "ours_T": o["best_T"], "ours_runtime_s": float(o["runtime_s"]),
            "ours_excess": float(o["excess_loss_mean"]), "verdict": res.verdict,
            "verdict_timing": table1_cell_within_timing(ratio, paper, tol),
            "dp_gd_edge": g.get("edge", ""), "ours_edge": o.get("edge", "")}


def _verdicts(summary, best, held, baseline, curves, claims: dict, official) -> tuple[pd.DataFrame, dict]:
    """Verdict rows of every claim and setting on the cells ``best`` (held-out cells ``held``), and
    the per-setting cells and Table 1 rows they were read from."""
    conv = {"a": claims["protocol_conversion"], "b": claims["official_conversion"], "c": claims["tight_conversion"]}
    ours = list(claims["ours"])
    base_alg, oracle, damped = claims["baseline"], claims["oracle"], claims["damped"]
    t1_ours = claims["table1_ours"]
    tol = float(claims["timing_tolerance"])
    triv = dict(zip(baseline["dataset"], baseline["trivial_excess_loss"]))
    datasets = sorted(best["dataset"].unique())
    bases = sorted(best["base"].unique())
    competitors = [b for b in bases if b not in ours and b != oracle]
    c1, c1_robust, c2, c3, c4, c5, c6 = (paper_claim(i) for i in ("C1", "C1-robustness", "C2", "C3", "C4", "C5", "C6"))
    fig1_eps = c3.values["epsilon"]
    rows = []

    def add(claim, setting, dataset, res: Verdict, paper=""):
        rows.append({"claim": claim, "setting": setting, "conversion": conv[SETTING_CONVERSION[setting]],
                     "dataset": dataset, "paper": paper, **res.row()})

    cells_by = {s: setting_cells(best, s, conv, official) for s in SETTINGS}
    held_by = {s: setting_cells(held, s, conv, official) for s in ("a", "a-tuned")}
    table1_rows = []
    for s in SETTINGS:
        cells = cells_by[s]
        for ds in datasets:
            add(c1.name(), s, ds, verdict_best_loss(cells, ds, ours, competitors, triv.get(ds)), c1.paper())
        for ds in datasets:
            for e in sorted(cells[cells["dataset"] == ds]["epsilon"].unique()):
                g, o = cell_row(cells, ds, base_alg, e), cell_row(cells, ds, t1_ours, e)
                if g is not None and o is not None:
                    table1_rows.append(_table1_row(s, ds, e, g, o, tol))
        t1 = pd.DataFrame([r for r in table1_rows if r["setting"] == s])
        if len(t1):
            ratios = " ".join(f"{r.dataset}@{r.epsilon:g}:{r.ratio:.1f}x" for r in t1.itertuples())
            degenerate = [max(r.dp_gd_excess, r.ours_excess) >= triv.get(r.dataset, np.inf) for r in t1.itertuples()]
            add(c2.name(), s, "all", replace(verdict_speedup(t1["ratio"], degenerate), ours=ratios), c2.paper())
        for ds in datasets:
            allb = cells[(cells["dataset"] == ds) & np.isclose(cells["epsilon"], fig1_eps)]["excess_loss_mean"]
            allb = allb.astype(float)
            allb = allb[np.isfinite(allb)]
            g, o = cell_row(cells, ds, base_alg, fig1_eps), cell_row(cells, ds, t1_ours, fig1_eps)
            if g is None or o is None:
                continue
            sub = curves[((curves["algorithm"] == g["algorithm"]) | (curves["algorithm"] == o["algorithm"]))
                         & (curves["conversion"] == o["conversion"])]
            add(c3.name(), s, ds,
                verdict_fig1(sub, ds, fig1_eps, o["conversion"], o["algorithm"], g["algorithm"],
                             float(allb.min()) if len(allb) else float("nan")),
                c3.paper())
        for ds in datasets:
            for e in sorted(best[best["base"] == oracle]["epsilon"].unique()):
                res = verdict_oracle(summary, cells, ds, float(e), ours, oracle)
                if res.verdict != NA:
                    add(c4.name(eps=e), s, ds, res, c4.paper())
        for ds in datasets:
            add(c5.name(), s, ds, verdict_damped(cells, ds, damped, [b for b in bases if b != oracle and b != damped]),
                c5.paper())
        for ds in datasets:
            add(c6.name(), s, ds, verdict_qu(cells, ds), c6.paper())
    for s in ("a", "a-tuned"):
        for ds in datasets:
            add(c1_robust.name(), s, ds, verdict_best_loss(held_by[s], ds, ours, competitors, triv.get(ds)),
                c1_robust.paper())
    return pd.DataFrame(rows), {"table1": pd.DataFrame(table1_rows), "cells": cells_by, "conv": conv}


def budget_winner(frontier: pd.DataFrame, conversion: str) -> pd.DataFrame:
    """The "winner by compute budget" rows (not a claim of the paper): the crossover table
    (:func:`dpnewton.pipeline.frontier.crossover`) of the frontier table's ``conversion`` cells, with
    the text of :func:`~.rules.winner_by_budget`. Reads only the frontier table: no verdict uses it."""
    long = to_long(frontier)
    x = crossover(long[long["conversion"] == conversion])
    return x.assign(reading=[winner_by_budget(r) for _, r in x.iterrows()])

