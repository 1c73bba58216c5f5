"""float32 where it is safe: per-pass speed and per-method accuracy of ``precision="float32"``.

float32 mode (:mod:`dpnewton.loss`, module docstring): Z in float32 and every product with it in
float32 BLAS, results cast up to float64; losses, the optimum (w*, loss*) and the noise stay float64.

(a) Speed. Per dataset (a1a, adult, protein, fashion-mnist; random unit rows of the same shape where
the data are not available offline) one float64 problem and its float32 twin
(:meth:`LogisticProblem.with_precision`). Timed, interleaved in one process (common.interleaved,
thread CPU time, BLAS on one thread): the blocked first-order pass (``margins_and_grads``) of 1 and
of 8 runs, the Gram pass Z^T diag(c) Z (``weighted_gram``) and the fused Newton pass (``newton_pass``).
Reported: medians per call and float64 / float32 (ratio of the medians and median of the paired
per-repetition ratios).

(b) Accuracy. For each method of :data:`METHODS` (entries of config/config.yaml: its algorithm and
hyper-parameters, T = the largest T of its grid) on each dataset at each epsilon, the same seeds
run under both precisions with ``dpnewton.experiment.run_algorithm`` (same identities, so the same
noise draws). Per cell: the mean excess loss of the released model under each precision, their
difference, the standard error of the float64 excess losses across seeds (ddof=1) and
ratio = |difference| / s.e. Also: the largest per-seed |difference| (the seeds are paired: where it
exceeds a tenth of the s.e. the two precisions' trajectories split, e.g. after a line search or a
divergence takes another branch), the evaluation error (l of the released float32 w on the float32
problem minus on the float64 problem) and the update-time ratio float64 / float32 (the library's
timer on CPU time; runs of the two precisions alternate). Verdict per (method, dataset): float32 is
safe if the ratio is < 0.1 at every epsilon, else keep float64 there.

(c) Long T (``--long``, run on its own: it replaces only the long-T block of the section). (b) stops at
the default grids' largest T (300); the claims config runs last-iterate DP-GD to T = 307,200 at epsilon
10, with best T of 38,400-76,800 on adult and protein, so float32 rounding has far more steps to build
up. DP-GD as config/claims.yaml's ``dp-gd`` and ``dp-gd-tail`` (step 4), at epsilon 10 with seeds
0..3 at each T of :data:`LONG_RUNS`: one run per seed and precision with ``average: tail`` releases
both models of one trajectory, the last iterate (``none``) and the mean of the last ceil(T/2) iterates
(``tail``). Per (dataset, T, average): the (b) ratio |mean float32 - mean float64| / s.e. (pass:
< 0.1), and the update CPU time per step of the seed batch in each precision (speed ratio float64 /
float32). The T set is bounded by cost (a step of 4 runs costs ~10-13 ms float64 and ~55 % of that
in float32 on one core): a probe of :data:`LONG_PROBE_T` steps per cell first estimates the whole
check, which stops before it starts if that exceeds ``--long-max-minutes``.

    python benchmarks/float32.py [--datasets a1a synthetic adult protein] [--methods ...] [--seeds 8]
                                 [--skip-speed] [--add]
    python benchmarks/float32.py --long [--long-runs a1a:9600 adult:38400 fashion-mnist:9600] [--add]
                                 [--long-max-minutes 20]
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import time
from pathlib import Path

import numpy as np
import yaml
from threadpoolctl import threadpool_limits

import common
from dpnewton.algorithms import ALGORITHMS
from dpnewton.experiment import last_iterate_only, run_algorithm
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.plan import algorithm_grids

#: config/config.yaml entries whose accuracy is measured (iterative methods)
METHODS = ("dp-gd", "dp-gd-tail", "precond-dp-gd", "hess-clip", "hess-add", "qu-clip", "qu-add", "damped-newton",
           "dp-gd-oracle", "minibatch-qu-clip", "dp-sgd", "cubic-newton")
#: datasets of the speed part and their shapes for random unit rows when the data are missing
SPEED_SHAPES = {"a1a": (30956, 124), "adult": (45220, 105), "protein": (50000, 75), "fashion-mnist": (12000, 784)}
EPSILONS = (0.1, 1.0, 10.0)
SAFE = 0.1
CONFIG = common.REPO_DIR / "config" / "config.yaml"
#: the long-T check (c): the claims config's DP-GD entries, epsilon, seeds and dataset -> T. T = 76,800 and
#: 307,200 cost ~20-25 and ~80-100 min of one core per dataset: beyond the check's ~15 minutes
LONG_CONFIG = common.REPO_DIR / "config" / "claims.yaml"
LONG_METHODS = ("dp-gd", "dp-gd-tail")
LONG_EPSILON = 10.0
LONG_SEEDS = 4
LONG_RUNS = {"a1a": (9600,), "adult": (38400,), "fashion-mnist": (9600,)}
#: steps of the probe run per (dataset, precision) that estimates the check's cost
LONG_PROBE_T = 300
#: the line that starts the long-T block of results/float32.md
LONG_MARK = "**Long T**"


def method_grid(methods=METHODS) -> dict[str, dict]:
    """Each of ``methods`` -> {'base', 'hyper', 'T'}: the default config's entry, T = the largest T of its grid."""
    cfg = load_config(yaml.safe_load(Path(CONFIG).read_text()))
    grids, _ = algorithm_grids(cfg, ALGORITHMS)
    return {m: {"base": grids[m]["base"], "hyper": dict(grids[m]["hyper"]), "T": max(grids[m]["iterations"])}
            for m in methods}


