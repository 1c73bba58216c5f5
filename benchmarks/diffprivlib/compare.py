"""dpnewton's DPLogisticRegression against IBM diffprivlib's LogisticRegression.

Run with dpnewton's venv active, after ``bash benchmarks/diffprivlib/setup_venv.sh``:

    python benchmarks/diffprivlib/compare.py            # full run (4 datasets x 3 epsilons x 10 reps)
    python benchmarks/diffprivlib/compare.py --quick    # smoke test: 1 rep, 2 datasets, 40 radius fits

Each library runs in its own venv: this driver (dpnewton's venv) prepares the datasets through
dpnewton's data layer, writes one seeded 80/20 train/test split per dataset to an .npz, runs the
diffprivlib side as a subprocess with diffprivlib's interpreter (run_diffprivlib.py, which reads the
same .npz files) and fits dpnewton's estimator, the non-private optimum and the majority class
itself. Then it runs the radius check (default fits, max weight norm), writes

    benchmarks/results/diffprivlib_comparison.csv          one row per dataset, epsilon, method, rep
    benchmarks/results/diffprivlib_comparison_summary.csv  mean, s.e., time, max norm per cell
    benchmarks/results/diffprivlib_radius_check.csv        one row per radius-check fit
    benchmarks/results/diffprivlib_comparison.env.json     versions, commit, defaults, timings
    benchmarks/results/diffprivlib_comparison.md           the results section
    benchmarks/diffprivlib/README.md                       README.intro.md + results + discussion.md

(``--quick`` writes the same names with ``_quick`` to benchmarks/diffprivlib/work/quick/, git-ignored,
and leaves README.md alone), each atomically.
BLAS runs on one thread in both processes, and only one of them computes at a time.
"""

from __future__ import annotations

import os
import sys

# One BLAS thread, set before numpy is first imported (shared.BLAS_ENV lists the same variables).
for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
           "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_k] = "1"

import argparse  # noqa: E402
import csv  # noqa: E402
import datetime as dt  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from shared import (BLAS_ENV, ROW_FIELDS, atomic_write_json, atomic_write_text, coef_norm,  # noqa: E402
                    load_split, test_metrics, timed_fit)

BENCH_DIR = HERE.parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DATA_DIR = Path(os.environ.get("DPNEWTON_DATA_DIR", "/work/shared/datasets"))
CACHE_DIR = BENCH_DIR / ".cache" / "diffprivlib_comparison"   # git-ignored (benchmarks/.gitignore)
WORK_DIR = HERE / "work"                                       # git-ignored (./.gitignore)
DPL_VENV = Path(os.environ.get("DPL_VENV", HERE / ".venv"))

SPLIT_SEED = 20260101
"""Seed of the stratified 80/20 train/test split (sklearn train_test_split): the same split for
every method and repetition."""
TEST_SIZE = 0.2
DATASETS = ("a1a", "adult", "protein", "synthetic")
QUICK_DATASETS = ("synthetic", "a1a")
EPSILONS = (0.1, 1.0, 10.0)
REPS = 10
FIXED_SETTINGS = (
    ("objpert", {"algorithm": "objpert"}),
    ("dp-gd tail T=100", {"algorithm": "dp-gd", "iterations": 100, "hyper": {"average": "tail"}}),
    ("dp-gd tail T=1000", {"algorithm": "dp-gd", "iterations": 1000, "hyper": {"average": "tail"}}),
    ("precond-dp-gd tail T=100", {"algorithm": "precond-dp-gd", "iterations": 100, "hyper": {"average": "tail"}}),
)
"""Fixed dpnewton settings: DPLogisticRegression(epsilon, data_norm, **setting), the rest default."""
DEFAULT = "dpnewton default"
DIFFPRIVLIB = "diffprivlib"
NONPRIVATE = "non-private (sklearn C=1e6)"
MAJORITY = "majority class"
METHOD_ORDER = [DEFAULT] + [f"dpnewton {name}" for name, _ in FIXED_SETTINGS] + [DIFFPRIVLIB, NONPRIVATE, MAJORITY]

RADIUS_FITS = 1000
RADIUS_CELLS = (("synthetic", 0.1), ("synthetic", 1.0), ("synthetic 1500x5", 0.1), ("synthetic 1500x5", 1.0))
"""The radius check: RADIUS_FITS default fits spread evenly over these (problem, epsilon) cells;
"synthetic" is the train split of the benchmark's synthetic dataset (8000 x 100), "synthetic
1500x5" dpnewton's synthetic generator at n=1500, d=5 (seed 0), all rows used."""


# ---- helpers -------------------------------------------------------------------------------------
def git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO_DIR), *args], capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return ""


def snapshot_source(dest: Path) -> str:
    """Copy src/dpnewton to ``dest``/dpnewton and put ``dest`` first on sys.path, so the whole run
    uses one frozen copy of the package while other engineers edit src/; returns a sha256 of the copy."""
    import shutil

    src = REPO_DIR / "src" / "dpnewton"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest / "dpnewton", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    h = hashlib.sha256()
    for f in sorted((dest / "dpnewton").rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(dest)).encode() + b"\0" + f.read_bytes())
    sys.path.insert(0, str(dest))
    return h.hexdigest()


def live_defaults() -> dict | str:
    """DPLogisticRegression().get_params() of the package as it is in src/ now (a fresh interpreter)."""
    code = ("import json, dpnewton; print(json.dumps(dpnewton.DPLogisticRegression().get_params(), "
            "sort_keys=True))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO_DIR), env=env)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"could not read: {p.stderr.strip()[-300:]}"


def git_state() -> dict:
    diff = git("diff", "HEAD", "--", "src")
    return {"commit": git("rev-parse", "HEAD"), "log": git("log", "--oneline", "-5").splitlines(),
            "src_status": git("status", "--porcelain", "--", "src").splitlines(),
            "src_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else "",
            "src_diff_lines": len(diff.splitlines())}


def csv_text(rows: list[dict], fields: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})
    return buf.getvalue()


