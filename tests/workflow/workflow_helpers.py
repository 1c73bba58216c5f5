"""Helpers of the tests that SIGKILL the pipeline and resume it (test_fault_tolerance, test_kill_each_stage).

A pipeline command is given as ``command(*extra)``, which returns the Snakemake command line with
``extra`` options added (e.g. ``functools.partial(test_determinism.snakemake_cmd, workdir)``); the
resume after a kill is the one docs/pipeline.md states: ``command("--unlock")``, then ``command()``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dpnewton import io
from dpnewton.pipeline.checkpoints import checkpoint_body
from dpnewton.pipeline.resources import read_benchmark
from tests.workflow.test_determinism import REPO, env

Command = Callable[..., list[str]]

#: the last bytes of a complete PNG file: its IEND chunk (length 0, type, CRC)
PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (Snakemake and the jobs it started); wait until all are gone."""
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


def run(cmd: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env())


def unlock(command: Command) -> None:
    """The first documented resume command: remove the lock the killed run left."""
    res = run(command("--unlock"), timeout=300)
    assert res.returncode == 0 and "Unlocked working directory" in res.stdout + res.stderr, res.stderr[-2000:]


def start(command: Command, log: Path) -> subprocess.Popen:
    """The pipeline's own command (the second documented resume command), in its own process group."""
    with open(log, "w") as fh:
        return subprocess.Popen(command(), cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, env=env(),
                                start_new_session=True)


def ran(log: str) -> dict[str, int]:
    """Snakemake's job stats: rule -> jobs planned (the table between "Job stats:" and its total)."""
    if "Job stats:" not in log:
        return {}
    table = log.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def check_complete(path: Path) -> None:
    """Raise unless ``path`` is a complete result file: its reader's check (:mod:`dpnewton.io`, a
    checkpoint's SHA-256), a PNG that ends with its IEND chunk, a PDF with its end marker, an HTML page
    with its closing tag, Markdown with its final line break."""
    if path.suffix == ".csv":
        io.check_csv(path)
    elif path.suffix == ".parquet":
        io.read_parquet(path)
    elif path.suffix == ".json":
        io.read_json(path)
    elif path.suffix == ".npz":
        io.check_npz(path)
        with np.load(path) as z:
            assert all(np.isfinite(z[k]).all() for k in z.files if z[k].dtype.kind == "f"), path
    elif path.suffix == ".tsv":
        read_benchmark(path)
    elif path.suffix == ".png":
        raw = path.read_bytes()
        assert raw.startswith(b"\x89PNG\r\n\x1a\n") and raw.endswith(PNG_END), f"{path} is not a complete PNG"
    elif path.suffix == ".pdf":
        assert path.read_bytes().rstrip().endswith(b"%%EOF"), f"{path} is not a complete PDF"
    elif path.suffix == ".pkl":  # a job's checkpointed unit (dpnewton.pipeline.jobs.save_checkpoint)
        checkpoint_body(pd.read_pickle(path))
    elif path.suffix == ".html":
        assert path.read_text().rstrip().endswith("</html>"), f"{path} is not a complete HTML page"
    elif path.suffix == ".md":
        assert path.read_text().endswith("\n"), f"{path} does not end with a line break"
    else:
        raise AssertionError(f"{path}: no completeness check for a {path.suffix} file")


def result_files(workdir: Path) -> list[str]:
    """The files under results/ that carry a final name (not a hidden temporary file), sorted."""
    return sorted(str(p.relative_to(workdir)) for p in (workdir / "results").rglob("*")
                  if p.is_file() and not p.name.startswith("."))


def hidden_leftovers(workdir: Path) -> list[str]:
    """Hidden files under results/; a killed writer's temporary file (``.name.XXXX.csv.tmp``) is one."""
    return sorted(str(p.relative_to(workdir)) for p in (workdir / "results").rglob(".*") if p.is_file())


def check_outputs(workdir: Path, expected: list[str], rows_per_job: int) -> list[str]:
    """Every file under results/ with a final name is one of ``expected`` and all of them are there
    and complete (:func:`check_complete`); hidden files are only temporary ``.tmp`` files of killed
    writers; every run job's rows file has ``rows_per_job`` runs of two seeds, and its curves file
    has its runs. Returns the hidden leftovers."""
    found = result_files(workdir)
    assert found == sorted(expected), {"unexpected": sorted(set(found) - set(expected)),
                                       "missing": sorted(set(expected) - set(found))}
    leftovers = hidden_leftovers(workdir)
    assert all(Path(p).name.endswith(".tmp") for p in leftovers), leftovers
    for name in expected:
        p = workdir / name
        check_complete(p)
        if "runs" in p.parts and p.suffix == ".csv":
            frame = io.read_csv(p)
            assert len(frame) == rows_per_job, p
            assert frame["excess_loss"].notna().all() and frame["seed"].nunique() == 2, p
        elif p.name.endswith(".curves.parquet"):
            assert io.read_parquet(p).groupby(["seed", "iterations"]).ngroups == rows_per_job, p
    return leftovers
