"""The report's ranking tables name tie sets, not winners: *Beyond the paper* (under the protocol's
conversion) and the ranking on equal accounting terms (under the tight conversion) rank every private
configuration by its lowest mean at its best T; each row gets the cell's tie set (:mod:`.ties`: the method
families not significantly above the lowest, Welch's test over seeds) and the number of seeds behind it.

The column is added to the finished Markdown, so the rule ``claims`` and the republication from the
committed bundle (:func:`.summary.republish`) write the same text; adding it twice replaces it.
"""

from __future__ import annotations

import re

import pandas as pd

from ..significance import ALPHA
from .ties import config_ties, tie_sets

#: the column's header
TIE_COLUMN = f"tie set (Welch p >= {ALPHA:g}; seeds)"
#: heading prefix -> which conversion ("protocol" or "tight") its table ranks under
SECTIONS = {"## Beyond the paper": "protocol", "## Ranking on equal accounting terms": "tight"}


def cell_ties(best: pd.DataFrame, conversion: str) -> dict[tuple[str, str], str]:
    """(dataset, epsilon as the tables print it) -> the tie set's families and the seeds per configuration."""
    configs = config_ties(best, conversion)
    out = {}
    for (ds, eps), fams in tie_sets(configs).items():
        cell = configs[(configs["dataset"] == ds) & (configs["epsilon"] == eps)]
        seeds = "/".join(str(k) for k in sorted(set(cell["n_seeds"].astype(int)))) if "n_seeds" in cell else "?"
        out[(ds, f"{eps:g}")] = f"{', '.join(fams)} ({seeds} seeds)"
    return out


def _cells(line: str) -> list[str]:
    return line.strip().strip("|").split("|")


def _with_column(table: list[str], ties: dict) -> list[str]:
    """The Markdown table's lines with :data:`TIE_COLUMN` last (replacing an earlier one)."""
    rows = [_cells(line) for line in table]
    if rows[0][-1].strip() == TIE_COLUMN:
        rows = [r[:-1] for r in rows]
    out = [rows[0] + [f" {TIE_COLUMN} "], rows[1] + ["---"]]
    out += [r + [f" {ties.get((r[0].strip(), r[1].strip()), 'n/a')} "] for r in rows[2:]]
    return ["|" + "|".join(r) + "|" for r in out]


def in_both(best: pd.DataFrame, conversion: str, other: str | None) -> pd.DataFrame:
    """``best``'s rows at ``conversion`` of the (dataset, epsilon, configuration) that also ran under
    ``other`` (all of them when ``other`` is None): the configurations the equal-terms ranking compares."""
    rows = best[best["conversion"] == conversion]
    if other is None:
        return rows
    keys = ["dataset", "epsilon", "algorithm"]
    ran = best.loc[best["conversion"] == other, keys].drop_duplicates()
    return rows.merge(ran, on=keys)


def with_tie_columns(body: str, best: pd.DataFrame, conversions: dict[str, str]) -> str:
    """``body`` with the first table of each section of :data:`SECTIONS` given :data:`TIE_COLUMN`
    (``conversions``: "protocol" and "tight" -> conversion name; the tight ranking's tie sets are over the
    configurations that ran under both; a section whose conversion has no rows in ``best`` is left as it
    is)."""
    lines = body.split("\n")
    for head, which in SECTIONS.items():
        conv = conversions.get(which)
        start = next((i for i, line in enumerate(lines) if line.startswith(head)), None)
        rows = in_both(best, conv, conversions.get("protocol") if which == "tight" else None)
        if start is None or conv is None or not len(rows):
            continue
        first = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("|")
                      or re.match(r"^## ", lines[i])), None)
        if first is None or not lines[first].startswith("|"):
            continue
        last = first
        while last < len(lines) and lines[last].startswith("|"):
            last += 1
        lines[first:last] = _with_column(lines[first:last], cell_ties(rows, conv))
    return "\n".join(lines)
