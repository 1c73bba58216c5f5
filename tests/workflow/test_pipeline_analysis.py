"""benchmarks/pipeline.py --analyze: the phases of one run job read from its log, for a job that
resumed some units from checkpoints (their time belongs to the cut-off attempt, counted once)."""

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def job_phases(log: Path, start: float, end: float) -> dict:
    """The script's job_phases, run where the script runs (its folder: it imports benchmarks/common.py)."""
    code = f"import json, pipeline; print(json.dumps(pipeline.job_phases(__import__('pathlib').Path({str(log)!r}), "
    code += f"{start!r}, {end!r})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=BENCHMARKS, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(1_800_000_000 + seconds).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def test_resumed_units_count_once_as_an_earlier_attempt(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("\n".join([
        f"{stamp(2.0)} INFO job s/dp-gd/bs16 eps=1 seeds=[0, 1] T=[5] n=10 d=2 config_hash=x",
        f"{stamp(2.0)} INFO progress 1/2 seeds done (1 runs, 30.0s) [from checkpoint, computed in 30.0s]",
        f"{stamp(2.0)} INFO progress 1/2 seeds done (1 runs, 1.5s) [from checkpoint]",
        f"{stamp(6.0)} INFO progress 2/2 seeds done (1 runs, 4.0s)",
        f"{stamp(7.0)} INFO job done: 2 rows in 6.0s"]) + "\n")
    t0 = 1_800_000_000
    ph = job_phases(log, t0 + 0.5, t0 + 7.5)
    # this attempt: started at 0.5, t0 = 1.0, first line at 2.0, 4 s of compute, done at 7.0, ended at 7.5
    assert ph["compute"] == pytest.approx(4.0) and ph["compute_earlier_attempts"] == pytest.approx(30.0)
    assert (ph["resumed_units"], ph["resumed_untimed_units"]) == (2, 1)
    assert (ph["wall"], ph["start"], ph["load"], ph["exit"]) == pytest.approx((7.0, 0.5, 1.0, 0.5))
    assert ph["assemble_write"] == pytest.approx(1.0)
