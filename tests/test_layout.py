"""The standard Snakemake layout: the workflow is ``workflow/Snakefile``; the top-level ``Snakefile``
only includes it, and both give the same rules, the same DAG and the same jobs (default target
included). Also the catalog file, the licence and the ``.test`` config."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.pipeline.test_config_errors import _env

REPO = Path(__file__).resolve().parents[1]
TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"


def _snakemake(*args: str, cwd: Path = REPO) -> str:
    cmd = [sys.executable, "-m", "snakemake", *args]
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env())
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return res.stdout


def _job_stats(dry_run: str) -> str:
    """The job-stats table of a dry run (the per-job blocks carry dates and random job order)."""
    m = re.search(r"^Job stats:\n(.*?)\n\n", dry_run, re.MULTILINE | re.DOTALL)
    assert m, dry_run[-2000:]
    return m.group(1)


@pytest.mark.slow
@pytest.mark.parametrize("config", [None, TEST_CONFIG], ids=["default-config", "test-config"])
def test_both_entries_give_the_same_workflow(tmp_path, config):
    common = ["--cores", "2", "--directory", str(tmp_path)]
    if config is not None:
        common += ["--configfile", str(config)]
    entries = {"top-level": [], "workflow/Snakefile": ["-s", str(REPO / "workflow" / "Snakefile")]}
    rules = {k: _snakemake("--list-rules", *e, *common) for k, e in entries.items()}
    dags = {k: _snakemake("--dag", *e, *common) for k, e in entries.items()}
    stats = {k: _job_stats(_snakemake("-n", *e, *common)) for k, e in entries.items()}
    assert rules["top-level"] == rules["workflow/Snakefile"]
    assert dags["top-level"] == dags["workflow/Snakefile"]
    assert stats["top-level"] == stats["workflow/Snakefile"]
    # the default target is rule all, and it is not empty
    assert re.search(r"^all\s+1$", stats["top-level"], re.MULTILINE)
    assert re.search(r"^run_job\s+\d+$", stats["top-level"], re.MULTILINE)
    assert "digraph" in dags["top-level"]


def test_catalog_file_has_the_documented_keys():
    cat = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())
    usage = cat["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert set(usage["mandatory-flags"]) == {"desc", "flags"}
    assert set(usage["software-stack-deployment"]) <= {"conda", "apptainer", "apptainer+conda"}
    assert usage["report"] is True


def test_license_is_the_apache_2_text_of_pyproject():
    text = (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 190
    assert 'license = {text = "Apache-2.0"}' in (REPO / "pyproject.toml").read_text()


def test_test_config_is_small_and_valid():
    from dpnewton.pipeline import config as pipecfg

    cfg = yaml.safe_load(TEST_CONFIG.read_text())
    plan = pipecfg.expand(cfg, base_dir=REPO)
    assert list(plan.datasets) == ["synthetic"] and len(plan.jobs) <= 8


def test_every_figure_has_its_rule_caption_and_tables():
    """rule figure makes every figure of dpnewton.pipeline.figures.SPECS: its name fits the rule's
    wildcard, its spec has a draw function and a caption that mentions its number, and the tables it reads
    are outputs of rule aggregate."""
    from dpnewton.pipeline.config import load_config
    from dpnewton.pipeline.figures import FIGURES, SPECS

    assert FIGURES == tuple(SPECS)
    cfg = load_config(yaml.safe_load((REPO / "config" / "test.yaml").read_text()))
    rules = REPO / "workflow" / "rules"
    assert "rule figure:" in (rules / "plots.smk").read_text()
    common = (rules / "common.smk").read_text()
    pattern = re.search(r'^\s*fig=r"(.*)",$', common, re.MULTILINE).group(1)
    assert "snakemake.params.caption" in (REPO / "workflow" / "report" / "figure.rst").read_text()
    tables = set(re.findall(r"results/tables/(\w+)\.parquet", (rules / "aggregate.smk").read_text()))
    tables |= set(re.findall(r'"(\w+)"', re.search(r"^TABLES = \[(.*)\]$", common, re.MULTILINE).group(1)))
    tables |= {"heldout"}  # with a holdout (common.smk appends it to TABLES)
    for name, spec in SPECS.items():
        assert re.fullmatch(pattern, name), name
        number = name.split("_")[0].replace("fig", "Figure ")
        assert callable(spec.draw) and spec.caption(cfg, {"algorithm": "hess-clip"}).startswith(number), name
        assert spec.title and set(spec.inputs.values()) <= tables, (name, spec.inputs)

BLOCKER = '''import sys


class _NoDpnewton:
    """Makes ``import dpnewton`` fail, as in a Python that has Snakemake but not the package."""

    def find_spec(self, name, path=None, target=None):
        if name == "dpnewton" or name.startswith("dpnewton."):
            raise ImportError(f"No module named {name!r}")
        return None


sys.meta_path.insert(0, _NoDpnewton())
'''


@pytest.mark.slow
def test_parse_without_the_package_names_the_fix(tmp_path):
    """Without the package (a sitecustomize on PYTHONPATH blocks ``import dpnewton``), the workflow
    still parses (--lint, --list-rules); building the DAG stops with the install command.
    tests/workflow/test_parse_without_package.py checks the same in a venv without numpy as well."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = dict(_env(), PYTHONPATH=str(site))

    def snakemake(*args):
        cmd = [sys.executable, "-m", "snakemake", *args, "--directory", str(tmp_path / "run"),
               "--configfile", str(TEST_CONFIG)]
        res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
        return res.returncode, res.stdout + res.stderr

    rc, out = snakemake("--lint")
    assert rc == 0 and "Congratulations" in out, out[-2000:]
    rc, out = snakemake("--list-rules")
    assert rc == 0 and re.search(r"^run_job$", out, re.MULTILINE), out[-2000:]
    rc, out = snakemake("-n", "--cores", "1")
    assert rc != 0
    assert "needs the dpnewton package in the Python that runs Snakemake" in out, out[-2000:]
    assert f"pip install --no-deps {REPO}" in out


