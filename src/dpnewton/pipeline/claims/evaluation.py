"""Every claim under every setting: the verdict rows and the tables they were read from.

:data:`CLAIMS` lists the claims the report checks, each with its rule; :func:`evaluate` runs every
row under each of its settings. Runtimes are lone-run runtimes from the timing stage's costs
(:mod:`dpnewton.pipeline.timing`). Each verdict is also evaluated with every capped cell continued
and with the baseline's costs moved by the timing tolerance (:mod:`.sensitivity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ...privacy import epsilon_to_rho
from ..frontier import CELL, budget_outcomes, crossover_of, dims_from_baseline, to_long
from ..timing import cost_lookup, runtime_column
from .beyond import beyond_table, tight_ranking
from .cells import (SETTING_CONVERSION, SETTINGS, base_of, cell_row, is_paper_configuration, is_reset,
                    setting_cells)
from .paper import PAPER_TABLE1, PaperClaim, paper_claim
from .checks import (Evidence, check_best_loss, check_damped, check_fig1, check_oracle, check_oracle_gap, check_qu,
                     check_qu_speed, check_speedup)
from .rules import degenerate_cell, verdict_table1_cell, winner_by_budget
from .sensitivity import (continued_past_cap, scaled_costs, table1_cell_within_timing, with_cap_check,
                          with_timing_check)
from .tables import code_versions, configurations, divergence_table, heldout_cells, split_seed_selection


@dataclass(frozen=True)
class Claim:
    """A claim the report checks: what the paper says (``paper``, a :class:`~.paper.PaperClaim`), the
    rule that reads our runs (``rule(paper, evidence)``, :mod:`.rules`), the settings it is checked
    under, and whether it reads the held-out cells (T chosen on half the seeds, loss on the others)."""

    paper: PaperClaim
    rule: Callable
    settings: tuple[str, ...] = tuple(SETTINGS)
    held_out: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.paper, PaperClaim):
            raise TypeError(f"claim {self.paper!r}: paper must be a PaperClaim")
        if not callable(self.rule):
            raise TypeError(f"claim {self.paper.id!r}: rule must be a function, got {self.rule!r}")
        if not self.settings or not set(self.settings) <= set(SETTINGS):
            raise ValueError(f"claim {self.paper.id!r}: settings {self.settings!r} must be some of {SETTINGS}")


#: the claims :func:`evaluate` checks, in the order of the report's rows (held-out rows after the others)
CLAIMS: tuple[Claim, ...] = (
    Claim(paper_claim("C1"), check_best_loss),
    Claim(paper_claim("C2"), check_speedup),
    Claim(paper_claim("C3"), check_fig1),
    Claim(paper_claim("C4"), check_oracle),
    Claim(paper_claim("C4-gap"), check_oracle_gap),
    Claim(paper_claim("C5"), check_damped),
    Claim(paper_claim("C6"), check_qu_speed),
    Claim(paper_claim("C6-loss"), check_qu),
    Claim(paper_claim("C1-robustness"), check_best_loss, ("a", "a-tuned"), held_out=True),
)


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
                                         dims_from_baseline(baseline), base_alg),
                  "tight": tight_ranking(full, claims["protocol_conversion"], claims["tight_conversion"])})
    return with_timing_check(with_cap_check(verdicts, continued), timed), extra


def tuning_budget(best: pd.DataFrame, conversion: str) -> dict[str, int]:
    """Setting a-tuned's tuning budget: base algorithm -> number of declared configurations of the
    paper's methods at ``conversion`` (reset variants excluded; settings a, b and c use one each)."""
    b = best[(best["conversion"] == conversion) & ~is_reset(best)]
    return {str(k): int(v) for k, v in b.groupby("base")["algorithm"].nunique().sort_index().items()}


def _table1_row(setting: str, ds: str, e: float, g, o, tol: float, trivial: float | None) -> dict:
    """One Table 1 cell: DP-GD's best-T cell ``g`` against ours' ``o``, with its verdict; ``degenerate``
    (:func:`~.rules.degenerate_cell`, against w = 0's excess loss ``trivial``) marks a cell that is not
    graded, here and in C2's reading."""
    ratio = float(g["runtime_s"]) / float(o["runtime_s"]) if float(o["runtime_s"]) > 0 else float("nan")
    paper = PAPER_TABLE1.get(ds, {}).get(float(e))
    degenerate = degenerate_cell(float(g["excess_loss_mean"]), float(o["excess_loss_mean"]), trivial)
    res = verdict_table1_cell(ratio, paper, float(o["excess_loss_mean"]), float(g["excess_loss_mean"]), degenerate)
    return {"setting": setting, "dataset": ds, "epsilon": float(e), "ratio": ratio, "paper": paper,
            "dp_gd_config": g["algorithm"], "dp_gd_T": g["best_T"], "dp_gd_runtime_s": float(g["runtime_s"]),
            "dp_gd_excess": float(g["excess_loss_mean"]), "ours_config": o["algorithm"],
            "ours_T": o["best_T"], "ours_runtime_s": float(o["runtime_s"]),
            "ours_excess": float(o["excess_loss_mean"]), "degenerate": degenerate, "verdict": res.verdict,
            "verdict_timing": "" if degenerate else table1_cell_within_timing(ratio, paper, tol),
            "dp_gd_edge": g.get("edge", ""), "ours_edge": o.get("edge", "")}


