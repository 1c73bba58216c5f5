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

import hashlib
import json
import logging
import math
import os
import pickle
import platform
import shutil
import subprocess
import time
import tomllib
from datetime import datetime, timezone
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pandas as pd
import scipy
from threadpoolctl import threadpool_info, threadpool_limits

from ..algorithms import get_algorithm
from ..experiment import MAX_ITERATIONS, RunGroup, check_run, resolve_budget, result_record, run_groups
from ..holdout import heldout_metrics
from ..io import atomic_path, atomic_write_csv, atomic_write_parquet, read_parquet
from ..privacy.neighbouring import BENCHMARK_RELATION, resolve_delta
from ..problems import file_sha256, load_split_from_prepared
from .frontier import pass_equivalents
from .plan import config_hash, job_members, trajectories
from .selection import best_t, mean_per_t

log = logging.getLogger("dpnewton.pipeline")
#: the per-run lines (one per seed and T): the job's log file only, not the console (:func:`setup_log`)
run_log = logging.getLogger("dpnewton.pipeline.runs")

CURVE_COLUMNS = ["dataset", "algorithm", "conversion", "epsilon", "seed", "iterations", "iterate",
                 "excess_loss", "elapsed_s"]
#: one row per noisy release: the run (and the job's config hash), then the ledger entry's fields
#: (:class:`dpnewton.privacy.ledger.LedgerEntry`); ``release`` numbers the run's releases from 0
LEDGER_COLUMNS = ["dataset", "algorithm", "conversion", "epsilon", "seed", "iterations", "config_hash",
                  "release", "step", "quantity", "sensitivity", "sigma", "rho"]


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


def run_job(prepared: str | Path, spec: dict, rows_out: str | Path, curves_out: str | Path,
            source_dir: str | Path | None = None) -> pd.DataFrame:
    """Run the job described by ``spec`` (see :func:`dpnewton.pipeline.plan.expand`); ``source_dir``
    is the workflow's checkout, whose git revision and version the rows record (:func:`provenance`).
    Returns the rows as written (with their ``file_rows`` column).

    The job's runs release a model for every member (:func:`~.plan.job_members`: one configuration,
    several that differ only in ``average``, or every configuration x conversion x epsilon of a grouped
    job); each member keeps its own T grid and extension (the :class:`TSearch` of its rows), and a
    (seed, T) run of a trajectory (:func:`~.plan.trajectories`) is computed once whichever members need it.
    Every grid round runs the T values of all trajectories as one batch."""
    t0 = time.perf_counter()
    problem, test = load_split_from_prepared(Path(prepared), holdout=spec.get("holdout"),
                                             precision=spec.get("precision", "float64"))
    prov = provenance(spec, prepared, source_dir)
    seeds = [int(s) for s in spec["seeds"]]
    base = spec.get("base_algorithm") or spec["algorithm"]
    members = job_members(spec)
    paths = trajectories(spec)
    path_of = {key: path for path, keys in paths.items() for key in keys}
    searches = {key: TSearch(m["algorithm"], m, pass_capped(m["extend"], base, problem.n, problem.d, m["hyper"]),
                             path_of[key]) for key, m in members.items()}
    cells = sorted({(m["conversion"], m["eps_label"]) for m in members.values()}, key=lambda c: (c[0], float(c[1])))
    log.info("job %s/%s %s seeds=%s T=%s n=%d d=%d config_hash=%s", spec["dataset"],
             "+".join(dict.fromkeys(m["algorithm"] for m in members.values())),
             ", ".join(f"{c} eps={e}" for c, e in cells), seeds, sorted({t for x in searches.values() for t in x.grid}),
             problem.n, problem.d, prov["config_hash"])
    if test is not None:
        log.info("holdout %s: the runs use the %d training rows; %d test rows give the held-out metrics",
                 spec["holdout"], problem.n, test.n)
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
                     batch if s in todo else _resumed_note(unit))

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