def fmt(x, nd=4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "--"
    return f"{x:.{nd}f}"


def pm(mean, se, nd=4) -> str:
    if mean is None or not math.isfinite(mean):
        return "--"
    return f"{mean:.{nd}f} ± {se:.{nd}f}" if se is not None and math.isfinite(se) else f"{mean:.{nd}f}"


def mean_se(values) -> tuple[float, float]:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return float(v.mean()), se


# ---- data ----------------------------------------------------------------------------------------
def load_dataset(name: str, **options):
    """Raw features X (the data layer's X without its constant bias column) and labels y in {-1, +1}."""
    from dpnewton.data import prepare

    out = None
    if options:
        out = CACHE_DIR / (name + "_" + "_".join(f"{k}{v}" for k, v in sorted(options.items())) + ".npz")
    pd = prepare(name, data_dir=DATA_DIR, cache_dir=CACHE_DIR, out=out, allow_download=False, **options)
    X, y = pd.X, pd.y
    if pd.meta.get("bias"):
        if not np.all(X[:, 0] == 1.0):
            raise RuntimeError(f"{name}: the data layer says bias but column 0 is not all ones")
        X = X[:, 1:]
    return np.ascontiguousarray(X), y, pd.meta


def row_norm_bound(X: np.ndarray) -> float:
    """max ||[x, 1]|| over the rows of X."""
    return float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X)) + 1.0))


def write_split(name: str, path: Path) -> dict:
    from sklearn.model_selection import train_test_split

    X, y, meta = load_dataset(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=TEST_SIZE, random_state=SPLIT_SEED, stratify=y)
    B = row_norm_bound(Xtr)
    # diffprivlib's data_norm bounds ||x|| and it adds the intercept's 1 itself (its
    # _logistic_regression_path uses sqrt(data_norm^2 + 1)): sqrt(B^2 - 1) is the same bound on [x, 1].
    B_dpl = float(np.sqrt(max(B * B - 1.0, 0.0)))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, dataset=np.array(name), X_train=Xtr, y_train=ytr, X_test=Xte, y_test=yte,
             data_norm=np.array(B), data_norm_diffprivlib=np.array(B_dpl))
    os.replace(tmp, path)
    test_max = row_norm_bound(Xte)
    return {"dataset": name, "n_train": len(ytr), "n_test": len(yte), "d": X.shape[1], "data_norm": B,
            "data_norm_diffprivlib": B_dpl, "test_max_row_norm": test_max,
            "test_rows_above_bound": int(np.sum(np.sqrt(np.einsum("ij,ij->i", Xte, Xte) + 1.0) > B * (1 + 1e-12))),
            "median_row_norm": float(np.median(np.sqrt(np.einsum("ij,ij->i", Xtr, Xtr) + 1.0))),
            "positive_rate_train": float(np.mean(ytr == 1.0)),
            "preprocessing": meta.get("preprocessing"), "description": meta.get("description")}


# ---- the diffprivlib side ------------------------------------------------------------------------
def run_diffprivlib_side(split_paths: list[Path], epsilons, reps: int, out: Path) -> dict:
    py = DPL_VENV / "bin" / "python"
    if not py.is_file():
        raise SystemExit(f"{py} not found: run  bash {HERE / 'setup_venv.sh'}  first (or set DPL_VENV)")
    env = dict(os.environ, **BLAS_ENV)
    for k in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(k, None)
    cmd = [str(py), str(HERE / "run_diffprivlib.py"), *map(str, split_paths), "--out", str(out),
           "--reps", str(reps), "--epsilons", *map(str, epsilons)]
    subprocess.run(cmd, check=True, env=env, cwd=str(HERE))
    return json.loads(out.read_text())


# ---- the dpnewton side ---------------------------------------------------------------------------
def fit_dpnewton(s: dict, eps: float, rep: int, method: str, setting: dict) -> dict:
    from dpnewton import DPLogisticRegression

    labels = np.unique(s["y_train"])
    row = {"dataset": s["dataset"], "epsilon": eps, "method": method, "library": "dpnewton", "rep": rep,
           "random_state": rep, "data_norm": s["data_norm"], "n_train": len(s["y_train"]),
           "n_test": len(s["y_test"]), "d": s["X_train"].shape[1]}
    model = DPLogisticRegression(epsilon=eps, data_norm=s["data_norm"], random_state=rep, **setting)
    try:
        with timed_fit(ignore=("PrivacyWarning",)) as t:
            model.fit(s["X_train"], s["y_train"])
    except ValueError as exc:
        status = "unsupported" if setting else "error"
        row.update(t, status=status, message=f"ValueError: {exc}"[:400])
        return row
    except Exception as exc:  # recorded, the run goes on
        row.update(t, status="error", message=f"{type(exc).__name__}: {exc}"[:400])
        return row
    p_pos = model.predict_proba(s["X_test"])[:, list(model.classes_).index(labels[1])]
    cn = coef_norm(model.coef_, model.intercept_)
    row.update(t, status="ok", message="", n_iter=int(model.n_iter_), coef_norm=cn,
               w_norm=cn * s["data_norm"], delta=float(model.delta_),
               **test_metrics(s["y_test"], labels, p_pos, model.predict(s["X_test"])))
    return row