def _verdicts(summary, best, held, baseline, curves, claims: dict, official) -> tuple[pd.DataFrame, dict]:
    """Verdict rows of every row of :data:`CLAIMS` under each of its settings on the cells ``best``
    (held-out cells ``held``), and the per-setting cells and Table 1 rows they were read from."""
    conv = {"a": claims["protocol_conversion"], "b": claims["official_conversion"], "c": claims["tight_conversion"]}
    tol = float(claims["timing_tolerance"])
    triv = dict(zip(baseline["dataset"], baseline["trivial_excess_loss"]))
    cells_by = {s: setting_cells(best, s, conv, official) for s in SETTINGS}
    table1 = {s: _table1(s, cells_by[s], claims["baseline"], claims["table1_ours"], tol, triv) for s in SETTINGS}

    def evidence(setting: str, cells: pd.DataFrame) -> Evidence:
        return Evidence(setting, conv[SETTING_CONVERSION[setting]], cells, best, summary, curves,
                        pd.DataFrame(table1[setting]), triv, tuple(claims["ours"]), claims["baseline"],
                        claims["table1_ours"], claims["oracle"], claims["damped"])

    held_settings = [s for s in SETTINGS if any(c.held_out and s in c.settings for c in CLAIMS)]
    by_kind = {False: {s: evidence(s, cells_by[s]) for s in SETTINGS},
               True: {s: evidence(s, setting_cells(held, s, conv, official)) for s in held_settings}}
    rows = []
    for held_out, by_setting in by_kind.items():  # the held-out rows after the others
        for s, ev in by_setting.items():
            for claim in CLAIMS:
                if claim.held_out == held_out and s in claim.settings:
                    rows += [{"claim": name, "setting": s, "conversion": ev.conversion, "dataset": ds,
                              "paper": claim.paper.paper(), **res.row()}
                             for name, ds, res in claim.rule(claim.paper, ev)]
    return pd.DataFrame(rows), {"table1": pd.DataFrame([r for s in SETTINGS for r in table1[s]]),
                                "cells": cells_by, "conv": conv}


def _table1(setting: str, cells: pd.DataFrame, base_alg: str, ours: str, tol: float, trivial: dict) -> list[dict]:
    """The setting's Table 1 cells: each (dataset, epsilon) where DP-GD and ``ours`` both have a cell
    (``trivial``: dataset -> excess loss of w = 0)."""
    rows = []
    for ds in sorted(cells["dataset"].unique()):
        for e in sorted(cells[cells["dataset"] == ds]["epsilon"].unique()):
            g, o = cell_row(cells, ds, base_alg, e), cell_row(cells, ds, ours, e)
            if g is not None and o is not None:
                rows.append(_table1_row(setting, ds, e, g, o, tol, trivial.get(ds)))
    return rows


def budget_winner(frontier: pd.DataFrame, conversion: str) -> pd.DataFrame:
    """The "winner by compute budget" rows (not a claim of the paper): the crossover table of the frontier
    table's ``conversion`` cells (:func:`dpnewton.pipeline.frontier.crossover`: per budget, the lowest mean
    tested against the other role's by the tie rule), with ``second_order_winners`` (every second-order
    method significantly best at some budget, in budget order) and the text of :func:`~.rules.winner_by_budget`.
    Reads only the frontier table: no verdict uses it."""
    long = to_long(frontier)
    outcomes = budget_outcomes(long[long["conversion"] == conversion])
    won = outcomes[outcomes["outcome"] == "second-order"].sort_values("budget")
    winners = {k: tuple(dict.fromkeys(g["leader"])) for k, g in won.groupby(CELL, sort=False)}
    x = crossover_of(outcomes)
    x = x.assign(second_order_winners=[winners.get(tuple(k), ()) for k in x[CELL].itertuples(index=False)])
    return x.assign(reading=[winner_by_budget(r) for _, r in x.iterrows()])
