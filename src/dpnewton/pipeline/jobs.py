"""Run one pipeline job: every (seed, T) of one (dataset, algorithm, conversion, epsilon) chunk, or of every
member of a grouped job (:func:`dpnewton.pipeline.plan.group_jobs`).

Writes (atomically, via :mod:`dpnewton.io`)

* ``rows``: a CSV with one row per run (``head``-readable), the :func:`result_record` columns, n, d,
  loss*, hyper-parameters and provenance (:func:`provenance`: config hash, package version, git
  revision, software versions, CPU and BLAS, the prepared file's sha256, a UTC timestamp); with a
  ``holdout`` in the spec the runs see only the training split (:mod:`dpnewton.holdout`), and rows
  add ``holdout``, ``n_test``, ``test_accuracy`` and ``test_log_loss`` of the final iterate. Its
  last columns, ``file_rows`` and ``file_sha256``, are the file's row count and content digest
  (:func:`dpnewton.io.check_csv` verifies them);
* ``curves``: a parquet file of per-iterate excess loss and cumulative update time, downsampled
  to at most ``curves_max_points`` iterates per run (empty when the spec stores no curves);
* the privacy ledger, ``<rows stem>.ledger.parquet`` beside the rows (:func:`ledger_path`): one row
  per noisy release of every run of the job (:data:`LEDGER_COLUMNS`: the run's identity, then
  step, quantity, sensitivity, sigma, rho), written before the rows. It is not a declared output of
  the rule, so runs made before it existed stay complete; runs calibrated by an RDP accountant
  (dp-sgd, the minibatch methods) or one-shot mechanisms (aop, objpert) have no zCDP releases and
  no ledger rows: their accounting is the rows' ``accounting_events``.

The core is called once per grid round with every seed that is not checkpointed yet (one batch of the
runs of every trajectory of the job, :func:`~dpnewton.pipeline.plan.trajectories`, at the round's T values:
the batched methods share each pass over Z among them), and progress is logged per seed. A run's noise
comes from its own identity; its bits do not depend on its batch while the batch is narrower than
``dpnewton.loss.GEMM_MIN_RUNS`` and equal those of the run alone to rounding from that width on
(tests/algorithms/test_batching.py), so its numbers do not depend on how seeds are chunked into jobs,
which configurations share its job or which units were resumed, beyond that rounding.

Checkpoints: each (grid round, seed) unit's rows, curves and ledger (every trajectory's runs of that seed
in that round) are also written, atomically, to ``<rows>.partial/``, with its share of the batch's wall
time and the SHA-256 of its contents (:func:`save_checkpoint`). An interrupted job (killed, cluster time
limit, session end) that is run again with the same spec (``snakemake --rerun-incomplete``) loads its
finished units instead of recomputing them; every run is a deterministic function of its identity (and
of its batch's widths: the resumed batch is the interrupted one, less its finished units), so the result
is the same to the rounding above. A unit is reused only if its spec hash, seed and runs match and its
contents match their SHA-256 (:func:`load_checkpoint`); the folder is removed when the job succeeds.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import subprocess
import time
import tomllib
from datetime import datetime, timezone
from functools import lru_cache, partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pandas as pd
import scipy
from threadpoolctl import threadpool_info, threadpool_limits

from ..algorithms import get_algorithm
from ..experiment import budgeted_group, result_record, run_groups
from ..holdout import heldout_metrics
from ..io import atomic_write_csv, atomic_write_parquet
from ..problems import file_sha256, load_split_from_prepared
from .checkpoints import checkpoint_dir, load_checkpoint, resumed_note, save_checkpoint
from .jobspec import JobSpec, as_job_spec
from .labels import config_hash
from .run_ledger import ledger_frame, ledger_path, write_ledger
from .t_search import TSearch, pass_capped

log = logging.getLogger("dpnewton.pipeline")
#: the per-run lines (one per seed and T): the job's log file only, not the console (:func:`setup_log`)
run_log = logging.getLogger("dpnewton.pipeline.runs")

CURVE_COLUMNS = ["dataset", "algorithm", "conversion", "epsilon", "seed", "iterations", "iterate",
                 "excess_loss", "elapsed_s"]


#: BLAS threads of the optimizer runs (``dpnewton.experiment.run_algorithm``'s default)
RUN_BLAS_THREADS = 1

#: the provenance columns of every run row that describe the machine or the moment, not the code or
#: the data: two runs of the same config on other hosts or at other times differ in them
HOST_COLUMNS = ["cpu_model", "cpu_count", "platform", "blas_threads", "timestamp_utc"]


def _package_dir() -> Path:
    return Path(__file__).resolve().parents[1]


@lru_cache(maxsize=8)
def git_revision(source_dir: str | Path | None = None) -> str:
    """HEAD (+ '-dirty' if tracked files changed) of the git checkout holding ``source_dir`` (the
    workflow's own source folder), else of the one holding this package; 'unknown' only when neither
    is inside a git checkout (or git is missing)."""
    folders = [Path(source_dir)] if source_dir and Path(source_dir).is_dir() else []
    for here in folders + [_package_dir()]:
        # safe.directory: a checkout owned by another user (a shared or deployed copy) is still read
        git = ["git", "-c", "safe.directory=*", "-C", str(here)]
        try:
            rev = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                                 timeout=20, check=True).stdout.strip()
            dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        return rev + ("-dirty" if dirty else "")
    return "unknown"


@lru_cache(maxsize=8)
def package_version(source_dir: str | Path | None = None) -> str:
    """The installed dpnewton's version; without an installed distribution, the ``version`` of the
    ``pyproject.toml`` beside ``source_dir`` (the workflow's checkout) or above this package."""
    # imported on call, not bound at import: tests/data/test_provenance.py patches dpnewton.__version__
    from .. import __version__

    if not __version__.endswith("unknown"):
        return __version__

    roots = [Path(source_dir)] if source_dir else []
    for root in roots + [_package_dir().parents[1]]:
        f = root / "pyproject.toml"
        if f.is_file():
            project = tomllib.loads(f.read_text()).get("project", {})
            if project.get("name") == "dpnewton" and project.get("version"):
                return str(project["version"])
    return __version__


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


@lru_cache(maxsize=1)
def environment() -> dict:
    """The host and software columns of a run row (benchopt's ``system-processor``, ``system-cpus``,
    ``platform``, ``version-numpy``, ``version-scipy`` and the BLAS that numpy calls, by threadpoolctl):
    CPU model, logical CPU count, platform, BLAS vendor / version / threads in effect during the runs,
    and the scipy, dp-accounting and snakemake versions ('' when one is not installed)."""
    with threadpool_limits(RUN_BLAS_THREADS):
        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    mine = [i for i in blas if "numpy" in str(i.get("filepath", ""))] or blas
    lib = mine[0] if mine else {}
    return {"cpu_model": _cpu_model(), "cpu_count": int(os.cpu_count() or 0), "platform": platform.platform(),
            "blas_vendor": str(lib.get("internal_api", "")), "blas_version": str(lib.get("version") or ""),
            "blas_threads": int(lib.get("num_threads") or 0), "scipy_version": scipy.__version__,
            "dp_accounting_version": _version("dp-accounting"), "snakemake_version": _version("snakemake")}


def utc_timestamp() -> str:
    """Now, UTC, ISO 8601 to the second (``2026-12-01T20:15:03Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(spec: dict, prepared: str | Path | None = None, source_dir: str | Path | None = None) -> dict:
    """The provenance columns of a job's rows: config hash (of the spec), package version and git
    revision (of ``source_dir``, the workflow's checkout, else of this package's), python / numpy
    versions, :func:`environment`, and ``dataset_sha256`` (of the prepared file, when given).
    Each row adds its own ``timestamp_utc``."""
    out = {"config_hash": config_hash(spec), "package_version": package_version(source_dir),
           "git_revision": git_revision(source_dir), "python_version": platform.python_version(),
           "numpy_version": np.__version__, **environment()}
    if prepared is not None:
        out["dataset_sha256"] = file_sha256(Path(prepared))
    return out


def workflow_source_dir(scriptdir: str | Path | None) -> Path | None:
    """The workflow's checkout (two levels above ``workflow/scripts``), from a script's
    ``snakemake.scriptdir``; None for a remote (URL) workflow."""
    if not scriptdir or "://" in str(scriptdir):
        return None
    return Path(scriptdir).resolve().parents[1]


def curve_indices(T: int, max_points: int) -> np.ndarray:
    """Iterates 0..T kept for a curve: all if few, else a linear + geometric mix incl. 0 and T."""
    if max_points <= 0:
        return np.zeros(0, dtype=int)
    if T + 1 <= max_points:
        return np.arange(T + 1)
    half = max(max_points // 2, 2)
    lin = np.linspace(0, T, half)
    geo = np.geomspace(1, T, max_points - half)
    return np.unique(np.concatenate([[0, T], np.rint(lin), np.rint(geo)]).astype(int))


def flatten_record(record: dict) -> dict:
    """A record with its list and dict values as JSON text (one CSV cell each)."""
    return {k: (json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v)
            for k, v in record.items()}


def run_job(prepared: str | Path, spec: JobSpec | dict, rows_out: str | Path, curves_out: str | Path,
            source_dir: str | Path | None = None) -> pd.DataFrame:
    """Run the job described by ``spec`` (:class:`~.jobspec.JobSpec`, or its serialised form, which
    :meth:`~.jobspec.JobSpec.from_dict` checks first); ``source_dir`` is the workflow's checkout, whose git
    revision and version the rows record (:func:`provenance`). Returns the rows as written (with their
    ``file_rows`` column).

    The job's runs release a model for every member (one configuration, several that differ only in
    ``average``, or every configuration x conversion x epsilon of a grouped job); each member keeps its own
    T grid and extension (the :class:`~.t_search.TSearch` of its rows), and a (seed, T) run of a trajectory
    (:meth:`~.jobspec.JobSpec.trajectories`) is computed once whichever members need it. Every grid round
    runs the T values of all trajectories as one batch."""
    t0 = time.perf_counter()
    spec = as_job_spec(spec)
    problem, test = load_split_from_prepared(Path(prepared), holdout=spec.holdout,
                                             precision=spec.precision or "float64")
    prov = provenance(spec.to_dict(), prepared, source_dir)
    seeds = list(spec.seeds)
    paths = spec.trajectories()
    searches = {key: TSearch(m, pass_capped(m.extend, spec.base_algorithm, problem.n, problem.d, m.hyper))
                for key, m in spec.members.items()}
    cells = sorted({(m.conversion, m.eps_label) for m in spec.members.values()}, key=lambda c: (c[0], float(c[1])))
    log.info("job %s/%s %s seeds=%s T=%s n=%d d=%d config_hash=%s", spec.dataset,
             "+".join(dict.fromkeys(m.algorithm for m in spec.members.values())),
             ", ".join(f"{c} eps={e}" for c, e in cells), seeds, sorted({t for x in searches.values() for t in x.grid}),
             problem.n, problem.d, prov["config_hash"])
    if test is not None:
        log.info("holdout %s: the runs use the %d training rows; %d test rows give the held-out metrics",
                 spec.holdout, problem.n, test.n)
    runs: dict[tuple[str, int, int], dict] = {}       # (trajectory, seed, T) -> the run's record, curve and ledger
    partial = checkpoint_dir(rows_out)

    def averages_of(path: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(searches[key].average for key in paths[path]))

    def by_path(proposed: dict[str, int]) -> dict[str, list[int]]:
        """{trajectory: T values} of members' T values."""
        out: dict[str, set[int]] = {}
        for key, T in proposed.items():
            out.setdefault(searches[key].path, set()).add(T)
        return {path: sorted(Ts) for path, Ts in out.items()}

    def compute(grid_round: int, wanted: dict[int, dict[str, list[int]]], what: str) -> None:
        """Run (or resume) the units {seed: {trajectory: Ts}} of one grid round: one batch of every seed not
        resumed."""
        wanted = {s: {path: sorted(set(Ts) - {T for (p, q, T) in runs if (p, q) == (path, s)})
                      for path, Ts in by.items()} for s, by in wanted.items()}
        wanted = {s: {path: Ts for path, Ts in by.items() if Ts} for s, by in wanted.items()}
        wanted = {s: by for s, by in wanted.items() if by}
        keys = {s: {"config_hash": prov["config_hash"], "seed": s,
                    "runs": [[path, Ts, list(averages_of(path))] for path, Ts in by.items()]}
                for s, by in wanted.items()}
        files = {s: partial / f"round{grid_round}_seed{s}.pkl" for s in keys}
        units = {s: load_checkpoint(files[s], keys[s]) for s in keys}
        todo = [s for s, unit in units.items() if unit is None]
        if todo:
            ts = time.perf_counter()
            computed = _run_units(problem, spec, todo, grid_round, {s: wanted[s] for s in todo}, searches, prov, test)
            share = (time.perf_counter() - ts) / len(todo)  # the runs (benchmarks/pipeline.py reads it)
            for s in todo:
                units[s] = {**computed[s], "seconds": share}
                save_checkpoint(files[s], keys[s], units[s])
        batch = f" [one batch of {len(todo)} seeds]" if len(todo) > 1 else ""
        for k, (s, unit) in enumerate(units.items(), 1):
            if unit.get("ledger") is None:
                log.warning("checkpoint %s predates the privacy ledger: its runs have no rows in the ledger file",
                            files[s])
            for r, rec in enumerate(unit["rows"]):
                runs[(unit["paths"][r], s, int(rec["iterations"]))] = {
                    "row": rec, "ledger": None if unit.get("ledger") is None else unit["ledger"][r],
                    "curve": unit["curves"][r]}
            log.info("progress %d/%d seeds done (%d runs, %.1fs)%s%s", k, len(units), len(unit["rows"]),
                     unit["seconds"] or 0.0, f" [grid round {grid_round}, {what}]" if grid_round else "",
                     batch if s in todo else resumed_note(unit))

    grid_round = 0
    declared = {path: sorted({T for key in keys for T in searches[key].grid}) for path, keys in paths.items()}
    compute(0, {s: declared for s in seeds}, "declared grid")
    while True:
        proposed = {key: T for key, x in searches.items() if (T := x.next_T(runs, seeds)) is not None}
        if not proposed:
            break
        grid_round += 1
        probe = seeds[0]
        if len(seeds) > 1 and any(searches[key].probe for key in proposed):
            probed = sorted(set(proposed.values()))
            compute(grid_round, {probe: by_path(proposed)}, f"seed {probe} probes T={probed}")
        for key, T in proposed.items():
            searches[key].extend(T, grid_round, runs, seeds)
        accepted = {key: T for key, T in proposed.items() if T in searches[key].grid}
        if accepted:
            Ts = sorted(set(accepted.values()))
            log.info("best mean-over-seeds T is at an edge of the grid: extending it with T=%s (round %d)",
                     Ts, grid_round)
            compute(grid_round, {s: by_path(accepted) for s in seeds}, f"T={Ts}")
    rows, curves, ledgers = [], [], []
    for x in searches.values():
        r, c, lg = x.outputs(runs, seeds)
        rows += r
        curves += c
        ledgers += lg
    frame = pd.DataFrame(rows)
    write_ledger(ledger_path(rows_out), ledgers)
    curve_frame = (pd.concat(curves, ignore_index=True) if curves
                   else pd.DataFrame({c: pd.Series(dtype="float64") for c in CURVE_COLUMNS}))
    atomic_write_parquet(curves_out, curve_frame)
    frame = atomic_write_csv(rows_out, frame)  # last: a rows file means the job's other files are complete
    shutil.rmtree(partial, ignore_errors=True)
    log.info("job done: %d rows in %.1fs", len(frame), time.perf_counter() - t0)
    return frame


def _run_units(problem, spec: JobSpec, seeds: list[int], grid_round: int, wanted: dict[int, dict[str, list[int]]],
               searches: dict[str, TSearch], prov: dict, test=None) -> dict[int, dict]:
    """One batch of the runs {seed: {trajectory: Ts}} (``wanted``) of the members ``searches`` -> {seed:
    {'rows': result rows, 'curves': their downsampled curve frames (None without curves), 'ledger': their
    ledger frames (:func:`ledger_frame`), 'paths': their trajectories}}, the lists aligned.

    A trajectory's runs get its first member's conversion, epsilon and hyper-parameters (its ``average``
    the configured one) and release a model for every member's ``average``; each trajectory is one group
    of :func:`dpnewton.experiment.budgeted_group` (checked, delta and rho computed once) run by
    :func:`dpnewton.experiment.run_groups`, the chain of :func:`dpnewton.experiment.run_algorithm`. A run's
    row keeps every released model in ``released`` ({average: excess_loss, average, train_accuracy and,
    with ``test``, the held-out metrics}). ``test``: the test split's problem (holdout on)."""
    base = spec.base_algorithm
    units = {s: {"rows": [], "curves": [], "ledger": [], "paths": []} for s in seeds}
    groups, cells = [], []
    for path in dict.fromkeys(p for by in wanted.values() for p in by):
        keys = [key for key, x in searches.items() if x.path == path]
        first = spec.members[keys[0]]
        averages = tuple(dict.fromkeys(searches[key].average for key in keys))
        hyper = {k: v for k, v in first.hyper.items() if k != "average"}
        if averages[0] != "none":
            hyper["average"] = averages[0]
        runs = [(s, T) for s in seeds for T in wanted[s].get(path, [])]
        groups.append(budgeted_group(base, problem.n, first.epsilon, spec.delta, first.conversion, runs, hyper,
                                     averages=averages[1:],
                                     loss_iterates=partial(curve_indices, max_points=first.curves_max_points)))
        cells.append((path, first, averages))
    # a lockstep card steps every trajectory in one batch; any other runs one trajectory's batch at a time
    # (a job of a single trajectory, as :func:`~.plan.group_jobs` groups them by algorithm)
    batches = [groups] if get_algorithm(base).lockstep else [[g] for g in groups]
    results_of = [res for batch in batches for res in run_groups(problem, spec.dataset, base, batch)]
    for (path, first, averages), group, results in zip(cells, groups, results_of):
        for res in results:
            seed = res.identity.seed
            rec = result_record(res, first.conversion, first.epsilon, group.delta)
            rec.update({"algorithm": first.algorithm, "base_algorithm": base, "eps_label": first.eps_label,
                        "n": problem.n, "d": problem.d, "loss_opt": problem.loss_opt,
                        "hyper": first.hyper, "grid_round": grid_round, **prov,
                        "timestamp_utc": utc_timestamp()})
            released = {}
            for a in averages:
                model = res.released_as(a)
                released[a] = {"excess_loss": model.released_excess_loss, "average": a,
                               "train_accuracy": float("nan") if model.train_accuracy is None
                               else float(model.train_accuracy)}
                if test is not None:
                    released[a].update(heldout_metrics(test, model.w))
            if test is not None:
                rec.update({"holdout": float(spec.holdout), "n_test": test.n, **released[averages[0]]})
            row = flatten_record(rec)
            row["released"] = released
            unit = units[seed]
            unit["rows"].append(row)
            unit["paths"].append(path)
            unit["ledger"].append(ledger_frame(res.ledger, rec, prov["config_hash"]))
            run_log.info("  seed %d T=%d %s eps=%s excess_loss=%s runtime_s=%.4g rho=%.6g ledger=%.6g resets=%d",
                         seed, res.identity.iterations, first.conversion, first.eps_label,
                         " ".join(f"{a}:{v['excess_loss']:.6g}" for a, v in released.items()),
                         rec["runtime_s"], rec["rho"], rec["ledger_rho_total"], rec["resets"])
            unit["curves"].append(curve_frame(spec.dataset, first, res))
    return units


def curve_frame(dataset: str, member, res) -> pd.DataFrame | None:
    """A run's downsampled curve (:data:`CURVE_COLUMNS`, :func:`curve_indices`); None when the member stores
    no curves."""
    if not member.curves_max_points:
        return None
    idx = curve_indices(res.identity.iterations, member.curves_max_points)
    return pd.DataFrame({
        "dataset": dataset, "algorithm": member.algorithm, "conversion": member.conversion,
        "epsilon": member.epsilon, "seed": res.identity.seed, "iterations": res.identity.iterations, "iterate": idx,
        "excess_loss": np.asarray(res.excess_loss)[idx], "elapsed_s": np.asarray(res.elapsed)[idx]})


def setup_log(path: str | Path | None) -> None:
    """Log INFO lines to ``path`` (the rule's log: file) and stderr; with a ``path``, the per-run lines
    (:data:`run_log`) go to the file only, so the console shows each job's start, progress and end."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if path:
        handlers[0].addFilter(lambda record: not record.name.startswith(run_log.name))
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="w"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(message)s")
