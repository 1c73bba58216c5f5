"""Schedule model of a finished run: its recorded job times replayed through Snakemake's scheduler at 2, 16, 64
and 256 cores, with the makespan, the critical path and the utilisation (``dpnewton.pipeline.schedule_model``).

    python benchmarks/schedule.py RUN_DIR --config CONFIG --cores N [--job-split X] [--tag schedule_NAME]
                                  [--at 2 16 64 256] [--label TEXT]

RUN_DIR is the run's working directory, CONFIG its config file and N the cores it ran on (``--cores``; its
``job_split: auto`` plan depends on them); ``--job-split`` the ``job_split`` the run was given on the
command line (``--config job_split=X``; e.g. a 2-core run that records the jobs of a 64-core plan). Its
jobs are read as ``pipeline.py --analyze`` reads them (``pipeline.job_times``: Snakemake's metadata, per job
its start, end, outputs and inputs); a job needs the jobs whose outputs are among its inputs. Priorities and
threads are the workflow's: a run job's is ``dpnewton.pipeline.scheduling.priority`` of its spec,
prepare_data's and the optimum's above every run job's, time_updates takes every core, every other rule
priority 0 and one thread; ties go to the larger input (the sizes of its input files in RUN_DIR). Two
scenarios at each core count C:

* ``recorded``: the run's own jobs at their recorded wall times (the jobs of a run on N cores, whatever C);
* ``split``: the run jobs ``job_split: auto`` makes for C cores (``dpnewton.pipeline.job_split``), each
  timed as a start-up (JOB_START_S, or a shorter job's whole wall) + the recorded wall minus start-up of the
  jobs its trajectories ran in, shared out by the trajectories' recorded update time (``runtime_s`` of the
  job's rows, a trajectory's runs counted once; where a job records none, by estimated cost,
  ``dpnewton.pipeline.scheduling``). A model: it keeps every trajectory's recorded cost, so it leaves out
  that a narrower batch costs more per run (docs/pipeline.md, Job granularity), a wider one less.

The model at N cores is set beside the run's recorded length (the time in which some job ran). Writes
``results/<tag>.csv`` (one row per scenario and core count) and the section ``<tag>``.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import yaml

import common
import pipeline
from dpnewton.pipeline.config import expand, load_config
from dpnewton.pipeline.jobspec import job_members
from dpnewton.pipeline.schedule_model import Task, simulate
from dpnewton.pipeline.scheduling import JOB_START_S, MAX_JOB_PRIORITY, estimated_cost, priority

RUN_ROWS = re.compile(r"^results/runs/([^/]+)/([^/]+)/([^/]+)/eps~([^/]+)/seeds~([^/]+)\.csv$")
#: the rules whose jobs the workflow starts before every run job (workflow/rules/common.smk, data_priority)
DATA_RULES = ("prepare_data", "optimum", "optimum_holdout")
#: the rule whose job takes every core (workflow/rules/timing.smk)
ALL_CORES_RULE = "time_updates"


def rows_file(job: dict) -> str | None:
    """A run job's rows file (its name here), None for another rule's job."""
    return next((out for out in job["outputs"] if RUN_ROWS.match(out)), None)


def run_key(job: dict) -> tuple | None:
    """The plan key of a run job's record, None for another rule's job."""
    rows = rows_file(job)
    return None if rows is None else RUN_ROWS.match(rows).groups()


def members(spec: dict, dataset: str, chunk: str) -> list[tuple]:
    """(dataset, chunk, configuration, conversion, epsilon) of every member of a job spec."""
    return [(dataset, chunk, m["algorithm"], m["conversion"], m["eps_label"]) for m in job_members(spec).values()]


class Run:
    """A finished run's jobs as tasks, and the plan they came from (module docstring)."""

    def __init__(self, run_dir: Path, config: dict, cores: int):
        self.jobs = [j for j in pipeline.job_times(run_dir) if j["rule"] != "all"]
        if not self.jobs:
            raise SystemExit(f"{run_dir}: no .snakemake/metadata with start/end times")
        self.run_dir, self.cores = run_dir, cores
        recorded = {run_key(j)[0] for j in self.jobs if run_key(j)}
        # the run's datasets (a dataset it dropped has no job), so that the plan's total is the run's
        self.config = {**config, "datasets": {k: v for k, v in config["datasets"].items() if k in recorded}}
        plan = expand(self.config, check_data=False, slots=cores).job_index
        self.name = {id(j): rows_file(j) or j["target"] for j in self.jobs}
        maker = {out: self.name[id(j)] for j in self.jobs for out in j["outputs"]}
        self.after = {self.name[id(j)]: tuple(sorted({maker[f] for f in j["input"] if f in maker})) for j in self.jobs}
        self.spec = {}
        for j in self.jobs:
            key = run_key(j)
            if key is not None and key not in plan:
                raise SystemExit(f"{run_dir}: run job {j['target']} is not in the plan of the config on {cores} cores; "
                                 "give the config and --cores the run used")
            if key is not None:
                self.spec[self.name[id(j)]] = (key, plan[key].spec)

        self.size = {self.name[id(j)]: float(sum((run_dir / f).stat().st_size for f in j["input"]
                                                 if (run_dir / f).is_file())) for j in self.jobs}

    def task(self, job: dict, cores: int) -> Task:
        name = self.name[id(job)]
        rank = (priority(self.spec[name][1]) if name in self.spec
                else MAX_JOB_PRIORITY + 1 if job["rule"] in DATA_RULES else 0)
        return Task(name, job["end"] - job["start"], rank, cores if job["rule"] == ALL_CORES_RULE else 1,
                    self.after[name], self.size[name])

    def recorded(self, cores: int) -> list[Task]:
        return [self.task(j, cores) for j in self.jobs]

    def update_times(self, rows_file: str, dataset: str, chunk: str, cell_of: dict) -> dict[tuple, float]:
        """{cell: its recorded update time} in a run job's rows (``common.trajectory_update_time``)."""
        by_cell: dict[tuple, list] = {}
        with open(self.run_dir / rows_file) as fh:
            for r in csv.DictReader(fh):
                by_cell.setdefault(cell_of[(dataset, chunk, r["algorithm"], r["conversion"], r["eps_label"])],
                                   []).append(r)
        return {c: common.trajectory_update_time(rows)[0] for c, rows in by_cell.items()}

    def split(self, cores: int) -> list[Task]:
        """The tasks with the run jobs of the plan for ``cores`` cores (module docstring)."""
        cells = expand({**self.config, "job_split": 1e-9}, check_data=False).jobs      # one trajectory each
        cell_of = {m: c.key for c in cells for m in members(c.spec, c.dataset, c.chunk)}
        cost = {c.key: estimated_cost(c.spec) for c in cells}
        seconds, source, start = {}, {}, {}
        for j in self.jobs:
            name = self.name[id(j)]
            if name not in self.spec:
                continue
            (ds, _, _, _, chunk), spec = self.spec[name]
            mine = sorted({cell_of[m] for m in members(spec, ds, chunk)})
            share = self.update_times(name, ds, chunk, cell_of)
            if not sum(share.get(c, 0.0) for c in mine) > 0:
                share = cost
            total = sum(share.get(c, 0.0) for c in mine)
            wall = j["end"] - j["start"]
            start[name] = min(JOB_START_S, wall)
            for c in mine:
                seconds[c] = (wall - start[name]) * share.get(c, 0.0) / total
                source[c] = name
        tasks, parts_of = [], {}
        for job in expand({**self.config, "job_split": "auto"}, check_data=False, slots=cores).jobs:
            mine = {cell_of[m] for m in members(job.spec, job.dataset, job.chunk)}
            if not mine <= set(seconds):
                raise SystemExit(f"{self.run_dir}: the run has no record of {sorted(mine - set(seconds))}: an "
                                 "unfinished run?")
            sources = sorted({source[c] for c in mine})
            name = f"{job.stem}.csv"
            for s in sources:
                parts_of.setdefault(s, []).append(name)
            seconds_of_job = max(start[s] for s in sources) + sum(seconds[c] for c in mine)
            tasks.append(Task(name, seconds_of_job, priority(job.spec), 1,
                              tuple(sorted({a for s in sources for a in self.after[s]})),
                              max(self.size[n] for n in sources)))
        for j in self.jobs:
            if self.name[id(j)] not in self.spec:
                t = self.task(j, cores)
                after = tuple(sorted({p for a in t.after for p in parts_of.get(a, [a])}))
                tasks.append(Task(t.name, t.seconds, t.priority, t.threads, after, t.size))
        return tasks


