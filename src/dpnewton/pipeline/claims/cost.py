"""The cost of the run behind the report, from its jobs' Snakemake ``benchmark:`` files.

Per part of the run (the paper's methods, the methods beyond the paper, each track, the timing stage,
data and optimum): jobs, and wall and CPU time summed over them (the files' ``s`` and ``cpu_time``,
:func:`dpnewton.pipeline.resources.read_benchmark`). Summed job wall time over the machine's cores is
the run's length when the scheduler keeps every core busy. A job resumed from checkpoints counts its
last attempt only: the units it reused were computed by attempts that were cut off, which write no
benchmark file (``benchmarks/pipeline.py --analyze`` adds them from the job logs).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..resources import read_benchmark
from .cells import is_paper_configuration

#: the cores the issue's cost target refers to (``hours on 2 cores`` = core-hours / 2)
REFERENCE_CORES = 2
COLUMNS = ["part", "jobs", "missing", "wall_s", "cpu_s"]
RULE_PARTS = {"time_updates": "timing stage", "prepare_data": "data and optimum", "optimum": "data and optimum",
              "optimum_holdout": "data and optimum"}


@lru_cache(maxsize=None)
def _configuration_part(algorithm: str, base: str, hyper_json: str) -> str:
    """One configuration's part (a run job's benchmark file names only its configuration)."""
    row = pd.DataFrame([{"algorithm": algorithm, "base_algorithm": base, "hyper": hyper_json}])
    return "paper's methods" if bool(is_paper_configuration(row).iloc[0]) else "beyond the paper"


def _run_job_part(path: str, variants: dict) -> str:
    """results/benchmarks/run_job/{dataset}/{algorithm}/... -> the part of its configuration."""
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


def run_cost(benchmarks: dict[str, list[str]], variants: dict) -> pd.DataFrame:
    """One row per part: jobs with a benchmark file, jobs without one (``missing``), summed wall and CPU
    seconds. ``benchmarks``: rule -> its jobs' benchmark files (the workflow's ``all_benchmarks``);
    ``variants``: configuration name -> {'algorithm': registered base, 'hyper': dict} (the protocol's)."""
    acc: dict[str, dict] = {}
    for rule, paths in benchmarks.items():
        for path in paths:
            rec = acc.setdefault(_part(rule, path, variants), {"jobs": 0, "missing": 0, "wall_s": 0.0, "cpu_s": 0.0})
            if not Path(path).is_file():
                rec["missing"] += 1
                continue
            job = read_benchmark(path).mean(numeric_only=True)
            rec["jobs"] += 1
            rec["wall_s"] += _seconds(job, "s")
            rec["cpu_s"] += _seconds(job, "cpu_time")
    return pd.DataFrame([{"part": p, **r} for p, r in acc.items()], columns=COLUMNS)


def cost_section(table: pd.DataFrame | None) -> list[str]:
    """The report's "Cost of this run" section."""
    if table is None or table.empty:
        return []
    L = ["", "## Cost of this run", "",
         "Summed over the jobs' Snakemake benchmark files (wall and CPU time of each job). *paper's methods*: "
         "every configuration of the paper's algorithms at the last iterate; *beyond the paper*: iterate "
         "averaging, precond-dp-gd, objpert and the other algorithms the paper does not have. Hours on "
         f"{REFERENCE_CORES} cores = summed job wall / {REFERENCE_CORES}, the run's length when both cores are "
         "busy. A job "
         "resumed from checkpoints counts its last attempt only; `benchmarks/pipeline.py --analyze` adds the "
         "cut-off attempts from the job logs.", "",
         f"| part | jobs | summed job wall (h) | CPU (h) | hours on {REFERENCE_CORES} cores | share |",
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
