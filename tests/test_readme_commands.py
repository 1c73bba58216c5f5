"""Every command of the README's code blocks is run by a test: the cheap ones here, on a fresh clone (``git
clone`` of this checkout) beside a ``shared/datasets`` folder that mirrors the real data files; the others by
the test named in :data:`ELSEWHERE`. A command added to the README without either fails
:func:`test_every_readme_command_is_run_by_a_test`. The download path (no data folder, downloads allowed)
is run against a local ``file://`` mirror of the same files."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from dpnewton.data import sources
from dpnewton.data.registry import get_spec

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

#: README commands not run here (command prefix -> the tests that run its parts, or why none can here)
ELSEWHERE = {
    "python3 -m venv .venv": "not as one line (a pip install and the whole default run): the install by "
                             "tests/workflow/test_deployment.py, the workflow by tests/workflow/test_pipeline.py",
    "bash .ci/run": "the CI entry point itself (runs the suite; installs Debian packages as root)",
    'pip install "snakemake-executor-plugin-slurm': "tests/cluster (the SLURM profile; needs root for slurmd)",
    "cp -r profiles/slurm": "tests/cluster/test_profile.py",
    "snakemake --profile dpnewton-slurm": "tests/cluster/run_slurm_test.sh",
}
#: the cheap commands, run here as the README writes them (the python one-liner included)
CHEAP = ("dpnewton ", "python -c ")


def readme_commands() -> list[str]:
    """The shell commands of the README's ```bash blocks (continuation lines joined, comments dropped)."""
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#(?![^\"]*\"\)).*$", "", line).strip() if not line.lstrip().startswith("#") else ""
            if line:
                out.append(re.sub(r"\s+", " ", line))
    return out


def test_every_readme_command_is_run_by_a_test():
    commands = readme_commands()
    assert any(c.startswith("dpnewton run --dataset a1a") for c in commands)  # the parser finds the blocks
    unknown = [c for c in commands if not c.startswith(CHEAP) and not any(c.startswith(k) for k in ELSEWHERE)]
    assert unknown == [], "a README command no test runs: add it to CHEAP or ELSEWHERE with its test"


def _write_csv(path: Path, X: np.ndarray, labels) -> None:
    lines = [",".join(f"f{j}" for j in range(X.shape[1])) + ",label"]
    lines += [",".join(repr(float(v)) for v in row) + f",{label}" for row, label in zip(X, labels)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory, request):
    """A clone of this checkout's HEAD beside ``shared/datasets`` (a symlink to the real files, as
    ``../shared/datasets`` is for the checkout), with the CSV files the README's examples name."""
    shared = ROOT.parent / "shared" / "datasets"
    if not shared.is_dir():
        pytest.skip(f"{shared} is absent (the README's data commands read the real files)")
    base = tmp_path_factory.mktemp("readme")
    subprocess.run(["git", "clone", "-q", str(ROOT), str(base / "clone")], check=True)
    (base / "shared").mkdir()
    (base / "shared" / "datasets").symlink_to(shared)
    rng = np.random.default_rng(0)
    for name in ("train.csv", "test.csv", "my.csv"):
        X = rng.normal(size=(300, 3))
        _write_csv(base / "clone" / name, X, np.where(X[:, 0] - X[:, 1] > 0, "yes", "no"))
    return base / "clone"


@pytest.mark.parametrize("command", [c for c in readme_commands() if c.startswith(CHEAP)])
def test_cheap_readme_command_runs_on_a_fresh_clone(fresh_clone, command):
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(fresh_clone), "MPLBACKEND": "Agg"}
    cmd = re.sub(r"^python ", f"{sys.executable} ", command)
    done = subprocess.run(cmd, shell=True, cwd=fresh_clone, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.stdout.strip() or done.stderr.strip()


def test_the_download_path_against_a_local_mirror(tmp_path, monkeypatch, shared_datasets):
    """No data folder, downloads allowed (the README's ``--config allow_download=true`` on a fresh clone):
    a1a's source file is fetched from its URL, here served from a ``file://`` mirror of the real files,
    verified against its published checksum and kept in the download cache; a changed file is refused."""
    src = get_spec("a1a").sources["data"]
    mirror = {src.urls[0]: (shared_datasets / src.subdir / src.filename).as_uri()}
    monkeypatch.setattr(sources, "_opener", lambda url, timeout: urllib.request.urlopen(mirror[url], timeout=timeout))
    got = sources.resolve(src, None, tmp_path / "cache", allow_download=True)
    assert got.origin == "downloaded" and got.verified and got.path == tmp_path / "cache/downloads" / src.filename
    assert got.sha256 in src.sha256
    again = sources.resolve(src, None, tmp_path / "cache", allow_download=True)
    assert again.origin == "download_cache"
    # a mirror serving other bytes is refused and leaves nothing behind
    bad = tmp_path / "bad" / src.filename
    bad.parent.mkdir()
    bad.write_bytes(b"1 1:1\n")
    mirror[src.urls[0]] = bad.as_uri()
    with pytest.raises(sources.DatasetError, match="checksum mismatch"):
        sources.resolve(src, None, tmp_path / "cache2", allow_download=True)
    assert not any((tmp_path / "cache2").rglob("*.*"))


def test_the_paths_the_readme_names_exist():
    for path in ("envs/requirements.txt", "config/claims.yaml", "config/paper.yaml", "profiles/slurm",
                 "figures/claims.md", "figures/claims_summary.png", ".ci/run"):
        assert (ROOT / path).exists(), path
    assert shutil.which("git")
