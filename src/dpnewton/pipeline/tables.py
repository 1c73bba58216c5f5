"""The aggregate rule: run rows -> every table (parquet + CSV mirror, Markdown for humans)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from ..io import atomic_write_json, atomic_write_text
from . import aggregate as agg
from .timing import cost_lookup, load_costs

log = logging.getLogger("dpnewton.pipeline")


def write_all(rows, curves, optima, timings, out: dict, protocol: dict, table1: dict, conversion: str) -> dict:
    """Build and write runs, summary, best_T, baseline, update_costs, table1(_long), edges, protocol,
    best_curves, and heldout when ``out`` names it (holdout on). ``timings`` are the timing rule's raw
    CSV files (:mod:`dpnewton.pipeline.timing`).

    ``out`` maps the aggregate rule's output names (``runs_parquet``, ``runs_csv``, ...) to paths.
    """
    runs = agg.load_rows(rows)
    log.info("loaded %d run rows from %d job files", len(runs), len(rows))
    bad = runs[~runs["ledger_ok"]]
    if len(bad):
        log.warning("%d runs have a ledger total different from rho", len(bad))
    summary = agg.summarize(runs)
    best = agg.best_t(summary)
    optimum_summaries = [json.loads(Path(p).read_text()) for p in optima]
    baseline = agg.trivial_baseline(optimum_summaries)
    best = agg.add_cell_stability(best, runs, baseline)
    base_alg, ours = table1.get("baseline", "dp-gd"), table1.get("ours", "hess-clip")
    costs = load_costs(timings)
    t1_long, t1 = agg.table1(best, cost_lookup(costs), base_alg, ours, conversion)
    frames = {"runs": runs, "summary": summary, "best_T": best, "baseline": baseline, "update_costs": costs,
              "table1": t1, "table1_long": t1_long}
    if "heldout_parquet" in out:
        frames["heldout"] = agg.heldout_table(best, optimum_summaries)
    for name, frame in frames.items():
        agg.write_frame(frame, out[f"{name}_parquet"], out.get(f"{name}_csv"))
    atomic_write_text(out["table1_md"], agg.table1_markdown(t1, base_alg, ours, conversion))
    atomic_write_text(out["edges_md"], agg.edges_markdown(best))
    for _, r in best[best["at_edge"]].iterrows():
        log.warning("best T at the %s grid edge: %s %s %s eps=%g T=%s (grid %s)", r["edge"], r["dataset"],
                    r["algorithm"], r["conversion"], r["epsilon"], r["best_T"], r["grid"])
    curves_frame = agg.best_curves(agg.load_curves(curves), best)
    agg.write_frame(curves_frame, out["best_curves"])
    prov = runs[["config_hash", "package_version", "git_revision"]].drop_duplicates()
    atomic_write_json(out["protocol"], {
        **protocol, "n_runs": int(len(runs)), "n_cells": int(len(best)),
        "cells_at_grid_edge": int(best["at_edge"].sum()), "ledger_mismatches": int(len(bad)),
        "package_versions": sorted(prov["package_version"].astype(str).unique()),
        "git_revisions": sorted(prov["git_revision"].astype(str).unique()),
        "table1": {"baseline": base_alg, "ours": ours, "conversion": conversion}})
    log.info("wrote %d summary rows, %d best-T cells (%d at a grid edge), Table 1 for %d datasets",
             len(summary), len(best), int(best["at_edge"].sum()), len(t1))
    return frames


def read_table(path) -> pd.DataFrame:
    return pd.read_parquet(path)
