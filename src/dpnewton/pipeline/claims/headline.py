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
from ..frontier import MEASURE_LABELS, members, untested
from .beyond import TARGETS, WHOSE, target_counts
from .cells import SETTINGS, by_whose, is_paper_method
from .cost import REFERENCE_CORES
from .rules import UNTESTED
from ..significance import ALPHA
from .tuning_tracks import (NEAR_ORACLE, TRACKS, default_ratios, library_default_label, library_default_table,
                            not_better_than_trivial, track_ties)
from .verdict import NA, NOT, PARTLY, REPRODUCED
from .verdict import format_number as _fmt

HEADING = "## In short"
START = "<!-- in-short: copied from figures/claims.md by python -m dpnewton.pipeline.claims.summary -->"
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


def _spread(x: pd.Series) -> str:
    """'median M (range a-b)' of the finite values of ``x``."""
    return f"median {_fmt(float(x.median()))} (range {_fmt(float(x.min()))}-{_fmt(float(x.max()))})"


def _finite_values(frame: pd.DataFrame, column: str) -> pd.Series:
    x = frame[column].astype(float) if column in frame else pd.Series(dtype=float)
    return x[np.isfinite(x)]


def floor_line(beyond: pd.DataFrame) -> list[str]:
    """The Gaussian ridge floor F*, as an illustration (not a target, not a lower bound): best / F*, and
    F*'s own mechanism on the true logistic loss / F* when the table has it."""
    ratio, mechanism = _finite_values(beyond, "best_over_floor"), _finite_values(beyond, "mechanism_over_floor")
    if not len(ratio):
        return []
    text = (f"* **Gaussian ridge floor F\\*** (an illustration of a local quadratic model at w\\*: neither a target "
            f"nor a lower bound): the lowest mean / F\\* has {_spread(ratio)} over {len(ratio)} cells")
    if len(mechanism):
        text += (f"; F\\*'s own mechanism (one Gaussian release of the whole budget, then ridge), evaluated on the "
                 f"true logistic loss, has {_spread(mechanism)} x F\\*")
    return [text + "."]


def second_order_line(beyond: pd.DataFrame, methods) -> list[str]:
    """The second-order methods against the best of all methods, the paper's and this project's apart
    (:data:`~.beyond.WHOSE`)."""
    counts = target_counts(beyond)
    sides = by_whose(members("second-order", methods))
    parts = []
    for side in WHOSE:
        if not sides[side]:
            continue
        k = counts[side]
        who = "the paper's" if side == "paper" else "this project's"
        parts.append(f"{who} ({', '.join(sides[side])}) within one standard error of the best in {k['within_se']}, "
                     f"also with >= {TARGETS['iterations_ratio']:g}x fewer iterations and >= "
                     f"{TARGETS['runtime_ratio']:g}x less runtime than averaged DP-GD in {k['speed_met']}")
    if not parts:
        return []
    return [f"* **Second order** ({counts['cells']} cells; target for each side: {counts['speed_needed']}): "
            + "; ".join(parts) + "."]


def best_lines(beyond: pd.DataFrame, conversion: str, methods) -> list[str]:
    n = len(beyond)
    gd = _finite_values(beyond, "dp_gd_over_best")
    L = [f"* **Best private method at its best T** ({n} (dataset, epsilon) cells, `{conversion}`; T and the "
         "configuration chosen on the true loss, which is **not private**: an upper bound on what tuning gives): "
         f"{_counts(beyond['best'])}."]
    if len(gd):
        L.append(f"  Last-iterate DP-GD's loss is {_fmt(float(gd.median()))}x the best (median; range "
                 f"{_fmt(float(gd.min()))}-{_fmt(float(gd.max()))}x).")
    return L + floor_line(beyond) + second_order_line(beyond, methods)


def _winners(row) -> tuple[str, ...]:
    """The second-order methods significantly best at some budget in one crossover row, in budget order."""
    won = getattr(row, "second_order_winners", None)
    if isinstance(won, (tuple, list)):
        return tuple(won)
    return (row.second_order_winner,) if row.second_order_budgets else ()


def _budget_where(r, won: tuple, best: str, unit: str) -> str:
    """One cell's budgets in words: from where second order is best (by which methods), from where the
    roles tie, and the crossover (where a first-order method becomes best); '' when second order never
    wins or ties."""
    parts = [f"{', '.join(won)} {best} from {_fmt(r.second_order_from)} {unit}"] if won else []
    if r.tied_budgets:
        parts.append(f"tied from {_fmt(r.tied_from)} {unit}")
    if not parts:
        return ""
    cross = (f"crossover at {_fmt(r.crossover_budget)} {unit} ({r.first_order_winner})" if _finite(r.crossover_budget)
             else "no crossover within the grid")
    return f"{_cell(r.dataset, r.epsilon)}: {', '.join(parts + [cross])}"