def fit_reference(s: dict, method: str) -> dict:
    labels = np.unique(s["y_train"])
    row = {"dataset": s["dataset"], "epsilon": None, "method": method, "rep": 0, "data_norm": None,
           "n_train": len(s["y_train"]), "n_test": len(s["y_test"]), "d": s["X_train"].shape[1]}
    if method == MAJORITY:
        with timed_fit() as t:
            prior = float(np.mean(s["y_train"] == labels[1]))
            major = labels[1] if prior > 0.5 else labels[0]
        p_pos = np.full(len(s["y_test"]), prior)
        pred = np.full(len(s["y_test"]), major)
        row.update(t, library="numpy", status="ok", message=f"predicts {major:+g}; P(+1) = train rate {prior:.4f}",
                   coef_norm=None, **test_metrics(s["y_test"], labels, p_pos, pred))
        return row
    import sklearn
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e6, max_iter=100_000, tol=1e-8)
    with timed_fit() as t:
        model.fit(s["X_train"], s["y_train"])
    p_pos = model.predict_proba(s["X_test"])[:, list(model.classes_).index(labels[1])]
    row.update(t, library=f"scikit-learn {sklearn.__version__}", status="ok", message="lbfgs, C=1e6, tol=1e-8",
               n_iter=int(np.max(model.n_iter_)), coef_norm=coef_norm(model.coef_, model.intercept_),
               **test_metrics(s["y_test"], labels, p_pos, model.predict(s["X_test"])))
    return row


def run_dpnewton_side(split_paths, epsilons, reps, progress) -> list[dict]:
    rows: list[dict] = []
    for path in split_paths:
        s = load_split(path)
        rows += [fit_reference(s, NONPRIVATE), fit_reference(s, MAJORITY)]
        for eps in epsilons:
            t0 = time.perf_counter()
            for rep in range(reps):
                rows.append(fit_dpnewton(s, eps, rep, DEFAULT, {}))
            for name, setting in FIXED_SETTINGS:
                for rep in range(reps):
                    row = fit_dpnewton(s, eps, rep, f"dpnewton {name}", setting)
                    rows.append(row)
                    if row["status"] == "unsupported":   # the setting, not this repetition: next setting
                        break
            progress(f"dpnewton: {s['dataset']} eps={eps:g} done in {time.perf_counter() - t0:.0f} s", rows)
    return rows


# ---- the radius check ----------------------------------------------------------------------------
RADIUS_PARAMS = ("max_norm", "radius", "weight_radius", "norm_bound")
"""get_params keys taken as the estimator's public weight radius (the first present wins), and any
other key with 'radius' in its name."""


def radius_of(params: dict, model=None) -> tuple[str | None, float | None]:
    """The estimator's public radius on the optimizer's weights w (on the rows [x, 1]/data_norm):
    a get_params key of RADIUS_PARAMS or with 'radius' in its name (or, when its value is None, a
    fitted attribute with 'radius' or 'max_norm' in its name). (None, None) when there is none."""
    keys = [k for k in RADIUS_PARAMS if k in params] + [k for k in params if "radius" in k.lower()
                                                         and k not in RADIUS_PARAMS]
    for k in keys:
        v = params[k]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return k, float(v)
        if model is not None:
            for a, av in vars(model).items():
                if (("radius" in a.lower() or "max_norm" in a.lower()) and a.endswith("_")
                        and isinstance(av, (int, float))):
                    return f"{k} -> {a}", float(av)
        return k, None
    return None, None


def run_radius_check(split_dir: Path, n_fits: int, progress) -> tuple[list[dict], dict]:
    from dpnewton import DPLogisticRegression

    problems = {}
    s = load_split(split_dir / "split_synthetic.npz") if (split_dir / "split_synthetic.npz").is_file() else None
    if s is None:
        X, y, _ = load_dataset("synthetic")
        problems["synthetic"] = (X, y)
    else:
        problems["synthetic"] = (s["X_train"], s["y_train"])
    X5, y5, _ = load_dataset("synthetic", n=1500, d=5, seed=0)
    problems["synthetic 1500x5"] = (X5, y5)
    per_cell = [n_fits // len(RADIUS_CELLS) + (1 if i < n_fits % len(RADIUS_CELLS) else 0)
                for i in range(len(RADIUS_CELLS))]
    rows = []
    key, radius = radius_of(DPLogisticRegression().get_params())
    for (prob, eps), k in zip(RADIUS_CELLS, per_cell):
        X, y = problems[prob]
        B = row_norm_bound(X)
        t0 = time.perf_counter()
        for i in range(k):
            model = DPLogisticRegression(epsilon=eps, data_norm=B, random_state=i)
            row = {"problem": prob, "n": X.shape[0], "d": X.shape[1], "epsilon": eps, "random_state": i,
                   "data_norm": B}
            try:
                with timed_fit(ignore=("PrivacyWarning",)) as t:
                    model.fit(X, y)
            except Exception as exc:
                row.update(t, status="error", message=f"{type(exc).__name__}: {exc}"[:300])
                rows.append(row)
                continue
            cn = coef_norm(model.coef_, model.intercept_)
            rkey, rval = radius_of(model.get_params(), model)
            if rval is not None:
                key, radius = rkey, rval
            row.update(t, status="ok", message="", coef_norm=cn, w_norm=cn * B, radius=rval,
                       projected=int("ProjectionWarning" in (t.get("warnings") or "")),
                       n_iter=int(model.n_iter_), delta=float(model.delta_),
                       train_accuracy=float(model.score(X, y)))
            rows.append(row)
        progress(f"radius check: {prob} eps={eps:g}: {k} fits in {time.perf_counter() - t0:.0f} s", None)
    return rows, radius_summary(rows, key, radius)


