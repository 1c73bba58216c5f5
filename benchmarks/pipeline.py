"""End-to-end wall time of the default pipeline config: ``snakemake --cores 2``, and its overhead.

The pipeline writes ``results/`` and ``resources/`` relative to its working directory, so it is run
in a scratch copy (Snakefile, config/, workflow/, envs/) -- never in the repository -- with the data
directory reachable at the config's relative path (``../shared/datasets`` -> a symlink). The
package itself is the installed (editable) one.

Recorded:
* wall time of the whole ``snakemake`` call (incl. DAG building, onstart, all jobs);
* per-job wall times from Snakemake's own metadata (``.snakemake/metadata``: starttime/endtime of
  every output file, one entry per job after de-duplication by job hash);
* in-job update time: the sum of ``runtime_s`` over every trajectory of every run-job CSV, a trajectory
  that releases several models counted once (the optimizer update steps the results report; loss
  evaluation, process start, imports and I/O excluded);
* the load average (``/proc/loadavg``), sampled every 5 s during the run.

Overhead shares reported: ``1 - sum(job wall) / (cores * wall)`` (scheduler / idle capacity, incl.
the critical path), and ``1 - update time / sum(run-job wall)`` (per-job overhead: interpreter
start, imports, data loading, untimed loss evaluation, writing).

    python benchmarks/pipeline.py [--config config/config.yaml] [--cores 2] [--timeout 1500] [--keep]

``--analyze RUN_DIR`` instead reads a finished run (its ``.snakemake/metadata``, ``logs/runs`` and
``results/runs``; e.g. a claims run) and splits every run job's wall time into phases from the
job's own log timestamps: *start* (Snakemake spawn, interpreter start, imports: metadata start ->
job t0), *load* (data, optimum, provenance: t0 -> first log line), *compute* (the
``run_algorithm`` calls incl. the per-iterate loss evaluation, summed from the per-seed progress
lines), *assemble/write* (records, CSV/parquet) and *exit*. Workflow overhead = everything but
compute, plus the other rules' jobs (the track and timing jobs excepted: they measure) and the
capacity the scheduler left idle (cores x wall - sum of job wall). A run that was
stopped and resumed (``--rerun-incomplete``) is handled: wall is the time in which some job ran
(gaps left out), and the units a job reused from its checkpoints count with the time their first
attempt took (logged as ``[from checkpoint, computed in Xs]``). Writes section
``pipeline_claims`` (``--tag`` changes the name).
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import common


def sample_load(stop: threading.Event, out: list):
    while not stop.is_set():
        out.append(float(Path("/proc/loadavg").read_text().split()[0]))
        stop.wait(5.0)


def job_times(work: Path) -> list[dict]:
    """One record per job from Snakemake's metadata (rule, start, end, one output ``target``, every output
    ``outputs`` and the ``input`` files); de-duplicated by job hash."""
    jobs = {}
    meta = work / ".snakemake" / "metadata"
    if not meta.is_dir():
        return []
    for f in meta.iterdir():
        try:
            m = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if m.get("starttime") is None or m.get("endtime") is None:
            continue
        try:
            target = base64.urlsafe_b64decode(f.name.replace("@", "/")).decode(errors="replace")
        except Exception:
            target = f.name
        key = m.get("job_hash") or (m.get("rule"), m.get("starttime"))
        job = jobs.setdefault(key, {"rule": m.get("rule"), "start": float(m["starttime"]),
                                    "end": float(m["endtime"]), "target": target, "outputs": [],
                                    "input": list(m.get("input") or [])})
        job["outputs"].append(target)
    return list(jobs.values())


def update_time(work: Path) -> tuple[float, int]:
    total, runs = 0.0, 0
    for f in (work / "results" / "runs").rglob("*.csv"):
        with open(f) as fh:
            t, k = common.trajectory_update_time(csv.DictReader(fh))
        total, runs = total + t, runs + k
    return total, runs


LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO (.*)$")
PROGRESS = re.compile(r"progress \d+/\d+ seeds done \(\d+ runs, ([0-9.]+)s\)")
DONE = re.compile(r"job done: \d+ rows in ([0-9.]+)s")
#: rules other than run_job whose jobs measure (the tuning tracks' runs, the timing stage's lone runs):
#: their time is work of the protocol, not workflow overhead
MEASURING_RULES = ("run_track", "time_updates")
RESUMED = re.compile(r"\[from checkpoint(?:, computed in ([0-9.]+)s)?\]")


def busy_time(jobs: list[dict]) -> float:
    """Seconds in which at least one job ran: the union of the jobs' [start, end] intervals.

    Equals last end - first start for an uninterrupted run; for a run resumed after a stop (a session
    end, a time limit) it leaves out the gaps in which nothing ran."""
    busy, reach = 0.0, float("-inf")
    for j in sorted(jobs, key=lambda j: j["start"]):
        if j["end"] > reach:
            busy += j["end"] - max(j["start"], reach)
            reach = j["end"]
    return busy


def job_phases(log: Path, start: float, end: float) -> dict | None:
    """Phases (seconds) of one run job from its log (see the module docstring); None if incomplete."""
    first = done_ts = since_t0 = None
    compute = earlier = 0.0
    resumed = unknown = 0
    for line in log.read_text(errors="replace").splitlines():
        m = LOG_TS.match(line)
        if not m:
            continue
        ts = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        first = ts if first is None else first
        if (p := PROGRESS.search(m.group(2))):
            if (r := RESUMED.search(m.group(2))):  # its seconds are an earlier attempt's, not this one's
                resumed += 1
                if r.group(1) is None:
                    unknown += 1
                else:
                    earlier += float(r.group(1))
            else:
                compute += float(p.group(1))
        if (d := DONE.search(m.group(2))):
            done_ts, since_t0 = ts, float(d.group(1))
    if first is None or done_ts is None:
        return None
    t0 = done_ts - since_t0
    return {"wall": end - start, "start": max(t0 - start, 0.0), "load": max(first - t0, 0.0), "compute": compute,
            "assemble_write": max(done_ts - first - compute, 0.0), "exit": max(end - done_ts, 0.0),
            "resumed_units": resumed, "resumed_untimed_units": unknown, "compute_earlier_attempts": earlier}


def analyze(run_dir: Path, config: str, cores: int, tag: str) -> None:
    """Per-phase time split of a finished run (``--analyze``)."""
    jobs = job_times(run_dir)
    if not jobs:
        raise SystemExit(f"{run_dir}: no .snakemake/metadata with start/end times")
    span = max(j["end"] for j in jobs) - min(j["start"] for j in jobs)
    wall = busy_time(jobs)
    per_ds: dict[str, dict] = {}
    per_alg: dict[str, dict] = {}
    total = {"dataset": "all", "jobs": 0, "missing_logs": 0}
    untimed: list[dict] = []  # jobs resumed from checkpoints that do not record their first attempt's time
    keys = ("wall", "start", "load", "compute", "assemble_write", "exit", "update", "compute_earlier_attempts")
    for j in jobs:
        if j["rule"] != "run_job" or "results/runs/" not in j["target"]:
            continue
        rel = j["target"][j["target"].index("results/runs/"):]
        rel = rel.replace(".curves.parquet", ".csv")  # a job is listed under either of its two outputs
        if not rel.endswith(".csv"):
            continue
        ds, alg = rel.split("/")[2:4]
        ph = job_phases(run_dir / rel.replace("results/runs/", "logs/runs/").replace(".csv", ".log"),
                        j["start"], j["end"])
        row = per_ds.setdefault(ds, {"dataset": ds, "jobs": 0, "missing_logs": 0})
        if ph is None:
            row["missing_logs"] += 1
            total["missing_logs"] += 1
            continue
        with open(run_dir / rel) as fh:
            ph["update"] = common.trajectory_update_time(csv.DictReader(fh))[0]
        if ph["resumed_untimed_units"]:
            untimed.append({"job": rel, "resumed_units": ph["resumed_units"], "update_s": ph["update"]})
            continue
        # a resumed unit's first attempt counts as compute (and wall) of its job; that attempt's own
        # start and load time are not recorded, so the overhead of resumed jobs is slightly low
        ph["wall"] += ph["compute_earlier_attempts"]
        ph["compute"] += ph["compute_earlier_attempts"]
        alg_row = per_alg.setdefault(alg, {"algorithm": alg, "jobs": 0})
        for tgt in (row, total, alg_row):
            tgt["jobs"] += 1
            for k in keys:
                tgt[k + "_s"] = tgt.get(k + "_s", 0.0) + ph[k]
            for k in ("resumed_units", "resumed_untimed_units"):
                tgt[k] = tgt.get(k, 0) + ph[k]
    if not total["jobs"]:
        raise SystemExit(f"{run_dir}: no run job has finished with a complete log yet ({len(untimed)} resumed from "
                         f"checkpoints without recorded times, {total['missing_logs']} without a complete log)")
    work = sum(j["end"] - j["start"] for j in jobs if j["rule"] in MEASURING_RULES)
    other = sum(j["end"] - j["start"] for j in jobs if j["rule"] not in ("run_job", *MEASURING_RULES))
    job_sum = sum(j["end"] - j["start"] for j in jobs)
    rows = [per_ds[k] for k in sorted(per_ds)] + [total]
    for r in rows:
        w = r.get("wall_s", 0.0)
        r["in_job_overhead_share"] = 1 - r.get("compute_s", 0.0) / w if w else float("nan")
        r["outside_update_share"] = 1 - r.get("update_s", 0.0) / w if w else float("nan")
    idle = max(cores * wall - job_sum, 0.0)
    # attempts cut off by a stop are in no metadata: their finished units (compute_earlier_attempts) are
    # counted as extra capacity, i.e. as if they had run on one core outside the recorded window
    earlier = total.get("compute_earlier_attempts_s", 0.0)
    capacity = cores * wall + earlier
    total["measuring_rules_s"] = work
    total["other_rules_s"] = other
    total["idle_capacity_s"] = idle
    total["workflow_overhead_share"] = ((total["wall_s"] - total["compute_s"]) + other + idle) / capacity
    total["run_wall_s"] = wall
    total["run_span_s"] = span
    common.write_csv(f"{tag}.csv", rows)
    cols = ["dataset", "jobs", "wall_s", "start_s", "load_s", "compute_s", "update_s", "assemble_write_s", "exit_s",
            "in_job_overhead_share", "outside_update_share"]
    fmt = {c: ".1f" for c in cols if c.endswith("_s")} | {"in_job_overhead_share": ".3f",
                                                            "outside_update_share": ".3f"}
    stops = (f" The run was stopped and resumed: {span / 60:.1f} min passed from the first job start to the "
             f"last job end, and no job ran in {(span - wall) / 60:.1f} min of them. Attempts that were cut off are "
             "not in Snakemake's metadata; the units they finished were reused from checkpoints "
             f"({total.get('resumed_units', 0)} unit{'' if total.get('resumed_units', 0) == 1 else 's'}; "
             "the attempts that computed them took "
             f"{total.get('compute_earlier_attempts_s', 0.0):.0f} s, counted below as compute and wall of their "
             "jobs)." if span > 1.01 * wall else "")
    if untimed:
        stops += (f" {len(untimed)} jobs reused checkpoints written before checkpoints recorded their time, so "
                  "their compute is unknown: they are left out of the phase sums (their update time: "
                  f"{sum(u['update_s'] for u in untimed):.0f} s; " + ", ".join(f"`{u['job']}`" for u in untimed)
                  + ").")
    md = [f"Finished run in `{run_dir.name}` (config `{config}`, `--cores {cores}`): {total['jobs']} run jobs "
          f"({total['missing_logs']} without a complete log), wall {wall / 60:.1f} min in which at least one job "
          f"ran.{stops}", "",
          "Run-job phases summed per dataset (seconds of job wall time):", "",
          common.md_table(rows, cols, fmt), "",
          "Run-job wall time per algorithm (summed over its epsilons and conversions), largest first:", "",
          common.md_table(sorted(per_alg.values(), key=lambda r: -r["wall_s"]),
                          ["algorithm", "jobs", "wall_s", "compute_s", "update_s"], fmt), "",
          f"Whole run: {cores} cores x {wall:.0f} s"
          + (f" + {earlier:.0f} s of cut-off attempts" if earlier else "")
          + f" = {capacity:.0f} core-s of capacity; run jobs "
          f"{total['wall_s']:.0f} s, of which compute {total['compute_s']:.0f} s; the tracks and the timing stage "
          f"({', '.join(MEASURING_RULES)}: measurements, not overhead) {work:.0f} s; other rules (data, optimum, "
          f"aggregate, figures, claims) {other:.0f} s; capacity left idle by the scheduler {idle:.0f} s. "
          f"**Workflow overhead share = (run-job wall - compute + other rules + idle) / capacity = "
          f"{total['workflow_overhead_share']:.3f}.**", "",
          "Phases: *start* = Snakemake spawn + interpreter start + imports (metadata start -> job t0); *load* = "
          "data, optimum and provenance; *compute* = the `run_algorithm` calls, incl. the per-iterate loss "
          "evaluation the curves and best-T selection need (*update* = the timed update steps only, "
          "`runtime_s`); *assemble_write* = result records, CSV and parquet; *exit* = after the last log "
          "line. `in_job_overhead_share` = 1 - compute / wall; `outside_update_share` = 1 - update / wall "
          "(the stricter reading that also counts the loss evaluation as overhead)."]
    common.write_section(tag, "\n".join(md))
    print(total)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1500.0, help="give up after this many seconds")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--analyze", type=Path, help="analyze this finished run directory instead of running")
    ap.add_argument("--tag", default="pipeline_claims", help="section/CSV name for --analyze")
    args = ap.parse_args()
    if args.analyze:
        analyze(args.analyze, args.config, args.cores, args.tag)
        return
    repo = common.REPO_DIR
    if not (repo / "Snakefile").exists() or not (repo / "workflow").is_dir():
        common.write_section("pipeline", "Not timed: no Snakefile/workflow in the repository yet.")
        return
    scratch = Path(tempfile.mkdtemp(prefix="dpnewton_pipeline_"))
    work = scratch / "repo"
    work.mkdir()
    shutil.copy2(repo / "Snakefile", work / "Snakefile")
    for sub in ("config", "workflow", "envs"):
        if (repo / sub).is_dir():
            shutil.copytree(repo / sub, work / sub)
    (scratch / "shared").mkdir()
    (scratch / "shared" / "datasets").symlink_to(common.DATA_DIR)
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [str(snakemake), "--cores", str(args.cores), "--configfile", args.config]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    loads, stop = [], threading.Event()
    th = threading.Thread(target=sample_load, args=(stop, loads), daemon=True)
    started = common.environment()["date_utc"]
    th.start()
    t0 = time.perf_counter()
    timed_out = False
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=args.timeout)
        rc, so, se = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        timed_out, rc = True, "timeout"
        so = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        se = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    (common.RESULTS_DIR / "pipeline_snakemake.log").write_text(so[-20000:] + "\n--- stderr ---\n" + se[-30000:])
    jobs = job_times(work)
    run_jobs = [j for j in jobs if j["rule"] == "run_job"]
    job_sum = sum(j["end"] - j["start"] for j in jobs)
    run_sum = sum(j["end"] - j["start"] for j in run_jobs)
    upd, ntraj = update_time(work)
    by_rule = {}
    for j in jobs:
        r = by_rule.setdefault(j["rule"], {"rule": j["rule"], "jobs": 0, "sum_wall_s": 0.0, "max_wall_s": 0.0})
        r["jobs"] += 1
        r["sum_wall_s"] += j["end"] - j["start"]
        r["max_wall_s"] = max(r["max_wall_s"], j["end"] - j["start"])
    row = {"config": args.config, "cores": args.cores, "returncode": rc, "timed_out": timed_out,
           "started": started, "wall_s": wall,
           "jobs_finished": se.count("Finished job") + so.count("Finished job"), "jobs_with_metadata": len(jobs),
           "sum_job_wall_s": job_sum, "sum_run_job_wall_s": run_sum, "run_jobs": len(run_jobs),
           "update_time_s": upd, "trajectories": ntraj,
           "idle_capacity_share": 1 - job_sum / (args.cores * wall) if wall > 0 else float("nan"),
           "run_job_overhead_share": 1 - upd / run_sum if run_sum > 0 else float("nan"),
           "load_min": min(loads) if loads else float("nan"),
           "load_median": sorted(loads)[len(loads) // 2] if loads else float("nan"),
           "load_max": max(loads) if loads else float("nan"),
           "scratch": str(scratch) if args.keep else "(deleted)"}
    common.write_csv("pipeline.csv", [row])
    common.write_csv("pipeline_rules.csv", sorted(by_rule.values(), key=lambda r: -r["sum_wall_s"]))
    md = [f"`snakemake --cores {args.cores} --configfile {args.config}` in a scratch copy of Snakefile/config/"
          "workflow/envs (data symlinked), BLAS 1 thread per job, started " + started + ". The config is the "
          "working tree's `config/config.yaml` at that moment.", "",
          common.md_table([row], ["returncode", "wall_s", "jobs_finished", "sum_job_wall_s", "sum_run_job_wall_s",
                                  "update_time_s", "idle_capacity_share", "run_job_overhead_share", "load_min",
                                  "load_median", "load_max"],
                          {"wall_s": ".1f", "sum_job_wall_s": ".1f", "sum_run_job_wall_s": ".1f",
                           "update_time_s": ".1f", "idle_capacity_share": ".2f", "run_job_overhead_share": ".2f",
                           "load_min": ".1f", "load_median": ".1f", "load_max": ".1f"}), "",
          "Per rule (Snakemake metadata start/end times):", "",
          common.md_table(sorted(by_rule.values(), key=lambda r: -r["sum_wall_s"]),
                          ["rule", "jobs", "sum_wall_s", "max_wall_s"], {"sum_wall_s": ".1f", "max_wall_s": ".1f"}),
          "",
          "`idle_capacity_share` = 1 - sum(job wall) / (cores x wall): capacity not spent inside jobs (DAG build, "
          "scheduling, serial stretches such as data preparation -> optimum -> runs -> aggregate -> figures). "
          "`run_job_overhead_share` = 1 - sum(runtime_s of every trajectory) / sum(run-job wall): what a run job "
          "spends outside the timed update steps (interpreter start and imports, data loading, the untimed loss "
          "evaluation, writing CSV/parquet). The load average was sampled every 5 s: "
          + ("above the core count, other jobs shared the cores, so every time here is an upper bound for an "
             "idle machine." if row["load_median"] > args.cores + 0.5 else
             "at most about the core count, so the machine ran little besides this workflow."),
          "", "Log tail: `results/pipeline_snakemake.log`."]
    common.write_section("pipeline", "\n".join(md))
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    print(row)


if __name__ == "__main__":
    main()
