"""Provenance of every run row and of protocol.json.

Each row records the code (package version, git revision of the workflow's checkout, python,
numpy, scipy, dp-accounting and snakemake versions), the host (CPU model and count, platform, the
BLAS numpy calls and its threads during the runs), the prepared file's sha256 and a UTC timestamp;
protocol.json lists every distinct value seen (``software``, ``dataset_sha256``, ``host``).
"""

from __future__ import annotations

import json
import re
import subprocess
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpnewton.pipeline import jobs
from dpnewton.problems import file_sha256
from tests.workflow.test_determinism import reference_run

REPO = Path(__file__).resolve().parents[2]
ROW_COLUMNS = ["config_hash", "package_version", "git_revision", "python_version", "numpy_version",
               "scipy_version", "dp_accounting_version", "snakemake_version", "cpu_model", "cpu_count",
               "platform", "blas_vendor", "blas_version", "blas_threads", "dataset_sha256", "timestamp_utc"]


def _head() -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_git_revision_of_the_workflow_checkout(tmp_path):
    jobs.git_revision.cache_clear()
    assert jobs.git_revision(REPO).split("-")[0] == _head()
    # a folder outside any checkout falls back to the package's own checkout, never 'unknown' here
    assert jobs.git_revision(tmp_path).split("-")[0] == _head()


def test_package_version_without_installed_metadata(monkeypatch):
    import dpnewton

    jobs.package_version.cache_clear()
    monkeypatch.setattr(dpnewton, "__version__", "0+unknown")
    try:
        assert jobs.package_version(REPO) == "0.1.0" != "0+unknown"
    finally:
        jobs.package_version.cache_clear()


def test_environment_columns():
    env = jobs.environment()
    assert env["cpu_count"] >= 1 and env["cpu_model"]
    assert env["blas_threads"] == jobs.RUN_BLAS_THREADS
    assert env["blas_vendor"] and env["blas_version"]
    assert env["snakemake_version"] == version("snakemake")
    assert env["dp_accounting_version"] == version("dp-accounting")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", jobs.utc_timestamp())


@pytest.mark.slow
def test_rows_and_protocol_carry_provenance(tmp_path_factory):
    ref = reference_run(tmp_path_factory)
    runs = pd.read_parquet(ref / "results/tables/runs.parquet")
    for c in ROW_COLUMNS:
        assert c in runs.columns, c
        assert runs[c].notna().all() and (runs[c].astype(str) != "").all(), c
    assert (runs["package_version"] != "0+unknown").all()
    assert not runs["git_revision"].str.startswith("unknown").any()
    assert (runs["numpy_version"] == np.__version__).all()
    sha = file_sha256(ref / "results/data/synthetic.npz")
    assert (runs["dataset_sha256"] == sha).all()
    stamps = pd.to_datetime(runs["timestamp_utc"], utc=True)
    assert stamps.notna().all()
    protocol = json.loads((ref / "results/tables/protocol.json").read_text())
    assert protocol["dataset_sha256"] == {"synthetic": [sha]}
    assert protocol["software"]["snakemake_version"] == [version("snakemake")]
    assert protocol["software"]["numpy_version"] == [np.__version__]
    assert protocol["host"]["cpu_count"] == [str(runs["cpu_count"].iloc[0])]
    assert protocol["host"]["first_run_utc"] <= protocol["host"]["last_run_utc"]
