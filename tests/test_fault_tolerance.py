"""SIGKILL the pipeline at seeded random points, rerun, get the uninterrupted tables.

The tiny config of ``tests/test_determinism.py`` is started up to three times and each time the
whole process group (Snakemake and the job processes it started) is SIGKILLed a seeded random delay
after a ``run_job`` job has started; the run is then completed with ``snakemake --unlock`` and
``snakemake --rerun-incomplete``. Checks:

* the final tables equal the uninterrupted reference run's (timing columns and git revision aside,
  exactly as in test_determinism);
* every non-hidden file under ``results/`` is exactly one of the reference run's outputs (no
  temporary ``.*.tmp`` file took a final name, nothing extra, nothing missing), every CSV/parquet/
  JSON/npz parses, every per-job CSV has seeds x Ts rows and every curves file has its runs;
* a second ``snakemake -n`` has nothing to do.

Leftover hidden temporary files of killed writers (``.name.XXXX.csv.tmp``) are allowed - SIGKILL
gives the writer no chance to remove them - but they must never be read as results.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from test_determinism import (N_ROWS_PER_JOB, REPO, env, reference_run, snakemake_cmd, table_differences,
                              write_config)

pytestmark = pytest.mark.slow

KILL_SEED = 20231
MAX_KILLS = 3


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)
    for _ in range(100):  # every member of the group is gone (no orphaned job keeps writing)
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"process group {proc.pid} survived SIGKILL")


def _interrupted_attempt(workdir: Path, attempt: int, delay: float) -> str:
    """Start the pipeline; SIGKILL its group ``delay`` s after its first run_job started."""
    out = workdir / f"attempt{attempt}.log"
    with open(out, "w") as fh:
        proc = subprocess.Popen(snakemake_cmd(workdir, "--nolock"), cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                env=env(), start_new_session=True)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if ", seeds " in out.read_text(errors="replace"):  # the run_job message: "... (bs16), seeds 0-1"
            break
        time.sleep(0.05)
    time.sleep(delay)
    if proc.poll() is not None:
        return f"attempt {attempt}: finished before the kill (rc={proc.returncode})"
    _kill_group(proc)
    return f"attempt {attempt}: SIGKILL {delay:.2f}s after a run_job started"


def _check_outputs(workdir: Path, reference: Path) -> list[str]:
    def listing(wd):
        return sorted(str(p.relative_to(wd)) for p in (wd / "results").rglob("*")
                      if p.is_file() and not p.name.startswith("."))

    assert listing(workdir) == listing(reference)
    leftovers = sorted(str(p.relative_to(workdir)) for p in (workdir / "results").rglob(".*") if p.is_file())
    assert all(Path(p).name.endswith(".tmp") for p in leftovers), leftovers
    for p in (workdir / "results").rglob("*"):
        if not p.is_file() or p.name.startswith("."):
            continue
        if p.suffix == ".csv":
            frame = pd.read_csv(p)
            if "runs" in p.parts:
                assert len(frame) == N_ROWS_PER_JOB, p
                assert frame["excess_loss"].notna().all() and frame["seed"].nunique() == 2, p
        elif p.suffix == ".parquet":
            frame = pd.read_parquet(p)
            if p.name.endswith(".curves.parquet"):
                assert frame.groupby(["seed", "iterations"]).ngroups == N_ROWS_PER_JOB, p
        elif p.suffix == ".json":
            json.loads(p.read_text())
        elif p.suffix == ".npz":
            with np.load(p) as z:
                assert all(np.isfinite(z[k]).all() for k in z.files if z[k].dtype.kind == "f"), p
    return leftovers


def test_sigkill_and_rerun_incomplete_reproduces_tables(tmp_path_factory):
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
    unlock = subprocess.run(snakemake_cmd(workdir, "--unlock"), cwd=REPO, capture_output=True, text=True,
                            timeout=300, env=env())
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    final = subprocess.run(snakemake_cmd(workdir, "--rerun-incomplete"), cwd=REPO, capture_output=True,
                           text=True, timeout=600, env=env())
    assert final.returncode == 0, "\n".join(events) + final.stdout[-3000:] + final.stderr[-3000:]

    assert table_differences(reference, workdir) == [], events
    leftovers = _check_outputs(workdir, reference)
    dry = subprocess.run(snakemake_cmd(workdir, "-n"), cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=env())
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr, dry.stderr[-2000:]
    print("\n".join(events), f"\nhidden temporary leftovers: {leftovers}")
