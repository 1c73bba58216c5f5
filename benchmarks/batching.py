"""Batching: S=10 DP-GD seeds in one batch vs 10 sequential runs (throughput and bit-identity), and the
per-run cost of the stacked first-order pass by width (``--widths``).

Default: datasets a1a and protein (real), T=100, epsilon=1, BLAS 1 thread. Three ways, interleaved
(round-robin inside one process), ``--repeats`` times; min and median reported:
* ``batch``: run_algorithm(seeds=0..9) with the blocked pass (``loss.GEMM_MIN_RUNS`` raised above 10 for
  this comparison) -- one row-blocked pass over Z per iteration serves all runs
  (LogisticProblem.margins_and_grads: per block, one gemv pair per run);
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

``--widths``: ``margins_and_grads`` of S runs on a1a, adult, protein and fashion-mnist (random unit rows
of the shape where a dataset is not available), float64 and float32, S in :data:`WIDTHS`, three ways
interleaved (common.interleaved, thread CPU time, medians): the blocked pass (one gemv pair per run per
block, ``GEMM_MIN_RUNS`` raised), the GEMM pass (``_gemm_pass``: two GEMMs per block of
``GEMM_BLOCK_BYTES``) and two GEMMs over the whole of Z (the unblocked alternative). Cost per run in units
of the blocked pass of one run. ``crossover``: the smallest width from which the GEMM pass is cheaper per
run than the blocked one at every larger measured width, per (dataset, precision); ``GEMM_MIN_RUNS`` is
their maximum. Bits: whether a run's GEMM column (margins and gradient) has the same bits at every width
from ``GEMM_MIN_RUNS`` to 64 and at every position of 3 shuffles of 64 runs, and its largest difference
from the blocked pass relative to the run's largest entry. Writes ``batching_width.csv`` and the section
``batching_width.md``.

``--lockstep``: the per-run cost of a DP-GD long round in a lockstep job against today's 4-run batches, on
a1a and adult (random unit rows of the shape where a dataset is not available), float64. A round runs 4
seeds of k trajectories at one T (``--T``, default 500 here): k = 1 is a job of one (configuration,
conversion, epsilon), the batch of 4 runs it runs in a round (the blocked pass); k > 1 is a lockstep job's
round, k trajectories of :data:`LOCKSTEP_CELLS` (step, epsilon, conversion) stepping together
(``dpnewton.experiment.run_groups``, the GEMM pass from 8 runs on). Timed, interleaved over k
(common.interleaved, thread CPU time of the whole call, ``--repeats``, medians): CPU seconds per run per
step, its ratio to k = 1, and the library's recorded update time per run per step (``runtime_s`` / T).
Writes ``batching_lockstep.csv`` and the section ``batching_lockstep.md``.

    python benchmarks/batching.py [--T 100] [--repeats 5] [--datasets a1a protein]
    python benchmarks/batching.py --widths [--repeats 7]
    python benchmarks/batching.py --lockstep [--T 500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_limits

import common
from dpnewton import loss
from dpnewton.experiment import RunGroup, last_iterate_only, resolve_budget, run_algorithm, run_groups

SEEDS = list(range(10))
#: the widths of ``--widths``
WIDTHS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 64)
#: the shapes of ``--widths`` (n, d), timed on random unit rows when the dataset is not available
WIDTH_SHAPES = {"a1a": (30956, 124), "adult": (45220, 105), "protein": (50000, 75), "fashion-mnist": (12000, 784)}
#: the trajectories of ``--lockstep``, in the order a round adds them: (step, epsilon, conversion), the claims
#: config's DP-GD cells (its long rounds at epsilon 10 first)
LOCKSTEP_CELLS = [(4.0, 10.0, "bs16"), (8.0, 10.0, "bs16"), (4.0, 10.0, "gdp"), (16.0, 10.0, "bs16"),
                  (32.0, 10.0, "bs16"), (4.0, 1.0, "bs16"), (8.0, 1.0, "bs16"), (16.0, 1.0, "bs16"),
                  (32.0, 1.0, "bs16"), (4.0, 1.0, "gdp"), (4.0, 0.1, "bs16"), (8.0, 0.1, "bs16"),
                  (16.0, 0.1, "bs16"), (32.0, 0.1, "bs16"), (4.0, 0.1, "gdp"), (4.0, 0.1, "official-fsolve")]
#: trajectories per round of ``--lockstep`` (4 seeds each: 4 to 64 runs per batch)
LOCKSTEP_TRAJECTORIES = (1, 2, 3, 4, 8, 16)
LOCKSTEP_SEEDS = (0, 1, 2, 3)


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


def width_problem(name: str):
    """(source, float64 problem) of a dataset, or random unit rows of its shape when it is not available."""
    try:
        return "real", common.load(name, optimum=False)
    except Exception:  # noqa: BLE001 -- any missing source: time the shape instead
        return "random unit rows", common.random_problem(*WIDTH_SHAPES[name], name=name)


def blocked_pass(p, W):
    """``margins_and_grads`` with the blocked pass at any width."""
    saved, loss.GEMM_MIN_RUNS = loss.GEMM_MIN_RUNS, 10 ** 9
    try:
        return p.margins_and_grads(W)
    finally:
        loss.GEMM_MIN_RUNS = saved


def whole_gemm(p, W):
    """Two GEMMs over the whole of Z (no blocks): M = Z W^T, G = -(1/n) sigma(-M)^T Z."""
    W = p._in(W)
    Mt = W @ p.Z.T
    return p._out(Mt.T), -p._out(expit(-Mt) @ p.Z) / p.n


def gemm_bits(p, rng) -> dict:
    """Whether a run's GEMM column has the same bits at every width >= GEMM_MIN_RUNS and position, and its
    largest difference from the blocked pass relative to the run's largest entry."""
    W = rng.standard_normal((64, p.d)) * 3 / np.sqrt(p.d)
    ref_M, ref_G = p.margins_and_grads(W)
    blk_M, blk_G = blocked_pass(p, W)
    same_width = all(np.array_equal(M, ref_M[:, :S]) and np.array_equal(G, ref_G[:S])
                     for S in range(loss.GEMM_MIN_RUNS, 64)
                     for M, G in [p.margins_and_grads(W[:S])])
    same_position = True
    for _ in range(3):
        order = rng.permutation(64)
        M, G = p.margins_and_grads(W[order])
        same_position &= bool(np.array_equal(M, ref_M[:, order]) and np.array_equal(G, ref_G[order]))
    return {"bits_same_every_width": same_width, "bits_same_every_position": same_position,
            "margins_rel_diff_max": float(np.max(np.abs(ref_M - blk_M).max(axis=0) / np.abs(blk_M).max(axis=0))),
            "grads_rel_diff_max": float(np.max(np.abs(ref_G - blk_G).max(axis=1) / np.abs(blk_G).max(axis=1)))}


