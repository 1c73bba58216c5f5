"""Two uninterrupted pipeline runs of a tiny config give identical result tables.

Compared after dropping

* timing columns: names matching ``runtime*``, ``time*``, ``elapsed*`` as a word (``runtime_s``,
  ``runtime_s_mean``, ``runtime_s_mean_dp_gd``, ``min runtime hess-clip (s)``, ``elapsed_s``) and the
  columns *derived* from runtimes only: Table 1's ratio columns (``eps=...``),
  ``table1_long.ratio``, the timing stage's ``update_costs`` (costs, spread, and the updates per
  timed run, chosen from a timed warm-up; its keys and round counts are compared) and the measured
  wall time, CPU time and memory of ``resources`` (its rules and job counts are compared); ``table1.md``
  holds only those numbers, so only its caption line is compared;
* provenance that may legitimately differ between two runs: ``git_revision`` (runs.csv/parquet)
  and ``git_revisions`` (protocol.json) - another commit may land between the runs; the host
  columns of the rows (``dpnewton.pipeline.jobs.HOST_COLUMNS``: CPU model and count, platform, BLAS
  threads, ``timestamp_utc``) and protocol.json's ``host`` block - they say where and when a run
  was made, and a second run may be made at another time or on another machine. The software
  versions and the prepared files' sha256 are compared.

Everything else (every other column, the row order, the dtypes, ``best_T_edges.md`` and the rest
of ``protocol.json``) must be identical: CSV fields are compared as the exact strings in the file,
parquet frames with ``check_exact=True``.

The uninterrupted reference run (:func:`reference_run`) is made once per session and reused by
``tests/workflow/test_fault_tolerance.py``. The pipeline is run up to rule ``aggregate`` (all tables); the
figures are not compared (PDF/PNG metadata and rendering are not meant to be byte-stable).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpnewton.pipeline.jobs import HOST_COLUMNS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

# A cut-down config/test.yaml: one small synthetic dataset, four algorithms (first-order, minibatch,
# both double-noise flavours), one epsilon (stored curves), two seeds, two Ts -> 4 run_job jobs.
PIPELINE_CONFIG = {
    "data_dir": None,
    "allow_download": False,
    "datasets": {"synthetic": {"options": {"n": 400, "d": 5, "seed": 0}}},
    "epsilons": [1],
    "delta": None,
    "conversion": "bs16",
    "seeds": 2,
    "grids": {"g": [2, 4]},
    "algorithms": {"hess-clip": {"grid": "g"}, "qu-add": {"grid": "g"}, "dp-gd": {"grid": "g"},
                   "dp-sgd": {"grid": "g"}},
    "conversion_study": {"enabled": False},
    "curves": {"max_points": 5},
    "figures": {"formats": ["png"], "runtime_epsilon": 1, "runtime_algorithms": ["dp-gd", "hess-clip"],
                "convergence_epsilons": [1], "convergence_algorithms": ["hess-clip"],
                "minibatch_algorithms": []},
    "table1": {"baseline": "dp-gd", "ours": "hess-clip"},
}
TARGET = "aggregate"
N_ROWS_PER_JOB = 2 * 2  # seeds x Ts

TIMING = re.compile(r"(^|[_\s])(runtime|time|elapsed)", re.IGNORECASE)
TIMING_DERIVED = {"table1": re.compile(r"^eps="), "table1_long": re.compile(r"^ratio$"),
                  # the timing stage's costs, and the run lengths it chose from a timed warm-up
                  "update_costs": re.compile(r"^(steps|first_update_s|s_per_update.*|spread)$"),
                  # measured resource use of the jobs (rule resources; its rules and job counts are compared)
                  "resources": re.compile(r"^(wall_s|cpu_s|max_rss_mb)_")}
PROVENANCE_MAY_DIFFER = {"git_revision", *HOST_COLUMNS}
#: the protocol fields that depend on the machine (json_sha256: its digest, which covers the host block)
PROTOCOL_MAY_DIFFER = {"git_revisions", "host", "json_sha256"}


def snakemake_cmd(workdir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", TARGET, "--cores", "2", *extra,
            "--directory", str(workdir), "--configfile", str(workdir / "cfg.yaml")]


def env() -> dict:
    return dict(os.environ, PYTHONHASHSEED="0")


def write_config(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "cfg.yaml").write_text(yaml.safe_dump(PIPELINE_CONFIG, sort_keys=False))


def full_run(workdir: Path) -> Path:
    write_config(workdir)
    res = subprocess.run(snakemake_cmd(workdir), cwd=REPO, capture_output=True, text=True, timeout=600, env=env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return workdir


_REFERENCE: dict[str, Path] = {}


def reference_run(tmp_path_factory) -> Path:
    """The session's uninterrupted run (made on first use, shared with test_fault_tolerance)."""
    if "ref" not in _REFERENCE:
        _REFERENCE["ref"] = full_run(tmp_path_factory.mktemp("reference_run"))
    return _REFERENCE["ref"]