def radius_summary(rows: list[dict], key, radius) -> dict:
    ok = [r for r in rows if r["status"] == "ok"]
    w = np.array([r["w_norm"] for r in ok]) if ok else np.array([np.nan])
    info = {"n_fits": len(rows), "n_ok": len(ok), "radius_param": key, "radius": radius,
            "max_w_norm": float(np.nanmax(w)), "median_w_norm": float(np.nanmedian(w)),
            "max_coef_norm": float(max((r["coef_norm"] for r in ok), default=float("nan"))),
            "cells": []}
    if radius is not None:
        info["n_exceeding"] = int(sum(r["w_norm"] > radius * (1 + 1e-9) for r in ok))
    info["n_projected"] = int(sum(bool(r.get("projected")) for r in ok))
    for prob, eps in RADIUS_CELLS:
        cell = [r for r in ok if r["problem"] == prob and r["epsilon"] == eps]
        if cell:
            ws = np.array([r["w_norm"] for r in cell])
            info["cells"].append({"problem": prob, "epsilon": eps, "n": len(cell), "data_norm": cell[0]["data_norm"],
                                  "max_w_norm": float(ws.max()), "median_w_norm": float(np.median(ws)),
                                  "p99_w_norm": float(np.quantile(ws, 0.99)),
                                  "n_projected": int(sum(bool(r.get("projected")) for r in cell)),
                                  "mean_fit_s": float(np.mean([r["fit_wall_s"] for r in cell]))})
    return info


# ---- summary, targets, report --------------------------------------------------------------------
def summarise(rows: list[dict]) -> list[dict]:
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["epsilon"], r["method"]), []).append(r)
    out = []
    for (ds, eps, method), rs in cells.items():
        ok = [r for r in rs if r["status"] == "ok"]
        statuses = sorted({r["status"] for r in rs})
        am, ase = mean_se([r["accuracy"] for r in ok])
        lm, lse = mean_se([r["log_loss"] for r in ok])
        norms = [r["coef_norm"] for r in ok if r.get("coef_norm") is not None]
        wn = [r["w_norm"] for r in ok if r.get("w_norm") is not None]
        deltas = sorted({r["delta"] for r in ok if r.get("delta") is not None})
        out.append({
            "dataset": ds, "epsilon": eps, "method": method, "library": rs[0].get("library"),
            "status": statuses[0] if len(statuses) == 1 else "/".join(statuses),
            "n_runs": len(rs), "n_ok": len(ok), "accuracy_mean": am, "accuracy_se": ase,
            "log_loss_mean": lm, "log_loss_se": lse,
            "fit_wall_mean_s": float(np.mean([r["fit_wall_s"] for r in ok])) if ok else None,
            "fit_cpu_mean_s": float(np.mean([r["fit_cpu_s"] for r in ok])) if ok else None,
            "coef_norm_max": max(norms) if norms else None, "w_norm_max": max(wn) if wn else None,
            "delta": deltas[0] if len(deltas) == 1 else ("/".join(f"{d:.3g}" for d in deltas) if deltas else None),
            "data_norm": rs[0].get("data_norm"),
            "n_iter_mean": float(np.mean([r["n_iter"] for r in ok if r.get("n_iter") is not None]))
            if any(r.get("n_iter") is not None for r in ok) else None,
            "warnings": "; ".join(sorted({w for r in rs for w in (r.get("warnings") or "").split("; ") if w}))[:300],
            "message": next((r["message"] for r in rs if r.get("message")), "")[:300],
        })
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    out.sort(key=lambda r: (r["dataset"], -1 if r["epsilon"] is None else r["epsilon"], order.get(r["method"], 99)))
    return out


RADIUS_FIELDS = ["problem", "n", "d", "epsilon", "random_state", "data_norm", "status", "w_norm", "coef_norm",
                 "radius", "projected", "n_iter", "delta", "train_accuracy", "fit_wall_s", "fit_cpu_s", "warnings",
                 "message"]
SUMMARY_FIELDS = ["dataset", "epsilon", "method", "library", "status", "n_runs", "n_ok", "accuracy_mean",
                  "accuracy_se", "log_loss_mean", "log_loss_se", "fit_wall_mean_s", "fit_cpu_mean_s",
                  "coef_norm_max", "w_norm_max", "delta", "data_norm", "n_iter_mean", "warnings", "message"]


def evaluate_targets(summary: list[dict], datasets, epsilons) -> dict:
    idx = {(r["dataset"], r["epsilon"], r["method"]): r for r in summary}
    fixed = [f"dpnewton {n}" for n, _ in FIXED_SETTINGS]
    cells = []
    for ds in datasets:
        for eps in epsilons:
            d, p = idx.get((ds, eps, DEFAULT)), idx.get((ds, eps, DIFFPRIVLIB))
            cand = [idx[(ds, eps, m)] for m in fixed if (ds, eps, m) in idx
                    and idx[(ds, eps, m)]["n_ok"] == idx[(ds, eps, m)]["n_runs"] and idx[(ds, eps, m)]["n_ok"] > 0]
            best = max(cand, key=lambda r: r["accuracy_mean"]) if cand else None
            c = {"dataset": ds, "epsilon": eps}
            if d and p and d["n_ok"] and p["n_ok"]:
                c["default_acc"], c["default_se"] = d["accuracy_mean"], d["accuracy_se"]
                c["dpl_acc"], c["dpl_se"] = p["accuracy_mean"], p["accuracy_se"]
                c["vs_dpl_diff"] = d["accuracy_mean"] - p["accuracy_mean"]
                c["t1_met"] = d["accuracy_mean"] >= p["accuracy_mean"]
            if d and best and d["n_ok"]:
                se = math.sqrt(np.nan_to_num(d["accuracy_se"]) ** 2 + np.nan_to_num(best["accuracy_se"]) ** 2)
                c["best_fixed"], c["best_acc"] = best["method"], best["accuracy_mean"]
                c["best_se"] = best["accuracy_se"]
                c["vs_best_diff"], c["vs_best_se"] = d["accuracy_mean"] - best["accuracy_mean"], se
                c["t2_met"] = d["accuracy_mean"] >= best["accuracy_mean"] - 2 * se
            cells.append(c)
    n1 = sum(bool(c.get("t1_met")) for c in cells)
    n2 = sum(bool(c.get("t2_met")) for c in cells)
    return {"cells": cells, "t1_count": n1, "t2_count": n2, "n_cells": len(cells)}


