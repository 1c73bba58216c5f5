"""SIGKILL the pipeline while a job of each stage runs; the documented resume gives the uninterrupted tables.

One parametrized test per stage: prepare (rule ``prepare_data``), optimum, track (``run_track``),
timing (``time_updates``), aggregate and figures (``figure``). Each starts the tiny config below in a
fresh directory, watches Snakemake's output for the stage's start line (``Job N: <the rule's
message>``, or ``rule <name>:`` / ``localrule <name>:`` for a rule without one), and SIGKILLs the
whole process group (Snakemake and its jobs):

* track, timing, aggregate: once the job's own log shows it is past its first unit of work (the first
  repetition checkpointed; the first timing round; the run rows loaded, before any table is written);
* prepare, optimum, figures: 0.3 s after the start line (prepare and optimum do a few milliseconds of
  work after their imports and log nothing before their outputs are written; a figure's log has no
  progress line), so the kill falls in their start-up or computation.

Checks, per stage:

* the kill came mid-job: the job had started and not all of its outputs existed;
* right after the kill, every file under ``results/`` with a final name is complete (its verified
  reader, ``tests/workflow_helpers.check_complete``): no partial file took a final name;
* the documented resume (docs/pipeline.md, "Resuming after an interruption": ``snakemake --unlock``
  with the run's options, then the same command) succeeds and runs exactly the jobs that had not
  finished: per rule, the jobs planned minus those Snakemake reported finished before the kill; a
  killed track job reuses its checkpointed repetition (``[from checkpoint]`` in its log);
* the final tables equal the uninterrupted reference run's (``test_determinism.table_differences``:
  timing and host columns aside), and the files under ``results/`` are exactly the reference's, all
  complete; hidden ``.tmp`` files of killed writers may remain.

The reference run (every target) is made once per module. The figure jobs are the slowest stage, so
the kills before it run the pipeline to its tables only (targets ``aggregate``, ``tracks_table``,
``resources``) and compare with the reference's files outside ``results/figures/``; the figure-stage
kill runs every target. Measured on the shared 2-core machine: 3 min 8 s at load 2-3 (5 min 48 s at
load 4-5), of which 44 s is the reference run.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import yaml

from tests.workflow.test_determinism import PIPELINE_CONFIG, REPO, table_differences
from tests.workflow.workflow_helpers import (check_complete, check_outputs, kill_group, ran, result_files, run, start,
                                             unlock)

pytestmark = pytest.mark.slow

# the determinism test's config with the two algorithms of Table 1 (2 seeds x 2 T each), a fixed-rule track
# of 3 repetitions long enough to be killed between them, three timing rounds
CONFIG = {**PIPELINE_CONFIG,
          "algorithms": {"hess-clip": {"grid": "g"}, "dp-gd": {"grid": "g"}},
          "timing": {"repeats": 3, "seconds_per_run": 0.05},
          "tracks": {"repetitions": 3, "fixed": {"methods": {"gd": {"variant": "dp-gd", "iterations": 3000}}}}}
ROWS_PER_JOB = 2 * 2  # seeds x Ts
TABLE_TARGETS = ("aggregate", "tracks_table", "resources")
TRACK_LOG = "logs/tracks/fixed-rule/synthetic/gd/eps~1.log"


@dataclass(frozen=True)
class Stage:
    rule: str
    job_log: str | None = None     # the job's log, and the line in it after which the job is killed
    line: str | None = None
    targets: tuple[str, ...] = TABLE_TARGETS


STAGES = {
    "prepare": Stage("prepare_data"),
    "optimum": Stage("optimum"),
    "track": Stage("run_track", TRACK_LOG, "progress 1/3 repetitions"),
    "timing": Stage("time_updates", "logs/timing/synthetic.log", "round 1/3 done"),
    "aggregate": Stage("aggregate", "logs/aggregate.log", "loaded 8 run rows"),
    "figures": Stage("figure", targets=()),
}
#: seconds between a start line and the kill, for a stage without a progress line
START_DELAY = 0.3


def is_report_product(rel: str) -> bool:
    """A file the report stage writes (figures, the results browser), absent when only tables are asked for."""
    return rel.startswith("results/figures/") or rel == "results/browser.html"


def command(workdir: Path, targets: tuple[str, ...], *extra: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *targets, "--cores", "2", *extra, "--directory", str(workdir),
            "--configfile", str(workdir / "cfg.yaml")]


def fresh(workdir: Path) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cfg.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    return workdir


def start_line(rule: str) -> re.Pattern:
    """Snakemake's line for a starting job of ``rule`` (group 1: its job id): ``Job N: <message>`` when
    the rule has a ``message:`` (read from workflow/rules/, its wildcards matching anything), else the
    ``rule <name>:`` / ``localrule <name>:`` block up to its ``jobid: N``."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    block = re.search(rf"^\s*rule {rule}:\n(.*?)(?=^\s*rule |\Z)", text, re.MULTILINE | re.DOTALL)
    assert block, f"no rule {rule} in workflow/rules/"
    message = re.search(r'^\s+message:\n\s+"([^"]*)"', block.group(1), re.MULTILINE)
    if message:
        parts = re.split(r"\{[^}]*\}", message.group(1))
        return re.compile(r"^Job (\d+): " + ".+".join(map(re.escape, parts)) + "$", re.MULTILINE)
    return re.compile(rf"^(?:local)?rule {rule}:\n(?:\s+.*\n)*?\s+jobid: (\d+)$", re.MULTILINE)


