"""A run says what it will do: a dry run names the dropped datasets and the estimated duration on the
given cores (dpnewton.pipeline.scheduling.plan_lines, printed by workflow/rules/common.smk when the plan is
built); per-run INFO lines go to the job's log file, the console gets the job's progress (setup_log)."""

from __future__ import annotations

import copy
import logging
import subprocess
import sys

import pytest
import yaml

from dpnewton.pipeline import scheduling
from dpnewton.pipeline.config import expand
from dpnewton.pipeline.jobs import log, run_log, setup_log
from tests.workflow.test_determinism import PIPELINE_CONFIG, REPO, env


def test_makespan_longest_first_known_answers():
    # 2 cores, longest first onto the core that frees first: [3 | 3], [3+2 | 3+2], [5 | 5+2] -> 7
    assert scheduling.makespan([2, 3, 2, 3, 2], cores=2) == 7
    assert scheduling.makespan([2, 3, 2, 3, 2], cores=1) == 12
    assert scheduling.makespan([5, 1, 1], cores=8) == 5


def _config_with_missing_dataset(tmp_path) -> dict:
    cfg = copy.deepcopy(PIPELINE_CONFIG)
    cfg["data_dir"] = str(tmp_path / "no-data")     # a1a's files are not there
    (tmp_path / "no-data").mkdir()
    cfg["datasets"]["a1a"] = {"optional": True}
    return cfg


def test_plan_lines_name_the_dropped_dataset_and_the_estimate(tmp_path):
    plan = expand(_config_with_missing_dataset(tmp_path), base_dir=REPO)
    lines = scheduling.plan_lines(plan, cores=2)
    assert any(line.startswith("WARNING: optional dataset 'a1a' dropped") for line in lines)
    assert "datasets: synthetic (dropped: a1a)" in lines
    n = len(plan.jobs)
    seconds = [scheduling.estimated_seconds(j.spec) for j in plan.jobs]
    assert all(s >= scheduling.JOB_START_S for s in seconds)
    expected = scheduling._duration(scheduling.makespan(seconds, 2))
    assert f"optimizer jobs: {n} to run of {n}; estimated {expected} on 2 cores" in lines[-1]
    # the jobs already done are not counted; none left says so
    assert scheduling.plan_lines(plan, 2, done=lambda job: True)[-1] == f"optimizer jobs: all {n} done"
    assert "on 1 core (none given)" in scheduling.plan_lines(plan, None)[-1]
    assert " on 8 job slots (" in scheduling.plan_lines(plan, 8, unit="job slot")[-1]


def test_dry_run_prints_the_plan(tmp_path):
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(_config_with_missing_dataset(tmp_path), sort_keys=False))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--directory", str(tmp_path),
                          "--configfile", str(tmp_path / "cfg.yaml")], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env=env())
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "datasets: synthetic (dropped: a1a)" in out
    assert "optimizer jobs: " in out and " on 2 cores (" in out
    assert out.count("dpnewton pipeline: ") == 1


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for h in root.handlers:
        h.close()
    root.handlers[:], root.level = handlers, level


def test_per_run_lines_go_to_the_log_file_only(tmp_path, capsys, restore_logging):
    setup_log(tmp_path / "job.log")
    log.info("progress 1/2 seeds done")
    run_log.info("  seed 0 T=4 excess_loss=0.1")
    err = capsys.readouterr().err
    text = (tmp_path / "job.log").read_text()
    assert "progress 1/2" in err and "seed 0 T=4" not in err
    assert "progress 1/2" in text and "seed 0 T=4" in text
