"""Bring your own optimizer: a third-party package registers an algorithm through the entry-point group
``dpnewton.algorithms`` (docs/extending.md) and gets it in ``dpnewton run``, the estimator, the audit and
the workflow without any edit to dpnewton.

The plugin (heavy-ball DP-GD: the same gradient releases as DP-GD, momentum is post-processing) is one
module of about 40 lines, built and installed with pip into a temporary target directory; the processes
that use it get that directory on PYTHONPATH, so ``importlib.metadata`` finds its ``.dist-info`` exactly
as in a site-packages, and the test venv itself is left untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NAME = "toy-heavy-ball"

PLUGIN = '''
"""dpnewton_toy: DP-GD with heavy-ball momentum, registered as a dpnewton plugin."""
from dataclasses import dataclass

import numpy as np

from dpnewton.algorithms import AlgorithmSpec, AuditCase, planner, register, runner
from dpnewton.algorithms.base import iterate_batched
from dpnewton.algorithms.gradient_descent import gradient_plan, noisy_gradients
from dpnewton.privacy.neighbouring import RELATIONS


@dataclass(frozen=True)
class HeavyBallConfig:
    step: float = 2.0
    momentum: float = 0.5

    def validated(self):
        if not (self.step > 0 and 0 <= self.momentum < 1):
            raise ValueError(f"need step > 0 and 0 <= momentum < 1; got {self.step}, {self.momentum}")
        return self


def plan(cfg, n, d, T, rho):
    return gradient_plan(cfg, n, d, T, rho, "toy-heavy-ball")   # DP-GD's T releases of the mean gradient


def run(problem, contexts, cfg):
    for c in contexts:   # each run's own state, in its context's slot
        c.state = {"plan": plan(cfg, c.rows(problem), problem.d, c.iterations, c.rho), "velocity": np.zeros(problem.d)}

    def step(W, M, G, ctxs, t):
        noisy = noisy_gradients(problem, G, ctxs, t)
        for j, c in enumerate(ctxs):
            c.state["velocity"] = cfg.momentum * c.state["velocity"] + noisy[j]
        return W - cfg.step * np.stack([c.state["velocity"] for c in ctxs])

    return iterate_batched(problem, contexts, step)


register(AlgorithmSpec("toy-heavy-ball", runner(HeavyBallConfig, run), "DP-GD with heavy-ball momentum",
                       label="heavy ball", role="first-order", paper=False, passes=lambda n, d, hyper: (1.0, 1.0),
                       batched=True, plan=planner(HeavyBallConfig, plan), relations=RELATIONS,
                       calibration="zcdp-plan", family="gradient descent", colour="#2f4f4f", marker="o",
                       audit=(AuditCase("toy-heavy-ball", ("output",), "T=1: one Gaussian release"),)))
'''

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "dpnewton-toy"
version = "0.1"

[project.entry-points."dpnewton.algorithms"]
toy = "dpnewton_toy"

[tool.setuptools]
py-modules = ["dpnewton_toy"]
'''


def install(root: Path, plugin: str) -> dict:
    """An environment whose PYTHONPATH holds the plugin module ``plugin``, installed under ``root``."""
    src, site = root / "src", root / "site"
    src.mkdir()
    (src / "dpnewton_toy.py").write_text(textwrap.dedent(plugin))
    (src / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert list(site.glob("dpnewton_toy-0.1.dist-info/entry_points.txt"))
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path)


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """An environment whose PYTHONPATH holds the installed plugin."""
    return install(tmp_path_factory.mktemp("plugin"), PLUGIN)


@pytest.mark.parametrize("fields, reason", [
    ('calibration="zcdp-plan", ', "calibration=''; add calibration=... naming how its noise is calibrated"),
    ("plan=planner(HeavyBallConfig, plan), ", "calibration='zcdp-plan' contradicts its plan"),
    ('colour="#2f4f4f", ', "colour=''; add colour='#rrggbb'")])
def test_a_plugin_card_without_its_calibration_or_style_is_refused(tmp_path, fields, reason):
    """A plugin whose card leaves out its calibration, contradicts it (no plan for a zCDP plan) or leaves out
    its colour: importing dpnewton.algorithms fails, naming the plugin, its package and the reason."""
    assert fields in PLUGIN
    env = install(tmp_path, PLUGIN.replace(fields, ""))
    res = subprocess.run([sys.executable, "-c", "import dpnewton.algorithms"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode != 0
    assert "the dpnewton algorithm plugin 'toy' (dpnewton_toy, package dpnewton-toy) failed to load" in res.stderr
    assert f"algorithm card 'toy-heavy-ball': {reason}" in res.stderr, res.stderr[-2000:]


def python(env, code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_the_card_is_registered_and_read(plugin_env):
    out = python(plugin_env, textwrap.dedent(f"""
        import json
        from dpnewton.algorithms import ALGORITHMS, PLUGINS
        from dpnewton.audit.mechanisms import default_mechanisms
        from dpnewton.estimator import supported_algorithms
        from dpnewton.pipeline import frontier
        from dpnewton.pipeline.plots import label
        print(json.dumps({{"plugins": PLUGINS, "registered": {NAME!r} in ALGORITHMS,
                          "estimator": {NAME!r} in supported_algorithms(), "role": frontier.role({NAME!r}),
                          "first_order": {NAME!r} in frontier.FIRST_ORDER,
                          "passes": frontier.run_passes({NAME!r}, 100, 5, 10),
                          "label": label({NAME!r}),
                          "audit": [m.name for m in default_mechanisms() if m.algorithm == {NAME!r}]}}))
        """))
    got = json.loads(out)
    assert got == {"plugins": ["toy"], "registered": True, "estimator": True, "role": "first-order",
                   "first_order": True, "passes": 10.0, "label": "heavy ball", "audit": [NAME]}


def test_generated_config_docs_do_not_depend_on_the_plugin(plugin_env):
    """config/README.md's generated table is the same with the plugin installed; the listing command has it."""
    from dpnewton.pipeline import config_reference

    table = python(plugin_env, "from dpnewton.pipeline.config_reference import table; print(table(), end='')")
    assert table == config_reference.table() and NAME not in table
    listed = python(plugin_env, "from dpnewton.pipeline.config_reference import main; main(['--algorithms'])")
    assert f"{NAME}\tfirst-order\tzcdp-plan\tplugin" in listed.splitlines()