def job_outputs(log: str, started: re.Match) -> list[str]:
    """The outputs of the job whose start line is ``started`` (in a fresh run, all missing)."""
    after = log[started.end():]
    m = re.search(r"^(?:Reason: Missing output files|\s+output): ([^;\n]+)", after, re.MULTILINE)
    assert m, after[:2000]
    return m.group(1).split(", ")


def wait_for(proc, test, what: str, timeout: float = 300, poll: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        found = test()
        if found:
            return found
        assert proc.poll() is None, f"the run ended (rc={proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(poll)


def kill_during(stage: Stage, workdir: Path, log: Path) -> tuple[str, int, list[str]]:
    """Start the pipeline, SIGKILL its process group while a job of ``stage`` runs; returns the
    Snakemake output up to the kill, the job's id and its outputs."""
    proc = start(partial(command, workdir, stage.targets), log)
    pattern = start_line(stage.rule)
    started = wait_for(proc, lambda: pattern.search(log.read_text(errors="replace")), f"a {stage.rule} job")
    if stage.line:
        job_log = workdir / stage.job_log
        wait_for(proc, lambda: job_log.exists() and stage.line in job_log.read_text(), f"{stage.line!r}")
    else:
        time.sleep(START_DELAY)
    kill_group(proc)
    killed = log.read_text(errors="replace")
    jobid = int(started.group(1))
    assert f"Finished jobid: {jobid} " not in killed, f"the {stage.rule} job finished before the kill"
    return killed, jobid, job_outputs(killed, started)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run of every target."""
    workdir = fresh(tmp_path_factory.mktemp("uninterrupted"))
    res = run(command(workdir, ()))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return workdir


@pytest.mark.parametrize("name", list(STAGES))
def test_sigkill_during_a_stage_and_resume(name, reference, tmp_path_factory):
    stage = STAGES[name]
    workdir = fresh(tmp_path_factory.mktemp(f"killed_during_{name}"))
    killed, jobid, outputs = kill_during(stage, workdir, workdir / "killed.log")

    assert not all((workdir / o).exists() for o in outputs), f"job {jobid} had written all of {outputs}"
    for rel in result_files(workdir):  # no partial file under a final name
        check_complete(workdir / rel)
    if name == "track":
        assert list((workdir / "results/tracks/fixed-rule/synthetic/gd/eps~1.csv.partial").glob("*.pkl"))

    planned = ran(killed)
    finished = re.findall(r"^Finished jobid: \d+ \(Rule: (\w+)\)", killed, re.MULTILINE)
    cmd = partial(command, workdir, stage.targets)
    unlock(cmd)
    resumed = run(cmd())
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out[-3000:]
    left = {rule: n - finished.count(rule) for rule, n in planned.items() if n > finished.count(rule)}
    assert ran(out) == left and stage.rule in left, out[-3000:]
    if name == "track":  # the repetition checkpointed before the kill is not run again
        assert re.search(r"progress 1/3 repetitions: .* \[from checkpoint\]$", (workdir / TRACK_LOG).read_text(),
                         re.MULTILINE)

    assert table_differences(reference, workdir) == []
    expected = [f for f in result_files(reference) if stage.targets == () or not is_report_product(f)]
    leftovers = check_outputs(workdir, expected, ROWS_PER_JOB)
    print(f"{name}: killed job {jobid} ({stage.rule}); resumed {ran(out)}; hidden leftovers {leftovers}")