def widths(repeats: int) -> None:
    """``--widths`` (module docstring)."""
    rows, bits = [], []
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        for name in WIDTH_SHAPES:
            src, p64 = width_problem(name)
            for precision in ("float64", "float32"):
                p = p64.with_precision(precision)
                ways = {"blocked": blocked_pass, "gemm": lambda p, W: p._gemm_pass(p._in(W)), "whole_gemm": whole_gemm}
                solo = None
                for S in WIDTHS:
                    W = rng.standard_normal((S, p.d)) / np.sqrt(p.d)
                    t = common.interleaved({k: (lambda f=f: f(p, W)) for k, f in ways.items()}, repeats)
                    med = {k: float(np.median(v)) for k, v in t.items()}
                    solo = med["blocked"] if S == 1 else solo
                    rows.append({"dataset": name, "source": src, "n": p.n, "d": p.d, "precision": precision, "S": S,
                                 **{f"{k}_ms": 1e3 * v for k, v in med.items()},
                                 **{f"{k}_per_run": v / S / solo for k, v in med.items()}, "repeats": repeats})
                    print(f"{name} {precision} S={S}: " + " ".join(f"{k} {v / S / solo:.3f}" for k, v in med.items()),
                          flush=True)
                bits.append({"dataset": name, "precision": precision, **gemm_bits(p, rng)})
    for b in bits:
        per = [r for r in rows if (r["dataset"], r["precision"]) == (b["dataset"], b["precision"])]
        cheaper = [r["gemm_per_run"] < r["blocked_per_run"] for r in per]
        b["crossover"] = next((r["S"] for k, r in enumerate(per) if all(cheaper[k:])), None)
    common.write_csv("batching_width.csv", rows)
    common.write_csv("batching_width_bits.csv", bits)
    md = width_markdown(rows, bits, repeats)
    common.write_section("batching_width", md, readme=False)


def width_markdown(rows: list[dict], bits: list[dict], repeats: int) -> str:
    """The section of ``--widths``: crossover and bits per (dataset, precision), then the cost per run by width."""
    shown = [S for S in WIDTHS if S > 1]
    table = []
    for b in bits:
        per = {r["S"]: r for r in rows if (r["dataset"], r["precision"]) == (b["dataset"], b["precision"])}
        for way in ("blocked", "gemm", "whole_gemm"):
            table.append({"dataset": b["dataset"], "precision": b["precision"], "pass": way,
                          **{f"S={S}": float(per[S][f"{way}_per_run"]) for S in shown}})
    shapes = ", ".join(f"{r['dataset']} {r['n']} x {r['d']} ({r['source']})"
                       for r in rows if int(r["S"]) == 1 and r["precision"] == "float64")
    md = [f"`LogisticProblem.margins_and_grads` of S runs, BLAS 1 thread, thread CPU time, median of {repeats} "
          "interleaved repetitions; shapes " + shapes + ".", "",
          "**Crossover and bits** (`batching_width_bits.csv`): `crossover` = the smallest S from which the GEMM pass "
          "is cheaper per run than the blocked one at every larger measured S; whether a run's GEMM margins and "
          f"gradient have the same bits at every width from {loss.GEMM_MIN_RUNS} to 64, and at every position of 3 "
          "shuffles of 64 runs; their largest difference from the blocked pass relative to the run's largest entry:",
          "",
          common.md_table(bits, ["dataset", "precision", "crossover", "bits_same_every_width",
                                 "bits_same_every_position", "margins_rel_diff_max", "grads_rel_diff_max"],
                          {"margins_rel_diff_max": ".1e", "grads_rel_diff_max": ".1e"}), "",
          "**Cost per run** in units of the blocked pass of one run (`batching_width.csv` also has the milliseconds "
          "per call): `blocked` = one gemv pair per run per block of 256 KiB (the pass below `GEMM_MIN_RUNS`), "
          f"`gemm` = two GEMMs per block of `GEMM_BLOCK_BYTES` (the pass from `GEMM_MIN_RUNS` = {loss.GEMM_MIN_RUNS} "
          "on), `whole_gemm` = two GEMMs over all of Z:", "",
          common.md_table(table, ["dataset", "precision", "pass"] + [f"S={S}" for S in shown],
                          {f"S={S}": ".2f" for S in shown}), ""]
    return "\n".join(md)