def _dropped(table: str, columns) -> list[str]:
    derived = TIMING_DERIVED.get(table)
    return [c for c in columns if TIMING.search(c) or c in PROVENANCE_MAY_DIFFER
            or (derived is not None and derived.search(c))]


def _csv_cells(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    keep = [i for i, c in enumerate(header) if c not in _dropped(path.stem, header)]
    return [header[i] for i in keep], [[r[i] for i in keep] for r in body]


def table_differences(a: Path, b: Path) -> list[str]:
    """Differences between results/tables of two working directories (timing/provenance aside)."""
    ta, tb = a / "results" / "tables", b / "results" / "tables"
    files_a = sorted(p.name for p in ta.iterdir() if not p.name.startswith("."))
    files_b = sorted(p.name for p in tb.iterdir() if not p.name.startswith("."))
    if files_a != files_b:
        return [f"table files differ: {files_a} vs {files_b}"]
    diffs = []
    for name in files_a:
        pa, pb = ta / name, tb / name
        if name.endswith(".csv"):
            ha, ra = _csv_cells(pa)
            hb, rb = _csv_cells(pb)
            if ha != hb:
                diffs.append(f"{name}: header {ha} vs {hb}")
            elif ra != rb:
                bad = next(i for i, (x, y) in enumerate(zip(ra, rb)) if x != y) if len(ra) == len(rb) else -1
                diffs.append(f"{name}: rows differ (first at {bad}; {len(ra)} vs {len(rb)} rows)")
        elif name.endswith(".parquet"):
            fa, fb = pd.read_parquet(pa), pd.read_parquet(pb)
            stem = name.removesuffix(".parquet")
            fa, fb = fa.drop(columns=_dropped(stem, fa.columns)), fb.drop(columns=_dropped(stem, fb.columns))
            try:
                pd.testing.assert_frame_equal(fa, fb, check_exact=True)
            except AssertionError as exc:
                diffs.append(f"{name}: {str(exc)[:500]}")
        elif name == "protocol.json":
            ja, jb = (json.loads(p.read_text()) for p in (pa, pb))
            for k in PROTOCOL_MAY_DIFFER:
                ja.pop(k, None)
                jb.pop(k, None)
            if ja != jb:
                diffs.append(f"{name}: {ja} vs {jb}")
        elif name == "table1.md":  # every number in it is a runtime or a runtime ratio
            if pa.read_text().splitlines()[0] != pb.read_text().splitlines()[0]:
                diffs.append(f"{name}: caption differs")
        elif pa.read_bytes() != pb.read_bytes():
            diffs.append(f"{name}: bytes differ")
    return diffs


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return reference_run(tmp_path_factory)


def test_two_runs_give_identical_tables(reference, tmp_path_factory):
    second = full_run(tmp_path_factory.mktemp("second_run"))
    assert table_differences(reference, second) == []
    # the comparison is not vacuous: the tables hold every run, and the timing columns really differ
    runs = pd.read_parquet(reference / "results/tables/runs.parquet")
    assert len(runs) == 4 * N_ROWS_PER_JOB and runs["excess_loss"].notna().all()
    other = pd.read_parquet(second / "results/tables/runs.parquet")
    assert (runs["excess_loss"].to_numpy() == other["excess_loss"].to_numpy()).all()


def _edit_cell(path: Path, column: str, value) -> None:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    col = rows[0].index(column)
    rows[1][col] = value(rows[1][col])
    with open(path, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


def test_comparison_detects_a_changed_value(reference, tmp_path):
    """Guard against a comparison that ignores too much: one changed excess loss is caught."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(reference / "results" / "tables", copy / "results" / "tables")
    _edit_cell(copy / "results/tables/summary.csv", "excess_loss_mean", lambda v: repr(float(v) * (1 + 1e-12)))
    assert any("summary.csv" in d for d in table_differences(reference, copy))
    # and a runtime-only change is ignored
    shutil.copy(reference / "results/tables/summary.csv", copy / "results/tables/summary.csv")
    _edit_cell(copy / "results/tables/runs.csv", "runtime_s", lambda v: "123.0")
    assert table_differences(reference, copy) == []
    # a timed cost is ignored, but not which configuration was timed
    _edit_cell(copy / "results/tables/update_costs.csv", "s_per_update", lambda v: "9.0")
    assert table_differences(reference, copy) == []
    _edit_cell(copy / "results/tables/update_costs.csv", "algorithm", lambda v: v + "-renamed")
    assert any("update_costs.csv" in d for d in table_differences(reference, copy))
