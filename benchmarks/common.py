"""Shared helpers for the benchmark scripts: environment record, problem loading, timing, CSV/README.

Every script is run as ``python benchmarks/<name>.py`` from the repository root (or anywhere:
paths are resolved relative to this file). Each writes CSVs to ``benchmarks/results/`` and a
Markdown section ``benchmarks/results/<name>.md``; :func:`write_readme` assembles
``benchmarks/README.md`` from the environment record and every section present.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
REPO_DIR = BENCH_DIR.parent
DATA_DIR = Path(os.environ.get("DPNEWTON_DATA_DIR", "/work/shared/datasets"))
CACHE_DIR = Path(os.environ.get("DPNEWTON_BENCH_CACHE", BENCH_DIR / ".cache"))

# Order of the sections in README.md (name of the script -> title).
SECTIONS = [
    ("roofline", "1. Roofline per iteration"),
    ("batching", "2. Batching throughput and bit-identity"),
    ("batching_width", "2b. The stacked first-order pass by width: blocked gemv pairs vs GEMM"),
    ("batching_lockstep", "2c. Lockstep jobs: per-run cost of a DP-GD long round vs 4-run batches"),
    ("table1", "3. Table 1 reproduced"),
    ("table1_b", "3b. Table 1, further datasets (separate, parallel run; see its seed count)"),
    ("table1_retime", "3c. Table 1 best-T runs re-timed together with the current core (incl. a gemv DP-GD)"),
    ("lone_runtime", "3d. Lone runs at best T vs the pipeline's runtime model (first update + (T - 1) x timed cost)"),
    ("memory", "4. Peak memory"),
    ("pipeline", "5. End-to-end pipeline"),
    ("pipeline_claims", "5b. Where a large run's time goes: per-job phases of the claims config"),
    ("pipeline_claims_a1a", "5b'. The current claims config on a1a alone: wall time and per-job phases"),
    ("pipeline_paper_synthetic", "5c. The paper config on synthetic: wall time and per-job phases"),
    ("pipeline_paper_a1a", "5d. The paper config on a1a: wall time and per-job phases"),
    ("pipeline_paper_protein", "5e. The paper config on protein: wall time and per-job phases"),
    ("pipeline_paper_adult", "5f. The paper config on adult: wall time and per-job phases"),
    ("history", "6. History: the old core (lane-padded gemm) and the proposals now applied"),
    ("aop_tolerance", "7. AOP: one objective draw, Newton to gamma = 1/n^2 (vs the old BFGS retry path)"),
    ("precond_step", "8. precond-dp-gd: per-step cost vs DP-GD (paired, CPU time)"),
    ("pass_costs",
     "9. Pass equivalents: Gram and eigendecomposition costs in gradient passes (the frontier's pass count)"),
    ("selection_clip", "10. Private selection: the clip C of the private score, on public synthetic data"),
    ("loss_recording", "11. Loss recording: every iterate's loss vs only the curve's points (batched DP-GD)"),
    ("float32", "12. float32 products: pass speed and the shift of mean excess losses per method and dataset"),
    ("t_search_replay",
     "13. T-grid search with a seed-0 probe per extension round, replayed on the claims run's losses"),
    ("verdict_changes", "14. Verdicts of a new claims run against the published report"),
    ("cap_study", "15. A lower shared T cap replayed on a claims run: verdicts, best T and update time"),
    ("multiclass", "16. Multiclass rules: one softmax model vs one-vs-rest, non-private scaling"),
    ("schedule_default", "17. Schedule model: the default config's recorded job times replayed at 2 to 256 cores"),
    ("schedule_claims", "17b. Schedule model: the claims config's recorded job times replayed at 2 to 256 cores"),
    ("step_levers", "18. Per-step levers: tanh sigmoid, float32 eigh, DP-GD batch width, Newton pass vs bare SYRK"),
]


# ---- environment ---------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_info() -> list[dict]:
    from threadpoolctl import threadpool_info

    keep = ("user_api", "internal_api", "version", "num_threads", "architecture", "threading_layer",
            "filepath")
    return [{k: v for k, v in info.items() if k in keep} for info in threadpool_info()]


def numpy_build() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '?')} {blas.get('version', '')} ({blas.get('openblas configuration', '')})".strip()
    except Exception:  # older numpy
        return "see numpy.show_config()"


def environment() -> dict:
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": __import__("scipy").__version__,
        "numpy_blas_build": numpy_build(),
        "blas_runtime": blas_info(),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"),
        "blas_threads_in_benchmarks": 1,
    }


def environment_markdown(env: dict) -> str:
    lines = ["| item | value |", "|---|---|"]
    for k, v in env.items():
        if k == "blas_runtime":
            v = "; ".join(f"{b.get('internal_api')} {b.get('version')} {b.get('architecture', '')} "
                          f"threads={b.get('num_threads')} ({Path(str(b.get('filepath'))).name})" for b in v)
        lines.append(f"| {k} | {v} |")
    return "\n".join(lines)


# ---- committed files -----------------------------------------------------------------------------
def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(REPO_DIR), *args], capture_output=True, check=True).stdout


def short_commit(ref: str) -> str:
    """The short hash of ``ref`` in this repository."""
    return _git("rev-parse", "--short", ref).decode().strip()


def committed_file(commit: str, path: str) -> bytes:
    """The bytes of ``path`` (relative to the repository root) as committed at ``commit``."""
    return _git("show", f"{commit}:{path}")


# ---- problems ------------------------------------------------------------------------------------
def _a1a_fallback():
    """a1a without the data package: LIBSVM a1a.t -> StandardScaler -> bias column -> from_xy."""
    from sklearn.datasets import load_svmlight_file
    from sklearn.preprocessing import StandardScaler

    from dpnewton.algorithms.optimum import find_optimum
    from dpnewton.loss import LogisticProblem

    X, y = load_svmlight_file(str(DATA_DIR / "a1a" / "a1a.t"), n_features=123)
    X = StandardScaler().fit_transform(X.toarray())
    X = np.hstack([np.ones((X.shape[0], 1)), X])
    p = LogisticProblem.from_xy(X, y, name="a1a")
    opt = find_optimum(p)
    p.set_optimum(opt.w, opt.loss)
    return p


def load(name: str, optimum: bool = True):
    """A LogisticProblem for a named dataset via dpnewton.problems (cached under CACHE_DIR)."""
    try:
        from dpnewton.problems import load_problem
    except ImportError:
        if name != "a1a":
            raise
        return _a1a_fallback()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    return load_problem(dataset=name, data_dir=str(DATA_DIR), cache_dir=str(CACHE_DIR), optimum=optimum)


def random_problem(n: int, d: int, seed: int = 0, name: str = "random"):
    """Rows uniform on the unit sphere, random signs: the shape of a real dataset, for timing only."""
    from dpnewton.loss import LogisticProblem

    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True) * (1 + 1e-12)
    return LogisticProblem(Z, name=name)


def timing_problems(optimum: bool = False) -> list:
    """(name, source, problem) for a1a and protein, or random unit rows of their shapes when the data
    are not available (timing only depends on the shape)."""
    out = []
    for name, shape in (("a1a", (30956, 124)), ("protein", (50000, 75))):
        try:
            p = load(name, optimum=optimum)
            src = "real"
        except Exception:
            p = random_problem(*shape, name=name)
            src = "random unit rows"
        out.append((name, src, p))
    return out


# ---- timing --------------------------------------------------------------------------------------
# The 2 cores are oversubscribed by other engineers' jobs (load average 6-10), so wall-clock minima
# are biased: a short call can run undisturbed, a long one is always preempted, which makes any
# "long vs short" ratio look worse than it is. With BLAS pinned to one thread the calling thread's
# CPU time (CLOCK_THREAD_CPUTIME_ID) is the work done, minus preemption; it is the default clock.
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}


def use_clock_in_library(clock: str) -> None:
    """Make the library's update-step timer (``time.perf_counter`` in dpnewton.algorithms.base)
    read ``clock`` -- a benchmark-side monkeypatch; the library itself times wall clock."""
    import types

    import dpnewton.algorithms.base as base

    if clock == "wall":
        base.time = time
    else:
        base.time = types.SimpleNamespace(perf_counter=CLOCKS[clock])


def interleaved(funcs: dict, repeats: int, inner: int = 1, warmup: int = 1,
                clock: str = "cpu") -> dict[str, np.ndarray]:
    """Time every callable ``repeats`` times, interleaved (round-robin); seconds per call."""
    now = CLOCKS[clock]
    for f in funcs.values():
        for _ in range(warmup):
            f()
    out = {k: [] for k in funcs}
    for _ in range(repeats):
        for k, f in funcs.items():
            t0 = now()
            for _ in range(inner):
                f()
            out[k].append((now() - t0) / inner)
    return {k: np.array(v) for k, v in out.items()}


# ---- output --------------------------------------------------------------------------------------
def write_csv(name: str, rows: list[dict]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / name
    fields: list[str] = []
    for r in rows:
        for k in r:
            if k not in fields:
                fields.append(k)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)
    return path


def trajectory_update_time(rows) -> tuple[float, int]:
    """Summed ``runtime_s`` of the distinct trajectories among result rows, and their count.

    Models released from one trajectory (a configuration's last iterate and its ``average: tail``
    twin) each carry the trajectory's ``runtime_s``: a trajectory is counted once, keyed by its
    dataset, algorithm, hyper-parameters without ``average``, conversion, epsilon, seed and T.
    """
    seen: dict[tuple, float] = {}
    for r in rows:
        value = r.get("runtime_s")
        runtime = float("nan") if value in (None, "") else float(value)
        if runtime != runtime:  # no timed update (an empty field or NaN)
            continue
        hyper = {k: v for k, v in json.loads(r.get("hyper") or "{}").items() if k != "average"}
        key = (r.get("dataset"), r.get("base_algorithm"), json.dumps(hyper, sort_keys=True), r.get("conversion"),
               r.get("epsilon"), r.get("seed"), r.get("iterations"))
        seen.setdefault(key, runtime)
    return sum(seen.values()), len(seen)


def md_table(rows: list[dict], cols: list[str], fmt: dict | None = None) -> str:
    fmt = fmt or {}
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            f = fmt.get(c)
            if f and isinstance(v, (int, float, np.floating)) and not (isinstance(v, float) and np.isnan(v)):
                v = format(v, f)
            cells.append(str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def write_section(name: str, markdown: str, readme: bool = True) -> None:
    """Store this script's section (with its own environment record) and rebuild README.md (unless
    ``readme`` is False: then the section waits for the next rebuild, :func:`write_readme`).

    A hand-written ``results/<name>_discussion.md``, if present, is appended to the section."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    discussion = RESULTS_DIR / f"{name}_discussion.md"
    if discussion.exists():
        markdown = markdown.rstrip() + "\n\n" + discussion.read_text()
    (RESULTS_DIR / f"{name}.md").write_text(markdown.rstrip() + "\n")
    (RESULTS_DIR / f"{name}.env.json").write_text(json.dumps(environment(), indent=1, default=str))
    if readme:
        write_readme()