def test_lint_and_format():
    lint = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=_env())
    assert lint.returncode == 0 and "Congratulations" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    snakefmt = Path(sys.executable).with_name("snakefmt")
    if not snakefmt.exists():
        pytest.skip("snakefmt is not installed (envs/requirements.txt pins it)")
    fmt = subprocess.run([str(snakefmt), "--check", "Snakefile", "workflow/"], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert fmt.returncode == 0, fmt.stderr[-3000:]


def test_python_lines_fit_the_line_length():
    """No line of a tracked ``*.py`` file under ``src/``, ``benchmarks/``, ``tests/`` or ``workflow/`` (``git
    ls-files``) is longer than the project's line length (``[tool.snakefmt] line_length`` of pyproject.toml)."""
    limit = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["snakefmt"]["line_length"]
    folders = ("src", "benchmarks", "tests", "workflow")
    specs = [f"{folder}/*.py" for folder in folders]
    res = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--", *specs],
                         capture_output=True, text=True, check=True)
    paths = sorted(REPO / name for name in res.stdout.split("\0") if name and (REPO / name).is_file())
    assert {path.relative_to(REPO).parts[0] for path in paths} == set(folders), res.stdout[:2000]
    long = [f"{path.relative_to(REPO)}:{i} ({len(line)} characters)"
            for path in paths
            for i, line in enumerate(path.read_text().splitlines(), start=1) if len(line) > limit]
    assert not long, f"lines longer than {limit} characters:\n" + "\n".join(long)


def test_tests_mirror_the_package():
    """tests/<name>/ holds the tests of src/dpnewton/<name>/ (tests/workflow/: the end-to-end runs of the
    workflow; tests/cluster/: the SLURM profile); tests/ itself those of the top-level modules."""
    packages = {p.name for p in (REPO / "src" / "dpnewton").iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - {"workflow", "cluster"} <= packages, sorted(folders - packages)
    for folder in folders - {"workflow", "cluster"}:
        assert list((REPO / "tests" / folder).glob("test_*.py")), folder
