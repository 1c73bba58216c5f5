"""Software deployment with ``--sdm conda``: what can be checked without conda.

``envs/dpnewton.yaml`` pins every dependency and holds no path to the package (a relative
``-e ..`` would resolve against Snakemake's temporary copy of the file, not the checkout);
``envs/dpnewton.post-deploy.sh``, which Snakemake runs inside the new env, installs the package
editable from ``DPNEWTON_SOURCE``, the checkout the workflow exports while it is parsed. The
script is run here in a fresh venv standing in for the conda env; creating the conda env itself is
not tested (no conda on the CI machine).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ENV = REPO / "envs" / "dpnewton.yaml"
POST_DEPLOY = REPO / "envs" / "dpnewton.post-deploy.sh"


def test_env_file_pins_everything_and_names_no_path():
    deps = yaml.safe_load(ENV.read_text())["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = [p for d in deps if isinstance(d, dict) for p in d.get("pip", [])]
    assert all(re.fullmatch(r"[a-z0-9_.-]+=[0-9][0-9.]*", d) for d in conda if d != "pip"), conda
    assert pip and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9.]*", p) for p in pip), pip
    assert not any(p.startswith("-e") or "/" in p or ".." in p for p in pip)


def test_the_workflow_exports_its_checkout_for_the_post_deploy_script():
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert "os.environ.update(DPNEWTON_SOURCE=str(REPO))" in common
    assert "DPNEWTON_SOURCE" in POST_DEPLOY.read_text()


@pytest.mark.slow
def test_post_deploy_script_installs_the_checkout(tmp_path):
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    path = f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    res = subprocess.run(["bash", str(POST_DEPLOY)], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=dict(base, PATH=path, DPNEWTON_SOURCE=str(REPO)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Name: dpnewton" in res.stdout
    assert f"Editable project location: {REPO}" in res.stdout
    # without the variable the script stops and says why
    bad = subprocess.run(["bash", str(POST_DEPLOY)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env=dict(base, PATH=path, DPNEWTON_SOURCE=str(tmp_path)))
    assert bad.returncode != 0 and "is not a dpnewton checkout" in bad.stderr
