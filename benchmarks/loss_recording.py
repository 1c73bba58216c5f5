"""Loss recording: a batched DP-GD job that evaluates the loss of every iterate vs only its curve's points.

The loss of each iterate is untimed post-processing (the runtimes exclude it), but the job pays for it:
per step and run, log(1 + exp(-m)) over n margins and its mean. ``RunContext.loss_iterates`` lets the
pipeline evaluate only the iterates its curves keep (``jobs.curve_indices(T, 200)``; w_T always).

Two ways, interleaved (round-robin inside one process), ``--repeats`` times, S = 4 seeds per batch as in
the claims config, epsilon 10, BLAS 1 thread, CPU time of the whole ``run_algorithm`` call:
* ``every``: ``loss_iterates=None`` (every iterate 0..T);
* ``curve``: ``loss_iterates=lambda T: curve_indices(T, 200)``.
Both give the same models and, at the curve's points, the same loss bits (checked here and in
tests/algorithms/test_batching.py).

    python benchmarks/loss_recording.py [--Ts 400 2400] [--repeats 3] [--datasets a1a protein]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import common
from dpnewton.experiment import run_algorithm
from dpnewton.pipeline.jobs import curve_indices

SEEDS = [0, 1, 2, 3]
MAX_POINTS = 200
EPSILON = 10.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--Ts", type=int, nargs="+", default=[400, 2400])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datasets", nargs="+", default=["a1a", "protein"])
    args = ap.parse_args()
    rows = []
    for ds in args.datasets:
        p = common.load(ds)
        for T in args.Ts:
            ways = {"every": None, "curve": lambda T: curve_indices(T, MAX_POINTS)}
            cpu = {k: [] for k in ways}
            out = {}
            with threadpool_limits(1):
                run_algorithm(p, ds, "dp-gd", EPSILON, [0], 2)  # warm-up
                for r in range(args.repeats):
                    for way, li in ways.items():
                        c0 = time.process_time()
                        out[way] = run_algorithm(p, ds, "dp-gd", EPSILON, SEEDS, T, loss_iterates=li)
                        cpu[way].append(time.process_time() - c0)
                    print(f"{ds} T={T}: repetition {r + 1}/{args.repeats}", flush=True)
            idx = curve_indices(T, MAX_POINTS)
            same = all(np.array_equal(a.w, b.w) and np.array_equal(a.excess_loss[idx], b.excess_loss[idx])
                       for a, b in zip(out["every"], out["curve"]))
            paired = np.array(cpu["every"]) / np.array(cpu["curve"])
            rows.append({"dataset": ds, "n": p.n, "d": p.d, "S": len(SEEDS), "T": T, "points": len(idx),
                         "repeats": args.repeats, "every_cpu_s_min": min(cpu["every"]),
                         "curve_cpu_s_min": min(cpu["curve"]),
                         "ratio_min": min(cpu["every"]) / min(cpu["curve"]),
                         "ratio_paired_median": float(np.median(paired)), "same_bits": same})
            common.write_csv("loss_recording.csv", rows)
    md = [f"Batched DP-GD, S={len(SEEDS)} seeds, epsilon {EPSILON:g}, BLAS 1 thread, CPU time of the whole call; "
          f"{args.repeats} interleaved repetitions. `every`: the loss of every iterate; `curve`: only the "
          f"{MAX_POINTS}-point curve's iterates (`points`, w_T included). `ratio_min` = min(every) / min(curve); "
          "`ratio_paired_median` = median of the ratio inside a repetition. `same_bits`: the models and the "
          "curve points' losses are bit-identical.", "",
          common.md_table(rows, ["dataset", "n", "d", "T", "points", "every_cpu_s_min", "curve_cpu_s_min",
                                 "ratio_min", "ratio_paired_median", "same_bits"],
                          {"every_cpu_s_min": ".2f", "curve_cpu_s_min": ".2f", "ratio_min": ".2f",
                           "ratio_paired_median": ".2f"})]
    common.write_section("loss_recording", "\n".join(md))


if __name__ == "__main__":
    main()
