"""Check the timing stage's runtime model: a lone run of T updates takes T x the per-update cost.

Table 1, Figure 1 and the claims C2/C3 use runtime(T) = first + (T - 1) x cost, from the medians of
short lone runs (``results/tables/update_costs.parquet``, rule ``time_updates``;
:func:`dpnewton.pipeline.timing.lone_runtime`). This script runs, in one process and round-robin, lone runs of DP-GD and
Hess-clip at their best T of a finished pipeline run (conversion bs16) and compares the measured
update time with the model, for every (dataset, epsilon) cell whose predicted run is at most
``--max-seconds`` long. It also shows the run jobs' own recorded time (``runtime_s_mean``: for
DP-GD a share of a step batched over the T grid, on a machine shared with other jobs), which the
pipeline no longer compares. Wall clock, the library's own timer, as in the pipeline.

    python benchmarks/lone_runtime.py RUN_DIR [--repeats 3] [--max-seconds 25]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import common
from dpnewton.experiment import run_algorithm
from dpnewton.pipeline.timing import cost_lookup, runtime_column
from dpnewton.problems import load_problem_from_prepared

ALGORITHMS = ("dp-gd", "hess-clip")
SEED = 0


def cells(run_dir: Path, max_seconds: float) -> pd.DataFrame:
    best = pd.read_parquet(run_dir / "results/tables/best_T.parquet")
    costs = pd.read_parquet(run_dir / "results/tables/update_costs.parquet")
    b = best[(best["conversion"] == "bs16") & best["algorithm"].isin(ALGORITHMS)].dropna(subset=["best_T"])
    b = b.merge(costs[["dataset", "algorithm", "first_update_s", "s_per_update"]], on=["dataset", "algorithm"])
    b["predicted_s"] = runtime_column(b, cost_lookup(costs))
    return b[b["predicted_s"] <= max_seconds].sort_values(["dataset", "epsilon", "algorithm"]).reset_index(drop=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path, help="a finished pipeline run (with results/tables/update_costs.parquet)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=25.0, help="skip cells whose predicted run is longer")
    args = ap.parse_args()
    todo = cells(args.run_dir, args.max_seconds)
    problems = {ds: load_problem_from_prepared(args.run_dir / f"results/data/{ds}.npz")
                for ds in todo["dataset"].unique()}
    measured = {i: [] for i in todo.index}
    for k in range(args.repeats):
        for i, r in todo.iterrows():
            res = run_algorithm(problems[r["dataset"]], r["dataset"], r["algorithm"], float(r["epsilon"]), [SEED],
                                int(r["best_T"]))[0]
            measured[i].append(res.runtime_s)
        print(f"round {k + 1}/{args.repeats} done", flush=True)
    rows = []
    for i, r in todo.iterrows():
        m = float(np.median(measured[i]))
        rows.append({"dataset": r["dataset"], "epsilon": float(r["epsilon"]), "algorithm": r["algorithm"],
                     "best_T": int(r["best_T"]), "first_ms": 1e3 * float(r["first_update_s"]),
                     "cost_ms": 1e3 * float(r["s_per_update"]),
                     "predicted_s": float(r["predicted_s"]), "measured_s": m,
                     "measured_min_s": float(np.min(measured[i])), "measured_max_s": float(np.max(measured[i])),
                     "measured_over_predicted": m / float(r["predicted_s"]),
                     "recorded_in_run_s": float(r["runtime_s_mean"]),
                     "recorded_over_measured": float(r["runtime_s_mean"]) / m})
    common.write_csv("lone_runtime.csv", rows)
    frame = pd.DataFrame(rows)
    ratios = []
    for (ds, e), g in frame.groupby(["dataset", "epsilon"]):
        if set(g["algorithm"]) >= set(ALGORITHMS):
            gd, hc = g.set_index("algorithm").loc["dp-gd"], g.set_index("algorithm").loc["hess-clip"]
            ratios.append({"dataset": ds, "epsilon": e, "model_ratio": gd["predicted_s"] / hc["predicted_s"],
                           "lone_ratio": gd["measured_s"] / hc["measured_s"],
                           "recorded_ratio": gd["recorded_in_run_s"] / hc["recorded_in_run_s"]})
    for r in ratios:
        r["lone_over_model"] = r["lone_ratio"] / r["model_ratio"]
    q = frame["measured_over_predicted"]
    md = [f"Run directory: `{args.run_dir}` (bs16, seed {SEED}); {len(frame)} (dataset, epsilon, algorithm) cells "
          f"with a predicted lone run of at most {args.max_seconds:g} s, each run {args.repeats} times round-robin "
          "in one process (median shown). *predicted* = first update + (best T - 1) x per-update cost, the timing "
          "stage's medians (the pipeline's model); *measured* = "
          "the lone run's update time (wall clock, the library's timer); *recorded* = the run job's own "
          "`runtime_s_mean` (DP-GD: a share of a step batched over its T grid).", "",
          common.md_table(rows, ["dataset", "epsilon", "algorithm", "best_T", "first_ms", "cost_ms", "predicted_s",
                                 "measured_s", "measured_over_predicted", "recorded_in_run_s",
                                 "recorded_over_measured"],
                          {"first_ms": ".3f", "cost_ms": ".3f", "predicted_s": ".3g", "measured_s": ".3g",
                           "measured_over_predicted": ".3f", "recorded_in_run_s": ".3g",
                           "recorded_over_measured": ".3f"}), "",
          f"measured / predicted over all cells: median {q.median():.3f}, range {q.min():.3f}-{q.max():.3f}.", ""]
    if ratios:
        md += ["Table 1 ratio DP-GD / Hess-clip of a cell from the model, from the lone runs, and from the run "
               "jobs' recorded times:", "",
               common.md_table(ratios, ["dataset", "epsilon", "model_ratio", "lone_ratio", "lone_over_model",
                                        "recorded_ratio"],
                               {"model_ratio": ".2f", "lone_ratio": ".2f", "lone_over_model": ".3f",
                                "recorded_ratio": ".2f"})]
    common.write_section("lone_runtime", "\n".join(md))


if __name__ == "__main__":
    main()