def row(scenario: str, cores: int, tasks: list[Task]) -> dict:
    run = simulate(sorted(tasks, key=lambda t: t.name), cores)         # ties by name in every scenario
    runs = [t for t in tasks if RUN_ROWS.match(t.name)]
    longest = max(runs, key=lambda t: t.seconds)
    return {"scenario": scenario, "cores": cores, "jobs": len(tasks), "run_jobs": len(runs),
            "makespan_s": run.makespan, "lower_bound_s": run.lower_bound, "utilisation": run.utilisation,
            "longest_job_s": run.longest_job[1], "longest_job": run.longest_job[0],
            "longest_run_job_s": longest.seconds, "longest_run_job": longest.name,
            "critical_path_s": run.chain_seconds, "critical_path_jobs": len(run.chain),
            "critical_path": " -> ".join(run.chain)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--config", required=True, help="the run's config file")
    ap.add_argument("--cores", type=int, required=True, help="the cores the run had (--cores)")
    ap.add_argument("--at", type=int, nargs="+", default=[2, 16, 64, 256], help="core counts to model")
    ap.add_argument("--job-split", help="the run's --config job_split=X, if it had one")
    ap.add_argument("--tag", default="schedule", help="section/CSV name")
    ap.add_argument("--label", default="", help="what the run was (machine, load, commit), for the section")
    args = ap.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    if args.job_split is not None:
        config["job_split"] = yaml.safe_load(args.job_split)
    config = load_config(config)
    run = Run(args.run_dir, config, args.cores)
    rows = []
    for cores in args.at:
        rows.append(row("recorded", cores, run.recorded(cores)))
        rows.append(row("split", cores, run.split(cores)))
    common.write_csv(f"{args.tag}.csv", rows)
    wall = pipeline.busy_time(run.jobs)
    check = row("recorded", args.cores, run.recorded(args.cores))
    cols = ["scenario", "cores", "jobs", "run_jobs", "makespan_s", "lower_bound_s", "utilisation", "longest_job_s",
            "longest_run_job_s", "critical_path_s", "critical_path_jobs"]
    fmt = {c: ".0f" for c in cols if c.endswith("_s")} | {"utilisation": ".3f"}
    longest = {r["cores"]: r["longest_run_job"] for r in rows if r["scenario"] == "split"}
    label = f"; {args.label}" if args.label else ""
    split = f" with `job_split: {args.job_split}`" if args.job_split is not None else ""
    md = [f"A finished run of `{args.config}`{split} on {args.cores} cores (`{args.run_dir.name}`{label}): "
          f"{len(run.jobs)} jobs, {len(run.spec)} of them run jobs. Its jobs ran for {wall:.0f} s (the time in which "
          f"some job ran); the model of it on {args.cores} cores gives {check['makespan_s']:.0f} s "
          f"({check['makespan_s'] / wall - 1:+.1%}).", "",
          "Model, not measurement: every job takes its recorded wall time whatever runs beside it; *split* shares a "
          "recorded run job's time out to the trajectories it ran by their recorded update time and regroups them as "
          "`job_split: auto` does on that many cores (narrower batches are not charged their higher cost per run). "
          "`lower_bound_s` = max(critical path, summed job time x threads / cores); `utilisation` = summed job "
          "time x threads / (cores x makespan).", "",
          common.md_table(rows, cols, fmt), "",
          "Longest run job of the split plan: " + "; ".join(f"{c} cores `{n}`" for c, n in longest.items()) + ".",
          "", f"Critical path at {rows[-1]['cores']} cores (split): {rows[-1]['critical_path']}."]
    common.write_section(args.tag, "\n".join(md))


if __name__ == "__main__":
    main()