def speed_problem(name: str):
    """(source, float64 problem) of a dataset, or random unit rows of its shape when it is not available."""
    try:
        return "real", common.load(name, optimum=False)
    except Exception:  # noqa: BLE001 -- any missing source: time the shape instead
        return "random unit rows", common.random_problem(*SPEED_SHAPES[name], name=name)


def speed(repeats: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for name in SPEED_SHAPES:
        src, p64 = speed_problem(name)
        p32 = p64.with_precision("float32")
        W1 = rng.standard_normal((1, p64.d)) / np.sqrt(p64.d)
        W8 = rng.standard_normal((8, p64.d)) / np.sqrt(p64.d)
        coef = rng.random(p64.n) * 0.25
        passes = {"first-order, 1 run": lambda p: p.margins_and_grads(W1),
                  "first-order, 8 runs": lambda p: p.margins_and_grads(W8),
                  "Gram Z^T diag(c) Z": lambda p: p.weighted_gram(coef),
                  "fused Newton pass": lambda p: p.newton_pass(W1[0], "hessian")}
        for what, fn in passes.items():
            t0 = time.thread_time()
            fn(p64)
            inner = max(1, int(0.03 / max(time.thread_time() - t0, 1e-6)))
            t = common.interleaved({"float64": lambda: fn(p64), "float32": lambda: fn(p32)}, repeats, inner)
            m64, m32 = float(np.median(t["float64"])), float(np.median(t["float32"]))
            rows.append({"dataset": name, "source": src, "n": p64.n, "d": p64.d, "pass": what,
                         "float64_ms": 1e3 * m64, "float32_ms": 1e3 * m32, "ratio": m64 / m32,
                         "paired_ratio": float(np.median(t["float64"] / t["float32"])), "repeats": repeats,
                         "calls_per_sample": inner})
            print(f"speed {name} {what}: {m64 * 1e3:.3f} ms / {m32 * 1e3:.3f} ms = {m64 / m32:.2f}x", flush=True)
    return rows


def accuracy(datasets: list[str], seeds: list[int], grid: dict) -> tuple[list[dict], list[dict]]:
    runs, cells = [], []
    for name in datasets:
        p64 = common.load(name)
        p32 = p64.with_precision("float32")
        for eps in EPSILONS:
            for k, (method, entry) in enumerate(grid.items()):
                out = {}
                order = ("float64", "float32") if k % 2 == 0 else ("float32", "float64")
                for prec in order:
                    problem = p64 if prec == "float64" else p32
                    out[prec] = run_algorithm(problem, name, entry["base"], eps, seeds, entry["T"],
                                              hyper=copy.deepcopy(entry["hyper"]), loss_iterates=last_iterate_only)
                ex64 = np.array([r.released_excess_loss for r in out["float64"]])
                ex32 = np.array([r.released_excess_loss for r in out["float32"]])
                # l of the released float32 w on either problem: the error of evaluating it in float32
                evaluation = np.array([float(p32.loss(r.w)) - float(p64.loss(r.w)) for r in out["float32"]])
                t64 = sum(r.runtime_s for r in out["float64"])
                t32 = sum(r.runtime_s for r in out["float32"])
                for s, a, b, c in zip(seeds, ex64, ex32, evaluation):
                    runs.append({"dataset": name, "method": method, "epsilon": eps, "T": entry["T"], "seed": s,
                                 "excess_float64": a, "excess_float32": b, "evaluation_error": c})
                diff = float(ex32.mean() - ex64.mean())
                se = float(ex64.std(ddof=1) / np.sqrt(len(seeds)))
                ratio = abs(diff) / se if se > 0 else (0.0 if diff == 0 else np.inf)
                cells.append({"dataset": name, "method": method, "epsilon": eps, "T": entry["T"], "seeds": len(seeds),
                              "mean_float64": float(ex64.mean()), "mean_float32": float(ex32.mean()),
                              "difference": diff, "se_float64": se,
                              "ratio": ratio if np.isfinite(ex64).all() and np.isfinite(ex32).all() else np.nan,
                              "max_seed_difference": float(np.max(np.abs(ex32 - ex64))),
                              "max_evaluation_error": float(np.max(np.abs(evaluation))),
                              "update_time_ratio": t64 / t32 if t32 > 0 else np.nan})
                print(f"{name} eps={eps:g} {method} T={entry['T']}: diff {diff:.3g} se {se:.3g} "
                      f"ratio {cells[-1]['ratio']:.3g} time x{cells[-1]['update_time_ratio']:.2f}", flush=True)
    return runs, cells


def kept_rows(name: str, rerun: set[tuple[str, str]], seeds: int) -> list[dict]:
    """The rows of results CSV ``name`` whose (method, dataset) is not in ``rerun`` (``--add``), numbers
    parsed; an earlier run with another seed count is refused (its cells would not be comparable)."""
    with open(common.RESULTS_DIR / name, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if (r["method"], r["dataset"]) not in rerun]
    if "seeds" in (rows[0] if rows else {}) and {int(r["seeds"]) for r in rows} != {seeds}:
        raise SystemExit(f"--add: {name} was computed with other seeds; rerun every dataset")
    text, integer = {"dataset", "method"}, {"T", "seeds", "seed"}
    return [{k: v if k in text else int(v) if k in integer else float(v) for k, v in r.items()} for r in rows]


def verdicts(cells: list[dict]) -> list[dict]:
    """Per (method, dataset): the largest ratio over epsilons, and safe (< SAFE at every epsilon) or not."""
    out = []
    for method in [m for m in METHODS if any(c["method"] == m for c in cells)]:
        for name in dict.fromkeys(c["dataset"] for c in cells):
            group = [c for c in cells if c["method"] == method and c["dataset"] == name]
            if not group:
                continue
            ratios = np.array([c["ratio"] for c in group])
            worst = group[int(np.nanargmax(ratios))] if np.isfinite(ratios).any() else group[0]
            safe = bool(np.isfinite(ratios).all() and ratios.max() < SAFE)
            times = [c["update_time_ratio"] for c in group]
            split = any(c["max_seed_difference"] > SAFE * c["se_float64"] for c in group)
            out.append({"method": method, "dataset": name, "T": group[0]["T"],
                        "max_ratio": float(np.max(ratios)) if np.isfinite(ratios).all() else np.nan,
                        "at_epsilon": worst["epsilon"],
                        "max_seed_difference": max(c["max_seed_difference"] for c in group),
                        "min_se": min(c["se_float64"] for c in group),
                        "max_evaluation_error": max(c["max_evaluation_error"] for c in group),
                        "update_time_ratio": float(np.median(times)),
                        "verdict": "float32 safe" if safe else "keep float64",
                        "seeds": "trajectories split" if split else "paired"})
    return out


def long_entry() -> dict:
    """{'base', 'hyper'} of config/claims.yaml's ``dp-gd-tail``, checked to be its ``dp-gd`` (the last
    iterate) with ``average: tail``: one run releases the models of both."""
    cfg = load_config(yaml.safe_load(Path(LONG_CONFIG).read_text()))
    grids, _ = algorithm_grids(cfg, ALGORITHMS)
    last, tail = (grids[m] for m in LONG_METHODS)
    if tail["base"] != last["base"] or tail["hyper"] != {**last["hyper"], "average": "tail"}:
        raise ValueError(f"{LONG_CONFIG.name}: {LONG_METHODS[1]} is not {LONG_METHODS[0]} with average: tail")
    return {"base": tail["base"], "hyper": dict(tail["hyper"])}


def long_pair(problems: dict, name: str, entry: dict, T: int, seeds: list[int], first: str) -> dict:
    """Both precisions' runs of one (dataset, T), ``first`` first: precision -> (excess losses of the
    last iterates, of the tail averages, seconds of update CPU time summed over the seeds)."""
    out = {}
    for prec in (first, "float32" if first == "float64" else "float64"):
        runs = run_algorithm(problems[prec], name, entry["base"], LONG_EPSILON, seeds, T,
                             hyper=copy.deepcopy(entry["hyper"]), loss_iterates=last_iterate_only)
        out[prec] = (np.array([r.final_excess_loss for r in runs]), np.array([r.released_excess_loss for r in runs]),
                     sum(r.runtime_s for r in runs))
    return out


def long_check(runs: dict[str, tuple[int, ...]], seeds: list[int],
               max_minutes: float) -> tuple[list[dict], list[dict]]:
    """(per-run rows, per-(dataset, T, average) cells) of the long-T check (module docstring, (c))."""
    entry = long_entry()
    problems = {}
    for name in runs:
        p64 = common.load(name)
        problems[name] = {"float64": p64, "float32": p64.with_precision("float32")}
    estimate = 0.0
    for name, Ts in runs.items():
        probe = long_pair(problems[name], name, entry, LONG_PROBE_T, seeds, "float64")
        per_step = sum(t for _, _, t in probe.values()) / LONG_PROBE_T
        estimate += per_step * sum(Ts)
        print(f"probe {name} T={LONG_PROBE_T}: {1e3 * per_step:.2f} ms per step of both precisions ({len(seeds)} "
              f"runs each) -> T {', '.join(map(str, Ts))}: ~{per_step * sum(Ts) / 60:.1f} min", flush=True)
    print(f"long-T check: estimated {estimate / 60:.1f} min of update CPU time", flush=True)
    if estimate / 60 > max_minutes:
        raise SystemExit(f"the long-T check would take ~{estimate / 60:.0f} min > --long-max-minutes {max_minutes:g}: "
                         "shrink --long-runs")
    rows, cells = [], []
    k = 0
    for name, Ts in runs.items():
        for T in Ts:
            out = long_pair(problems[name], name, entry, T, seeds, "float64" if k % 2 == 0 else "float32")
            k += 1
            (last64, tail64, t64), (last32, tail32, t32) = out["float64"], out["float32"]
            for i, s in enumerate(seeds):
                rows.append({"dataset": name, "T": T, "seed": s, "last_float64": last64[i], "last_float32": last32[i],
                             "tail_float64": tail64[i], "tail_float32": tail32[i]})
            for average, ex64, ex32 in (("none", last64, last32), ("tail", tail64, tail32)):
                diff = float(ex32.mean() - ex64.mean())
                se = float(ex64.std(ddof=1) / np.sqrt(len(seeds)))
                ratio = abs(diff) / se if se > 0 else (0.0 if diff == 0 else np.inf)
                if not (np.isfinite(ex64).all() and np.isfinite(ex32).all()):
                    ratio = np.nan
                cells.append({"dataset": name, "T": T, "average": average, "epsilon": LONG_EPSILON,
                              "seeds": len(seeds), "mean_float64": float(ex64.mean()),
                              "mean_float32": float(ex32.mean()),
                              "difference": diff, "se_float64": se, "ratio": ratio,
                              "max_seed_difference": float(np.max(np.abs(ex32 - ex64))),
                              "ms_per_step_float64": 1e3 * t64 / T, "ms_per_step_float32": 1e3 * t32 / T,
                              "speed_ratio": t64 / t32 if t32 > 0 else np.nan,
                              "verdict": "pass" if ratio < SAFE else "fail"})
                print(f"{name} T={T} {average}: diff {diff:.3g} se {se:.3g} ratio {ratio:.3g} "
                      f"speed x{cells[-1]['speed_ratio']:.2f}", flush=True)
    return rows, cells


def read_rows(name: str) -> list[dict]:
    """The rows of results/``name``, numbers as floats (none when the file is absent)."""
    path = common.RESULTS_DIR / name
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        row = {}
        for key, value in r.items():
            try:
                row[key] = float(value)
            except ValueError:
                row[key] = value
        out.append(row)
    return out


def kept_long_rows(name: str, rerun: set[tuple[str, int]]) -> list[dict]:
    """The rows of results CSV ``name`` of the long-T check whose (dataset, T) is not in ``rerun`` (``--long
    --add``), counts as integers."""
    rows = [r for r in read_rows(name) if (r["dataset"], int(r["T"])) not in rerun]
    return [{k: int(v) if k in ("T", "seed", "seeds") else v for k, v in r.items()} for r in rows]


def long_markdown() -> str:
    """The long-T block of the section, from results/float32_long.csv ("" when it is absent)."""
    cells = read_rows("float32_long.csv")
    if not cells:
        return ""
    for c in cells:
        c["T"], c["seeds"] = int(c["T"]), int(c["seeds"])
    once = [c for c in cells if c["average"] == "none"]        # one row per (dataset, T): its runs and times
    runs = ", ".join(f"{name} {', '.join(str(c['T']) for c in once if c['dataset'] == name)}"
                     for name in dict.fromkeys(c["dataset"] for c in cells))
    total = sum(c["T"] * (c["ms_per_step_float64"] + c["ms_per_step_float32"]) / 1e3 for c in once)
    both = {c["dataset"]: (c["ms_per_step_float64"] + c["ms_per_step_float32"]) / 1e3 for c in cells}
    cost = "; ".join(f"{name} {76800 * t / 60:.0f} min at T = 76,800, {307200 * t / 60:.0f} min at 307,200"
                     for name, t in both.items())
    ratios = np.array([c["ratio"] for c in cells], dtype=float)
    worst = cells[int(np.nanargmax(ratios))] if np.isfinite(ratios).any() else cells[0]
    failed = [c for c in cells if c["verdict"] != "pass"]
    verdict = (f"**Verdict: pass** at every (dataset, T, average): the largest ratio is {worst['ratio']:.3g} "
               f"({worst['dataset']}, T = {worst['T']}, {worst['average']}), below {SAFE}; float32 is safe for "
               "DP-GD at these T."
               if not failed else
               "**Verdict: fail** at "
               + ", ".join(f"{c['dataset']} T = {c['T']} {c['average']} (ratio {c['ratio']:.3g})" for c in failed)
               + f": keep float64 there ({SAFE} s.e. or more).")
    speed = ", ".join(f"{c['dataset']} T = {c['T']} x{c['speed_ratio']:.2f}" for c in once)
    md = [f"{LONG_MARK} (`python benchmarks/float32.py --long`; `float32_long.csv` per cell, `float32_long_runs.csv` "
          "per run): DP-GD as config/claims.yaml's `dp-gd` and `dp-gd-tail` (step 4) at epsilon "
          f"{LONG_EPSILON:g}, seeds 0..{cells[0]['seeds'] - 1} under both precisions (same noise draws); one run per "
          "seed and precision releases both models of its trajectory: the last iterate (`none`) and the mean of "
          f"the last ceil(T/2) iterates (`tail`). T: {runs}. The claims config runs last-iterate DP-GD up to "
          "T = 307,200 at epsilon 10 (best T 38,400-76,800 on adult and protein); the T set is what fits in about "
          "20 minutes of one core: a cell costs T x (float64 + float32 time per step), here "
          f"{cost}. `ratio` = |mean float32 - mean float64| / s.e. (float64, ddof=1; pass: < {SAFE}); "
          "`ms_per_step_*`: update CPU time per step of the seed batch; `speed_ratio` = float64 / float32.", "",
          common.md_table(cells, ["dataset", "T", "average", "mean_float64", "mean_float32", "difference", "se_float64",
                                  "ratio", "max_seed_difference", "ms_per_step_float64", "ms_per_step_float32",
                                  "speed_ratio", "verdict"],
                          {"mean_float64": ".6g", "mean_float32": ".6g", "difference": ".2e", "se_float64": ".2e",
                           "ratio": ".3g", "max_seed_difference": ".2e", "ms_per_step_float64": ".2f",
                           "ms_per_step_float32": ".2f", "speed_ratio": ".2f"}), "",
          f"{verdict} Speed (update time float64 / float32): {speed}. Update CPU time of the check (both "
          f"precisions): {total / 60:.1f} min."]
    return "\n".join(md)


def write_long_block(block: str) -> None:
    """results/float32.md with its long-T block replaced by ``block`` (the rest as the last full run
    wrote it), and README.md rebuilt; the long run's environment goes to float32_long.env.json."""
    section = common.RESULTS_DIR / "float32.md"
    discussion = common.RESULTS_DIR / "float32_discussion.md"
    text = section.read_text() if section.exists() else ""
    if discussion.exists():
        text = text.rstrip().removesuffix(discussion.read_text().strip())
    text = text.split("\n" + LONG_MARK)[0].rstrip()
    text = (text + "\n\n" + block) if text else block
    if discussion.exists():
        text = text.rstrip() + "\n\n" + discussion.read_text()
    section.write_text(text.rstrip() + "\n")
    (common.RESULTS_DIR / "float32_long.env.json").write_text(json.dumps(common.environment(), indent=1, default=str))
    common.write_readme()


def parse_runs(items: list[str]) -> dict[str, tuple[int, ...]]:
    """["a1a:9600", "adult:9600", "adult:38400"] -> {"a1a": (9600,), "adult": (9600, 38400)}."""
    runs: dict[str, list[int]] = {}
    for item in items:
        name, _, T = item.partition(":")
        runs.setdefault(name, []).append(int(T))
    return {name: tuple(Ts) for name, Ts in runs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["a1a", "synthetic", "adult", "protein"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repetitions of the speed part")
    ap.add_argument("--skip-speed", action="store_true", help="keep the speed CSV of an earlier run")
    ap.add_argument("--add", action="store_true",
                    help="keep the accuracy rows of the (method, dataset) pairs not given (an earlier run's, "
                         "same seeds and T); with --long, the rows of the (dataset, T) not given")
    ap.add_argument("--long", action="store_true", help="run only the long-T DP-GD check (c)")
    ap.add_argument("--long-runs", nargs="+", metavar="DATASET:T",
                    default=[f"{name}:{T}" for name, Ts in LONG_RUNS.items() for T in Ts])
    ap.add_argument("--long-max-minutes", type=float, default=20.0,
                    help="stop before the long-T check when its estimated cost exceeds this")
    args = ap.parse_args()
    common.use_clock_in_library("cpu")
    t0 = time.perf_counter()
    if args.long:
        wanted = parse_runs(args.long_runs)
        with threadpool_limits(1):
            runs, cells = long_check(wanted, list(range(LONG_SEEDS)), args.long_max_minutes)
        if args.add:
            rerun = {(name, T) for name, Ts in wanted.items() for T in Ts}
            runs, cells = (kept_long_rows(name, rerun) + new
                           for name, new in (("float32_long_runs.csv", runs), ("float32_long.csv", cells)))
        common.write_csv("float32_long_runs.csv", runs)
        common.write_csv("float32_long.csv", cells)
        block = long_markdown()
        write_long_block(block)
        print(block)
        print(f"long-T check: {(time.perf_counter() - t0) / 60:.1f} min wall")
        return
    grid = method_grid()
    with threadpool_limits(1):
        if not args.skip_speed:
            common.write_csv("float32_speed.csv", speed(args.repeats))
        runs, cells = accuracy(args.datasets, list(range(args.seeds)), method_grid(args.methods))
    if args.add:
        rerun = {(m, name) for m in args.methods for name in args.datasets}
        runs, cells = (kept_rows(name, rerun, args.seeds) + new
                       for name, new in (("float32_runs.csv", runs), ("float32_accuracy.csv", cells)))
    datasets = list(dict.fromkeys(c["dataset"] for c in cells))
    common.write_csv("float32_runs.csv", runs)
    common.write_csv("float32_accuracy.csv", cells)
    summary = verdicts(cells)
    common.write_csv("float32_verdicts.csv", summary)
    with open(common.RESULTS_DIR / "float32_speed.csv", newline="") as fh:
        speed_rows = list(csv.DictReader(fh))
    used_T = ", ".join(f"{m} {e['T']}" for m, e in grid.items())
    minutes = (time.perf_counter() - t0) / 60
    md = ["float64 vs `precision=\"float32\"` (`dpnewton.loss`): Z and every product with it in float32, results, "
          "losses, the optimum and the noise float64. BLAS 1 thread, thread CPU time.", "",
          f"**Speed** (`float32_speed.csv`; interleaved, {args.repeats} repetitions, medians in ms; ratio = "
          "float64 / float32):", "",
          common.md_table([{**r, **{k: float(r[k]) for k in ("float64_ms", "float32_ms", "ratio", "paired_ratio")}}
                           for r in speed_rows],
                          ["dataset", "source", "n", "d", "pass", "float64_ms", "float32_ms", "ratio", "paired_ratio"],
                          {"float64_ms": ".3f", "float32_ms": ".3f", "ratio": ".2f", "paired_ratio": ".2f"}), "",
          f"**Accuracy** (`float32_accuracy.csv` per cell, `float32_runs.csv` per run): datasets "
          f"{', '.join(datasets)}; epsilon {', '.join(f'{e:g}' for e in EPSILONS)}; seeds 0..{args.seeds - 1} "
          "under both precisions (same noise draws); T = the largest T of each method's grid in config/config.yaml "
          f"({used_T}). The one-shot methods (AOP, objpert) solve in float64 whatever the precision "
          "(`dpnewton.algorithms.aop.minimize_objective`) and are not listed. `max_ratio` = the largest over "
          "epsilons of "
          "|mean float32 - mean float64| / s.e. (float64, ddof=1); float32 is safe where it is < "
          f"{SAFE} at every epsilon. `max_seed_difference`: largest per-seed |difference|; `max_evaluation_error`: "
          "largest |l(w) on the float32 problem - l(w) on the float64 problem| at the released float32 w; "
          "`update_time_ratio`: median over epsilons of float64 / float32 update time of the cell's runs "
          "(indicative); `seeds`: `trajectories split` where some cell's largest per-seed difference exceeds "
          f"{SAFE} s.e. (the runs of a seed took different branches; the verdict is about the means).", "",
          common.md_table(summary, ["method", "dataset", "T", "max_ratio", "at_epsilon", "max_seed_difference",
                                    "min_se", "max_evaluation_error", "update_time_ratio", "verdict", "seeds"],
                          {"max_ratio": ".3g", "max_seed_difference": ".2e", "min_se": ".2e",
                           "max_evaluation_error": ".2e", "update_time_ratio": ".2f"}), "",
          f"Whole benchmark: {minutes:.1f} min wall" + (
              f" (this run: {', '.join(args.methods)} on {', '.join(args.datasets)}; the other rows are earlier "
              "runs', kept by --add)." if args.add else ".")]
    long_block = long_markdown()   # the last --long run's, from its CSV
    if long_block:
        md += ["", long_block]
    common.write_section("float32", "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