class TSearch:
    """One member configuration's T grid in a job: the declared grid, extended while its best
    mean-over-seeds T is at an edge (:func:`next_extension`, the extension rule ``ext``).

    With ``probe_first_seed`` in the rule, the job's first seed runs a proposed T alone first: if its
    released excess loss there is above every seed's at the current best T (:func:`probe_passes`), the
    search stops without the other seeds running it (the probe's run is logged, not a row;
    ``probe_rejected_T`` records it).
    Non-private, like the whole best-T selection. ``name`` is the member's configuration, ``path`` the
    trajectory whose runs release its model (:func:`~.plan.trajectories`; the job's runs are keyed
    (trajectory, seed, T))."""

    def __init__(self, name: str, member: dict, ext: dict | None, path: str = ""):
        self.name, self.average, self.hyper, self.ext = name, member["average"], member["hyper"], ext
        self.path = path
        self.grid = [int(t) for t in member["iterations"]]
        self.joined = {t: 0 for t in self.grid}
        self.probe = bool(ext and ext.get("probe_first_seed"))
        self.rejected = 0
        self.done = False

    def rows(self, runs: dict, seeds: list[int]) -> list[dict]:
        """The member's released-model rows of every (seed, T) of its grid so far."""
        return [released_row(runs[(self.path, s, T)]["row"], self.average) for s in seeds for T in self.grid]

    def next_T(self, runs: dict, seeds: list[int]) -> int | None:
        if self.done:
            return None
        new = next_extension(self.rows(runs, seeds), self.grid, self.ext)
        self.done = not new
        return new[0] if new else None

    def extend(self, T: int, grid_round: int, runs: dict, seeds: list[int]) -> None:
        """Accept T into the grid, unless the first seed's probe says it is already worse (then stop)."""
        if self.probe and len(seeds) > 1:
            best, _ = best_mean_t(self.rows(runs, seeds))
            at_best = [released_row(runs[(self.path, s, best)]["row"], self.average)["excess_loss"] for s in seeds]
            at_new = released_row(runs[(self.path, seeds[0], T)]["row"], self.average)["excess_loss"]
            if not probe_passes(at_new, at_best):
                run_log.info("%s: seed %d at T=%d (%.6g) is above every seed's loss at the best T=%d (at most %.6g): "
                         "the T search stops there", self.name, seeds[0], T, at_new, best, max(at_best))
                self.rejected, self.done = T, True
                return
        self.grid.append(T)
        self.joined[T] = grid_round

    def outputs(self, runs: dict, seeds: list[int]) -> tuple[list[dict], list, list]:
        """The member's rows, curves and ledger frames, labelled with its configuration name."""
        rows, curves, ledgers = [], [], []
        extended = any(self.joined.values())
        for s in seeds:
            for T in self.grid:
                run = runs[(self.path, s, T)]
                row = released_row(run["row"], self.average)
                row.update({"algorithm": self.name, "hyper": json.dumps(self.hyper, sort_keys=True, default=str),
                            "grid_round": self.joined[T], "grid_extended": extended,
                            "probe_rejected_T": self.rejected})
                rows.append(row)
                if run["curve"] is not None:
                    curves.append(run["curve"].assign(algorithm=self.name))
                if run["ledger"] is not None:
                    ledgers.append(run["ledger"].astype({"algorithm": "object"}).assign(algorithm=self.name))
        return rows, curves, ledgers


def probe_passes(at_new: float, at_best: list[float]) -> bool:
    """The first seed's run at a proposed T lets the other seeds run it unless its excess loss there is
    above every seed's at the current best T (``at_best``; a non-finite probe never passes). Replayed
    on a full claims run's recorded losses (benchmarks/results/t_search_replay.md) against two stricter
    tests (its own loss at the best T, the mean there), it keeps the best T of the most cells."""
    return bool(at_new <= max(at_best))


def released_row(row: dict, average: str) -> dict:
    """A run's row for the model it released with ``average`` (one trajectory, several released
    models: the unit's rows keep each one's excess loss, accuracy and held-out metrics in ``released``)."""
    out = {k: v for k, v in row.items() if k != "released"}
    out.update(row["released"][average])
    return out


