"""Re-time the best-T runs of table1*.csv in one process, interleaved, with a gemv DP-GD as well.

For every row (dataset, epsilon, conversion) of ``results/table1.csv`` and ``results/table1_b.csv``
(rows with identical best T's are timed once), time -- round-robin, ``--repeats`` times, min kept:
* ``hess`` : one Hess-clip run at its best T (library, run_algorithm, update time runtime_s);
* ``gd_lib``: one DP-GD run at its best T (library: since c3abb36 a row-blocked gemv pass; the old
  core used a lane-padded width-8 gemm even for one run);
* ``gd_gemv``: the same DP-GD update (same math, same noise scale) as a plain numpy loop with a
  gemv pair per iteration -- what the official code does; timed around the update loop only.
Clock: thread CPU time by default (``--clock``; the library's update timer is patched to it, see
common.use_clock_in_library). Ratios ``gd_lib / hess`` and ``gd_gemv / hess`` are then measured under the
same load, minutes apart at most. The excess losses are those of table1*.csv (the retimed runs are not
re-scored).

Results of the core before c3abb36 are kept in ``results/table1_retimed_oldcore.csv`` (static) and
shown next to the new ones (``ratio_lib_old``).

    python benchmarks/table1_retime.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import csv
import time

import numpy as np
from threadpoolctl import threadpool_limits

import common
from dpnewton.experiment import resolve_budget, run_algorithm

PAPER = {"a1a": [4.87, 2.95, 5.09, 30.59], "synthetic": [2.90, 2.90, 5.19, 11.61],
         "adult": [12.08, 11.84, 22.17, 38.16], "covertype": [24.19, 19.85, 35.70, 36.20]}
EPS = [0.01, 0.1, 1.0, 10.0]
CLOCK = "cpu"


def gd_gemv_time(p, rho, T, seed):
    """Clock time of the plain-gemv DP-GD baseline (:func:`common.gemv_dpgd`)."""
    t0 = common.CLOCKS[CLOCK]()
    common.gemv_dpgd(p, rho, T, seed)
    return common.CLOCKS[CLOCK]() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rebuild", action="store_true", help="only rebuild the section from table1_retimed.csv")
    ap.add_argument("--resume", action="store_true", help="keep rows already in table1_retimed.csv")
    ap.add_argument("--limit", type=int, default=None, help="only the first N rows (smoke test)")
    ap.add_argument("--clock", choices=sorted(common.CLOCKS), default="cpu",
                    help="cpu: thread CPU time, also patched into the library's update timer")
    args = ap.parse_args()
    global CLOCK
    CLOCK = args.clock
    common.use_clock_in_library(CLOCK)
    rows = []
    for f in ("table1.csv", "table1_b.csv"):
        path = common.RESULTS_DIR / f
        if path.exists():
            with open(path) as fh:
                rows += [dict(r, source=f) for r in csv.DictReader(fh)]
    rows = rows[:args.limit] if args.limit else rows
    if args.rebuild:
        rows, args.resume = [], True
    out, problems = [], {}
    done_path = common.RESULTS_DIR / "table1_retimed.csv"
    if args.resume and done_path.exists():
        with open(done_path) as fh:
            out = [{k: (float(v) if k.endswith(("_s", "ratio_lib", "ratio_gemv")) else v) for k, v in r.items()
                    if k != "ratio_lib_old"} for r in csv.DictReader(fh)]
    done = {(r["dataset"], float(r["epsilon"]), r["conversion"]) for r in out}
    with threadpool_limits(1):
        for r in rows:
            ds, eps, conv = r["dataset"], float(r["epsilon"]), r["conversion"]
            if (ds, eps, conv) in done:
                continue
            Tg, Th = int(r["dp-gd_T"]), int(r["hess-clip_T"])
            if ds not in problems:
                problems[ds] = common.load(ds)
            p = problems[ds]
            _, rho = resolve_budget(eps, None, p.n, conv)
            t = {"hess": [], "gd_lib": [], "gd_gemv": []}
            for rep in range(args.repeats):
                t["hess"].append(run_algorithm(p, ds, "hess-clip", eps, [rep], Th, conversion=conv)[0].runtime_s)
                t["gd_lib"].append(run_algorithm(p, ds, "dp-gd", eps, [rep], Tg, conversion=conv)[0].runtime_s)
                t["gd_gemv"].append(gd_gemv_time(p, rho, Tg, rep))
            m = {k: float(np.min(v)) for k, v in t.items()}
            row = {"dataset": ds, "epsilon": eps, "conversion": conv, "seeds_in_selection": r["seeds"],
                   "dp-gd_T": Tg, "hess-clip_T": Th, "hess_s": m["hess"], "gd_lib_s": m["gd_lib"],
                   "gd_gemv_s": m["gd_gemv"], "ratio_lib": m["gd_lib"] / m["hess"],
                   "ratio_gemv": m["gd_gemv"] / m["hess"],
                   "paper_ratio": PAPER[ds][EPS.index(eps)] if ds in PAPER and eps in EPS else ""}
            out.append(row)
            print(row, flush=True)
            common.write_csv("table1_retimed.csv", [{k: v for k, v in x.items() if k != "ratio_lib_old"} for x in out])
    old = {}
    old_path = common.RESULTS_DIR / "table1_retimed_oldcore.csv"
    if old_path.exists():
        with open(old_path) as fh:
            old = {(r["dataset"], float(r["epsilon"]), r["conversion"]): float(r["ratio_lib"])
                   for r in csv.DictReader(fh)}
    for r in out:
        r["ratio_lib_old"] = old.get((r["dataset"], float(r["epsilon"]), r["conversion"]), "")
    md = [f"Best T's from table1*.csv (chosen with the old core; the choice depends on excess loss, not on time); "
          f"each best-T run re-timed with the **current core** on the **{CLOCK}** clock (the old-core run used wall "
          f"clock) in one process, round-robin, min of {args.repeats}. "
          "`ratio_lib` = library DP-GD (row-blocked gemv pass) / Hess-clip; `ratio_gemv` = plain-gemv DP-GD (as the "
          "official code) / Hess-clip; `ratio_lib_old` = library DP-GD / Hess-clip measured the same way with the "
          "core before c3abb36 (lane-padded gemm; `table1_retimed_oldcore.csv`).", "",
          common.md_table(sorted(out, key=lambda r: (str(r["dataset"]), str(r["conversion"]), float(r["epsilon"]))),
                          ["dataset", "epsilon", "conversion", "seeds_in_selection", "dp-gd_T", "hess-clip_T",
                           "hess_s", "gd_lib_s", "gd_gemv_s", "ratio_lib", "ratio_gemv", "ratio_lib_old",
                           "paper_ratio"],
                          {"hess_s": ".3f", "gd_lib_s": ".3f", "gd_gemv_s": ".3f", "ratio_lib": ".2f",
                           "ratio_gemv": ".2f", "ratio_lib_old": ".2f"}), ""]
    common.write_section("table1_retime", "\n".join(md))


if __name__ == "__main__":
    main()
