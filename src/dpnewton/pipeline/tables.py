"""The aggregate rule: run rows -> every table (parquet + CSV mirror, Markdown for humans)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..floor import floor_table
from ..io import atomic_write_json, atomic_write_text, read_parquet
from ..problems import check_optimum, load_problem_from_prepared
from . import aggregate as agg
from . import table1 as paper_table
from .jobs import HOST_COLUMNS, utc_timestamp
from .protocol_text import protocol_markdown
from .timing import cost_lookup, load_costs

log = logging.getLogger("dpnewton.pipeline")


def write_all(rows, curves, optima, timings, out: dict, protocol: dict, table1: dict, conversion: str,
              prepared=None, holdout=None) -> dict:
    """Build and write runs, summary, best_T, baseline, update_costs, table1(_long), edges, protocol (JSON,
    and in words: :mod:`dpnewton.pipeline.protocol_text`),
    best_curves, heldout when ``out`` names it (holdout on), and frontier when ``out`` names it
    (:mod:`dpnewton.pipeline.frontier`: best excess loss per method within a runtime or pass budget).
    ``timings`` are the timing rule's raw CSV files (:mod:`dpnewton.pipeline.timing`); ``optima`` the
    optimum summaries (``<dataset>.optimum.json``), each checked against its npz
    (:func:`dpnewton.problems.check_optimum`).

    With ``prepared`` (the prepared ``results/data/<dataset>.npz`` files) and ``out["floor_parquet"]``
    also the floor table (:func:`floor_frame`: the Gaussian ridge floor of the local quadratic model,
    not a lower bound, per (dataset, conversion, epsilon)) and the best-T columns ``ridge_floor`` and
    ``excess_over_floor``; ``holdout`` is the config's fraction (the training split's optimum and n).

    ``out`` maps the aggregate rule's output names (``runs_parquet``, ``runs_csv``, ...) to paths.
    """
    runs = agg.load_rows(rows)
    log.info("loaded %d run rows from %d job files", len(runs), len(rows))
    bad = runs[~runs["ledger_ok"]]
    if len(bad):
        log.warning("%d runs have a ledger total different from rho", len(bad))
    summary = agg.summarize(runs)
    best = agg.best_t(summary)
    optimum_summaries = [check_optimum(Path(p).with_suffix(".npz"), Path(p)) for p in optima]
    baseline = agg.trivial_baseline(optimum_summaries)
    best = agg.add_cell_stability(best, runs, baseline)
    floor = None
    if prepared and "floor_parquet" in out:
        floor = floor_frame(prepared, agg.floor_cells(best), holdout)
        best = agg.add_floor_ratio(best, floor)
    base_alg, ours = table1["baseline"], table1["ours"]
    costs = load_costs(timings)
    t1_long, t1 = paper_table.table1(best, cost_lookup(costs), base_alg, ours, conversion)
    frames = {"runs": runs, "summary": summary, "best_T": best, "baseline": baseline, "update_costs": costs,
              "table1": t1, "table1_long": t1_long}
    if floor is not None:
        frames["floor"] = floor
    if "heldout_parquet" in out:
        frames["heldout"] = agg.heldout_table(best, optimum_summaries)
    if "frontier_parquet" in out:
        frames["frontier"] = agg.frontier(summary, baseline, cost_lookup(costs))
    for name, frame in frames.items():
        agg.write_frame(frame, out[f"{name}_parquet"], out.get(f"{name}_csv"))
    atomic_write_text(out["table1_md"], paper_table.table1_markdown(t1, base_alg, ours, conversion))
    atomic_write_text(out["edges_md"], paper_table.edges_markdown(best))
    for _, r in best[best["at_edge"]].iterrows():
        log.warning("best T at the %s grid edge: %s %s %s eps=%g T=%s (grid %s)", r["edge"], r["dataset"],
                    r["algorithm"], r["conversion"], r["epsilon"], r["best_T"], r["grid"])
    curves_frame = agg.best_curves(agg.load_curves(curves), best)
    agg.write_frame(curves_frame, out["best_curves"])
    prov = runs[["config_hash", "package_version", "git_revision"]].drop_duplicates()
    atomic_write_text(out["protocol_md"], protocol_markdown(protocol))
    atomic_write_json(out["protocol"], {
        **protocol, "n_runs": int(len(runs)), "n_cells": int(len(best)),
        "cells_at_grid_edge": int(best["at_edge"].sum()), "ledger_mismatches": int(len(bad)),
        "package_versions": sorted(prov["package_version"].astype(str).unique()),
        "git_revisions": sorted(prov["git_revision"].astype(str).unique()),
        **provenance_summary(runs),
        "table1": {"baseline": base_alg, "ours": ours, "conversion": conversion}}, digest=True)
    log.info("wrote %d summary rows, %d best-T cells (%d at a grid edge), Table 1 for %d datasets",
             len(summary), len(best), int(best["at_edge"].sum()), len(t1))
    return frames


def floor_frame(prepared, cells, holdout=None) -> pd.DataFrame:
    """The floor table (:func:`dpnewton.floor.floor_table`) of the cells, from the prepared files
    (dataset = file stem) and their cached optima (the training split's with a holdout)."""
    wanted = {c[0] for c in cells}
    problems = {}
    for p in prepared:
        ds = Path(p).stem
        if ds in wanted:
            problems[ds] = load_problem_from_prepared(Path(p), holdout=holdout)
    missing = sorted(wanted - set(problems))
    if missing:
        raise ValueError(f"no prepared file for the floor of {missing}")
    table = floor_table(problems, cells)
    log.info("Gaussian ridge floor (local quadratic model, not a lower bound) for %d cells of %d datasets",
             len(table), len(problems))
    return table


#: software columns of the run rows, summarised in protocol.json's ``software``
SOFTWARE_COLUMNS = ["package_version", "python_version", "numpy_version", "scipy_version", "dp_accounting_version",
                    "snakemake_version", "blas_vendor", "blas_version"]


def _values(runs: pd.DataFrame, column: str) -> list[str]:
    if column not in runs:
        return []
    return sorted({str(v) for v in runs[column] if not (isinstance(v, float) and pd.isna(v)) and str(v) != ""})


def provenance_summary(runs: pd.DataFrame) -> dict:
    """protocol.json's provenance blocks, from the run rows (benchopt-style: every distinct value
    seen, so a mix of versions or hosts shows): ``software`` (versions, BLAS), ``datasets`` (the
    sha256 of each prepared file) and ``host`` (CPU model and count, platform, BLAS threads, the
    first and last run's UTC timestamp, and the time the tables were written)."""
    software = {c: _values(runs, c) for c in SOFTWARE_COLUMNS}
    datasets = ({str(d): _values(g, "dataset_sha256") for d, g in runs.groupby("dataset", sort=True)}
                if "dataset_sha256" in runs else {})
    host = {c: _values(runs, c) for c in HOST_COLUMNS if c != "timestamp_utc"}
    stamps = _values(runs, "timestamp_utc")
    host.update({"first_run_utc": stamps[0] if stamps else None, "last_run_utc": stamps[-1] if stamps else None,
                 "tables_written_utc": utc_timestamp()})
    return {"software": software, "dataset_sha256": datasets, "host": host}


#: the fix of a damaged table
TABLE_FIX = "delete it and run `snakemake {path}` (the target before your other options): rule aggregate recomputes it"


def read_table(path) -> pd.DataFrame:
    """A table written by :func:`write_all`, verified (:func:`dpnewton.io.read_parquet`)."""
    return read_parquet(path, fix=TABLE_FIX)