def _run_units(problem, spec: dict, seeds: list[int], grid_round: int, wanted: dict[int, dict[str, list[int]]],
               searches: dict[str, "TSearch"], prov: dict, test=None) -> dict[int, dict]:
    """One batch of the runs {seed: {trajectory: Ts}} (``wanted``) of the members ``searches`` -> {seed:
    {'rows': result rows, 'curves': their downsampled curve frames (None without curves), 'ledger': their
    ledger frames (:func:`ledger_frame`), 'paths': their trajectories}}, the lists aligned.

    A trajectory's runs get its first member's conversion, epsilon and hyper-parameters (its ``average``
    the configured one; :func:`dpnewton.experiment.run_groups`) and release a model for every member's
    ``average``; a run's row keeps them all in ``released`` ({average: excess_loss, average, train_accuracy
    and, with ``test``, the held-out metrics}). ``test``: the test split's problem (holdout on)."""
    base = spec.get("base_algorithm") or spec["algorithm"]
    members = job_members(spec)
    units = {s: {"rows": [], "curves": [], "ledger": [], "paths": []} for s in seeds}
    groups, cells = [], []
    for path in dict.fromkeys(p for by in wanted.values() for p in by):
        keys = [key for key, x in searches.items() if x.path == path]
        first = members[keys[0]]
        averages = tuple(dict.fromkeys(searches[key].average for key in keys))
        hyper = {k: v for k, v in (first["hyper"] or {}).items() if k != "average"}
        if averages[0] != "none":
            hyper["average"] = averages[0]
        eps, max_points = float(first["epsilon"]), int(first["curves_max_points"])
        runs = tuple((s, T) for s in seeds for T in wanted[s].get(path, []))
        delta, rho = resolve_budget(eps, spec.get("delta"), problem.n, first["conversion"])
        check_run(base, eps, spec.get("delta"), sorted({T for _, T in runs}), first["conversion"], hyper=hyper)
        groups.append(RunGroup(eps, delta, first["conversion"], rho, runs, hyper, averages[1:],
                               lambda T, k=max_points: curve_indices(T, k)))
        cells.append((path, first, averages))
    # a lockstep card steps every trajectory in one batch; any other runs one trajectory's batch at a time
    # (a job of a single trajectory, as :func:`~.plan.group_jobs` groups them by algorithm)
    batches = [groups] if get_algorithm(base).lockstep else [[g] for g in groups]
    results_of = [res for batch in batches for res in run_groups(problem, spec["dataset"], base, batch)]
    for (path, first, averages), results in zip(cells, results_of):
        conversion, eps, max_points = first["conversion"], float(first["epsilon"]), int(first["curves_max_points"])
        for res in results:
            seed = res.identity.seed
            rec = result_record(res, conversion, eps, _delta(spec, problem.n))
            rec.update({"algorithm": first["algorithm"], "base_algorithm": base, "eps_label": first["eps_label"],
                        "n": problem.n, "d": problem.d, "loss_opt": problem.loss_opt,
                        "hyper": first["hyper"] or {}, "grid_round": grid_round, **prov,
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
                rec.update({"holdout": float(spec["holdout"]), "n_test": test.n, **released[averages[0]]})
            row = flatten_record(rec)
            row["released"] = released
            unit = units[seed]
            unit["rows"].append(row)
            unit["paths"].append(path)
            unit["ledger"].append(ledger_frame(res.ledger, rec, prov["config_hash"]))
            run_log.info("  seed %d T=%d %s eps=%s excess_loss=%s runtime_s=%.4g rho=%.6g ledger=%.6g resets=%d",
                     seed, res.identity.iterations, conversion, first["eps_label"],
                     " ".join(f"{a}:{v['excess_loss']:.6g}" for a, v in released.items()),
                     rec["runtime_s"], rec["rho"], rec["ledger_rho_total"], rec["resets"])
            curve = None
            if max_points:
                idx = curve_indices(res.identity.iterations, max_points)
                curve = pd.DataFrame({
                    "dataset": spec["dataset"], "algorithm": first["algorithm"], "conversion": conversion,
                    "epsilon": eps, "seed": seed, "iterations": res.identity.iterations, "iterate": idx,
                    "excess_loss": np.asarray(res.excess_loss)[idx], "elapsed_s": np.asarray(res.elapsed)[idx]})
            unit["curves"].append(curve)
    return units


def checkpoint_dir(rows_out: str | Path) -> Path:
    """The folder of a job's per-(grid round, seed) checkpoints: ``<rows>.partial``."""
    rows_out = Path(rows_out)
    return rows_out.with_name(rows_out.name + ".partial")


def save_checkpoint(path: Path, key: dict, unit: dict) -> None:
    """Write a finished unit atomically as ``{'key', 'sha256', 'body'}``: ``body`` is the pickled
    unit and ``sha256`` its digest, which :func:`load_checkpoint` checks before trusting the unit."""
    body = pickle.dumps(unit, protocol=pickle.HIGHEST_PROTOCOL)
    with atomic_path(path, suffix=".pkl") as tmp:
        with open(tmp, "wb") as fh:
            pickle.dump({"key": key, "sha256": hashlib.sha256(body).hexdigest(), "body": body}, fh,
                        protocol=pickle.HIGHEST_PROTOCOL)


def load_checkpoint(path: Path, key: dict) -> dict | None:
    """A finished unit (a run job's {'rows', 'curves', 'paths', 'seconds', 'ledger'}) if ``path`` holds one for
    exactly ``key``, else None.

    ``seconds`` is the wall time the unit took when it was computed and ``ledger`` its runs' ledger
    frames (None in checkpoints written before they were kept). A unit is trusted only if its body
    matches the SHA-256 saved with it (:func:`save_checkpoint`; checkpoints written before the digest
    existed are read as they are). A file that cannot be read or fails the digest (it is written
    atomically, so only a foreign or damaged file), or that belongs to another spec, seed or T grid,
    is ignored, logged, and recomputed (then overwritten).
    """
    if not path.exists():
        return None
    try:
        saved = pd.read_pickle(path)
        if not isinstance(saved, dict) or saved.get("key") != key:
            log.info("ignoring checkpoint %s: it belongs to another spec, seed or T grid", path)
            return None
        unit = checkpoint_body(saved)
    except Exception as err:  # noqa: BLE001 -- any unreadable checkpoint is recomputed, never trusted
        log.warning("ignoring damaged checkpoint %s (%s); its unit is recomputed", path, err)
        return None
    body = {k: v for k, v in unit.items() if k != "key"}     # a checkpoint from before the digest is its unit
    return {**body, "seconds": unit.get("seconds"), "ledger": unit.get("ledger")}


def checkpoint_body(saved: dict) -> dict:
    """The unit of a loaded checkpoint; ValueError when its body does not match its SHA-256."""
    if "body" not in saved:  # written before checkpoints carried a digest
        return saved
    if hashlib.sha256(saved["body"]).hexdigest() != saved.get("sha256"):
        raise ValueError("its contents do not match the SHA-256 saved with them")
    return pickle.loads(saved["body"])


def ledger_path(rows_out: str | Path) -> Path:
    """The privacy ledger of a job: ``<rows stem>.ledger.parquet`` beside its rows CSV."""
    rows_out = Path(rows_out)
    return rows_out.with_name(rows_out.name.removesuffix(".csv") + ".ledger.parquet")


def ledger_frame(ledger, record: dict, config_hash: str) -> pd.DataFrame:
    """One run's releases (:data:`LEDGER_COLUMNS`) from its :class:`~dpnewton.privacy.ledger.PrivacyLedger`
    and its result ``record`` (the run's identity)."""
    entries = ledger.entries
    frame = pd.DataFrame({
        "release": np.arange(len(entries), dtype=np.int64),
        "step": np.array([e.step for e in entries], dtype=np.int64),
        "quantity": [e.quantity for e in entries],
        "sensitivity": np.array([e.sensitivity for e in entries], dtype=float),
        "sigma": np.array([e.sigma for e in entries], dtype=float),
        "rho": np.array([e.rho for e in entries], dtype=float)})
    ident = {"dataset": record["dataset"], "algorithm": record["algorithm"], "conversion": record["conversion"],
             "epsilon": float(record["epsilon"]), "seed": int(record["seed"]),
             "iterations": int(record["iterations"]), "config_hash": config_hash}
    return frame.assign(**ident)[LEDGER_COLUMNS].astype({c: "category" for c in LEDGER_TEXT})


def unit_ledger(unit: dict, path: Path) -> pd.DataFrame:
    """The ledger rows of a unit's runs; an empty frame (logged) for a unit resumed from a checkpoint
    written before checkpoints kept the ledger."""
    if unit.get("ledger") is None:
        log.warning("checkpoint %s predates the privacy ledger: its runs have no rows in the ledger file", path)
        return _empty_ledger()
    frames = [f for f in unit["ledger"] if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else _empty_ledger()


def _empty_ledger() -> pd.DataFrame:
    types = {"release": "int64", "step": "int64", "seed": "int64", "iterations": "int64", "epsilon": "float64",
             "sensitivity": "float64", "sigma": "float64", "rho": "float64"}
    return pd.DataFrame({c: pd.Series(dtype=types.get(c, "object")) for c in LEDGER_COLUMNS})


#: ledger columns stored as parquet dictionaries (few distinct values) and as deltas (counters):
#: a DP-GD job of 6 million releases takes 0.4 MB instead of 51 MB
LEDGER_TEXT = ["dataset", "algorithm", "conversion", "config_hash", "quantity"]
LEDGER_COUNTERS = ["release", "step"]


def write_ledger(path: str | Path, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Write the job's ledger frames as one parquet file (atomic, page CRCs, zstd; text columns as
    categories); returns the frame."""
    frames = [f for f in frames if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else _empty_ledger()
    frame = frame.astype({c: "category" for c in LEDGER_TEXT})
    atomic_write_parquet(path, frame, compression="zstd",
                         use_dictionary=[c for c in LEDGER_COLUMNS if c not in LEDGER_COUNTERS],
                         column_encoding={c: "DELTA_BINARY_PACKED" for c in LEDGER_COUNTERS})
    return frame


def read_ledger(rows_out: str | Path) -> pd.DataFrame:
    """The privacy ledger of the job whose rows file is ``rows_out`` (:func:`ledger_path`), verified
    (:func:`dpnewton.io.read_parquet`): one row per release of every run, :data:`LEDGER_COLUMNS`."""
    return read_parquet(ledger_path(rows_out), fix=f"delete it and {rows_out}, then run `snakemake {rows_out}` "
                                                  "(the target before your other options): rule run_job "
                                                  "recomputes both")


def _resumed_note(unit: dict) -> str:
    """Progress-line suffix of a unit loaded from its checkpoint, with the time its first attempt took
    (the log of that attempt is overwritten by the rerun; benchmarks/pipeline.py --analyze sums it)."""
    seconds = unit.get("seconds")
    return " [from checkpoint]" if seconds is None else f" [from checkpoint, computed in {seconds:.1f}s]"


def best_mean_t(rows: list[dict]) -> tuple[int | None, list[int]]:
    """(best T of the rows so far, sorted grid): :func:`dpnewton.pipeline.selection.best_t`, the
    argmin over T of the mean excess loss over seeds; non-finite means never win."""
    means = mean_per_t(pd.DataFrame(rows)[["iterations", "excess_loss"]].astype(float))
    return best_t(means), [int(t) for t in means.index]


def pass_capped(ext: dict | None, algorithm: str, n: int, d: int, hyper: dict | None = None) -> dict | None:
    """The extension rule with its ``max_passes`` (the dataset's cap in pass-equivalents per run) turned
    into iterations: ``max_iterations`` becomes the smaller of itself and the largest T with
    first + (T - 1) x per <= max_passes (:func:`.frontier.pass_equivalents`; at least 1). Unchanged
    without a pass cap, or for an algorithm without a pass count (one-shot methods)."""
    if not ext or "max_passes" not in ext:
        return ext
    first, per = pass_equivalents(algorithm, n, d, hyper)
    if not (math.isfinite(first) and math.isfinite(per) and per > 0):
        return ext
    by_passes = max(1, int(math.floor((ext["max_passes"] - first) / per)) + 1)
    return {**ext, "max_iterations": min(int(ext["max_iterations"]), by_passes)}


def next_extension(rows: list[dict], grid: list[int], ext: dict | None) -> list[int]:
    """New T values to run when the best mean-over-seeds T is at an edge of the grid so far.

    Upwards: the largest T x ``factor`` while that stays <= ``max_iterations`` and the runs' public cap
    :data:`dpnewton.experiment.MAX_ITERATIONS`. Downwards: the
    smallest T // ``factor`` (at least 1) while the smallest T is above 1, so that a best T at the
    bottom of a grid such as DP-GD's {10, 30, ...} is made interior or reaches T = 1, the smallest
    admissible T. [] when there is nothing to extend (interior best T, all means non-finite, the cap
    or T = 1 reached).
    """
    if not ext or len(grid) < 2:
        return []
    best, seen = best_mean_t(rows)
    if best is None:
        return []
    factor = int(ext["factor"])
    if best == max(seen):
        nxt = int(best * factor)
        return [nxt] if nxt <= min(int(ext["max_iterations"]), MAX_ITERATIONS) and nxt not in seen else []
    if best == min(seen) and best > 1:
        nxt = max(1, best // factor)
        return [nxt] if nxt not in seen else []
    return []


def _delta(spec: dict, n: int) -> float:
    return resolve_delta(spec.get("delta"), BENCHMARK_RELATION, n)


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
