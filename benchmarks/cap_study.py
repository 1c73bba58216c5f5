"""A lower shared T cap, replayed on one claims run: which verdicts it changes and how much update time it saves.

The claims config extends every T grid until its best T is interior or a run would exceed the dataset's
``max_passes`` (pass-equivalents per run: first + (T - 1) x per update, the card's cost model,
:func:`dpnewton.pipeline.t_search.pass_capped`). A run's result depends only on its identity (its own
``SeedSequence``), and the T search reaches the same T values in the same order under any cap up to the
point where the cap stops it. So a run of the same config with a lower cap ``C`` holds the rows of this
run whose T is at most that cap's largest admissible T for their configuration (bit for bit, except that
a lockstep batch of 8 or more runs, whose width a lower cap can change, matches to rounding:
docs/pipeline.md, Job granularity), and its seed-0 probe can have rejected only a T within that cap (a
rejection recorded beyond it is dropped). This
script rebuilds the aggregate tables from those rows (:func:`dpnewton.pipeline.aggregate.summarize`,
``best_t``, ``add_cell_stability``, ``best_curves`` from every run's stored curves) and evaluates the
claims (:func:`dpnewton.pipeline.claims.evaluate`) under the run's own cap and under each lower cap.

Per cap: the rows and the timed update time (``runtime_s``, each run's share of its batch's step time, a
trajectory that releases several models counted once)
that the capped run would not spend, the cells whose best T changes, the cells whose best T sits at the
new cap, and every verdict that differs from the run's own (:func:`verdict_changes.compare`). The
update time is a share of what the run jobs time; their wall time also holds loading, loss evaluation
and writing, which a lower cap shortens less than in proportion.

    python benchmarks/cap_study.py RUN_DIR --caps 19200 38400 [--config config/claims.yaml] [--out DIR]

Reads the run's tables and curves (pandas); minutes on one core for a full claims run.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

import common
import verdict_changes
from dpnewton.pipeline import aggregate as agg
from dpnewton.pipeline.claims import evaluate
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.t_search import pass_capped
from dpnewton.pipeline.tables import read_table

NAME = "cap_study"
GROUP = ["dataset", "algorithm", "conversion", "epsilon"]
TOP_MOVED = 20
SIDES = ("own", "capped")  # verdict_own: under the run's own cap; verdict_capped: under a lower one
CHECK_SIDES = ("run", "rebuilt")  # the run's claims.csv vs the verdicts rebuilt here from its rows
NO_CAP = 2 ** 62


def largest_t(max_passes: float, base: str, n: int, d: int, hyper: str) -> float:
    """The largest T whose run stays within ``max_passes`` (:func:`~dpnewton.pipeline.t_search.pass_capped`, the
    jobs' own rule; inf for a method without a pass count)."""
    rule = pass_capped({"max_passes": max_passes, "max_iterations": NO_CAP}, base, int(n), int(d),
                       json.loads(hyper) if isinstance(hyper, str) else hyper)
    return math.inf if rule["max_iterations"] == NO_CAP else float(rule["max_iterations"])


def capped_runs(runs: pd.DataFrame, max_passes: float) -> pd.DataFrame:
    """The rows a run with cap ``max_passes`` would hold, with probe rejections beyond that cap dropped."""
    keys = ["base_algorithm", "n", "d", "hyper"]
    limits = runs[keys].drop_duplicates()
    limits["t_cap"] = [largest_t(max_passes, *row) for row in limits.itertuples(index=False)]
    r = runs.merge(limits, on=keys, how="left")
    r = r[r["iterations"].astype(float) <= r["t_cap"]].copy()
    if "probe_rejected_T" in r:
        probe = pd.to_numeric(r["probe_rejected_T"]).fillna(0)
        r["probe_rejected_T"] = probe.where(probe <= r["t_cap"], 0).astype(int)
    return r.drop(columns="t_cap").reset_index(drop=True)


def tables(runs: pd.DataFrame, curves: pd.DataFrame, baseline: pd.DataFrame) -> dict:
    summary = agg.summarize(runs)
    best = agg.add_cell_stability(agg.best_t(summary), runs, baseline)
    return {"runs": runs, "summary": summary, "best": best, "curves": agg.best_curves(curves, best)}


def verdicts_of(t: dict, baseline: pd.DataFrame, costs: pd.DataFrame, claims: dict) -> tuple[pd.DataFrame,
                                                                                                 pd.DataFrame]:
    """The claims' verdicts and the report's "Beyond the paper" table (best private method per cell)."""
    verdicts, extra = evaluate(t["runs"], t["summary"], t["best"], baseline, t["curves"], costs, claims)
    return verdicts, extra["beyond"]


def best_method_changes(own: pd.DataFrame, capped: pd.DataFrame) -> pd.DataFrame:
    """The (dataset, epsilon) cells whose best private method (the report's "Beyond the paper") differs."""
    b = own[["dataset", "epsilon", "best", "best_excess"]].merge(
        capped[["dataset", "epsilon", "best", "best_excess"]], on=["dataset", "epsilon"], suffixes=("", "_capped"))
    return b[b["best"] != b["best_capped"]]


def moved_cells(own: dict, capped: dict) -> pd.DataFrame:
    """The cells whose best T differs under the cap: both best T and the capped loss over the own one."""
    b = own["best"].merge(capped["best"][GROUP + ["best_T", "edge", "excess_loss_mean"]], on=GROUP,
                          suffixes=("", "_capped"))
    b = b[b["best_T"].astype(float) != b["best_T_capped"].astype(float)].copy()
    b["loss_ratio"] = b["excess_loss_mean_capped"] / b["excess_loss_mean"]
    return b[GROUP + ["best_T", "best_T_capped", "edge_capped", "loss_ratio"]].sort_values("loss_ratio",
                                                                                           ascending=False)


def cap_row(cap: float, own: dict, capped: dict, changes: dict, best_changes: pd.DataFrame) -> dict:
    runs, kept = own["runs"], capped["runs"]
    all_s, kept_s = (common.trajectory_update_time(r.to_dict("records"))[0] for r in (runs, kept))
    ratio = moved_cells(own, capped)["loss_ratio"]
    both = changes["both"]
    return {"max_passes": int(cap), "rows": len(kept), "rows_dropped": len(runs) - len(kept),
            "update_s_dropped": all_s - kept_s,
            "update_share_dropped": 1 - kept_s / all_s,
            "cells": len(own["best"]), "cells_best_T_moved": len(ratio),
            "cells_at_new_cap": int(capped["best"]["edge"].astype(str).eq("high").sum()),
            "moved_loss_ratio_median": float(ratio.median()) if len(ratio) else float("nan"),
            "moved_loss_ratio_max": float(ratio.max()) if len(ratio) else float("nan"),
            "best_method_changed": len(best_changes),
            "verdicts": len(both), "verdicts_changed": len(verdict_changes.changed_rows(both, SIDES))}


def section(run_dir: Path, own_cap: float, rows: list[dict], changed: dict[int, pd.DataFrame],
            moved: dict[int, pd.DataFrame], best_changed: dict[int, pd.DataFrame], own_check: dict) -> str:
    both = own_check["both"]
    lines = [f"Run: `{run_dir}` (its cap: {int(own_cap)} pass-equivalents per run); every lower cap replayed on "
             "its rows (the rows a run with that cap would hold; lockstep batches of 8 or more runs to rounding). "
             "Check: the verdicts rebuilt here "
             f"from the run's rows under its own cap equal its `results/claims/claims.csv` in "
             f"{len(both) - len(verdict_changes.changed_rows(both, CHECK_SIDES))} of {len(both)} rows.", "",
             common.md_table(rows, ["max_passes", "rows", "rows_dropped", "update_s_dropped", "update_share_dropped",
                                    "cells", "cells_best_T_moved", "cells_at_new_cap", "moved_loss_ratio_median",
                                    "moved_loss_ratio_max", "best_method_changed", "verdicts", "verdicts_changed"],
                             {"update_s_dropped": ".0f", "update_share_dropped": ".3f",
                              "moved_loss_ratio_median": ".3g", "moved_loss_ratio_max": ".3g"}), "",
             "`moved_loss_ratio`: a moved cell's mean excess loss at its capped best T over its loss at the run's "
             "own best T (>= 1). `best_method_changed`: (dataset, epsilon) cells whose best private method (the "
             "report's *Beyond the paper*, protocol conversion) differs under the cap.", ""]
    for cap, frame in moved.items():
        if len(frame):
            top = frame.head(TOP_MOVED).to_dict("records")
            lines += [f"Cells whose best T moves at cap {cap} ({len(frame)}; the {len(top)} largest loss ratios):", "",
                      common.md_table(top, GROUP + ["best_T", "best_T_capped", "edge_capped", "loss_ratio"],
                                      {"loss_ratio": ".3g"}), ""]
    for cap, frame in best_changed.items():
        if len(frame):
            lines += [f"Cells whose best private method changes at cap {cap}:", "",
                      common.md_table(frame.to_dict("records"), ["dataset", "epsilon", "best", "best_excess",
                                                                 "best_capped", "best_excess_capped"],
                                      {"best_excess": ".3g", "best_excess_capped": ".3g"}), ""]
    for cap, frame in changed.items():
        if len(frame):
            lines += [f"Verdicts that change at cap {cap} (`verdict_own`: under the run's own cap):", "",
                      common.md_table(frame.sort_values(verdict_changes.KEYS).to_dict("records"),
                                      verdict_changes.KEYS + ["verdict_own", "verdict_capped", "ours_capped"]), ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished claims run's folder (results/tables, results/runs)")
    parser.add_argument("--caps", type=float, nargs="+", required=True, help="lower caps in pass-equivalents")
    parser.add_argument("--config", type=Path, default=common.REPO_DIR / "config" / "claims.yaml")
    parser.add_argument("--out", type=Path, default=None, help="write the CSV and section here instead")
    args = parser.parse_args(argv)
    tables_dir = args.run_dir / "results" / "tables"
    if not (tables_dir / "runs.parquet").exists():
        raise SystemExit(f"{tables_dir / 'runs.parquet'} does not exist: give the folder of a finished claims run")
    cfg = load_config(yaml.safe_load(args.config.read_text()))
    own_caps = {v.get("max_passes") for v in cfg["datasets"].values()}
    if len(own_caps) != 1 or None in own_caps:
        raise SystemExit(f"{args.config} does not give every dataset one max_passes ({sorted(map(str, own_caps))})")
    own_cap = float(own_caps.pop())
    if any(c >= own_cap for c in args.caps):
        raise SystemExit(f"--caps must lie below the run's own cap {own_cap:g}")
    runs = read_table(tables_dir / "runs.parquet")
    baseline = read_table(tables_dir / "baseline.parquet")
    costs = read_table(tables_dir / "update_costs.parquet")
    curves = agg.load_curves(sorted((args.run_dir / "results" / "runs").rglob("*.curves.parquet")))
    own_runs = capped_runs(runs, own_cap)
    if len(own_runs) != len(runs):
        raise SystemExit(f"{len(runs) - len(own_runs)} rows lie beyond the config's own cap: is {args.config} "
                         "the run's config?")
    own = tables(own_runs, curves, baseline)
    own_verdicts, own_beyond = verdicts_of(own, baseline, costs, cfg["claims"])
    own_check = verdict_changes.compare(pd.read_csv(args.run_dir / verdict_changes.RUN_TABLE), own_verdicts,
                                        CHECK_SIDES)
    rows, changed, moved, best_changed = [], {}, {}, {}
    for cap in sorted(args.caps, reverse=True):
        capped = tables(capped_runs(runs, cap), curves, baseline)
        verdicts, beyond = verdicts_of(capped, baseline, costs, cfg["claims"])
        parts = verdict_changes.compare(own_verdicts, verdicts, SIDES)
        best_changed[int(cap)] = best_method_changes(own_beyond, beyond)
        rows.append(cap_row(cap, own, capped, parts, best_changed[int(cap)]))
        both = parts["both"]
        changed[int(cap)] = verdict_changes.changed_rows(both, SIDES)
        moved[int(cap)] = moved_cells(own, capped)
        print(f"cap {cap:g}: {rows[-1]}")
    if args.out is not None:
        common.RESULTS_DIR = args.out
    common.write_csv(f"{NAME}.csv", rows)
    common.write_section(NAME, section(args.run_dir, own_cap, rows, changed, moved, best_changed, own_check),
                         readme=args.out is None)
    print(f"wrote {common.RESULTS_DIR / (NAME + '.md')}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
