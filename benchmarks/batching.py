"""Batching: S=10 DP-GD seeds in one batch vs 10 sequential runs (throughput and bit-identity).

Datasets a1a and protein (real), T=100, epsilon=1, BLAS 1 thread. Three ways, interleaved
(round-robin inside one process), ``--repeats`` times; min and median reported:
* ``batch``: run_algorithm(seeds=0..9) -- one row-blocked pass over Z per iteration serves all
  runs (LogisticProblem.margins_and_grads: per block, one gemv pair per run);
* ``sequential``: run_algorithm(seeds=[s]) ten times -- the same code path with S=1;
* ``gemv_sequential``: a plain numpy DP-GD loop per run with unblocked gemv (Z @ w, Z^T @ s),
  the cheapest textbook single-run implementation (not bit-identical to the library's blocked
  sums; same math, same noise scale);
* ``blas ceiling`` (no optimizer): T x 10 bare gemv pairs (Z @ w, r @ Z) vs T bare gemm pairs
  with 10 columns (Z @ W^T, R^T @ Z) on the same Z -- the most that *any* batched implementation on
  this BLAS can gain over sequential runs that each cost one gemv pair per step.
Each way is timed on two clocks: wall and the process's CPU time (BLAS has one thread, so CPU time
is the work done without the preemption by other jobs on the oversubscribed cores; ratios on CPU
time are the headline). Both cover the whole call (incl. the loss evaluation the results do not
count); ``recorded`` = the update time the results report (sum of runtime_s, library wall clock).

Bit-identity: RunResult.w and the excess_loss arrays of the batch vs the 10 runs alone, and vs a
batch of the same seeds in another order.

    python benchmarks/batching.py [--T 100] [--repeats 5] [--datasets a1a protein]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import common
from dpnewton.experiment import run_algorithm

SEEDS = list(range(10))


def blas_products(Z, T: int, S: int, rng_seed: int = 0) -> tuple[float, float]:
    """CPU seconds of T x S bare gemv pairs and of T bare gemm pairs with S columns, on Z."""
    rng = np.random.default_rng(rng_seed)
    W = rng.standard_normal((S, Z.shape[1]))
    R = rng.standard_normal((S, Z.shape[0]))
    c0 = time.process_time()
    for _ in range(T):
        for k in range(S):
            Z @ W[k]
            R[k] @ Z
    c1 = time.process_time()
    for _ in range(T):
        Z @ W.T
        R @ Z
    c2 = time.process_time()
    return c1 - c0, c2 - c1


def compare(a, b):
    ka = {r.identity.seed: r for r in a}
    kb = {r.identity.seed: r for r in b}
    w_same = all(np.array_equal(ka[s].w, kb[s].w) for s in ka)
    loss_same = all(np.array_equal(ka[s].excess_loss, kb[s].excess_loss) for s in ka)
    w_maxdiff = max(float(np.max(np.abs(ka[s].w - kb[s].w))) for s in ka)
    loss_maxdiff = max(float(np.max(np.abs(ka[s].excess_loss - kb[s].excess_loss))) for s in ka)
    return w_same, loss_same, w_maxdiff, loss_maxdiff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["a1a", "protein"])
    args = ap.parse_args()
    T, eps = args.T, 1.0
    rows, ident_rows = [], []
    for ds in args.datasets:
        p = common.load(ds)
        rho = run_algorithm(p, ds, "dp-gd", eps, [0], 1)[0].ledger.budget_rho
        times: dict[str, list] = {}
        with threadpool_limits(1):
            run_algorithm(p, ds, "dp-gd", eps, [0], 2)  # warm-up
            for r in range(args.repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                batch = run_algorithm(p, ds, "dp-gd", eps, SEEDS, T)
                t1, c1 = time.perf_counter(), time.process_time()
                seq = [run_algorithm(p, ds, "dp-gd", eps, [s], T)[0] for s in SEEDS]
                t2, c2 = time.perf_counter(), time.process_time()
                for s in SEEDS:
                    common.gemv_dpgd(p, rho, T, s)
                t3, c3 = time.perf_counter(), time.process_time()
                gemv_cpu, gemm_cpu = blas_products(p.Z, T, len(SEEDS), r)
                times.setdefault("blas_gemv_pairs_cpu", []).append(gemv_cpu)
                times.setdefault("blas_gemm_pairs_cpu", []).append(gemm_cpu)
                times.setdefault("pair_ratio_blas", []).append(gemv_cpu / gemm_cpu)
                for k, v in (("batch_wall", t1 - t0), ("sequential_wall", t2 - t1), ("gemv_sequential_wall", t3 - t2),
                             ("batch_cpu", c1 - c0), ("sequential_cpu", c2 - c1), ("gemv_sequential_cpu", c3 - c2),
                             ("batch_recorded", sum(x.runtime_s for x in batch)),
                             ("sequential_recorded", sum(x.runtime_s for x in seq))):
                    times.setdefault(k, []).append(v)
                for clock, (b0, b1, b2, b3) in (("wall", (t0, t1, t2, t3)), ("cpu", (c0, c1, c2, c3))):
                    times.setdefault(f"pair_ratio_sequential_{clock}", []).append((b2 - b1) / (b1 - b0))
                    times.setdefault(f"pair_ratio_gemv_sequential_{clock}", []).append((b3 - b2) / (b1 - b0))
                if r == 0:
                    shuffled = run_algorithm(p, ds, "dp-gd", eps, [3, 9, 0, 7, 1, 8, 2, 6, 4, 5], T)
                    for other, res in (("10 runs alone", seq), ("shuffled batch", shuffled)):
                        w_same, loss_same, wd, ld = compare(batch, res)
                        ident_rows.append({"dataset": ds, "batch_vs": other, "w_bit_identical": w_same,
                                           "excess_loss_bit_identical": loss_same, "max_abs_w_diff": wd,
                                           "max_abs_loss_diff": ld})
                print(f"{ds}: repetition {r + 1}/{args.repeats}", flush=True)
        mn = {k: float(np.min(v)) for k, v in times.items()}
        med = {k: float(np.median(v)) for k, v in times.items()}
        row = {"dataset": ds, "S": len(SEEDS), "T": T, "repeats": args.repeats}
        for clock, label in (("cpu", "cpu_ratio"), ("wall", "ratio")):
            row.update({f"{way}_{clock}_s_min": mn[f"{way}_{clock}"]
                        for way in ("batch", "sequential", "gemv_sequential")})
            for way in ("sequential", "gemv_sequential"):
                row[f"{label}_vs_{way}_min"] = mn[f"{way}_{clock}"] / mn[f"batch_{clock}"]
                row[f"{label}_vs_{way}_paired_median"] = med[f"pair_ratio_{way}_{clock}"]
        rows.append({**row,
                     "ratio_recorded_update_time_min": mn["sequential_recorded"] / mn["batch_recorded"],
                     "batch_recorded_s_min": mn["batch_recorded"],
                     "sequential_recorded_s_min": mn["sequential_recorded"],
                     "blas_gemv_pairs_cpu_s_min": mn["blas_gemv_pairs_cpu"],
                     "blas_gemm_pairs_cpu_s_min": mn["blas_gemm_pairs_cpu"],
                     "blas_ceiling_ratio_min": mn["blas_gemv_pairs_cpu"] / mn["blas_gemm_pairs_cpu"],
                     "blas_ceiling_ratio_paired_median": med["pair_ratio_blas"],
                     "ceiling_vs_library_solo": (mn["blas_gemv_pairs_cpu"] / mn["blas_gemm_pairs_cpu"])
                     * (mn["sequential_cpu"] / mn["gemv_sequential_cpu"]),
                     "target": ">= 4", "meets_target": mn["sequential_cpu"] / mn["batch_cpu"] >= 4})
        common.write_csv("batching.csv", rows)
        common.write_csv("batching_identity.csv", ident_rows)
    md = [f"DP-GD, S={len(SEEDS)} seeds, T={T}, eps=1, BLAS 1 thread; {args.repeats} interleaved repetitions "
          "(batch, 10 sequential library runs, 10 sequential plain-gemv runs, in that order each repetition). "
          "`_min` ratio = min(sequential) / min(batch); `_paired_median` = median over repetitions of the "
          "ratio inside a repetition. Wall = whole call; `recorded` = the update time results report. "
          "Target: throughput ratio >= 4.", "",
          "CPU time (headline):", "",
          common.md_table(rows, ["dataset", "batch_cpu_s_min", "sequential_cpu_s_min", "gemv_sequential_cpu_s_min",
                                 "cpu_ratio_vs_sequential_min", "cpu_ratio_vs_sequential_paired_median",
                                 "cpu_ratio_vs_gemv_sequential_min", "cpu_ratio_vs_gemv_sequential_paired_median",
                                 "meets_target"],
                          {"batch_cpu_s_min": ".3f", "sequential_cpu_s_min": ".3f", "gemv_sequential_cpu_s_min": ".3f",
                           "cpu_ratio_vs_sequential_min": ".2f", "cpu_ratio_vs_sequential_paired_median": ".2f",
                           "cpu_ratio_vs_gemv_sequential_min": ".2f",
                           "cpu_ratio_vs_gemv_sequential_paired_median": ".2f"}), "",
          "BLAS ceiling (no optimizer; CPU time): T x 10 bare gemv pairs vs T bare gemm pairs with 10 columns "
          "on the same Z. `ceiling_vs_library_solo` = the ceiling ratio x (library sequential / plain-gemv "
          "sequential): the largest batch gain possible over the library's own solo runs with this BLAS.", "",
          common.md_table(rows, ["dataset", "blas_gemv_pairs_cpu_s_min", "blas_gemm_pairs_cpu_s_min",
                                 "blas_ceiling_ratio_min", "blas_ceiling_ratio_paired_median",
                                 "ceiling_vs_library_solo"],
                          {"blas_gemv_pairs_cpu_s_min": ".3f", "blas_gemm_pairs_cpu_s_min": ".3f",
                           "blas_ceiling_ratio_min": ".2f", "blas_ceiling_ratio_paired_median": ".2f",
                           "ceiling_vs_library_solo": ".2f"}), "",
          "Wall clock (same repetitions):", "",
          common.md_table(rows, ["dataset", "batch_wall_s_min", "sequential_wall_s_min", "gemv_sequential_wall_s_min",
                                 "ratio_vs_sequential_min", "ratio_vs_sequential_paired_median",
                                 "ratio_vs_gemv_sequential_min", "ratio_vs_gemv_sequential_paired_median",
                                 "ratio_recorded_update_time_min"],
                          {"batch_wall_s_min": ".3f", "sequential_wall_s_min": ".3f",
                           "gemv_sequential_wall_s_min": ".3f", "ratio_vs_sequential_min": ".2f",
                           "ratio_vs_sequential_paired_median": ".2f", "ratio_vs_gemv_sequential_min": ".2f",
                           "ratio_vs_gemv_sequential_paired_median": ".2f",
                           "ratio_recorded_update_time_min": ".2f"}), "",
          "Bit-identity (batch of 10 vs each run alone, and vs the same seeds batched in another order):", "",
          common.md_table(ident_rows, ["dataset", "batch_vs", "w_bit_identical", "excess_loss_bit_identical",
                                       "max_abs_w_diff", "max_abs_loss_diff"],
                          {"max_abs_w_diff": ".1e", "max_abs_loss_diff": ".1e"}), ""]
    common.write_section("batching", "\n".join(md))


if __name__ == "__main__":
    main()