def results_markdown(summary, targets, radius, env, splits, quick: bool) -> str:
    L = []
    g = env["git"]
    eps_all = sorted({r["epsilon"] for r in summary if r["epsilon"] is not None})
    L.append(f"## Results{' (QUICK smoke test: 1 repetition, 2 datasets -- not the benchmark)' if quick else ''}\n")
    L.append(f"Measured {env['started_utc']} -- {env['finished_utc']} (UTC), wall time "
             f"{env['wall_s'] / 60:.1f} min (of which the diffprivlib subprocess {env['diffprivlib_wall_s']:.0f} s, "
             f"the radius check {env['radius_wall_s']:.0f} s), load average at start / end "
             f"{env['loadavg_start']} / {env['loadavg_end']} on {env['cpu']} ({os.cpu_count()} logical CPUs, "
             "shared with other work; one BLAS thread per process, one process computing at a time).\n")
    L.append(f"* **Commit** `{g['commit'][:12]}` (`git log --oneline -5` at the start of the run: "
             + "; ".join(f"`{x[:90]}{'...' if len(x) > 90 else ''}`" for x in g["log"]) + ").")
    if g["src_status"]:
        L.append(f"  The working tree of `src/` was **not clean** at the start (other engineers' uncommitted "
                 f"edits: {', '.join('`' + x.strip() + '`' for x in g['src_status'])}; `git diff HEAD -- src` "
                 f"{g['src_diff_lines']} lines, sha256 {g['src_diff_sha256'][:16]}).")
    else:
        L.append("  `src/` had no uncommitted changes at the start of the run.")
    if env.get("src_snapshot_sha256"):
        L.append(f"  dpnewton was imported from a copy of `src/dpnewton` taken at the start of the run (content "
                 f"sha256 {env['src_snapshot_sha256'][:16]}), so edits made during the run do not mix in.")
    ge = env["git_end"]
    if (ge["commit"], ge["src_diff_sha256"]) != (g["commit"], g["src_diff_sha256"]):
        L.append(f"  **`src/` changed during the run**: at the end HEAD was `{ge['commit'][:12]}` "
                 f"(`{ge['log'][0] if ge['log'] else ''}`), uncommitted diff sha256 {ge['src_diff_sha256'][:16]}; "
                 "`DPLogisticRegression().get_params()` of that tree: "
                 f"`{json.dumps(env['dpnewton_defaults_end_live_src'], sort_keys=True)}`.")
    else:
        L.append("  `src/` was the same at the end of the run.")
    L.append(f"* **DPLogisticRegression defaults** (`DPLogisticRegression().get_params()`, read at run time): "
             f"`{json.dumps(env['dpnewton_defaults'], sort_keys=True)}`; supported algorithms "
             f"{', '.join(env['supported_algorithms'])}.")
    deltas = sorted({r["delta"] for r in summary if r["method"] == DEFAULT and r["delta"] is not None}, key=str)
    n_train = {sp["dataset"]: sp["n_train"] for sp in splits}
    resolved = [(r["dataset"], r["delta"]) for r in summary
                if r["method"] == DEFAULT and r["epsilon"] == max(eps_all) and isinstance(r["delta"], float)]
    what = ""
    if resolved and all(abs(dl * n_train[ds] ** 2 - 1) < 1e-9 for ds, dl in resolved):
        what = " = 1/n² for the n training rows"
    elif resolved and len({dl for _, dl in resolved}) == 1:
        what = " (the same constant on every dataset)"
    L.append("* **delta used by dpnewton**: the estimator's default "
             f"`delta={env['dpnewton_defaults'].get('delta')!r}`, "
             "resolved by the fitted models (`delta_`) to " + ", ".join(f"{ds} {dl:.3g}" for ds, dl in resolved)
             + f"{what}. diffprivlib: delta = 0 (pure epsilon-DP).")
    L.append(f"* Versions: dpnewton side {env['dpnewton_side']}; diffprivlib side {env['diffprivlib_side']}.")
    L.append("")
    L.append("### Data and data_norm\n")
    L.append(f"Stratified 80/20 split, `train_test_split(test_size=0.2, random_state={SPLIT_SEED}, stratify=y)`, "
             "the same for every method and repetition. data_norm B = max ||[x, 1]|| over the TRAIN rows, "
             "treated as public (as in diffprivlib's examples); dpnewton gets `data_norm=B`, diffprivlib "
             "`data_norm=sqrt(B^2 - 1)` = max ||x|| (its data_norm bounds x and it adds the intercept's 1 "
             "itself), so both calibrate to the same bound on ||[x, 1]|| and neither clips a training row.\n")
    L.append("| dataset | preprocessing (dpnewton data layer) | n train | n test | d | positive rate | "
             "B = data_norm | median ‖[x,1]‖ | diffprivlib data_norm | test rows above B |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for sp in splits:
        L.append(f"| {sp['dataset']} | {sp['preprocessing']} | {sp['n_train']} | {sp['n_test']} | {sp['d']} | "
                 f"{sp['positive_rate_train']:.3f} | {sp['data_norm']:.3f} | {sp['median_row_norm']:.3f} | "
                 f"{sp['data_norm_diffprivlib']:.3f} | {sp['test_rows_above_bound']} |")
    L.append("")
    # accuracy matrix
    L.append("### Test accuracy, mean ± s.e. over the repetitions\n")
    priv_methods = [m for m in METHOD_ORDER if m not in (NONPRIVATE, MAJORITY)]
    L.append("| dataset | ε | " + " | ".join(priv_methods) + " |")
    L.append("|---|---:|" + "---:|" * len(priv_methods))
    idx = {(r["dataset"], r["epsilon"], r["method"]): r for r in summary}
    datasets = list(dict.fromkeys(r["dataset"] for r in summary))
    for ds in datasets:
        for eps in eps_all:
            cells = []
            for m in priv_methods:
                r = idx.get((ds, eps, m))
                if r is None:
                    cells.append("--")
                elif r["n_ok"] == 0:
                    cells.append(r["status"])
                else:
                    partial = "" if r["n_ok"] == r["n_runs"] else f" ({r['n_ok']}/{r['n_runs']} ok)"
                    cells.append(pm(r["accuracy_mean"], r["accuracy_se"], 4) + partial)
            L.append(f"| {ds} | {eps:g} | " + " | ".join(cells) + " |")
        ref = [idx.get((ds, None, m)) for m in (NONPRIVATE, MAJORITY)]
        L.append(f"| {ds} | ∞ | non-private optimum: **{fmt(ref[0]['accuracy_mean'])}**; majority class: "
                 f"{fmt(ref[1]['accuracy_mean'])} |" + " |" * (len(priv_methods) - 1))
    L.append("")
    L.append("### Full table\n")
    L.append("Accuracy and log-loss on the test split (mean ± s.e., ddof = 1, over the repetitions; probabilities "
             "clipped to [1e-15, 1 - 1e-15]); fit time = mean wall-clock time of one `fit` (CPU time in "
             "brackets); max ‖coef‖ = the largest ‖(coef_, intercept_)‖ over the repetitions, in the units of the "
             "raw features (dpnewton's optimizer weight norm ‖w‖ = B × that). ε = ∞: non-private references, "
             "one deterministic fit.\n")
    L.append("| dataset | ε | method | status | runs ok | accuracy | log-loss | fit time s (CPU) | max ‖coef‖ "
             "| notes |")
    L.append("|---|---:|---|---|---:|---:|---:|---:|---:|---|")
    for r in summary:
        eps = "∞" if r["epsilon"] is None else f"{r['epsilon']:g}"
        note = r["message"] if r["status"] != "ok" else (r["warnings"] or "")
        if r["method"] == DEFAULT or r["method"].startswith("dpnewton"):
            if r.get("n_iter_mean") is not None:
                note = (f"T={r['n_iter_mean']:.0f}; " + note).strip("; ")
        elif r["method"] == DIFFPRIVLIB and r.get("n_iter_mean") is not None:
            note = (f"L-BFGS iterations {r['n_iter_mean']:.0f}; " + note).strip("; ")
        elif r["method"] == NONPRIVATE and r.get("n_iter_mean") is not None:
            note = (f"L-BFGS iterations {r['n_iter_mean']:.0f}; " + note).strip("; ")
        note = note.replace("|", "/")[:160]
        time_s = "--" if r["fit_wall_mean_s"] is None else f"{r['fit_wall_mean_s']:.3g} ({r['fit_cpu_mean_s']:.3g})"
        L.append(f"| {r['dataset']} | {eps} | {r['method']} | {r['status']} | {r['n_ok']}/{r['n_runs']} | "
                 f"{pm(r['accuracy_mean'], r['accuracy_se'])} | {pm(r['log_loss_mean'], r['log_loss_se'])} | "
                 f"{time_s} | {fmt(r['coef_norm_max'], 3)} | {note} |")
    L.append("")
    # targets
    L.append("### Targets\n")
    n = targets["n_cells"]
    t1, t2 = targets["t1_count"], targets["t2_count"]
    L.append(f"1. **Default at least as accurate as diffprivlib (mean test accuracy) in all {n} (dataset, ε) cells**: "
             f"{t1}/{n} -- **{'MET' if t1 == n and n else 'NOT MET'}**.")
    L.append(f"2. **Default within 2 s.e. of the best fixed dpnewton setting in at least 10 of 12 cells** (best = "
             "highest mean accuracy among the fixed settings that ran in every repetition, chosen after the fact on "
             "the same repetitions, which favours it; s.e. of the difference = sqrt(s.e.² + s.e.²)): "
             f"{t2}/{n} -- **{'MET' if t2 >= min(10, n) and n else 'NOT MET'}**"
             + (" (quick run: fewer cells, no s.e. with 1 repetition)" if quick else "") + ".")
    if radius is not None:
        if radius["radius"] is not None:
            verdict = "MET" if radius.get("n_exceeding", 1) == 0 and radius["n_ok"] == radius["n_fits"] else "NOT MET"
            L.append(f"3. **Radius check** ({radius['n_fits']} default fits, {radius['n_ok']} ok): public radius "
                     f"`{radius['radius_param']}` = {radius['radius']:g}; max optimizer weight norm ‖w‖ = "
                     f"{radius['max_w_norm']:.4g}; fits above the radius: {radius.get('n_exceeding')}; fits whose "
                     f"weights the estimator projected back onto the radius (ProjectionWarning): "
                     f"{radius.get('n_projected', 0)} -- **{verdict}**.")
        else:
            L.append(f"3. **Radius check** ({radius['n_fits']} default fits, {radius['n_ok']} ok): the estimator has "
                     + (f"a parameter `{radius['radius_param']}` without a numeric value"
                        if radius["radius_param"] else "**no radius parameter** in `get_params()`")
                     + f" at this commit, so the check cannot be decided; reported instead: max optimizer weight "
                     f"norm ‖w‖ (on the rows [x, 1]/B) = {radius['max_w_norm']:.4g}, max ‖(coef_, intercept_)‖ = "
                     f"{radius['max_coef_norm']:.4g} -- **NOT DECIDABLE (no radius)**.")
    L.append("")
    L.append("| dataset | ε | default acc | diffprivlib acc | default - diffprivlib | target 1 | best fixed setting | "
             "its acc | default - best (2 s.e.) | target 2 |")
    L.append("|---|---:|---:|---:|---:|:---:|---|---:|---:|:---:|")
    for c in targets["cells"]:
        L.append(f"| {c['dataset']} | {c['epsilon']:g} | "
                 f"{pm(c.get('default_acc', float('nan')), c.get('default_se'))} | "
                 f"{pm(c.get('dpl_acc', float('nan')), c.get('dpl_se'))} | {fmt(c.get('vs_dpl_diff'), 4)} | "
                 f"{'yes' if c.get('t1_met') else 'no'} | {c.get('best_fixed', '--')} | "
                 f"{pm(c.get('best_acc', float('nan')), c.get('best_se'))} | "
                 f"{fmt(c.get('vs_best_diff'), 4)} ({fmt(2 * c['vs_best_se'], 4) if 'vs_best_se' in c else '--'}) | "
                 f"{'yes' if c.get('t2_met') else 'no'} |")
    L.append("")
    if radius is not None:
        L.append("Radius check per cell (default estimator, `random_state` = 0, 1, ...; data_norm = max ‖[x, 1]‖ = "
                 "sqrt(2): the synthetic rows lie on the unit sphere, a public fact of the generator):\n")
        L.append("| problem | ε | fits | data_norm | max ‖w‖ | 99th pct ‖w‖ | median ‖w‖ | projected | mean fit s |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in radius["cells"]:
            L.append(f"| {c['problem']} | {c['epsilon']:g} | {c['n']} | {c['data_norm']:.4f} | {c['max_w_norm']:.4g} | "
                     f"{c['p99_w_norm']:.4g} | {c['median_w_norm']:.4g} | {c.get('n_projected', 0)} | "
                     f"{c['mean_fit_s']:.3g} |")
        L.append("")
    return "\n".join(L) + "\n"


def assemble_readme(results_md: str) -> None:
    parts = [(HERE / "README.intro.md").read_text(encoding="utf-8").rstrip() + "\n", results_md]
    disc = HERE / "discussion.md"
    if disc.is_file():
        parts.append(disc.read_text(encoding="utf-8"))
    atomic_write_text(HERE / "README.md", "\n".join(parts))


def read_csv_rows(path: Path) -> list[dict]:
    """Rows of a CSV written by this script, with numbers as floats/ints and blanks as None."""
    ints = {"rep", "random_state", "n_iter", "n_train", "n_test", "d", "n", "projected"}
    text_cols = {"dataset", "method", "library", "status", "warnings", "message", "problem"}
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            row = {}
            for k, v in r.items():
                if k in text_cols:
                    row[k] = v
                elif v == "":
                    row[k] = None
                else:
                    row[k] = int(float(v)) if k in ints else float(v)
            out.append(row)
    return out


def report_only(out_rows, out_summary, out_radius, out_env, out_md, quick: bool) -> int:
    env = json.loads(out_env.read_text(encoding="utf-8"))
    rows = read_csv_rows(out_rows)
    summary = summarise(rows)
    targets = evaluate_targets(summary, env["datasets"], EPSILONS)
    radius = env.get("radius_check")
    if radius is not None and out_radius.is_file():
        radius = radius_summary(read_csv_rows(out_radius), radius.get("radius_param"), radius.get("radius"))
    env["targets"], env["radius_check"] = targets, radius
    atomic_write_text(out_summary, csv_text(summary, SUMMARY_FIELDS))
    md = results_markdown(summary, targets, radius, env, env["splits"], quick)
    atomic_write_text(out_md, md)
    atomic_write_json(out_env, env)
    if not quick:
        assemble_readme(md)
    print(f"rebuilt {out_summary}, {out_md}, {out_env}" + ("" if quick else f", {HERE / 'README.md'}"))
    return 0


# ---- main ----------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 repetition, 2 datasets, 40 radius fits")
    ap.add_argument("--reps", type=int, default=None, help=f"repetitions (default {REPS}; quick 1)")
    ap.add_argument("--datasets", nargs="+", default=None, choices=DATASETS)
    ap.add_argument("--radius-fits", type=int, default=None, help=f"default {RADIUS_FITS}; quick 40; 0 skips")
    ap.add_argument("--no-snapshot", action="store_true",
                    help="import dpnewton as installed instead of from a copy of src/ taken at the start")
    ap.add_argument("--report-only", action="store_true",
                    help="fit nothing: rebuild the summary CSV, the results section and README.md from the "
                         "per-repetition CSVs and the .env.json of the last run (e.g. after editing discussion.md)")
    args = ap.parse_args(argv)
    reps = args.reps if args.reps is not None else (1 if args.quick else REPS)
    datasets = tuple(args.datasets) if args.datasets else (QUICK_DATASETS if args.quick else DATASETS)
    n_radius = args.radius_fits if args.radius_fits is not None else (40 if args.quick else RADIUS_FITS)
    suffix = "_quick" if args.quick else ""
    out_dir = WORK_DIR / "quick" if args.quick else RESULTS_DIR   # a smoke test stays out of results/
    out_rows = out_dir / f"diffprivlib_comparison{suffix}.csv"
    out_summary = out_dir / f"diffprivlib_comparison{suffix}_summary.csv"
    out_radius = out_dir / f"diffprivlib_radius_check{suffix}.csv"
    out_env = out_dir / f"diffprivlib_comparison{suffix}.env.json"
    out_md = out_dir / f"diffprivlib_comparison{suffix}.md"

    if args.report_only:
        return report_only(out_rows, out_summary, out_radius, out_env, out_md, args.quick)

    git_start = git_state()
    snapshot = None if args.no_snapshot else snapshot_source(WORK_DIR / f"src_snapshot{suffix}")

    from threadpoolctl import threadpool_info, threadpool_limits

    import dpnewton
    import scipy
    import sklearn
    from dpnewton import DPLogisticRegression
    from dpnewton.estimator import supported_algorithms

    t_start = time.perf_counter()
    env = {"started_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
           "argv": sys.argv, "quick": args.quick, "reps": reps, "datasets": list(datasets),
           "epsilons": list(EPSILONS), "split_seed": SPLIT_SEED, "git": git_start,
           "dpnewton_imported_from": str(Path(dpnewton.__file__).parent), "src_snapshot_sha256": snapshot,
           "loadavg_start": " ".join(f"{x:.1f}" for x in os.getloadavg()),
           "cpu": platform.processor() or platform.machine(),
           "dpnewton_defaults": DPLogisticRegression().get_params(),
           "supported_algorithms": list(supported_algorithms()),
           "fixed_settings": {n: s for n, s in FIXED_SETTINGS},
           "dpnewton_side": f"Python {platform.python_version()}, dpnewton {getattr(dpnewton, '__version__', '?')}, "
                            f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, scipy {scipy.__version__}"}
    try:
        with open("/proc/cpuinfo") as fh:
            env["cpu"] = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), env["cpu"])
    except OSError:
        pass
    print(f"commit {env['git']['commit'][:12]}; defaults {env['dpnewton_defaults']}", flush=True)

    rows: list[dict] = []

    def progress(msg, dp_rows):
        print(f"[{(time.perf_counter() - t_start) / 60:6.1f} min] {msg}", flush=True)
        if dp_rows is not None:   # partial per-repetition CSV after every cell
            atomic_write_text(out_rows, csv_text(rows + dp_rows, ROW_FIELDS))

    with threadpool_limits(limits=1):
        env["blas"] = [{k: v for k, v in i.items() if k in ("internal_api", "version", "num_threads")}
                       for i in threadpool_info()]
        split_dir = WORK_DIR / f"splits{suffix}"
        splits = [write_split(ds, split_dir / f"split_{ds}.npz") for ds in datasets]
        split_paths = [split_dir / f"split_{ds}.npz" for ds in datasets]
        progress("splits written: " + ", ".join(f"{s['dataset']} B={s['data_norm']:.3f}" for s in splits), None)

        t0 = time.perf_counter()
        dpl = run_diffprivlib_side(split_paths, EPSILONS, reps, WORK_DIR / f"diffprivlib_rows{suffix}.json")
        env["diffprivlib_wall_s"] = time.perf_counter() - t0
        e = dpl["env"]
        env["diffprivlib_side"] = (f"Python {e['python']}, diffprivlib {e['diffprivlib']}, scikit-learn "
                                   f"{e['scikit-learn']}, numpy {e['numpy']}, scipy {e['scipy']}")
        env["diffprivlib_defaults"] = e["LogisticRegression_defaults"]
        rows += dpl["rows"]
        progress(f"diffprivlib side done in {env['diffprivlib_wall_s']:.0f} s", [])

        rows += run_dpnewton_side(split_paths, EPSILONS, reps, progress)
        atomic_write_text(out_rows, csv_text(rows, ROW_FIELDS))

        radius = None
        env["radius_wall_s"] = 0.0
        if n_radius > 0:
            t0 = time.perf_counter()
            radius_rows, radius = run_radius_check(split_dir, n_radius, progress)
            env["radius_wall_s"] = time.perf_counter() - t0
            atomic_write_text(out_radius, csv_text(radius_rows, RADIUS_FIELDS))

    summary = summarise(rows)
    targets = evaluate_targets(summary, datasets, EPSILONS)
    env["finished_utc"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    env["wall_s"] = time.perf_counter() - t_start
    env["loadavg_end"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    env["git_end"] = git_state()
    env["dpnewton_defaults_end_live_src"] = live_defaults()
    env["splits"] = splits
    env["targets"] = targets
    env["radius_check"] = radius
    atomic_write_text(out_summary, csv_text(summary, SUMMARY_FIELDS))
    md = results_markdown(summary, targets, radius, env, splits, args.quick)
    atomic_write_text(out_md, md)
    atomic_write_json(out_env, env)
    if not args.quick:
        assemble_readme(md)
    print(md)
    print(f"wrote {out_rows}, {out_summary}, {out_radius}, {out_env}, {out_md}"
          + ("" if args.quick else f", {HERE / 'README.md'}"))
    print(f"total wall time {env['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
