"""SIGKILL the pipeline, resume it with the documented commands, get the uninterrupted tables.

The resume after a ``kill -9`` of Snakemake is the one docs/pipeline.md states ("Resuming after an
interruption"): ``snakemake --unlock`` with the run's options (the killed run left its lock), then the
same ``snakemake`` command again (``rerun-incomplete`` comes from profiles/default). No test uses
``--nolock`` or passes ``--rerun-incomplete`` itself.

``test_sigkill_and_resume_reproduces_tables``: the tiny config of ``tests/workflow/test_determinism.py`` is
started, and resumed, up to three times, and each time the whole process group (Snakemake and the job
processes it started) is SIGKILLed a seeded random delay after a ``run_job`` job has started; a last
resume completes it. Checks:

* the final tables equal the uninterrupted reference run's (timing columns and git revision aside,
  exactly as in test_determinism);
* every non-hidden file under ``results/`` is exactly one of the reference run's outputs (no
  temporary ``.*.tmp`` file took a final name, nothing extra, nothing missing), every CSV/parquet/
  JSON/npz parses, every per-job CSV has seeds x Ts rows and every curves file has its runs;
* a second ``snakemake -n`` has nothing to do.

Leftover hidden temporary files of killed writers (``.name.XXXX.csv.tmp``) are allowed - SIGKILL
gives the writer no chance to remove them - but they must never be read as results.

``test_resume_reruns_only_the_unfinished_jobs``: killed right after its first ``run_job`` finished,
the run cannot be resumed without ``--unlock`` (Snakemake's lock message), and the documented resume
reruns exactly the run jobs that had not finished (the finished ones keep their files: same inode,
same modification time) and ends with the reference tables.

Measured on the shared 2-core machine at load 2-5: 2 min 16 s for both tests, of which about 25 s
is the reference run (made once per session, shared with tests/workflow/test_determinism.py).
"""

from __future__ import annotations

import random
import re
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest

from tests.workflow.test_determinism import (N_ROWS_PER_JOB, PIPELINE_CONFIG, REPO, env, reference_run, snakemake_cmd,
                              table_differences, write_config)
from tests.workflow.workflow_helpers import check_outputs, kill_group, result_files, run, start, unlock

pytestmark = pytest.mark.slow

KILL_SEED = 20231
MAX_KILLS = 3


def _interrupted_attempt(workdir: Path, attempt: int, delay: float) -> str:
    """Start (attempt 0) or resume the pipeline; SIGKILL its group ``delay`` s after a run_job started."""
    out = workdir / f"attempt{attempt}.log"
    command = partial(snakemake_cmd, workdir)
    if attempt:
        unlock(command)
    proc = start(command, out)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if ", seeds " in out.read_text(errors="replace"):  # the run_job message: "... (bs16), seeds 0-1"
            break
        time.sleep(0.05)
    time.sleep(delay)
    if proc.poll() is not None:
        return f"attempt {attempt}: finished before the kill (rc={proc.returncode})"
    kill_group(proc)
    return f"attempt {attempt}: SIGKILL {delay:.2f}s after a run_job started"


def test_sigkill_and_resume_reproduces_tables(tmp_path_factory):
    reference = reference_run(tmp_path_factory)
    workdir = tmp_path_factory.mktemp("killed_run")
    write_config(workdir)
    rng = random.Random(KILL_SEED)
    events = []
    for attempt in range(MAX_KILLS):
        events.append(_interrupted_attempt(workdir, attempt, rng.uniform(0.2, 3.0)))
        if "finished" in events[-1]:
            break
    assert any("SIGKILL" in e for e in events), events
    unlock(partial(snakemake_cmd, workdir))
    final = run(snakemake_cmd(workdir))
    assert final.returncode == 0, "\n".join(events) + final.stdout[-3000:] + final.stderr[-3000:]

    assert table_differences(reference, workdir) == [], events
    leftovers = check_outputs(workdir, result_files(reference), N_ROWS_PER_JOB)
    dry = subprocess.run(snakemake_cmd(workdir, "-n"), cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=env())
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, dry.stderr[-2000:]
    print("\n".join(events), f"\nhidden temporary leftovers: {leftovers}")


def _run_jobs(log: str) -> dict[int, str]:
    """jobid -> algorithm of every run_job a Snakemake log announces ("Job 5: dp-gd on synthetic, ...")."""
    return {int(m[0]): m[1] for m in re.findall(r"^Job (\d+): (\S+) on synthetic, eps=", log, re.MULTILINE)}


def _job_files(workdir: Path, algorithm: str) -> list[Path]:
    stem = workdir / f"results/runs/synthetic/{algorithm}/bs16/eps~1/seeds~0-1"
    return [stem.with_name(stem.name + ".csv"), stem.with_name(stem.name + ".curves.parquet")]


def test_resume_reruns_only_the_unfinished_jobs(tmp_path_factory):
    reference = reference_run(tmp_path_factory)
    workdir = tmp_path_factory.mktemp("resumed_run")
    write_config(workdir)
    log = workdir / "killed.log"
    proc = start(partial(snakemake_cmd, workdir), log)
    finished_line = re.compile(r"Finished jobid: (\d+) \(Rule: run_job\)")
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not finished_line.search(log.read_text()):
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before its first run_job finished"
    kill_group(proc)
    killed = log.read_text()
    announced = _run_jobs(killed)
    finished = sorted(announced[int(j)] for j in finished_line.findall(killed))
    algorithms = sorted(PIPELINE_CONFIG["algorithms"])
    assert finished and len(finished) < len(algorithms), killed[-3000:]  # some finished, some not
    kept = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for a in finished for p in _job_files(workdir, a)}

    locked = run(snakemake_cmd(workdir))  # without --unlock: the dead run's lock stops it
    assert locked.returncode != 0 and "Directory cannot be locked" in locked.stdout + locked.stderr
    unlock(partial(snakemake_cmd, workdir))
    resumed = run(snakemake_cmd(workdir))
    out = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, out[-3000:]
    assert sorted(_run_jobs(out).values()) == sorted(set(algorithms) - set(finished)), out[-3000:]
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in kept} == kept  # finished jobs kept their files
    assert table_differences(reference, workdir) == []