def budget_lines(winners: pd.DataFrame, methods) -> list[str]:
    """Per cost measure: in how many cells one of the paper's second-order methods is significantly best at
    some budget (the tie rule, :func:`dpnewton.pipeline.frontier.crossover`), in how many each of this
    project's is (a cell where both are counts for both), in how many the roles tie at some budget, with
    the cells. Rows with no tested budget (:func:`~dpnewton.pipeline.frontier.untested`: a frontier table
    without standard errors) are read by the lowest mean, and the line says so when all are."""
    L = []
    sides = by_whose(members("second-order", methods))
    for measure, g in winners.groupby("measure", sort=True):
        unit = "passes" if measure == "passes" else "s"
        plain = all(untested(r) for _, r in g.iterrows())
        best = "lowest" if plain else "significantly best"
        won = [(r, _winners(r)) for r in g.itertuples()]
        counts = [(f"a paper second-order method ({', '.join(sides['paper'])})",
                   sum(any(is_paper_method(m) for m in w) for _, w in won))] if sides["paper"] else []
        counts += [(f"{m} (this project's)", sum(m in w for _, w in won)) for m in sides["project"]]
        counts = [f"{who} is {best} at some budget in {k} of {len(g)} cells" if i == 0 else f"{who} in {k}"
                  for i, (who, k) in enumerate(counts)]
        if not plain:
            counts.append(f"the roles tie at some budget in {int((g['tied_budgets'] > 0).sum())}")
        where = [text for text in (_budget_where(r, w, best, unit) for r, w in won) if text]
        label = f", {UNTESTED}" if plain else ""
        L.append(f"* **Winner by compute budget** ({MEASURE_LABELS[measure]}{label}): " + ", ".join(counts)
                 + (f" ({'; '.join(where)})." if where else "."))
    return L


def tracks_lines(tracks: pd.DataFrame, long: pd.DataFrame | None = None, default_label: str | None = None
                 ) -> list[str]:
    """The tracks' lines: per track, how many cells' tie sets hold each method (:func:`.tuning_tracks.track_ties`
    of the long table ``long``; without it no count is stated), the selection / oracle-tuned ratios, the
    selected models no better than w = 0 and the library default's ratios."""
    L = [f"{TRACKS[track]}: {_counts(pd.Series([m for names in sets.values() for m in names], dtype=object))}"
         for track, sets in (track_ties(long) if long is not None and len(long) else {}).items()]
    ratios = []
    for method, g in tracks.groupby("method", sort=True):
        r = (g["selection"].astype(float) / g["oracle_tuned"].astype(float)).replace([np.inf, -np.inf], np.nan).dropna()
        if len(r):
            ratios.append(f"{method} {_fmt(float(r.median()))}x")
    n = tracks[["dataset", "epsilon"]].drop_duplicates().shape[0]
    out = [f"* **Tuning paid for privately** (tie sets per track and cell, Welch p >= {ALPHA:g}; {n} cells): "
           + ("; ".join(L) if L else "no tie sets (no per-track s.e.)") + "."]
    if ratios:
        out.append("  Private selection's loss / the oracle-tuned loss, median over cells: " + ", ".join(ratios) + ".")
    if "trivial" in tracks:
        worse = tracks[not_better_than_trivial(tracks, "selection")]
        rated = int(np.isfinite(tracks["selection"].astype(float)).sum())
        if rated:
            cells = ", ".join(f"{r.method} on {_cell(r.dataset, r.epsilon)}" for r in worse.itertuples())
            out.append(f"  The privately selected model is no better than w = 0 in {len(worse)} of {rated} "
                       "(method, cell) pairs" + (f" ({cells})." if len(worse) else "."))
    ratio = default_ratios(library_default_table(tracks, default_label) if default_label else pd.DataFrame())
    if len(ratio):
        out.append(f"  The library's default ({default_label}, no tuning): within {NEAR_ORACLE:g}x of the "
                   f"oracle-tuned best in {int((ratio <= NEAR_ORACLE).sum())} of {len(ratio)} cells, median "
                   f"{_fmt(float(ratio.median()))}x.")
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
    tight = extra.get("tight")
    if tight is not None and len(tight):
        L.append(f"* **On equal accounting terms** (every method under `{extra['conv']['c']}`, objective perturbation "
                 f"by its own tight profile; {len(tight)} cells): best {_counts(tight['tight_best'])}; the winning "
                 f"method differs from the `{conversion}` ranking in {int(tight['changed'].sum())}.")
    winners = extra.get("budget_winner")
    if winners is not None and len(winners):
        L += budget_lines(winners, extra["methods"])
    tracks = extra.get("tracks")
    if tracks is not None and len(tracks):
        L += tracks_lines(tracks, extra.get("tracks_long"), library_default_label(extra.get("tracks_declared")))
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
