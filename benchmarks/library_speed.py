"""Fit time and peak memory of DPLogisticRegression (objpert, the default) before and after a change of the
core, against IBM diffprivlib's LogisticRegression and non-private scikit-learn.

    bash benchmarks/diffprivlib/setup_venv.sh        # once: diffprivlib in a venv of its own (see there)
    python benchmarks/library_speed.py               # dpnewton's venv; writes benchmarks/results/library_speed.*
    python benchmarks/library_speed.py --report-only # rebuild the .md from the .csv (+ library_speed_reading.md)
    python benchmarks/library_speed.py --quick       # 1 rep, small datasets only, to benchmarks/.cache/

diffprivlib is a benchmark-only dependency: it does not import with dpnewton's scikit-learn, so its fits
run with the interpreter of ``benchmarks/diffprivlib/.venv`` (``DPL_VENV`` overrides), exactly as
benchmarks/diffprivlib/compare.py does; the script stops with the setup command if that venv is missing.

Problems: w8a, a9a, phishing (the data layer's prepared arrays without the bias column), kddcup99 (the
official processed arrays, DPNEWTON_DATA_DIR/kddcup99, labels +1/-1) and a seeded dense synthetic
1,000,000 x 100 (Gaussian rows, labels from a logistic model). Two scalings of the features x:

* ``unit``: every row divided by its own norm (||x|| = 1; dpnewton's data_norm = sqrt(2) bounds [x, 1],
  diffprivlib's data_norm = 1 bounds x; it adds the intercept itself);
* ``bound``: the raw rows and one common bound B = max ||x|| (taken as public, as in diffprivlib's examples):
  dpnewton divides [x, 1] by data_norm = sqrt(B^2 + 1), diffprivlib's data_norm = B.

Libraries (every fit in a fresh process, one BLAS thread; a warm-up fit on 200 rows first, so imports and
first calls are not timed):

* ``dpnewton-before``: DPLogisticRegression(epsilon=1, delta=1e-8, data_norm, random_state=rep) from the
  source of ``--before`` (default: the merge base of HEAD and main), extracted with git archive;
* ``dpnewton``: the same from this checkout's src/;
* ``dpnewton-core``: this checkout's library path without the estimator's row building: the rows
  [x, 1]/data_norm are built untimed, then LogisticProblem.from_xy(rows, copy=False) and one objpert run
  (relation add-remove, as the estimator) are timed; its memory is over X plus those rows;
* ``diffprivlib``: diffprivlib.models.LogisticRegression(epsilon=1, data_norm, random_state=rep);
* ``sklearn``: sklearn.linear_model.LogisticRegression() (lbfgs, C=1, tol 1e-4, non-private).

Timing: the wall time of fit() (shared.timed_fit), median over ``--reps`` (default 5) repetitions. The
machine has 2 cores shared with other jobs, so the repetitions are interleaved: every repetition runs every
library once per problem, in an order rotated from one repetition to the next, so a slow spell of the
machine falls on all libraries alike. Memory (repetition 0
only): a second, untimed fit under tracemalloc gives the peak of the arrays the fit allocates, in copies of X
(n d 8 bytes); the CSV also has the timed fit's ru_maxrss over the process's earlier maximum.
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
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402
import tracemalloc  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO_DIR = HERE.parent
DPL_DIR = HERE / "diffprivlib"
_spec = importlib.util.spec_from_file_location("dpl_shared", DPL_DIR / "shared.py")
shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shared)   # the comparison's helpers: numpy and the standard library only

RESULTS_DIR = HERE / "results"
CACHE_DIR = HERE / ".cache" / "library_speed"          # git-ignored (benchmarks/.gitignore)
DATA_DIR = Path(os.environ.get("DPNEWTON_DATA_DIR", "/work/shared/datasets"))
DPL_VENV = Path(os.environ.get("DPL_VENV", DPL_DIR / ".venv"))
DATASETS = ("w8a", "a9a", "phishing", "kddcup99", "synthetic-1e6x100")
QUICK_DATASETS = ("phishing", "a9a")
SCALINGS = ("unit", "bound")
LIBRARIES = ("dpnewton-before", "dpnewton", "dpnewton-core", "diffprivlib", "sklearn")
EPSILON, DELTA = 1.0, 1e-8
SYNTHETIC_SHAPE, SYNTHETIC_SEED = (1_000_000, 100), 20260105
WARMUP_ROWS = 200


# ---- data ----------------------------------------------------------------------------------------
def raw_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X without a bias column, y in {-1, +1})."""
    if name == "synthetic-1e6x100":
        rng = np.random.default_rng(SYNTHETIC_SEED)
        n, d = SYNTHETIC_SHAPE
        X = rng.standard_normal((n, d))
        w = rng.standard_normal(d) * (2.0 / np.sqrt(d))
        y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ w))), 1.0, -1.0)
        return X, y
    if name == "kddcup99":
        import lzma
        folder = DATA_DIR / "kddcup99"
        with lzma.open(folder / "kddcup99_processed_x.npy.xz") as fh:
            X = np.load(fh, allow_pickle=True)
        y = np.load(folder / "kddcup99_processed_y.npy", allow_pickle=True)
        return np.ascontiguousarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    from dpnewton.data import prepare
    pd = prepare(name, data_dir=DATA_DIR, cache_dir=CACHE_DIR, allow_download=False)
    X = pd.X[:, 1:] if pd.meta.get("bias") else pd.X
    return np.ascontiguousarray(X, dtype=np.float64), np.asarray(pd.y, dtype=np.float64)


