"""The cost of the run behind the report, from its jobs' Snakemake ``benchmark:`` files.

Per part of the run (the paper's methods, the methods beyond the paper, each track, the timing stage,
data and optimum): jobs, and wall and CPU time summed over them (the files' ``s`` and ``cpu_time``,
:func:`dpnewton.pipeline.resources.read_benchmark`). Summed job wall time over the machine's cores is
the run's length when the scheduler keeps every core busy. A job resumed from checkpoints counts its
last attempt only: the units it reused were computed by attempts that were cut off, which write no
benchmark file (``benchmarks/pipeline.py --analyze`` adds them from the job logs). A job of several
members (:func:`dpnewton.pipeline.plan.job_members`: configurations that release their models from one
trajectory, or a lockstep job running every configuration, conversion and epsilon of its algorithm on a
dataset, :func:`dpnewton.pipeline.plan.group_jobs`) is counted under its first configuration, the one
its files are named after, by :func:`_run_job_part`.

The run's length and core utilisation (:func:`run_length`) come from the files' modification times:
a benchmark file is written when its job ends, so its mtime is the job's end and mtime - ``s`` its
start.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..resources import read_benchmark
from .cells import is_paper_configuration

#: the cores the issue's cost target refers to (``hours on 2 cores`` = core-hours / 2)
REFERENCE_CORES = 2
COLUMNS = ["part", "jobs", "missing", "wall_s", "cpu_s"]
#: how far summed job wall time may exceed run length x cores before the times are taken as not the
#: jobs' (the file is written a moment after its job ends; mtimes can be coarse)
OVERLAP_TOLERANCE = 0.02
RULE_PARTS = {"time_updates": "timing stage", "prepare_data": "data and optimum", "optimum": "data and optimum",
              "optimum_holdout": "data and optimum"}


@lru_cache(maxsize=None)
def _configuration_part(algorithm: str, base: str, hyper_json: str) -> str:
    """One configuration's part (a run job's benchmark file names only its configuration)."""
    row = pd.DataFrame([{"algorithm": algorithm, "base_algorithm": base, "hyper": hyper_json}])
    return "paper's methods" if bool(is_paper_configuration(row).iloc[0]) else "beyond the paper"


def _run_job_part(path: str, variants: dict) -> str:
    """results/benchmarks/run_job/{dataset}/{algorithm}/... -> the part of its configuration: the job's first
    member's, for a job of several (a lockstep job's whole time goes to the part of its first configuration)."""
    algorithm = Path(path).parts[-4]
    v = variants.get(algorithm, {"algorithm": algorithm, "hyper": {}})
    return _configuration_part(algorithm, v["algorithm"], json.dumps(v["hyper"], sort_keys=True))


def _part(rule: str, path: str, variants: dict) -> str:
    if rule == "run_job":
        return _run_job_part(path, variants)
    if rule == "run_track":     # results/benchmarks/run_track/{track}/{dataset}/{method}/eps~{eps}.tsv
        return f"{Path(path).parts[-4]} track"
    return RULE_PARTS.get(rule, rule)


def _seconds(job: pd.Series, column: str) -> float:
    """A measure of one job; 0 where Snakemake could not measure it ('-' in the file)."""
    value = job[column] if column in job else float("nan")
    return 0.0 if pd.isna(value) else float(value)


@dataclass(frozen=True)
class RunLength:
    """The run's length and how busy it kept its cores (:func:`run_length`). ``wall_s`` and both
    utilisations are None when the files' times cannot measure it (``reason`` says why)."""

    jobs: int               # jobs with a benchmark file
    cores: int
    job_wall_s: float       # summed over the jobs
    cpu_s: float            # summed over the jobs
    wall_s: float | None = None            # the first job's start to the last job's end
    cpu_utilisation: float | None = None   # cpu_s / (wall_s x cores)
    job_utilisation: float | None = None   # job_wall_s / (wall_s x cores)
    reason: str = ""

    @property
    def measurable(self) -> bool:
        return self.wall_s is not None

    def line(self) -> str:
        """The report's sentence."""
        if not self.measurable:
            return f"Run length and core utilisation: not measurable ({self.reason})."
        return (f"Run length {self.wall_s / 3600:.2f} h (the first job's start to the last job's end, from the "
                f"benchmark files' times); utilisation of {self.cores} cores: {self.cpu_utilisation:.0%} by CPU "
                f"time, {self.job_utilisation:.0%} by job wall time (summed over the jobs / (run length x "
                f"{self.cores})).")


