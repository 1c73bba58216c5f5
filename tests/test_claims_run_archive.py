"""benchmarks/claims_run.py carries a run across machines: save -> restore gives a run directory in
which Snakemake finds nothing to do, and the archive holds neither the prepared matrices nor the
checkpoints of jobs that have finished since."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "claims_run.py"
DATA_DIR = REPO.parent / "shared" / "datasets"
CONFIG = f"""\
data_dir: {DATA_DIR}
allow_download: false
datasets:
  synthetic:
    options: {{n: 300, d: 5, seed: 0}}
epsilons: [1]
seeds: 1
grids:
  first_order: [5]
algorithms:
  dp-gd: {{grid: first_order}}
tuning: {{extend_grid: false}}
"""


def snakemake(run: Path, config: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(run),
           "--configfile", str(config), "--until", "run_job", *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=True)


def archive_tool(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=check)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("carry")
    config = tmp / "mini.yaml"
    config.write_text(CONFIG)
    run, archive = tmp / "run", tmp / "archive"
    snakemake(run, config)
    partial = run / "results/runs/synthetic/dp-gd/bs16/eps~10/seeds~0-0.csv.partial/round0_seed0.pkl"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"unit")
    first = json.loads(archive_tool("save", str(run), "--archive", str(archive)).stdout)
    held_with_partial = files(archive)
    partial.unlink()
    partial.parent.rmdir()
    second = json.loads(archive_tool("save", str(run), "--archive", str(archive)).stdout)
    return dict(tmp=tmp, config=config, run=run, archive=archive, first=first, second=second,
                held_with_partial=held_with_partial)


def test_save_keeps_state_and_checkpoints_but_not_prepared_matrices(saved):
    held = saved["held_with_partial"]
    assert any(name.endswith("round0_seed0.pkl") for name in held)
    assert "results/runs/synthetic/dp-gd/bs16/eps~1/seeds~0-0.csv" in held
    assert "results/data/synthetic.optimum.json" in held
    assert not any(name in held for name in ("results/data/synthetic.npz", "results/data/synthetic.json"))
    assert any(name.startswith("snakemake-metadata/") for name in held)
    assert any(name.startswith("logs/runs/") for name in held)


def test_second_save_deletes_finished_checkpoints_and_copies_nothing_else(saved):
    assert saved["second"] == {"files": saved["first"]["files"] - 1, "copied": 0, "deleted": 1}
    assert not list(saved["archive"].rglob("*.partial"))


def test_restore_leaves_nothing_to_run(saved, tmp_path):
    run = tmp_path / "restored"
    summary = json.loads(archive_tool("restore", str(run), "--archive", str(saved["archive"]),
                                      "--configfile", str(saved["config"])).stdout.splitlines()[-1])
    assert summary["optima_checked"] == ["synthetic"]
    restored, original = files(run), files(saved["run"])
    held = files(saved["archive"])
    assert len(held) == saved["second"]["files"]
    for name, content in held.items():
        name = name.replace("snakemake-metadata/", ".snakemake/metadata/", 1)
        assert restored[name] == content == original[name]
    # the rebuilt matrix is the one the optimum was computed from
    assert restored["results/data/synthetic.npz"] == original["results/data/synthetic.npz"]
    assert "total        0" in snakemake(run, saved["config"], "-n").stdout
    # and the order of the modification times is what makes it so
    npz = run / "results/data/synthetic.npz"
    later = os.stat(run / "results/runs/synthetic/dp-gd/bs16/eps~1/seeds~0-0.csv").st_mtime + 10
    os.utime(npz, (later, later))
    assert "run_job" in snakemake(run, saved["config"], "-n").stdout


def test_restore_refuses_an_optimum_of_other_data(saved, tmp_path):
    archive = tmp_path / "archive"
    subprocess.run(["cp", "-r", str(saved["archive"]), str(archive)], check=True)
    js = archive / "results/data/synthetic.optimum.json"
    meta = json.loads(js.read_text())
    meta["prepared_sha256"] = "0" * 64
    js.write_text(json.dumps(meta))
    result = archive_tool("restore", str(tmp_path / "run"), "--archive", str(archive),
                          "--configfile", str(saved["config"]), check=False)
    assert result.returncode != 0
    assert "different sha256" in result.stderr


def test_status_counts_the_archived_jobs_of_the_plan(saved):
    result = json.loads(archive_tool("status", "--archive", str(saved["archive"]),
                                     "--configfile", str(saved["config"])).stdout)
    assert list(result) == ["synthetic"]
    assert result["synthetic"]["run_job"] == [1, 1] and result["synthetic"]["run_track"] == [0, 0]
    assert result["synthetic"]["cpu_h"] >= 0
    empty = json.loads(archive_tool("status", "--archive", str(saved["tmp"] / "nothing"),
                                    "--configfile", str(saved["config"])).stdout)
    assert empty["synthetic"]["run_job"] == [0, 1]