def write_problem(name: str, folder: Path) -> dict:
    """X (both scalings), y and the data norms of one problem as .npy + meta.json in ``folder``."""
    X, y = raw_dataset(name)
    labels = np.unique(y)
    if labels.size != 2:
        raise SystemExit(f"{name}: expected two labels, found {labels[:5]}")
    y = np.where(y == labels[1], 1.0, -1.0)
    folder.mkdir(parents=True, exist_ok=True)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    meta = {"dataset": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "x_bytes": int(X.nbytes)}
    B = float(norms.max())
    meta["bound"] = {"dpnewton": float(np.sqrt(B * B + 1.0)), "diffprivlib": B}
    meta["unit"] = {"dpnewton": float(np.sqrt(2.0)), "diffprivlib": 1.0}
    np.save(folder / "y.npy", y)
    np.save(folder / "X_bound.npy", X)
    X /= np.where(norms > 0, norms, 1.0)[:, None]
    np.save(folder / "X_unit.npy", X)
    shared.atomic_write_json(folder / "meta.json", meta)
    return meta


def before_source(rev: str) -> Path:
    """src/ of git revision ``rev`` extracted to the cache (the PYTHONPATH of dpnewton-before)."""
    sha = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", rev], capture_output=True, text=True,
                         check=True).stdout.strip()
    dest = CACHE_DIR / f"src-{sha[:12]}"
    if not (dest / "dpnewton").is_dir():
        tar = subprocess.run(["git", "-C", str(REPO_DIR), "archive", sha, "src/dpnewton"], capture_output=True,
                             check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            tf.extractall(CACHE_DIR / f"tmp-{sha[:12]}", filter="data")
        (CACHE_DIR / f"tmp-{sha[:12]}" / "src").rename(dest)
    return dest


# ---- one fit, in a fresh process -----------------------------------------------------------------
def make_fit(library: str, data_norm: float, rep: int):
    """fit(X, y) -> (coefficient vector) for ``library`` (imports only what that library needs)."""
    if library == "sklearn":
        from sklearn.linear_model import LogisticRegression

        def fit(X, y):
            m = LogisticRegression().fit(X, y)
            return np.r_[m.coef_.ravel(), m.intercept_]
    elif library == "diffprivlib":
        from diffprivlib.models import LogisticRegression

        def fit(X, y):
            m = LogisticRegression(epsilon=EPSILON, data_norm=data_norm, random_state=rep).fit(X, y)
            return np.r_[m.coef_.ravel(), m.intercept_]
    elif library == "dpnewton-core":
        from dpnewton.experiment import run_algorithm
        from dpnewton.loss import LogisticProblem
        from dpnewton.privacy.neighbouring import LIBRARY_RELATION

        def fit(rows, y):   # rows = [x, 1]/data_norm, built before the clock starts
            problem = LogisticProblem.from_xy(rows, y, copy=False)
            (res,) = run_algorithm(problem, "data", "objpert", EPSILON, [rep], [1], delta=DELTA,
                                   neighbouring=LIBRARY_RELATION)
            return res.w / data_norm
    else:
        from dpnewton import DPLogisticRegression

        def fit(X, y):
            m = DPLogisticRegression(epsilon=EPSILON, delta=DELTA, data_norm=data_norm, random_state=rep).fit(X, y)
            return np.r_[m.coef_.ravel(), m.intercept_]
    return fit


def worker(library: str, folder: Path, scaling: str, rep: int) -> dict:
    meta = json.loads((folder / "meta.json").read_text())
    data_norm = meta[scaling]["diffprivlib" if library == "diffprivlib" else "dpnewton"]
    X, y = np.load(folder / f"X_{scaling}.npy"), np.load(folder / "y.npy")
    fit = make_fit(library, data_norm, rep)
    if library == "dpnewton-core":   # [x, 1]/data_norm in one array, no temporary
        rows = np.empty((X.shape[0], X.shape[1] + 1))
        rows[:, :-1] = X
        rows[:, -1] = 1.0
        rows /= data_norm
        X = rows
        del rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pick = np.r_[np.flatnonzero(y > 0)[:WARMUP_ROWS // 2], np.flatnonzero(y < 0)[:WARMUP_ROWS // 2]]
        Xw = X[pick] if library != "dpnewton-core" else np.array(X[pick])
        fit(Xw, y[pick])
        del Xw
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with shared.timed_fit() as t:
            coef = fit(X, y)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        traced = float("nan")
        if rep == 0:   # a second, untimed fit under tracemalloc: the peak of the arrays it allocates
            tracemalloc.start()
            fit(X, y)
            traced = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    return {"fit_wall_s": t["fit_wall_s"], "fit_cpu_s": t["fit_cpu_s"], "rss_extra_mb": (after - before) / 1024.0,
            "traced_peak_copies": traced / meta["x_bytes"], "coef_norm": float(np.linalg.norm(coef))}


def run_worker(library: str, folder: Path, scaling: str, rep: int, before_src: Path) -> dict:
    env = dict(os.environ, **shared.BLAS_ENV)
    for k in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(k, None)
    py = sys.executable
    if library == "diffprivlib":
        py = str(DPL_VENV / "bin" / "python")
    elif library == "dpnewton-before":
        env["PYTHONPATH"] = str(before_src)
    cmd = [py, str(Path(__file__).resolve()), "--worker", library, "--folder", str(folder), "--scaling", scaling,
           "--rep", str(rep)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(REPO_DIR))
    if p.returncode != 0:
        return {"status": "error", "message": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return {"status": "ok", **json.loads(p.stdout.strip().splitlines()[-1])}


# ---- report --------------------------------------------------------------------------------------
NUMERIC = {"fit_wall_s", "fit_cpu_s", "rss_extra_mb", "traced_peak_copies", "coef_norm", "n", "d"}
FIELDS = ["dataset", "scaling", "library", "rep", "status", "fit_wall_s", "fit_cpu_s", "rss_extra_mb",
          "traced_peak_copies", "coef_norm", "n", "d", "message"]


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    shared.atomic_write_text(path, buf.getvalue())


def median(rows, key):
    """Median of ``key`` over the fits that ran (NaN and blank, e.g. memory after repetition 0, left out)."""
    v = [float(r[key]) for r in rows if r.get("status") == "ok" and r.get(key) not in (None, "")]
    v = [x for x in v if x == x]
    return float(np.median(v)) if v else float("nan")


def report(rows: list[dict], metas: dict, env: dict, reps: int) -> str:
    L = ["## Library fit speed: dpnewton (objpert) before and after, diffprivlib, scikit-learn\n",
         f"Written by `benchmarks/library_speed.py` (module docstring: settings). epsilon = {EPSILON:g}, dpnewton "
         f"delta = {DELTA:g}; median of {reps} fits per cell, each in a fresh process with one BLAS thread. The "
         "machine has 2 cores shared with other jobs: the repetitions are interleaved (every repetition fits every "
         "library once per problem, in an order rotated between repetitions) so that a slow spell falls on all "
         "libraries alike; single fits still vary by tens of percent. `before` = "
         f"`{env['before']}`, `after` = `{env['after']}`.\n",
         "Time columns: median fit wall time in seconds. `core` = this checkout's from_xy(copy=False) + objpert "
         "run on prebuilt rows [x, 1]/data_norm (the estimator's row building left out). Memory (`mem`): the peak "
         "of the memory the fit allocates (tracemalloc, which numpy reports its arrays to; a second, untimed fit "
         "of repetition 0), in copies of X (n d 8 bytes); X itself (and for `core` the rows) is not counted. "
         "The CSV also has the fit's ru_maxrss above the process's earlier peak (`rss_extra_mb`), which reads 0 "
         "whenever the fit stays below the peak of the imports and the warm-up.\n",
         "| problem | scaling | n x d | before s | after s | core s | diffprivlib s | sklearn s | after/before | "
         "after/diffprivlib | core/diffprivlib | after/sklearn | mem before | mem after | mem core | "
         "mem diffprivlib | mem sklearn |",
         "|" + "---|" * 17]
    for (ds, sc), meta in metas.items():
        cell = {lib: [r for r in rows if (r["dataset"], r["scaling"], r["library"]) == (ds, sc, lib)]
                for lib in LIBRARIES}
        t = {lib: median(cell[lib], "fit_wall_s") for lib in LIBRARIES}
        m = {lib: median(cell[lib], "traced_peak_copies") for lib in LIBRARIES}
        L.append(f"| {ds} | {sc} | {meta['n']} x {meta['d']} | {t['dpnewton-before']:.3f} | {t['dpnewton']:.3f} | "
                 f"{t['dpnewton-core']:.3f} | {t['diffprivlib']:.3f} | {t['sklearn']:.3f} | "
                 f"{t['dpnewton'] / t['dpnewton-before']:.2f} | {t['dpnewton'] / t['diffprivlib']:.2f} | "
                 f"{t['dpnewton-core'] / t['diffprivlib']:.2f} | {t['dpnewton'] / t['sklearn']:.2f} | "
                 f"{m['dpnewton-before']:.2f} | {m['dpnewton']:.2f} | {m['dpnewton-core']:.2f} | "
                 f"{m['diffprivlib']:.2f} | {m['sklearn']:.2f} |")
    errors = [r for r in rows if r.get("status") != "ok"]
    L.append("")
    L.append(f"Failed fits: {len(errors)}" + "".join(f"\n- {r['dataset']} {r['scaling']} {r['library']} rep "
                                                     f"{r['rep']}: {r.get('message')}" for r in errors) + "\n")
    L.append("Coefficient norms, after vs before (same seed, so the same noise draws; the solver changed, so "
             "they agree to the solver tolerance, not bit for bit): largest relative difference "
             f"{env['coef_rel_diff_max']:.2e}.\n")
    L.append(f"Environment: {env['platform']}; {env['versions']}.\n")
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=None)
    ap.add_argument("--before", default=None, help="git revision of dpnewton-before (default: merge-base HEAD main)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--report-only", action="store_true", help="rebuild the .md from the committed .csv")
    ap.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--scaling", choices=SCALINGS, help=argparse.SUPPRESS)
    ap.add_argument("--rep", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.folder, args.scaling, args.rep)))
        return 0

    if not (DPL_VENV / "bin" / "python").is_file():
        raise SystemExit(f"{DPL_VENV}/bin/python not found: run  bash {DPL_DIR / 'setup_venv.sh'}  first "
                         "(or set DPL_VENV)")
    datasets = args.datasets or (QUICK_DATASETS if args.quick else DATASETS)
    reps = 1 if args.quick else args.reps
    def git(*a):
        return subprocess.run(["git", "-C", str(REPO_DIR), *a], capture_output=True, text=True).stdout.strip()
    before_rev = args.before or git("merge-base", "HEAD", "main")
    before_src = before_source(before_rev)
    metas = {}
    for ds in datasets:
        folder = CACHE_DIR / "data" / ds
        meta = write_problem(ds, folder) if not (folder / "meta.json").is_file() else json.loads(
            (folder / "meta.json").read_text())
        for sc in SCALINGS:
            metas[(ds, sc)] = {**meta, "folder": folder}
    out = CACHE_DIR / "quick" if args.quick else RESULTS_DIR
    rows = []
    if args.report_only:
        with open(out / "library_speed.csv", newline="") as fh:
            rows = [{k: (float(v) if k in NUMERIC and v != "" else v) for k, v in r.items()}
                    for r in csv.DictReader(fh)]
        reps = len({r["rep"] for r in rows})
    for rep in range(0 if args.report_only else reps):
        for i, ((ds, sc), meta) in enumerate(metas.items()):
            k = (rep + i) % len(LIBRARIES)
            for lib in LIBRARIES[k:] + LIBRARIES[:k]:
                r = run_worker(lib, meta["folder"], sc, rep, before_src)
                rows.append({"dataset": ds, "scaling": sc, "library": lib, "rep": rep, "n": meta["n"],
                             "d": meta["d"], **r})
                print(f"rep {rep} {ds} {sc} {lib}: {r.get('fit_wall_s', float('nan')):.3f} s "
                      f"{r.get('traced_peak_copies', float('nan')):.2f} X {r.get('message', '')}", flush=True)
                write_csv(out / "library_speed.csv", rows)   # after every fit: a stopped run keeps its rows
    pairs = {}
    for r in rows:
        if r.get("status") == "ok" and r["library"] in ("dpnewton", "dpnewton-before") and r.get("coef_norm") != "":
            pairs.setdefault((r["dataset"], r["scaling"], r["rep"]), {})[r["library"]] = r["coef_norm"]
    diffs = [abs(p["dpnewton"] - p["dpnewton-before"]) / p["dpnewton-before"] for p in pairs.values() if len(p) == 2]
    import scipy
    import sklearn
    env = {"before": f"{before_rev[:12]} ({git('log', '-1', '--format=%s', before_rev)[:60]})",
           "after": f"{git('rev-parse', '--short=12', 'HEAD')} + working tree" if git("status", "--porcelain", "src")
           else git("rev-parse", "--short=12", "HEAD"),
           "platform": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
           "versions": f"numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn {sklearn.__version__} "
                       "(dpnewton side); diffprivlib and its stack as pinned in benchmarks/diffprivlib/setup_venv.sh",
           "coef_rel_diff_max": max(diffs) if diffs else float("nan")}
    text = report(rows, metas, env, reps)
    discussion = HERE / "library_speed_reading.md"   # the hand-written reading of the committed run, appended
    if discussion.is_file() and not args.quick:
        text = text.rstrip() + "\n\n" + discussion.read_text()
    shared.atomic_write_text(out / "library_speed.md", text)
    print(f"wrote {out / 'library_speed.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