def run_length(jobs: list[tuple[float, float, float]], cores: int = REFERENCE_CORES) -> RunLength:
    """The run's length and core utilisation from its jobs' (end, wall s, CPU s): end = the benchmark
    file's mtime, start = end - wall; run length = the last end - the first start; utilisation = summed
    CPU seconds, and summed job wall seconds, / (run length x ``cores``). A job's wall counts once,
    whatever threads it holds (the timing stage holds every core and computes on one).

    The mtimes are a file-system measure: they span everything between the first and the last job of
    the files, pauses between an interrupted run and its resumption included, and a copied results
    folder loses them (``cp`` without ``-p``, an unpacked archive, ``snakemake --touch``). The run is
    then "not measurable" rather than a wrong number: when every file has the same mtime, or when the
    summed job wall time exceeds run length x ``cores`` (more jobs at once than cores: the times are
    not the jobs' ends, or the run had more cores than ``cores``)."""
    job_wall = float(sum(w for _, w, _ in jobs))
    cpu = float(sum(c for _, _, c in jobs))
    base = {"jobs": len(jobs), "cores": int(cores), "job_wall_s": job_wall, "cpu_s": cpu}
    if not jobs:
        return RunLength(**base, reason="no benchmark file")
    ends = [e for e, _, _ in jobs]
    if len(jobs) > 1 and max(ends) == min(ends):
        return RunLength(**base, reason="every benchmark file has the same modification time, as after a copy")
    span = max(ends) - min(e - w for e, w, _ in jobs)
    if span <= 0:
        return RunLength(**base, reason="the jobs took no measurable time")
    if job_wall > span * cores * (1 + OVERLAP_TOLERANCE):
        return RunLength(**base, reason=f"the files' times put more than {cores} jobs at once: copied results, "
                                        f"which reset the times, or a run on more than {cores} cores")
    return RunLength(**base, wall_s=span, cpu_utilisation=cpu / (span * cores),
                     job_utilisation=job_wall / (span * cores))


def run_cost(benchmarks: dict[str, list[str]], variants: dict, cores: int = REFERENCE_CORES) -> pd.DataFrame:
    """One row per part: jobs with a benchmark file, jobs without one (``missing``), summed wall and CPU
    seconds. ``benchmarks``: rule -> its jobs' benchmark files (the workflow's ``all_benchmarks``);
    ``variants``: configuration name -> {'algorithm': registered base, 'hyper': dict} (the protocol's).
    The run's length and utilisation on ``cores`` (:func:`run_length`) are in ``attrs["run"]``, where
    :func:`cost_section` finds them."""
    acc: dict[str, dict] = {}
    timed: list[tuple[float, float, float]] = []
    for rule, paths in benchmarks.items():
        for path in paths:
            rec = acc.setdefault(_part(rule, path, variants), {"jobs": 0, "missing": 0, "wall_s": 0.0, "cpu_s": 0.0})
            if not Path(path).is_file():
                rec["missing"] += 1
                continue
            frame = read_benchmark(path)
            job = frame.mean(numeric_only=True)
            rec["jobs"] += 1
            rec["wall_s"] += _seconds(job, "s")
            rec["cpu_s"] += _seconds(job, "cpu_time")
            # the job's whole time (every repeat of a `repeat()` benchmark; the workflow's rules have one)
            total = frame.sum(numeric_only=True)
            timed.append((os.stat(path).st_mtime, _seconds(total, "s"), _seconds(total, "cpu_time")))
    table = pd.DataFrame([{"part": p, **r} for p, r in acc.items()], columns=COLUMNS)
    table.attrs["run"] = run_length(timed, cores)
    return table


def cost_section(table: pd.DataFrame | None, run: RunLength | None = None) -> list[str]:
    """The report's "Cost of this run" section; ``run``: the run's length (default: the table's
    ``attrs["run"]``, :func:`run_cost`'s; no line without one)."""
    if table is None or table.empty:
        return []
    run = run if run is not None else table.attrs.get("run")
    L = ["", "## Cost of this run", "",
         "Summed over the jobs' Snakemake benchmark files (wall and CPU time of each job). *paper's methods*: "
         "every configuration of the paper's algorithms at the last iterate; *beyond the paper*: iterate "
         "averaging, precond-dp-gd, objpert and the other algorithms the paper does not have. Hours on "
         f"{REFERENCE_CORES} cores = summed job wall / {REFERENCE_CORES}, the run's length when both cores are "
         "busy. A job "
         "resumed from checkpoints counts its last attempt only; `benchmarks/pipeline.py --analyze` adds the "
         "cut-off attempts from the job logs. A job of several configurations (several models released from one "
         "trajectory, or a lockstep job: every configuration, conversion and epsilon of one algorithm on a "
         "dataset, run in one batch) is counted under its first configuration, the one its files are named "
         "after.", ""]
    if run is not None:
        L += [run.line(), ""]
    L += [f"| part | jobs | summed job wall (h) | CPU (h) | hours on {REFERENCE_CORES} cores | share |",
          "|---|---|---|---|---|---|"]
    total = float(table["wall_s"].sum())
    for r in table.sort_values("wall_s", ascending=False).itertuples():
        jobs = f"{r.jobs}" + (f" (+{r.missing} without a file)" if r.missing else "")
        share = r.wall_s / total if total > 0 else float("nan")
        L.append(f"| {r.part} | {jobs} | {r.wall_s / 3600:.2f} | {r.cpu_s / 3600:.2f} | "
                 f"{r.wall_s / 3600 / REFERENCE_CORES:.2f} | {share:.0%} |")
    L.append(f"| all | {int(table['jobs'].sum())} | {total / 3600:.2f} | {table['cpu_s'].sum() / 3600:.2f} | "
             f"{total / 3600 / REFERENCE_CORES:.2f} | 100% |")
    return L + [""]