def test_cli_run_and_estimator(plugin_env, tmp_path):
    rng_rows = "\n".join(f"{x:.3f},{-x:.3f},{int(x > 0)}" for x in [-0.9, -0.5, -0.2, 0.1, 0.4, 0.8] * 20)
    data = tmp_path / "toy.csv"
    data.write_text(rng_rows + "\n")
    res = subprocess.run([sys.executable, "-m", "dpnewton", "run", "--data", str(data), "--algorithm", NAME,
                          "--epsilon", "1", "--iterations", "20", "--seed", "0", "--json", "--ledger"],
                         env=plugin_env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    record = json.loads(res.stdout)
    assert record["algorithm"] == NAME and record["neighbouring"] == "add-remove"
    ledger = record["ledger"]
    assert sum(e["rho"] for e in ledger) == pytest.approx(record["rho"], rel=1e-12)
    out = python(plugin_env, textwrap.dedent(f"""
        import numpy as np
        from dpnewton import DPLogisticRegression
        X = np.loadtxt({str(data)!r}, delimiter=",")
        model = DPLogisticRegression(epsilon=1.0, algorithm={NAME!r}, iterations=20, data_norm=2.0,
                                     random_state=0).fit(X[:, :2], X[:, 2])
        print(model.privacy_record_["algorithm"], model.coef_.shape)
        """))
    assert out.split()[0] == NAME


def test_audit_catches_its_broken_variant(plugin_env):
    """The plugin's audit row runs through ``dpnewton audit``: the correct calibration stays within its claim,
    the tenth-noise variant exceeds it."""
    rows = {}
    for broken in ("none", "tenth-noise"):
        res = subprocess.run([sys.executable, "-m", "dpnewton", "audit", NAME, "--trials", "4000", "--epsilon", "1",
                              "--broken", broken, "--json"], env=plugin_env, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        rows[broken] = json.loads(res.stdout)[0]
    assert not rows["none"]["violates_claim"]
    assert rows["tenth-noise"]["violates_claim"], rows


def test_workflow_runs_the_plugin(plugin_env, tmp_path):
    """The .test workflow with the plugin added to its algorithms: its rows reach the summary and the frontier."""
    cfg = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    cfg["algorithms"][NAME] = {"grid": "first_order"}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(tmp_path / "run"),
                          "--configfile", str(config), "--snakefile", str(REPO / "Snakefile")],
                         env=plugin_env, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    import pandas as pd

    summary = pd.read_parquet(tmp_path / "run" / "results" / "tables" / "summary.parquet")
    assert (summary["algorithm"] == NAME).any()
    frontier = pd.read_parquet(tmp_path / "run" / "results" / "tables" / "frontier.parquet")
    mine = frontier[frontier["method"] == NAME]
    assert len(mine) and (mine["role"] == "first-order").all() and mine["passes_best_excess_loss"].notna().any()
