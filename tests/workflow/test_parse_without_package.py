"""The workflow parses in a Python that has Snakemake (and snakefmt) but neither the dpnewton package
nor numpy: ``snakemake --lint``, ``--list-rules`` (direct and as a module) and ``snakefmt --check``
succeed there, and building the DAG stops with the install command.

The Python is a venv with only the pinned snakemake and snakefmt of ``envs/requirements.txt`` (no
``--system-site-packages``). ``.ci/run`` builds it once and passes it in ``DPNEWTON_PARSE_VENV``;
without that variable the test builds one (about a minute with pip's cache). A parse-time import of
the package (or of numpy) anywhere in the workflow makes these tests fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"
INSTALL_HINT = f"pip install --no-deps {REPO}"


def _pins(*names: str) -> list[str]:
    pins = {}
    for line in (REPO / "envs" / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            pins[m.group(1).lower()] = line.strip()
    return [pins[n] for n in names]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    given = os.environ.get("DPNEWTON_PARSE_VENV")
    venv = Path(given) if given else tmp_path_factory.mktemp("parse-venv") / "venv"
    python = venv / "bin" / "python"
    if not given:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        res = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *_pins("snakemake", "snakefmt")],
                             capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    # the venv really lacks the package and numpy (and does not see this Python's site-packages)
    probe = subprocess.run([str(python), "-c", "import snakemake, snakefmt, yaml, jsonschema\n"
                            "for m in ('dpnewton', 'numpy'):\n"
                            "    try:\n        __import__(m)\n    except ImportError:\n        pass\n"
                            "    else:\n        raise SystemExit(m + ' is importable')"],
                           cwd=REPO, capture_output=True, text=True, env=_env(python), timeout=120)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    return python


def _env(python: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(python: Path, *args: str, cwd: Path = REPO, tool: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(python.with_name(tool))] if tool else [str(python), "-m", "snakemake"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=_env(python))


def _rules(out: str) -> list[str]:
    return [line for line in out.splitlines() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", line)]


def test_lint_without_the_package(bare_python):
    res = _run(bare_python, "--lint")
    out = res.stdout + res.stderr
    assert res.returncode == 0 and "Congratulations, your workflow is in a good condition" in out, out[-3000:]


def test_snakefmt_without_the_package(bare_python):
    res = _run(bare_python, "--check", "Snakefile", "workflow/", tool="snakefmt")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]


@pytest.mark.parametrize("config", [None, TEST_CONFIG, REPO / "config" / "claims.yaml"],
                         ids=["default-config", "test-config", "claims-config"])
def test_list_rules_without_the_package(bare_python, tmp_path, config):
    """The same rules as in the Python that has the package."""
    args = ["--list-rules", "--directory", str(tmp_path)] + (["--configfile", str(config)] if config else [])
    bare = _run(bare_python, *args)
    assert bare.returncode == 0, bare.stdout[-2000:] + bare.stderr[-3000:]
    full = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == 0, full.stderr[-3000:]
    assert _rules(bare.stdout) == _rules(full.stdout) and "run_job" in _rules(bare.stdout)


def test_module_parses_without_the_package(bare_python, tmp_path):
    (tmp_path / "Snakefile").write_text(
        f'configfile: "{TEST_CONFIG}"\n\n\nmodule dpnewton:\n    snakefile:\n'
        f'        "{REPO / "workflow" / "Snakefile"}"\n    config:\n        config\n\n\n'
        f"use rule * from dpnewton as dpnewton_*\n")
    res = _run(bare_python, "--list-rules", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "dpnewton_run_job" in _rules(res.stdout)


def test_building_the_dag_names_the_fix(bare_python, tmp_path):
    res = _run(bare_python, "-n", "--cores", "1", "--directory", str(tmp_path), "--configfile", str(TEST_CONFIG))
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "needs the dpnewton package in the Python that runs Snakemake" in out, out[-3000:]
    assert INSTALL_HINT in out, out[-3000:]
    assert list(tmp_path.glob("results/**/*")) == []
