"""The results browser: one self-contained static HTML page built from a run's tables.

Pick a dataset, a conversion, an epsilon and configurations; the page draws the excess loss against
T and against the runtime (mean over seeds, error bars one s.e.), marks each configuration's best T
(**non-private** selection: argmin over T of the mean excess loss, as in ``best_T``), rings the tie
set of the cell and lists the claim verdicts of the dataset. Plotting is Plotly's JavaScript library,
inlined from the ``plotly`` Python package (:func:`plotly.offline.get_plotlyjs`): the page needs no
server and no network, it opens from ``file://``.

Inputs (:func:`load_tables`), each optional except ``best_T``:

* ``best_T`` (parquet or CSV): one row per (dataset, algorithm, conversion, epsilon) at its best T;
* ``summary``: one row per T (``results/tables/summary.parquet``): the curves. A claims bundle
  (``figures/claims/``) carries no per-T table; the page then draws the best-T points only and says so;
* ``claims`` (``claims.csv``): the verdicts; ``floor`` (``floor.csv``): F*, drawn as a dotted line;
* ``protocol`` (``protocol.json``): the config hash and datasets shown in the page's header.

Tie set (:func:`tie_sets`): the claims report's rule (:mod:`dpnewton.pipeline.claims.ties`: Welch's t-test
over seeds against the cell's lowest mean, p >= 0.05), over the private configurations only; a configuration
with a non-private step (its card's ``nonprivate``: the Oracle's line search, damped Newton's step) or the
explosion reset is drawn and labelled but never ranked. A card's ``loss_note`` (cubic Newton: its own
objective) is shown with the configuration wherever it appears. Run ``python -m dpnewton.pipeline.browser
--help``; the workflow's rule ``browser`` (``workflow/rules/browser.smk``) writes ``results/browser.html``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..algorithms import ALGORITHMS
from ..io import atomic_write_text, read_csv, read_json, read_parquet
from .browser_page import render
from .claims.cells import base_of, is_reset
from .claims.ties import mark_ties
from .frontier import role
from .significance import TIE_RULE as TIES_RULE

#: the tie rule in the page's words
TIE_RULE = (TIES_RULE + "; configurations with a non-private step are not ranked")
CELL = ["dataset", "conversion", "epsilon"]
#: significant digits kept in the page's numbers
DIGITS = 4


def read_table(path: str | Path) -> pd.DataFrame:
    """A table by its suffix, read verified (:func:`dpnewton.io.read_parquet`, :func:`dpnewton.io.read_csv`:
    complete, and unchanged when it records its digest); a damaged file is a DamagedFileError naming it."""
    path = Path(path)
    if path.suffix == ".parquet":
        return read_parquet(path)
    if path.suffix == ".csv":
        return read_csv(path)
    raise ValueError(f"{path}: not a .parquet or .csv table; give the table's parquet or CSV file")


#: the columns the page reads from each table
REQUIRED = {"best_T": CELL + ["algorithm", "best_T", "excess_loss_mean", "excess_loss_se"],
            "summary": CELL + ["algorithm", "iterations", "excess_loss_mean", "excess_loss_se", "runtime_s_mean"],
            "claims": ["claim", "setting", "dataset", "verdict"],
            "floor": CELL + ["ridge_floor"]}


def load_tables(best_T, summary=None, claims=None, floor=None, protocol=None) -> dict:
    """The page's tables from their files (None = absent); ``protocol`` is read as JSON. A table
    without a column of :data:`REQUIRED` raises ValueError naming it."""
    tables = {}
    for name, path in (("best_T", best_T), ("summary", summary), ("claims", claims), ("floor", floor)):
        tables[name] = read_table(path) if path else None
        missing = [c for c in REQUIRED[name] if tables[name] is not None and c not in tables[name].columns]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)}; give the pipeline's {name} table")
    tables["protocol"] = read_json(protocol) if protocol else None
    return tables


def ranked(best: pd.DataFrame) -> pd.Series:
    """Rows the tie sets rank: no non-private step (card role) and no explosion reset."""
    return ~is_reset(best) & ~base_of(best).map(role).eq("non-private step")


def tie_sets(best: pd.DataFrame) -> pd.DataFrame:
    """``best`` with ``is_best`` (the cell's lowest finite mean among :func:`ranked` rows), ``tie`` (not
    significantly above it: :func:`dpnewton.pipeline.claims.ties.mark_ties`, over ``n_seeds`` seeds when
    the table has them; the lowest is in its own tie set) and ``ranked`` per (dataset, conversion,
    epsilon). A configuration without a finite mean, or not ranked, is in no tie set."""
    out = best.reset_index(drop=True)
    out["ranked"] = ranked(out).to_numpy()
    out["is_best"], out["tie"] = False, False
    for _, cell in out[out["ranked"]].groupby(CELL, sort=False):
        marked = mark_ties(cell)
        finite = np.isfinite(marked["excess_loss_mean"].astype(float))
        if finite.any():
            out.loc[marked.index, "tie"] = marked["tied"].astype(bool)
            out.loc[marked["excess_loss_mean"].astype(float).idxmin(), "is_best"] = True
    return out


def _round(x):
    """``x`` to :data:`DIGITS` significant digits; None for NaN or infinite (JSON has neither)."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(f"{x:.{DIGITS}g}") if math.isfinite(x) else None
    if isinstance(x, str):
        return x
    return None if pd.isna(x) else str(x)


def _columns(frame: pd.DataFrame, columns: dict[str, str]) -> dict:
    """The frame as {"columns": [...], "rows": [[...], ...]}, renamed by ``columns`` (source -> page name)."""
    present = {src: dst for src, dst in columns.items() if src in frame.columns}
    rows = [[_round(v) for v in row] for row in frame[list(present)].itertuples(index=False, name=None)]
    return {"columns": list(present.values()), "rows": rows}