def lockstep_round(p, name: str, k: int, T: int) -> list:
    """One long round of k trajectories (:data:`LOCKSTEP_CELLS`) x 4 seeds at T, as one batch; its results."""
    groups = []
    for step, eps, conversion in LOCKSTEP_CELLS[:k]:
        delta, rho = resolve_budget(eps, None, p.n, conversion)
        groups.append(RunGroup(eps, delta, conversion, rho, tuple((s, T) for s in LOCKSTEP_SEEDS), {"step": step},
                               loss_iterates=last_iterate_only))
    return [r for results in run_groups(p, name, "dp-gd", groups) for r in results]


def lockstep(T: int, repeats: int) -> None:
    """``--lockstep`` (module docstring)."""
    rows = []
    with threadpool_limits(1):
        for name in ("a1a", "adult"):
            src, p = width_problem(name)
            recorded = {}

            def way(k):
                def call():
                    recorded[k] = sum(r.runtime_s for r in lockstep_round(p, name, k, T))
                return call

            t = common.interleaved({k: way(k) for k in LOCKSTEP_TRAJECTORIES}, repeats, warmup=0)
            base = float(np.median(t[1])) / (len(LOCKSTEP_SEEDS) * T)
            for k in LOCKSTEP_TRAJECTORIES:
                runs = k * len(LOCKSTEP_SEEDS)
                per = float(np.median(t[k])) / (runs * T)
                rows.append({"dataset": name, "source": src, "n": p.n, "d": p.d, "T": T, "trajectories": k,
                             "runs": runs, "pass": "GEMM" if runs >= loss.GEMM_MIN_RUNS else "blocked",
                             "cpu_ms_per_run_step": 1e3 * per, "ratio_to_4_runs": base / per,
                             "recorded_ms_per_run_step": 1e3 * recorded[k] / (runs * T), "repeats": repeats})
                print(f"{name} k={k} runs={runs}: {1e3 * per:.3f} ms per run-step, {base / per:.2f}x", flush=True)
    common.write_csv("batching_lockstep.csv", rows)
    md = [f"DP-GD long round: 4 seeds x k trajectories (step, epsilon, conversion of the claims config's DP-GD "
          f"cells) at T = {T} in one batch, float64, BLAS 1 thread, thread CPU time of the whole call (median of "
          f"{repeats} interleaved repetitions), per run per step; k = 1 is a job of one cell (today's 4-run "
          "batch), k > 1 a lockstep job's round. `recorded` = the library's update time per run per step "
          "(`runtime_s` / T). Shapes: " + ", ".join(dict.fromkeys(f"{r['dataset']} {r['n']} x {r['d']} ({r['source']})"
                                                                   for r in rows)) + ".", "",
          common.md_table(rows, ["dataset", "trajectories", "runs", "pass", "cpu_ms_per_run_step", "ratio_to_4_runs",
                                 "recorded_ms_per_run_step"],
                          {"cpu_ms_per_run_step": ".3f", "ratio_to_4_runs": ".2f", "recorded_ms_per_run_step": ".3f"}),
          ""]
    common.write_section("batching_lockstep", "\n".join(md), readme=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=None, help="iterations per run (default 100; --lockstep: 500)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["a1a", "protein"])
    ap.add_argument("--widths", action="store_true", help="the per-run cost of the stacked pass by width")
    ap.add_argument("--lockstep", action="store_true", help="a DP-GD long round in lockstep vs 4-run batches")
    args = ap.parse_args()
    if args.widths:
        return widths(args.repeats)
    if args.lockstep:
        return lockstep(args.T or 500, args.repeats)
    # the blocked pass at S = 10: this comparison is about it (the GEMM pass is --widths')
    loss.GEMM_MIN_RUNS = len(SEEDS) + 1
    T, eps = args.T or 100, 1.0
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
