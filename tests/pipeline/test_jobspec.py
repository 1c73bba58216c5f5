"""The typed job spec (dpnewton.pipeline.jobspec): the plan's specs round-trip exactly through their JSON form,
a malformed spec is refused naming the key, a job runs the experiment chain of run_algorithm (same bits, rho
computed once per group), and a misspelled hyper-parameter in a workflow config is refused at load time,
before any job (in process and by `snakemake --dry-run`)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpnewton import experiment
from dpnewton.data.prepare import prepare
from dpnewton.experiment import run_algorithm
from dpnewton.pipeline import jobs
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.jobspec import JobSpec, JobSpecError
from dpnewton.pipeline.plan import expand
from dpnewton.problems import load_split_from_prepared
from tests.pipeline.test_config_errors import TINY, _env

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["config/config.yaml", "config/claims.yaml", "config/paper.yaml", "config/test.yaml"]


@pytest.mark.parametrize("path", SHIPPED)
def test_every_planned_spec_round_trips_through_json(path):
    plan = expand(load_config(yaml.safe_load((REPO / path).read_text())), check_data=False)
    for job in plan.jobs:
        text = json.dumps(job.spec)                       # what Snakemake params carry: JSON-able
        spec = JobSpec.from_dict(json.loads(text))
        assert spec.to_dict() == job.spec, job.key
        assert spec.algorithm == job.algorithm and spec.dataset == job.dataset


def test_the_shipped_configs_cover_every_shape():
    shapes = set()
    for path in SHIPPED:
        plan = expand(load_config(yaml.safe_load((REPO / path).read_text())), check_data=False)
        shapes |= {JobSpec.from_dict(j.spec).shape for j in plan.jobs}
    assert shapes == {"single", "shared", "grouped"}


def _single() -> dict:
    return {"dataset": "synthetic", "dataset_options": {}, "algorithm": "dp-gd", "base_algorithm": "dp-gd",
            "conversion": "bs16", "primary": True, "eps_label": "1", "epsilon": 1.0, "seeds": [0, 1],
            "iterations": [1, 2], "delta": None, "hyper": {}, "curves_max_points": 0, "extend": None}


@pytest.mark.parametrize("change, needle", [
    ({"learnign_rate": 1}, r"unknown key\(s\) \['learnign_rate'\]; the valid keys are dataset, "),
    ({"epsilon": None}, r"epsilon: None must be a finite number"),
    ({"eps_label": "2"}, r"eps_label: '2' is not the label of epsilon 1.0"),
    ({"seeds": [0, -1]}, r"seeds: \[0, -1\] must be a non-empty list of integers >= 0"),
    ({"iterations": []}, r"iterations: \[\] must be a non-empty list of integers >= 1"),
    ({"extend": {"factr": 2, "max_iterations": 8}}, r"extend: unknown key\(s\) \['factr'\]; missing key\(s\) "
                                                   r"\['factor'\]"),
    ({"primary": 1}, r"primary: 1 must be true or false"),
])
def test_a_malformed_spec_is_refused_naming_the_key(change, needle):
    with pytest.raises(JobSpecError, match=needle):
        JobSpec.from_dict({**_single(), **change})


def test_a_missing_key_is_named():
    spec = _single()
    del spec["delta"]
    with pytest.raises(JobSpecError, match=r"missing key\(s\) \['delta'\]"):
        JobSpec.from_dict(spec)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    return prepare("synthetic", cache_dir=d, out=d / "synthetic.npz", n=500, d=4, seed=1).path


def test_a_job_runs_the_chain_of_run_algorithm(prepared, tmp_path, monkeypatch):
    """Same identities, budget and results as the library's run_algorithm; one epsilon -> rho conversion per group
    (two trajectories: two step sizes cannot share one, so two groups)."""
    conversions = []
    real = experiment.epsilon_to_rho

    def counting(*args, **kwargs):
        conversions.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(experiment, "epsilon_to_rho", counting)
    spec = {**_single(), "algorithm": "dp-gd", "grouped": True, "curves_max_points": 0}
    del spec["conversion"], spec["primary"], spec["epsilon"], spec["eps_label"], spec["iterations"]
    del spec["extend"], spec["hyper"]
    members = {}
    for name, step in (("dp-gd", 1.0), ("dp-gd-fast", 4.0)):
        members[f"{name}/bs16/eps~1"] = {"algorithm": name, "conversion": "bs16", "primary": True, "epsilon": 1.0,
                                         "eps_label": "1", "curves_max_points": 0, "average": "none",
                                         "hyper": {"step": step}, "iterations": [1, 3], "extend": None}
    spec["members"] = members
    rows = jobs.run_job(prepared, JobSpec.from_dict(spec), tmp_path / "rows.csv", tmp_path / "curves.parquet")
    assert len(conversions) == 2
    problem, _ = load_split_from_prepared(Path(prepared))
    for name, step in (("dp-gd", 1.0), ("dp-gd-fast", 4.0)):
        alone = run_algorithm(problem, "synthetic", "dp-gd", 1.0, [0, 1], [1, 3], conversion="bs16",
                              hyper={"step": step})
        mine = rows[rows["algorithm"] == name].sort_values(["seed", "iterations"])
        want = sorted((r.identity.seed, r.identity.iterations, r.released_excess_loss, r.ledger.budget_rho)
                      for r in alone)
        got = list(zip(mine["seed"], mine["iterations"], mine["excess_loss"], mine["rho"]))
        got, want = np.array(got, dtype=float), np.array(want, dtype=float)
        np.testing.assert_array_equal(got[:, [0, 1, 3]], want[:, [0, 1, 3]])       # identities and rho: exact
        # the job steps both groups in one lockstep batch: equal to rounding (dpnewton.pipeline.jobs docstring)
        np.testing.assert_allclose(got[:, 2], want[:, 2], rtol=1e-12)


MISSPELLED = {
    "entry key": ({"hess-clip": {"grid": "g", "learnign_rate": 1}},
                  "config key algorithms.hess-clip.learnign_rate: unknown key ('learnign_rate' was unexpected); "
                  "algorithms.hess-clip takes algorithm, epsilons, grid, hyper, iterations, max_iterations, "
                  "max_iterations_by_epsilon: rename or remove it"),
    "hyper-parameter": ({"hess-clip": {"grid": "g", "hyper": {"learnign_rate": 1}}},
                        "config key algorithms.hess-clip.hyper: {\"learnign_rate\": 1} is not a configuration of "
                        "hess-clip (unknown hyper-parameter(s) ['learnign_rate']; allowed: ['average', 'constants', "
                        "'grad_frac', 'lambda0', 'lambda_mode', 'reg', 'reset', 'trace_coeff', 'trace_frac']); "
                        "correct it (docs/algorithms.md lists the hyper-parameters)"),
    "grid name": ({"hess-clip": {"grid": "gg"}},
                  "config algorithms.hess-clip.grid: 'gg' is not a key of grids (g)"),
}


def _misspelled(name: str) -> dict:
    cfg = copy.deepcopy(TINY)
    cfg["grids"] = {"g": [1, 2]}
    cfg["algorithms"] = MISSPELLED[name][0]
    return cfg


@pytest.mark.parametrize("name", list(MISSPELLED))
def test_a_misspelled_algorithm_key_is_refused_at_load(name):
    with pytest.raises(Exception) as err:
        load_config(_misspelled(name))
    assert str(err.value) == MISSPELLED[name][1]


def test_a_misspelled_hyper_parameter_stops_the_dry_run_before_any_job(tmp_path):
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(_misspelled("hyper-parameter"), sort_keys=False))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--dry-run", "--cores", "1", "--directory", str(tmp_path),
                          "--configfile", str(cfg_path)], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=_env())
    out = res.stdout + res.stderr
    assert res.returncode != 0 and MISSPELLED["hyper-parameter"][1] in out, out[-3000:]
    assert "Job stats" not in out and "rule run_job" not in out and "rule prepare_data" not in out, out[-3000:]