def _average(hyper) -> str:
    """The release (``average`` hyper-parameter) of a best_T row's ``hyper`` (a dict or its JSON)."""
    if isinstance(hyper, str):
        try:
            hyper = json.loads(hyper)
        except ValueError:
            hyper = {}
    return str((hyper or {}).get("average", "none")) if isinstance(hyper, dict) else "none"


def method_table(best: pd.DataFrame) -> dict:
    """Per configuration: its algorithm, colour and label (:func:`dpnewton.pipeline.plots.method_styles`,
    as in the figures), legend order, and whether it is a registered algorithm's default configuration."""
    from .plots import method_styles

    first = best.drop_duplicates("algorithm").set_index("algorithm")
    base = first["base_algorithm"] if "base_algorithm" in first else first.index.to_series()
    hyper = first["hyper"] if "hyper" in first else pd.Series("{}", index=first.index)
    keys = {name: {"base": str(base[name]), "average": _average(hyper[name]), "variant": name} for name in first.index}
    styles = method_styles(keys)
    return {name: {"base": keys[name]["base"], "color": style["color"], "label": style["label"],
                   "default": name == keys[name]["base"], "order": i, "note": method_note(keys[name]["base"])}
            for i, (name, style) in enumerate(styles.items())}


def method_note(base: str) -> str:
    """What a reader must know beside the configuration's numbers, from its algorithm's card: its non-private
    step (``nonprivate``) and what its loss is measured on (``loss_note``); empty for neither."""
    card = ALGORITHMS.get(base)
    if card is None:
        return ""
    parts = [f"non-private step: {card.nonprivate}" if card.nonprivate else "",
             f"caveat: {card.loss_note}" if card.loss_note else ""]
    return "; ".join(p for p in parts if p)


def page_data(tables: dict, title: str, source: str) -> dict:
    """Everything the page draws, as JSON-ready columns (numbers to :data:`DIGITS` significant digits)."""
    best = tie_sets(tables["best_T"])
    data = {
        "title": title,
        "source": source,
        "tie_rule": TIE_RULE,
        "methods": method_table(best),
        "best": _columns(best, {"dataset": "dataset", "conversion": "conversion", "epsilon": "epsilon",
                                "algorithm": "method", "best_T": "T", "excess_loss_mean": "mean",
                                "excess_loss_se": "se", "runtime_s_mean": "runtime", "at_edge": "at_edge",
                                "is_best": "is_best", "tie": "tie", "ranked": "ranked",
                                "n_seeds": "n_seeds"}),
        "curves": None,
        "claims": None,
        "floor": None,
    }
    summary = tables.get("summary")
    if summary is not None and not summary.empty:
        data["curves"] = _columns(summary.sort_values("iterations"), {
            "dataset": "dataset", "conversion": "conversion", "epsilon": "epsilon", "algorithm": "method",
            "iterations": "T", "excess_loss_mean": "mean", "excess_loss_se": "se", "runtime_s_mean": "runtime"})
    claims = tables.get("claims")
    if claims is not None and not claims.empty:
        data["claims"] = _columns(claims, {c: c for c in ["claim", "setting", "conversion", "dataset", "paper",
                                                          "ours", "verdict", "reason"]})
    floor = tables.get("floor")
    if floor is not None and not floor.empty:
        data["floor"] = _columns(floor, {"dataset": "dataset", "conversion": "conversion", "epsilon": "epsilon",
                                         "ridge_floor": "ridge_floor"})
    return data


def describe_source(tables: dict, name: str) -> str:
    """The header's line: where the tables come from, and the protocol's config hash and datasets."""
    parts = [name]
    protocol = tables.get("protocol") or {}
    if protocol.get("config_hash"):
        parts.append(f"config hash {protocol['config_hash']}")
    if tables.get("summary") is None:
        parts.append("no per-T summary table: the plots show each configuration's best-T point only")
    return "; ".join(parts)


def build(out: str | Path, best_T, summary=None, claims=None, floor=None, protocol=None,
          title: str = "dpnewton results browser", source: str | None = None) -> Path:
    """Write the page to ``out`` atomically and return its path (arguments: :func:`load_tables`)."""
    from plotly.offline import get_plotlyjs

    tables = load_tables(best_T, summary, claims, floor, protocol)
    data = page_data(tables, title, describe_source(tables, source or str(Path(best_T).parent)))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(data, get_plotlyjs()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpnewton.pipeline.browser", description=__doc__.splitlines()[0])
    parser.add_argument("--best-T", required=True, help="best_T table (.parquet or .csv)")
    parser.add_argument("--summary", help="per-T summary table (.parquet or .csv); without it, best-T points only")
    parser.add_argument("--claims", help="claims.csv (the verdicts)")
    parser.add_argument("--floor", help="floor table (F*, a dotted line)")
    parser.add_argument("--protocol", help="protocol.json (config hash in the header)")
    parser.add_argument("--title", default="dpnewton results browser")
    parser.add_argument("--source", help="the header's name of the tables' origin (default: best_T's folder)")
    parser.add_argument("--out", required=True, help="the HTML page to write")
    args = parser.parse_args(argv)
    for given in (args.best_T, args.summary, args.claims, args.floor, args.protocol):
        if given and not Path(given).is_file():
            parser.error(f"{given}: no such file")
    try:
        path = build(args.out, args.best_T, args.summary, args.claims, args.floor, args.protocol, args.title,
                     args.source)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