def write_readme() -> None:
    intro = (BENCH_DIR / "README.intro.md").read_text() if (BENCH_DIR / "README.intro.md").exists() else ""
    parts = [intro.rstrip(), "", "## Machine and BLAS (recorded when README.md was last rebuilt)", "",
             environment_markdown(environment()), ""]
    for name, title in SECTIONS:
        sec = RESULTS_DIR / f"{name}.md"
        if sec.exists():
            envf = RESULTS_DIR / f"{name}.env.json"
            when = json.loads(envf.read_text())["date_utc"] if envf.exists() else "?"
            if name.startswith("schedule_"):
                config = "claims" if name == "schedule_claims" else "config"
                script = f"schedule.py RUN_DIR --config config/{config}.yaml --cores N --tag {name}"
            elif name.startswith(("pipeline_paper_", "pipeline_claims_")):
                config = "paper" if name.startswith("pipeline_paper_") else "claims"
                script = f"pipeline.py --analyze RUN_DIR --config config/{config}.yaml --tag {name}"
            else:
                script = {"table1_b": "table1.py --seeds 3 --datasets adult protein covertype --tag _b",
                          "pipeline_claims": "pipeline.py --analyze RUN_DIR --config config/claims.yaml",
                          "batching_width": "batching.py --widths",
                          "batching_lockstep": "batching.py --lockstep",
                          "verdict_changes": "verdict_changes.py RUN_DIR",
                          "cap_study": "cap_study.py RUN_DIR --caps 38400 19200 9600 4800 --config CONFIG",
                          }.get(name, f"{name}.py")
            origin = (f"_Hand-written note (no script), {when}._" if name == "history"
                      else f"_Script `python benchmarks/{script}`, run {when}._")
            parts += [f"## {title}", "", origin, "", sec.read_text().rstrip(), ""]
    (BENCH_DIR / "README.md").write_text("\n".join(parts).rstrip() + "\n")


def gemv_dpgd(problem, rho: float, T: int, rng_seed: int) -> np.ndarray:
    """Plain DP-GD loop for one run with unblocked gemv passes (baseline; same math as run_dp_gd)."""
    Z, n, d = problem.Z, problem.n, problem.d
    rng = np.random.default_rng(rng_seed)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    s = (1.0 / n) / np.sqrt(2 * rho / T)
    for _ in range(T):
        m = Z @ w
        g = -(Z.T @ expit(-m)) / n
        w = w - 4.0 * (g + s * rng.standard_normal(d))
    return w
