"""The workflow used as a Snakemake module of another workflow.

A scratch directory gets a three-statement Snakefile that loads ``workflow/Snakefile`` of this
checkout by its local path (``module dpnewton: snakefile: ...; config: config`` and
``use rule * from dpnewton as dpnewton_*``) with the ``.test`` config. Its run must give the same
tables as the direct run of the same config (compared as ``tests/workflow/test_determinism.py`` does:
timing and host columns aside), and its rows must name this checkout's git revision and version.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.workflow.test_determinism import env, table_differences

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"

HOST_SNAKEFILE = f'''configfile: "{TEST_CONFIG}"


module dpnewton:
    snakefile:
        "{REPO / "workflow" / "Snakefile"}"
    config:
        config


use rule * from dpnewton as dpnewton_*
'''


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env=env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    direct = tmp_path_factory.mktemp("direct")
    _run([sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(direct),
          "--configfile", str(TEST_CONFIG)], cwd=REPO)
    host = tmp_path_factory.mktemp("host")
    (host / "Snakefile").write_text(HOST_SNAKEFILE)
    res = _run([sys.executable, "-m", "snakemake", "--cores", "2"], cwd=host)
    return direct, host, res.stdout + res.stderr


def test_module_run_gives_the_direct_run_tables(runs):
    direct, host, log = runs
    assert "dpnewton_run_job" in log and "dpnewton_aggregate" in log
    assert sorted(p.name for p in (host / "results" / "figures").iterdir()) == \
        sorted(p.name for p in (direct / "results" / "figures").iterdir())
    assert table_differences(direct, host) == []


def test_module_rows_name_this_checkout(runs):
    _, host, _ = runs
    rows = pd.read_parquet(host / "results/tables/runs.parquet")
    # a commit of this checkout (HEAD at run time: another commit may have landed since)
    for rev in set(rows["git_revision"].str.split("-").str[0]):
        assert len(rev) == 40
        assert subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", rev, "HEAD"]).returncode == 0
    assert (rows["package_version"] != "0+unknown").all()
