"""The report's first section, "In short": the run's answers in a few lines, each number read from a
table that a later section prints in full. :func:`sync_readme` copies it into the README, between
the markers :data:`START` and :data:`END`, so the README's numbers are the published run's.

    python -m dpnewton.pipeline.claims.headline README.md figures/claims.md    # rewrite the README's copy
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...io import atomic_write_text
from ..frontier import MEASURE_LABELS, members
from .beyond import TARGETS, target_counts
from .cells import SETTINGS
from .cost import REFERENCE_CORES
from .tuning_tracks import TRACK_COLUMNS, cell_winners, not_better_than_trivial
from .verdict import NA, NOT, PARTLY, REPRODUCED
from .verdict import format_number as _fmt

HEADING = "## In short"
START = "<!-- in-short: copied from figures/claims.md by python -m dpnewton.pipeline.claims.headline -->"
END = "<!-- /in-short -->"


def _counts(values: pd.Series) -> str:
    """'name in k' for each distinct value, most frequent first (ties by name)."""
    c = values.value_counts()
    c = c.reindex(sorted(c.index, key=lambda k: (-c[k], k)))
    return ", ".join(f"{k} in {v}" for k, v in c.items())


def _finite(x) -> bool:
    return isinstance(x, (int, float, np.floating)) and bool(np.isfinite(x))


def _cell(ds: str, eps: float) -> str:
    return f"{ds}@{eps:g}"


def verdict_line(verdicts: pd.DataFrame) -> str:
    parts = []
    for s in SETTINGS:
        v = verdicts.loc[verdicts["setting"] == s, "verdict"]
        if len(v):
            counts = [f"{int((v == k).sum())} {k}" for k in (REPRODUCED, PARTLY, NOT, NA) if (v == k).any()]
            parts.append(f"{s} ({len(v)}): {', '.join(counts)}")
    return ("* **The paper's claims** (claim x dataset rows per setting; the settings: the report's *Settings*): "
            + "; ".join(parts) + ".")


def best_lines(beyond: pd.DataFrame, conversion: str, methods) -> list[str]:
    n = len(beyond)
    counts = target_counts(beyond)
    ratio = beyond["best_over_floor"].astype(float)
    ratio = ratio[np.isfinite(ratio)]
    gd = beyond["dp_gd_over_best"].astype(float)
    gd = gd[np.isfinite(gd)]
    L = [f"* **Best private method at its best T** ({n} (dataset, epsilon) cells, `{conversion}`; T and the "
         "configuration chosen on the true loss, which is **not private**: an upper bound on what tuning gives): "
         f"{_counts(beyond['best'])}."]
    if len(gd):
        L.append(f"  Last-iterate DP-GD's loss is {_fmt(float(gd.median()))}x the best (median; range "
                 f"{_fmt(float(gd.min()))}-{_fmt(float(gd.max()))}x).")
    if len(ratio):
        L.append(f"* **Gaussian ridge floor F\\*** (local quadratic model, not a lower bound): the best method is "
                 f"within {TARGETS['floor_ratio']:g}x of F\\* in {counts['floor_met']} of {counts['floor_cells']} "
                 f"cells with epsilon >= {TARGETS['floor_min_epsilon']:g} (target: all); best / F\\* has median "
                 f"{_fmt(float(ratio.median()))} (range {_fmt(float(ratio.min()))}-{_fmt(float(ratio.max()))}).")
    second = ", ".join(members("second-order", methods))
    L.append(f"* **Second order** ({second}): within one standard error of the best in "
             f"{counts['within_se']} of {counts['cells']} cells; also with >= {TARGETS['iterations_ratio']:g}x fewer "
             f"iterations and >= {TARGETS['runtime_ratio']:g}x less runtime than averaged DP-GD in "
             f"{counts['speed_met']} (target: {counts['speed_needed']}).")
    return L


def budget_lines(winners: pd.DataFrame, methods) -> list[str]:
    L = []
    second = ", ".join(members("second-order", methods))
    for measure, g in winners.groupby("measure", sort=True):
        so = g[g["second_order_budgets"] > 0]
        unit = "passes" if measure == "passes" else "s"
        where = []
        for r in so.itertuples():
            text = f"{_cell(r.dataset, r.epsilon)} from {_fmt(r.second_order_from)} {unit}"
            if _finite(r.crossover_budget):
                text += f" until {r.first_order_winner} overtakes at {_fmt(r.crossover_budget)}"
            else:
                text += " to the largest budget"
            where.append(text)
        L.append(f"* **Winner by compute budget** ({MEASURE_LABELS[measure]}): a second-order method ({second}) "
                 f"is best at some budget in {len(so)} of {len(g)} cells"
                 + (f" ({'; '.join(where)})." if where else "."))
    return L


def tracks_lines(tracks: pd.DataFrame) -> list[str]:
    L = []
    for col, name in zip(TRACK_COLUMNS, ("oracle-tuned (non-private upper bound)", "private selection",
                                          "fixed rule")):
        winners = [method for method, _ in cell_winners(tracks, col).values()]
        if winners:
            L.append(f"{name}: {_counts(pd.Series(winners))}")
    ratios = []
    for method, g in tracks.groupby("method", sort=True):
        r = (g["selection"].astype(float) / g["oracle_tuned"].astype(float)).replace([np.inf, -np.inf], np.nan).dropna()
        if len(r):
            ratios.append(f"{method} {_fmt(float(r.median()))}x")
    n = tracks[["dataset", "epsilon"]].drop_duplicates().shape[0]
    out = [f"* **Tuning paid for privately** (winner per cell, {n} cells): " + "; ".join(L) + "."]
    if ratios:
        out.append("  Private selection's loss / the oracle-tuned loss, median over cells: " + ", ".join(ratios) + ".")
    if "trivial" in tracks:
        worse = tracks[not_better_than_trivial(tracks, "selection")]
        rated = int(np.isfinite(tracks["selection"].astype(float)).sum())
        if rated:
            cells = ", ".join(f"{r.method} on {_cell(r.dataset, r.epsilon)}" for r in worse.itertuples())
            out.append(f"  The privately selected model is no better than w = 0 in {len(worse)} of {rated} "
                       "(method, cell) pairs" + (f" ({cells})." if len(worse) else "."))
    return out


def cost_line(cost: pd.DataFrame) -> str:
    wall, cpu = float(cost["wall_s"].sum()), float(cost["cpu_s"].sum())
    return (f"* **Cost of the run**: {int(cost['jobs'].sum())} jobs, {_fmt(wall / 3600)} job-hours "
            f"({_fmt(cpu / 3600)} CPU-hours), {_fmt(wall / 3600 / REFERENCE_CORES)} hours on {REFERENCE_CORES} cores.")


def headline(verdicts: pd.DataFrame, extra: dict, conversion: str) -> list[str]:
    """The "In short" section from the verdict rows and :func:`~.evaluation.evaluate`'s ``extra``
    (with the report's optional parts: ``budget_winner``, ``tracks``, ``cost``; ``methods``, the run's base
    algorithms, whenever ``beyond`` or ``budget_winner`` is there)."""
    L = [HEADING, "", verdict_line(verdicts)]
    beyond = extra.get("beyond")
    if beyond is not None and len(beyond):
        L += best_lines(beyond, conversion, extra["methods"])
    winners = extra.get("budget_winner")
    if winners is not None and len(winners):
        L += budget_lines(winners, extra["methods"])
    tracks = extra.get("tracks")
    if tracks is not None and len(tracks):
        L += tracks_lines(tracks)
    cost = extra.get("cost")
    if cost is not None and len(cost):
        L.append(cost_line(cost))
    return L + [""]


def section(report_md: str) -> str:
    """The body of the report's "In short" section (its heading left out)."""
    match = re.search(rf"^{re.escape(HEADING)}\n(.*?)(?=^## |\Z)", report_md, flags=re.S | re.M)
    if match is None:
        raise ValueError(f"the report has no '{HEADING}' section")
    return match.group(1).strip()


def readme_copy(readme: str) -> str:
    """What the README holds between its markers."""
    if START not in readme or END not in readme:
        raise ValueError(f"the README has no block between {START} and {END}")
    return readme.split(START, 1)[1].split(END, 1)[0].strip()


def sync_readme(readme: Path, report: Path) -> bool:
    """Rewrite the README's block with the report's section; True if it changed."""
    text = readme.read_text()
    old = readme_copy(text)
    new = section(report.read_text())
    if old == new:
        return False
    head, rest = text.split(START, 1)
    atomic_write_text(readme, f"{head}{START}\n{new}\n{END}{rest.split(END, 1)[1]}")
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Copy the claims report's 'In short' section into the README.")
    parser.add_argument("readme", type=Path)
    parser.add_argument("report", type=Path)
    args = parser.parse_args(argv)
    print("updated" if sync_readme(args.readme, args.report) else "unchanged", args.readme)


if __name__ == "__main__":
    main()
