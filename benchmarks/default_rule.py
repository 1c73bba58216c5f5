"""Default rule of ``DPLogisticRegression``: fixed rules without tuning vs the oracle-tuned best.

Every candidate sets T, the step and the regularisation from public quantities only (n, d, epsilon,
delta, data_norm); nothing is tuned on the private data. Each runs under the library's relation
(``neighbouring="add-remove"``: n private, the zCDP runs release the row count from 2 % of rho) with
delta = n^-2 passed explicitly (the claims run's delta, so that losses compare with its oracle-tuned
reference) and the default conversion (bs16).

Candidates (:data:`CANDIDATES`):

* ``objpert``: objective perturbation, tight profile, its default configuration (Lambda by the
  declared Jacobian-share rule; T ignored).
* ``dp-gd-tail-snr``: DP-GD, step 4, releasing the mean of the last T/2 iterates, T = snr(n, d, rho)
  = min(max(1, floor(2 rho n^2 / d)), 3000) (:func:`dpnewton.pipeline.tracks.snr_iterations`; the
  cap of the claims' fixed rule).
* ``precond-dp-gd-tail-snr``: precond-dp-gd (released defaults) with tail averaging, T by the same rule.
* reference (not eligible as the default): ``precond-dp-gd-T8`` (the claims' fixed rule for
  precond-dp-gd, last iterate).

rho of the snr rule: ``resolve_budget(epsilon, n^-2, n, "bs16")``. Datasets and their options as in
config/claims.yaml (prepared under benchmarks/.cache/default_rule/, optimum as the pipeline computes
it); epsilon in {0.1, 1, 10}; seeds 0..k-1. The reference of a (dataset, epsilon) cell is the
oracle-tuned best of the claims run: per method label of the config's ``tracks`` the lowest
best-T mean over the label's declared variants (figures/claims/best_T.csv, conversion bs16), then
the minimum over the labels -- the minimum of the "oracle-tuned (upper bound)" column of the tracks
table in figures/claims.md.

Reproduce (one BLAS thread, one process; 23 CPU-minutes, 29 minutes of wall time on a shared
2-core machine, plus 3 minutes to prepare the data and the optima on the first call)::

    python benchmarks/default_rule.py --resume

writes benchmarks/results/default_rule.csv (one row per dataset, epsilon, candidate, seed; rewritten
atomically after every cell, so a killed run loses at most the cell in progress and ``--resume``
skips every finished cell), default_rule_cells.csv (per cell and candidate: mean, s.e., ratio to the
oracle-tuned best), default_rule_summary.csv (per candidate) and the tables of docs/default_rule.md
(between its ``default_rule:tables`` markers). ``--summary-only`` rebuilds the summaries from the
per-seed CSV without running anything.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
CACHE_DIR = Path(os.environ.get("DPNEWTON_BENCH_CACHE", BENCH_DIR / ".cache")) / "default_rule"
DATA_DIR = Path(os.environ.get("DPNEWTON_DATA_DIR", "/work/shared/datasets"))
CLAIMS_CONFIG = REPO_DIR / "config" / "claims.yaml"
CLAIMS_DIR = REPO_DIR / "figures" / "claims"
DOC = REPO_DIR / "docs" / "default_rule.md"
PER_SEED = RESULTS_DIR / "default_rule.csv"
CELLS = RESULTS_DIR / "default_rule_cells.csv"
SUMMARY = RESULTS_DIR / "default_rule_summary.csv"

DATASETS = ("synthetic", "a1a", "adult", "protein", "fashion-mnist")
EPSILONS = (0.1, 1.0, 10.0)
RELATION = "add-remove"
CONVERSION = "bs16"            # the library's default conversion (dpnewton.experiment.DEFAULT_CONVERSION)
SNR_CAP = 3000                 # config/claims.yaml tracks.fixed: dp-gd-tail, T = snr capped at 3000
WITHIN = 1.25                  # the target: mean excess loss <= 1.25 x the oracle-tuned best
SEEDS = 8
#: fewer seeds where a cell is costly (T = 3000 full-batch steps at d = 784, and precond-dp-gd's snr
#: cells, whose ratios are far from 1.25x): 4
SEEDS_FOR = ("fashion-mnist:dp-gd-tail-snr=4", "*:precond-dp-gd-tail-snr=4")

#: name -> algorithm, hyper-parameters, T rule ("snr" or an integer), eligible as the default
CANDIDATES = {
    "objpert": {"algorithm": "objpert", "hyper": {}, "T": 1, "eligible": True,
                "rule": "objective perturbation, tight profile; Lambda = beta / (exp(0.1 eps_obj) - 1)"},
    "dp-gd-tail-snr": {"algorithm": "dp-gd", "hyper": {"average": "tail"}, "T": "snr", "eligible": True,
                       "rule": "DP-GD step 4, mean of the last T/2 iterates, T = snr capped at 3000"},
    "precond-dp-gd-tail-snr": {"algorithm": "precond-dp-gd", "hyper": {"average": "tail"}, "T": "snr",
                               "eligible": True,
                               "rule": "precond-dp-gd (released defaults), tail mean, T = snr capped at 3000"},
    "precond-dp-gd-T8": {"algorithm": "precond-dp-gd", "hyper": {}, "T": 8, "eligible": False,
                         "rule": "reference: the claims' fixed rule for precond-dp-gd, last iterate, T = 8"},
}

KEY = ["dataset", "epsilon", "candidate"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- data ----------------------------------------------------------------------------------------
def dataset_options(name: str) -> dict:
    cfg = yaml.safe_load(CLAIMS_CONFIG.read_text())
    return dict((cfg["datasets"].get(name) or {}).get("options") or {})


def load_dataset(name: str):
    """(problem with its optimum, sha256 of the prepared file, whether it matches the claims run's)."""
    from dpnewton.problems import load_problem_from_prepared, prepare_source

    prepared = prepare_source(name, data_dir=str(DATA_DIR), cache_dir=str(CACHE_DIR / "data"),
                              allow_download=False, **dataset_options(name))
    problem = load_problem_from_prepared(Path(prepared.path))
    sha = hashlib.sha256(Path(prepared.path).read_bytes()).hexdigest()
    protocol = json.loads((CLAIMS_DIR / "protocol.json").read_text())
    return problem, sha, sha in protocol.get("dataset_sha256", {}).get(name, [])


def snr_T(n: int, d: int, epsilon: float, delta: float) -> tuple[int, float]:
    from dpnewton.experiment import resolve_budget
    from dpnewton.pipeline.tracks import snr_iterations

    _, rho = resolve_budget(epsilon, delta, n, "bs16")
    return snr_iterations(n, d, rho, SNR_CAP), rho


def iterations(spec: dict, n: int, d: int, epsilon: float, delta: float) -> tuple[int, float]:
    T, rho = snr_T(n, d, epsilon, delta)
    return (T if spec["T"] == "snr" else int(spec["T"])), rho


def objpert_bias(problem, lam: float) -> float:
    """Excess loss of the noise-free regularised minimiser argmin l + Lambda/(2n)||w||^2: the part of
    objpert's loss its regulariser causes on its own."""
    from dpnewton.algorithms.aop import minimize_objective

    w, _, _ = minimize_objective(problem, lam, np.zeros(problem.d), 1e-10)
    return float(problem.excess_loss(w))


# ---- running -------------------------------------------------------------------------------------
def atomic_csv(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def seeds_for(dataset: str, candidate: str, default: int, overrides: dict[tuple[str, str], int]) -> int:
    for key in ((dataset, candidate), (dataset, "*"), ("*", candidate)):
        if key in overrides:
            return overrides[key]
    return default


def parse_overrides(items: list[str]) -> dict[tuple[str, str], int]:
    """``DATASET:CANDIDATE=K`` (either side may be ``*``)."""
    out = {}
    for item in items:
        lhs, k = item.split("=")
        ds, cand = lhs.split(":")
        out[(ds, cand)] = int(k)
    return out


def run_cell(problem, dataset: str, epsilon: float, name: str, seeds: list[int]) -> list[dict]:
    from dpnewton.experiment import last_iterate_only, run_algorithm

    spec = CANDIDATES[name]
    n, d = problem.n, problem.d
    delta = float(n) ** -2
    T, rho = iterations(spec, n, d, epsilon, delta)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    results = run_algorithm(problem, dataset, spec["algorithm"], epsilon, seeds, [T], delta=delta,
                            conversion=CONVERSION, hyper=dict(spec["hyper"]), neighbouring=RELATION,
                            loss_iterates=last_iterate_only)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    rows = []
    for seed, res in zip(seeds, results):
        row = {"dataset": dataset, "n": n, "d": d, "epsilon": epsilon, "delta": delta, "candidate": name,
               "algorithm": spec["algorithm"], "hyper": json.dumps(spec["hyper"], sort_keys=True), "T": T,
               "rho_bs16": rho, "relation": RELATION, "conversion": CONVERSION, "seed": seed,
               "excess_loss": float(res.released_excess_loss),
               "last_iterate_excess_loss": float(res.final_excess_loss),
               "train_accuracy": float("nan") if res.train_accuracy is None else float(res.train_accuracy),
               "ledger_rho": float(res.ledger.spent_rho) if spec["algorithm"] != "objpert" else float("nan"),
               "runtime_s": res.runtime_s, "cell_wall_s": wall, "cell_cpu_s": cpu, "cell_seeds": len(seeds),
               "Lambda": float("nan")}
        if spec["algorithm"] == "objpert":
            event = res.ledger.events[0]
            row["Lambda"] = float(event.get("Lambda", float("nan")))
            row["objpert_sigma"] = float(event.get("sigma", float("nan")))
        rows.append(row)
    return rows


def run(args) -> None:
    overrides = parse_overrides(args.seeds_for)
    frame = pd.read_csv(PER_SEED) if (args.resume and PER_SEED.exists()) else pd.DataFrame()
    if len(frame):
        log(f"resume: {len(frame)} rows in {PER_SEED.relative_to(REPO_DIR)}")
    for dataset in args.datasets:
        todo = []
        for eps in args.epsilons:
            for name in args.candidates:
                k = seeds_for(dataset, name, args.seeds, overrides)
                have = set() if not len(frame) else set(frame.loc[
                    (frame["dataset"] == dataset) & np.isclose(frame["epsilon"], eps)
                    & (frame["candidate"] == name), "seed"].astype(int))
                missing = [s for s in range(k) if s not in have]
                if missing:
                    todo.append((eps, name, missing))
        if not todo:
            log(f"{dataset}: every cell done")
            continue
        t0 = time.perf_counter()
        problem, sha, same = load_dataset(dataset)
        log(f"{dataset}: n={problem.n} d={problem.d}, prepared sha256 {sha[:12]} "
            f"({'= the claims run' if same else 'DIFFERS from the claims run'}), loaded in "
            f"{time.perf_counter() - t0:.1f} s; {len(todo)} cells to run")
        for eps, name, seeds in todo:
            rows = run_cell(problem, dataset, eps, name, seeds)
            if rows[0]["Lambda"] == rows[0]["Lambda"]:
                bias = objpert_bias(problem, rows[0]["Lambda"])
                for r in rows:
                    r["objpert_bias_excess"] = bias
            for r in rows:
                r["trivial_excess_loss"] = float(problem.excess_loss(np.zeros(problem.d)))
                r["prepared_sha256"] = sha
            new = pd.DataFrame(rows)
            frame = new if not len(frame) else pd.concat([frame, new], ignore_index=True)
            frame = frame.sort_values(["dataset", "epsilon", "candidate", "seed"], kind="stable")
            atomic_csv(frame, PER_SEED)
            loss = new["excess_loss"]
            log(f"  {dataset} eps={eps:g} {name}: T={rows[0]['T']} seeds={len(seeds)} "
                f"excess {loss.mean():.4g} +- "
                f"{loss.std(ddof=1) / math.sqrt(len(loss)) if len(loss) > 1 else float('nan'):.2g}"
                f" wall {rows[0]['cell_wall_s']:.1f} s (cpu {rows[0]['cell_cpu_s']:.1f} s)")


# ---- reference and summaries ---------------------------------------------------------------------
def oracle_reference() -> pd.DataFrame:
    """Per (dataset, epsilon): the minimum over the tracks' method labels of the oracle-tuned best
    (lowest best-T mean over the label's declared variants, conversion bs16), and the claims'
    fixed-rule losses (benchmark relation, n public) of the same labels."""
    from dpnewton.pipeline.claims.tuning_tracks import label_variants

    cfg = yaml.safe_load(CLAIMS_CONFIG.read_text())
    variants = label_variants(cfg["tracks"])
    best = pd.read_csv(CLAIMS_DIR / "best_T.csv")
    best = best[best["conversion"] == cfg["claims"]["protocol_conversion"]]
    fixed = pd.read_csv(CLAIMS_DIR / "fixed_rule.csv")
    rows = []
    for ds in DATASETS:
        for eps in cfg["tracks"]["epsilons"]:
            cell = best[(best["dataset"] == ds) & np.isclose(best["epsilon"], eps)]
            per_label = {}
            for label, vs in variants.items():
                m = cell[cell["algorithm"].isin(vs)].set_index("algorithm")["excess_loss_mean"].astype(float)
                m = m[np.isfinite(m)]
                if len(m):
                    per_label[label] = (float(m.min()), str(m.idxmin()))
            label = min(per_label, key=lambda k: per_label[k][0])
            rec = {"dataset": ds, "epsilon": float(eps), "oracle_best": per_label[label][0],
                   "oracle_method": label, "oracle_config": per_label[label][1]}
            f = fixed[(fixed["dataset"] == ds) & np.isclose(fixed["epsilon"], eps)]
            for r in f.itertuples():
                rec[f"claims_fixed_{r.method}"] = float(r.excess_loss)
                rec[f"claims_fixed_{r.method}_T"] = float(r.median_T)
            rows.append(rec)
    return pd.DataFrame(rows)


def cell_table(frame: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    g = frame.groupby(KEY, sort=False)
    cells = g.agg(T=("T", "first"), seeds=("seed", "nunique"), mean=("excess_loss", "mean"),
                  sd=("excess_loss", lambda s: s.std(ddof=1)), median=("excess_loss", "median"),
                  last_iterate_mean=("last_iterate_excess_loss", "mean"),
                  trivial=("trivial_excess_loss", "first"), wall_s=("cell_wall_s", "first"),
                  cpu_s=("cell_cpu_s", "first"), Lambda=("Lambda", "first"), n=("n", "first"),
                  rho_bs16=("rho_bs16", "first")).reset_index()
    # a cell run in parts (seeds added with --resume) has one wall time per part
    parts = frame.drop_duplicates(KEY + ["cell_wall_s"]).groupby(KEY)[["cell_wall_s", "cell_cpu_s"]].sum()
    cells = cells.drop(columns=["wall_s", "cpu_s"]).merge(
        parts.rename(columns={"cell_wall_s": "wall_s", "cell_cpu_s": "cpu_s"}).reset_index(), on=KEY)
    if "objpert_bias_excess" in frame:
        cells = cells.merge(frame.groupby(KEY)["objpert_bias_excess"].first().reset_index(), on=KEY)
    cells["se"] = cells["sd"] / np.sqrt(cells["seeds"])
    cells = cells.merge(ref[["dataset", "epsilon", "oracle_best", "oracle_method", "oracle_config"]],
                        on=["dataset", "epsilon"], how="left")
    cells["ratio"] = cells["mean"] / cells["oracle_best"]
    cells["within"] = cells["ratio"] <= WITHIN
    cells["eligible"] = cells["candidate"].map(lambda c: CANDIDATES[c]["eligible"])
    order = {c: i for i, c in enumerate(CANDIDATES)}
    cells["_o"] = cells["candidate"].map(order)
    cells["_d"] = cells["dataset"].map({d: i for i, d in enumerate(DATASETS)})
    return cells.sort_values(["_d", "epsilon", "_o"]).drop(columns=["_o", "_d", "sd"]).reset_index(drop=True)


def summary_table(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, g in cells.groupby("candidate", sort=False):
        rows.append({"candidate": name, "eligible": CANDIDATES[name]["eligible"], "rule": CANDIDATES[name]["rule"],
                     "cells": len(g), "within_1.25x": int(g["within"].sum()),
                     "median_ratio": float(g["ratio"].median()), "max_ratio": float(g["ratio"].max()),
                     "worst_cell": f"{g.loc[g['ratio'].idxmax(), 'dataset']}@{g.loc[g['ratio'].idxmax(), 'epsilon']:g}",
                     "seeds_min": int(g["seeds"].min()), "seeds_max": int(g["seeds"].max()),
                     "wall_s": float(g["wall_s"].sum()), "cpu_s": float(g["cpu_s"].sum()),
                     "runs": int(g["seeds"].sum())})
    out = pd.DataFrame(rows)
    out["_o"] = out["candidate"].map({c: i for i, c in enumerate(CANDIDATES)})
    return out.sort_values("_o").drop(columns="_o").reset_index(drop=True)


def winner(summary: pd.DataFrame) -> str:
    """Most cells within 1.25x, ties broken by the lower median ratio (eligible candidates only)."""
    e = summary[summary["eligible"]]
    return str(e.sort_values(["within_1.25x", "median_ratio"], ascending=[False, True]).iloc[0]["candidate"])


def fmt(x: float, digits: int = 3) -> str:
    if not (isinstance(x, (float, int)) and math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def claims_fixed_summary(ref: pd.DataFrame) -> list[dict]:
    out = []
    for col in [c for c in ref.columns if c.startswith("claims_fixed_") and not c.endswith("_T")]:
        r = ref[col] / ref["oracle_best"]
        out.append({"method": col[len("claims_fixed_"):], "within": int((r <= WITHIN).sum()),
                    "cells": int(r.notna().sum()),
                    "median": float(r.median()), "max": float(r.max())})
    return out


def markdown(cells: pd.DataFrame, summary: pd.DataFrame, ref: pd.DataFrame) -> str:
    names = [c for c in CANDIDATES if c in set(cells["candidate"])]
    L = ["### Per cell: mean excess loss ± s.e. (ratio to the oracle-tuned best; **bold**: within 1.25x)", "",
         "| dataset | eps | oracle-tuned best (method: config) | " + " | ".join(names) + " |",
         "|---|---|---|" + "---|" * len(names)]
    for (ds, eps), g in cells.groupby(["dataset", "epsilon"], sort=False):
        r0 = g.iloc[0]
        parts = []
        for name in names:
            row = g[g["candidate"] == name]
            if not len(row):
                parts.append("")
                continue
            r = row.iloc[0]
            ratio = f"{r['ratio']:.2f}x"
            ratio = f"**{ratio}**" if r["within"] else ratio
            parts.append(f"{fmt(r['mean'])} ± {fmt(r['se'], 2)} ({ratio})")
        L.append(f"| {ds} | {eps:g} | {fmt(r0['oracle_best'])} ({r0['oracle_method']}: {r0['oracle_config']}) | "
                 + " | ".join(parts) + " |")
    L += ["", "### Per cell: the snr rule's T and objpert's regulariser", "",
          "snr T = min(max(1, floor(2 rho n^2 / d)), 3000). *bias*: the excess loss of the noise-free "
          "regularised minimiser argmin l(w) + Lambda/(2n) ||w||^2, the part of objpert's loss its Lambda "
          "causes alone; *w = 0*: the excess loss of the trivial output.", "",
          "| dataset | eps | n | rho (bs16) | snr T | objpert Lambda | bias | bias / objpert loss | "
          "bias / oracle-tuned best | w = 0 |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for (ds, eps), g in cells.groupby(["dataset", "epsilon"], sort=False):
        snr = g[g["candidate"] == "dp-gd-tail-snr"]
        op = g[g["candidate"] == "objpert"]
        L.append(f"| {ds} | {eps:g} | {int(g.iloc[0]['n'])} | {fmt(g.iloc[0]['rho_bs16'])} | "
                 f"{int(snr.iloc[0]['T']) if len(snr) else 'n/a'} | "
                 f"{fmt(op.iloc[0]['Lambda']) if len(op) else 'n/a'} | "
                 f"{fmt(op.iloc[0]['objpert_bias_excess']) if len(op) and 'objpert_bias_excess' in op else 'n/a'} | "
                 f"{fmt(op.iloc[0]['objpert_bias_excess'] / op.iloc[0]['mean'], 2) if len(op) else 'n/a'} | "
                 f"{fmt(op.iloc[0]['objpert_bias_excess'] / op.iloc[0]['oracle_best'], 2) if len(op) else 'n/a'} | "
                 f"{fmt(g.iloc[0]['trivial'])} |")
    L += ["", "### Summary per candidate (15 cells: 5 datasets x epsilon 0.1, 1, 10)", "",
          "| candidate | rule | eligible | within 1.25x | median ratio | max ratio (cell) | seeds | runs | wall (s) "
          "| CPU (s) |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        seeds = f"{r.seeds_min}" if r.seeds_min == r.seeds_max else f"{r.seeds_min}-{r.seeds_max}"
        L.append(f"| {r.candidate} | {r.rule} | {'yes' if r.eligible else 'reference'} | {r._5} of {r.cells} | "
                 f"{r.median_ratio:.2f}x | {r.max_ratio:.2f}x ({r.worst_cell}) | {seeds} | {r.runs} | {r.wall_s:.0f} | "
                 f"{r.cpu_s:.0f} |")
    L += ["", f"Winner (most cells within 1.25x, ties by the median ratio; eligible candidates): "
              f"**{winner(summary)}**.", "",
          "The claims run's fixed-rule track on the same cells (benchmark relation, n public; "
          "figures/claims/fixed_rule.csv; 8 repetitions), against the same reference:", "",
          "| fixed rule (claims) | within 1.25x | median ratio | max ratio |", "|---|---|---|---|"]
    for s in claims_fixed_summary(ref):
        L.append(f"| {s['method']} | {s['within']} of {s['cells']} | {s['median']:.2f}x | {s['max']:.2f}x |")
    return "\n".join(L)


BEGIN, END = "<!-- default_rule:tables begin -->", "<!-- default_rule:tables end -->"


def summarize(write_doc: bool = True) -> None:
    frame = pd.read_csv(PER_SEED)
    ref = oracle_reference()
    cells = cell_table(frame, ref)
    summary = summary_table(cells)
    atomic_csv(cells, CELLS)
    atomic_csv(summary, SUMMARY)
    md = markdown(cells, summary, ref)
    print(md)
    if write_doc and DOC.exists():
        text = DOC.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            fd, tmp = tempfile.mkstemp(dir=DOC.parent, prefix=DOC.name, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(f"{head}{BEGIN}\n{md}\n{END}{tail}")
            os.replace(tmp, DOC)
            log(f"tables written to {DOC.relative_to(REPO_DIR)}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resume", action="store_true", help="keep the rows of default_rule.csv, skip finished cells")
    ap.add_argument("--summary-only", action="store_true", help="only rebuild the summaries from default_rule.csv")
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    ap.add_argument("--seeds", type=int, default=SEEDS, help="seeds per cell (0..k-1)")
    ap.add_argument("--seeds-for", nargs="*", default=list(SEEDS_FOR),
                    metavar="DATASET:CANDIDATE=K", help="fewer (or more) seeds for some cells ('*' matches all)")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite the tables of docs/default_rule.md")
    args = ap.parse_args(argv)
    if not args.summary_only:
        run(args)
    summarize(write_doc=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
