"""A config given with ``--configfile`` is the whole config; without one, the embedded default applies.

Snakemake merges a ``--configfile`` key by key into the config that the Snakefile's ``configfile:``
directive loads. Loaded unconditionally, the default's datasets and algorithms leaked into every
other config run from the repository root (``--configfile config/claims.yaml`` planned 544 jobs with
24 algorithm entries instead of 448 with 18), while the same command with ``--directory`` elsewhere
did not load the default at all. Each case below runs a dry run of a scratch copy of the workflow,
from the copy's root as the README does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dpnewton.pipeline.config import expand, load_config
from dpnewton.pipeline.plan import job_members
from tests.pipeline.test_config_errors import TINY, _env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN_PATH = re.compile(r"results/runs/([^/\s]+)/([^/\s]+)/")


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("workflow")
    shutil.copy(REPO / "Snakefile", root)
    for folder in ("workflow", "config"):
        shutil.copytree(REPO / folder, root / folder)
    return root


def planned_runs(cwd: Path, *args: str) -> set[tuple[str, str]]:
    """(dataset, algorithm) pairs of the run jobs a dry run plans."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", *args]
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env())
    assert out.returncode == 0, out.stderr[-3000:]
    return set(RUN_PATH.findall(out.stdout + out.stderr))


def test_configfile_replaces_the_default(workflow_copy):
    cfg = workflow_copy / "mine.yaml"
    cfg.write_text(yaml.safe_dump(TINY, sort_keys=False))
    assert planned_runs(workflow_copy, "--configfile", str(cfg)) == {("synthetic", "hess-clip"),
                                                                      ("synthetic", "dp-gd")}


def test_without_configfile_the_default_applies_from_any_directory(workflow_copy, tmp_path):
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = expand(load_config(default), base_dir=REPO, check_data=False)
    # a configuration that differs only in `average` runs in its owner's job, a lockstep algorithm's
    # configurations and epsilons in one job per dataset
    expected = {("synthetic", j.algorithm) for j in plan.jobs}
    assert {m["algorithm"] for j in plan.jobs for m in job_members(j.spec).values()} == set(default["algorithms"])
    assert planned_runs(workflow_copy) >= expected
    elsewhere = planned_runs(workflow_copy, "--snakefile", str(workflow_copy / "Snakefile"),
                             "--directory", str(tmp_path))
    assert elsewhere >= expected
