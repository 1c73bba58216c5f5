"""Per-step cost of precond-dp-gd against DP-GD, paired in one process (a1a, protein).

precond-dp-gd's update is DP-GD's (one blocked margins-and-gradient pass over Z, one Gaussian
gradient release) plus one d x d matrix-vector product with the once-computed P^-1; its first
update also does the one-time work: the Gram pass B = Z^T Z/(4n), the release of B's upper
triangle, and one ``eigh`` of the d x d B~ (docs/algorithms.md §13). Target: a steady-state step
within 1.3x of a DP-GD step.

How: ``run_algorithm`` with T = K + 1 for both methods (epsilon 1, seed r), the library's
update-step timer patched to the calling thread's CPU time (common.use_clock_in_library; BLAS
pinned to 1 thread), per-update times = np.diff(RunResult.elapsed). Update 0 is reported
separately (setup); steps 1..K are the steady state. Each repetition runs both methods back to
back, in alternating order, single runs and batches of 8 (the library books the batch step time / S
to each run); the paired ratio of a repetition is min(precond steps) / min(dp-gd steps) (least
disturbed samples, the machine is shared), and its median-based twin median / median. Reported:
the median over repetitions of the paired ratios and the smallest one, min / median of each
method's per-repetition minimum, and the setup cost (update 0 minus the steady-state median) in ms
and in DP-GD steps. Also timed alone: the d x d matvec P^-1 g (interleaved with a DP-GD pass).

    python benchmarks/precond_step.py [--repeats 7] [--iters 40] [--batch 8]
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

import common
from dpnewton.experiment import run_algorithm

ALGS = ("dp-gd", "precond-dp-gd")
TARGET = 1.3


def per_update(p, alg: str, seeds: list[int], K: int) -> np.ndarray:
    """Per-update times (update 0, then the steady-state updates 1..K) of the first run of a batch."""
    res = run_algorithm(p, p.name, alg, 1.0, seeds, K + 1)
    return np.diff(res[0].elapsed)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--iters", type=int, default=40, help="K steady-state updates per timed run")
    ap.add_argument("--batch", type=int, default=8, help="batch size of the batched comparison")
    ap.add_argument("--clock", choices=sorted(common.CLOCKS), default="cpu")
    args = ap.parse_args()
    common.use_clock_in_library(args.clock)
    K = args.iters
    rows = []
    rng = np.random.default_rng(2)
    with threadpool_limits(1):
        for name, src, p in common.timing_problems():
            n, d = p.n, p.d
            Pinv = np.linalg.inv(p.Z[:4 * d].T @ p.Z[:4 * d] + np.eye(d))
            g = rng.standard_normal(d)
            W1 = rng.standard_normal((1, d)) / np.sqrt(d)
            kern = common.interleaved({"matvec_PinvG": lambda: Pinv @ g,
                                       "margins_and_grads_S1": lambda: p.margins_and_grads(W1)},
                                      repeats=args.repeats, inner=200, clock=args.clock)
            for label, seeds in (("single", [0]), (f"batch{args.batch}_per_run", list(range(args.batch)))):
                mins = {a: [] for a in ALGS}
                meds = {a: [] for a in ALGS}
                setup = {a: [] for a in ALGS}
                ratio_min, ratio_med = [], []
                for r in range(args.repeats):
                    order = ALGS if r % 2 == 0 else ALGS[::-1]
                    got = {}
                    for a in order:
                        dt = per_update(p, a, [s + 100 * r for s in seeds], K)
                        got[a] = dt
                        steady = dt[1:]
                        mins[a].append(float(np.min(steady)))
                        meds[a].append(float(np.median(steady)))
                        setup[a].append(float(dt[0] - np.median(steady)))
                    ratio_min.append(np.min(got["precond-dp-gd"][1:]) / np.min(got["dp-gd"][1:]))
                    ratio_med.append(np.median(got["precond-dp-gd"][1:]) / np.median(got["dp-gd"][1:]))
                    print(f"{name} {label}: repetition {r + 1}/{args.repeats}: ratio {ratio_min[-1]:.3f}", flush=True)
                dpgd_step = float(np.median(meds["dp-gd"]))
                for a in ALGS:
                    row = {"dataset": name, "source": src, "n": n, "d": d, "clock": args.clock, "runs": label,
                           "what": a, "K": K, "repeats": args.repeats,
                           "step_min_ms": float(np.min(mins[a])) * 1e3,
                           "step_median_ms": float(np.median(mins[a])) * 1e3,
                           "setup_ms": float(np.median(setup[a])) * 1e3,
                           "setup_in_dpgd_steps": float(np.median(setup[a])) / dpgd_step}
                    if a == "precond-dp-gd":
                        row["ratio_vs_dpgd"] = float(np.median(ratio_min))
                        row["ratio_vs_dpgd_min"] = float(np.min(ratio_min))
                        row["ratio_vs_dpgd_max"] = float(np.max(ratio_min))
                        row["ratio_of_medians"] = float(np.median(ratio_med))
                        row["target"] = f"<= {TARGET} x dp-gd step"
                        row["meets_target"] = row["ratio_vs_dpgd"] <= TARGET
                    rows.append(row)
            for k, v in kern.items():
                rows.append({"dataset": name, "source": src, "n": n, "d": d, "clock": args.clock, "runs": "kernel",
                             "what": k, "repeats": args.repeats, "step_min_ms": float(np.min(v)) * 1e3,
                             "step_median_ms": float(np.median(v)) * 1e3})
            common.write_csv("precond_step.csv", rows)
    md = [f"Clock: **{args.clock}** "
          f"({'thread CPU time, library timer patched to it' if args.clock == 'cpu' else 'wall'}); "
          f"BLAS 1 thread. epsilon 1, T = {K} + 1 per timed run, {args.repeats} paired repetitions (order alternated). "
          "`step_*` = min / median over repetitions of each repetition's minimum steady-state update (updates "
          "1..K; ms). `ratio_vs_dpgd` = median over repetitions of min(precond step) / min(dp-gd step) of the "
          "same repetition (`_min`/`_max`: its range; `ratio_of_medians`: the same with per-run medians). "
          "`setup_ms` = update 0 minus the steady-state median (precond: Gram pass for B, the upper-triangle "
          "release and one eigh; dp-gd: first-call effects only), also in DP-GD steps. `batchS_per_run`: "
          "batch step time / S as the library books it. `kernel` rows: the extra matvec P^-1 g alone and one "
          "margins-and-gradient pass of one run (200 calls per sample).", "",
          common.md_table(rows, ["dataset", "source", "n", "d", "runs", "what", "step_min_ms", "step_median_ms",
                                 "ratio_vs_dpgd", "ratio_vs_dpgd_min", "ratio_vs_dpgd_max", "ratio_of_medians",
                                 "setup_ms", "setup_in_dpgd_steps", "meets_target"],
                          {"step_min_ms": ".4f", "step_median_ms": ".4f", "ratio_vs_dpgd": ".3f",
                           "ratio_vs_dpgd_min": ".3f", "ratio_vs_dpgd_max": ".3f", "ratio_of_medians": ".3f",
                           "setup_ms": ".2f", "setup_in_dpgd_steps": ".1f"}), ""]
    common.write_section("precond_step", "\n".join(md))


if __name__ == "__main__":
    main()
