"""Pipeline level: every bad input stops Snakemake with a clear error and no results.

Each case writes a tiny config (derived from the tiny synthetic config below, itself a cut-down
``config/test.yaml``) into its own working directory and runs the real pipeline with a real target
(not a dry run), so a case the validation misses would visibly produce ``results/`` files:

* config cases: the config is rejected when the workflow loads it (``dpnewton.pipeline.config.load_config``,
  called by ``plan()`` in ``workflow/rules/common.smk`` while Snakemake builds the DAG: JSON schema in
  ``workflow/schemas/config.schema.yaml``, the NaN/infinity check, the hand checks), so no job runs; the
  output holds the exact one-line message (key, value, rule, fix) and no schema dump;
* data cases: a ``custom`` dataset pointing at a bad CSV file, or a local copy of a real dataset
  whose checksum does not match; ``prepare_data`` fails with the data module's message and leaves
  neither a prepared file nor any other result (``logs/`` may exist).

All cases run in a pool of 3 concurrent Snakemake processes (module fixture) to keep the wall time
low; each test then checks its own case, and each config case's message is also checked in process
(``load_config``). Measured on the shared 2-core machine at load 2-5: 32 Snakemake cases (24 config,
8 data) and 24 in-process ones, 1 min 50 s wall, about 105 CPU-s (each Snakemake case is one start-up
+ DAG build, plus one prepare_data job for the data cases); the 12 config cases of values a job would
fail on (refused by ``dpnewton.pipeline.config_checks``) bring it to 44 Snakemake cases.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
import yaml

from dpnewton.pipeline.config import load_config

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SHARED_A1A = REPO.parent / "shared" / "datasets" / "a1a" / "a1a.t"

# Targets: a config error must stop before anything runs; a data error must stop in prepare_data.
CONFIG_TARGET = "results/data/synthetic.npz"
DATA_TARGET = "aggregate"

TINY = {
    "data_dir": None,
    "allow_download": False,
    "datasets": {"synthetic": {"options": {"n": 200, "d": 4, "seed": 0}}},
    "epsilons": [1],
    "delta": None,
    "conversion": "bs16",
    "seeds": 1,
    "grids": {"g": [2, 3]},
    "algorithms": {"hess-clip": {"grid": "g"}, "dp-gd": {"grid": "g"}},
    "conversion_study": {"enabled": False},
    "curves": {"max_points": 5},
    "figures": {"formats": ["png"], "runtime_algorithms": ["dp-gd", "hess-clip"],
                "convergence_epsilons": [1], "convergence_algorithms": ["hess-clip"],
                "minibatch_algorithms": []},
    "table1": {"baseline": "dp-gd", "ours": "hess-clip"},
}


def _cfg(**top):
    c = copy.deepcopy(TINY)
    c.update(top)
    return c


def _with(path: str, value):
    """TINY with the nested key ``a.b.c`` set to ``value``."""
    c = copy.deepcopy(TINY)
    keys = path.split(".")
    node = c
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return c


# name -> (config, the exact one-line message: key, value, rule and fix). Schema errors are the most
# relevant jsonschema error (best_match) rewritten by dpnewton.pipeline.schema; NaN and infinity are
# rejected by its check_finite (JSON schema's bounds let NaN through); the rest by check_config/expand.
TOP_KEYS = ("algorithms, allow_download, claims, conversion, conversion_study, curves, data_dir, datasets, delta, "
            "epsilons, figures, grids, holdout, job_grouping, job_split, missing_algorithms, precision, "
            "publish_figures, seeds, seeds_per_job, table1, timing, tracks, tuning")
SEEDS = "set seeds to an integer >= 1, or a non-empty list of distinct integers >= 0"
HOLDOUT = "set holdout to a number >= 0 and < 1, or null"
CONFIG_CASES = {
    "unknown_algorithm": (_with("algorithms.hess-clipp", {"grid": "g"}),
                          "config algorithms: 'hess-clipp' is not a registered algorithm (registered: aop, "
                          "cubic-newton, damped-newton, dp-gd, dp-gd-oracle, dp-sgd, hess-add, hess-clip, "
                          "minibatch-hess-add, minibatch-hess-clip, minibatch-qu-add, minibatch-qu-clip, objpert, "
                          "precond-dp-gd, qu-add, qu-clip); set missing_algorithms: skip to drop unregistered ones"),
    "unknown_dataset": (_with("datasets.synthetc", {"options": {}}),
                        "config key datasets.synthetc: 'synthetc' is not a registered dataset (did you mean "
                        "synthetic?); the datasets are a1a, a5a, a6a, a9a, w5a, w7a, w8a, phishing, adult, covertype, "
                        "synthetic, fashion-mnist, protein, custom: rename it to one of those or remove it"),
    "job_split_word": (_cfg(job_split="fast"), "config key job_split: 'fast' is not one of ['auto', 'wide']; set "
                                              "job_split to one of auto, wide, or a number > 0"),
    "job_split_zero": (_cfg(job_split=0), "config key job_split: 0 is less than or equal to the minimum of 0; set "
                                          "job_split to one of auto, wide, or a number > 0"),
    "epsilon_zero": (_cfg(epsilons=[0, 1]), "config key epsilons[0]: 0 is less than or equal to the minimum of 0; "
                                            "set epsilons[0] to a number > 0"),
    "epsilon_negative": (_cfg(epsilons=[-0.5]), "config key epsilons[0]: -0.5 is less than or equal to the minimum "
                                                "of 0; set epsilons[0] to a number > 0"),
    "epsilon_nan": (_cfg(epsilons=[float("nan")]),
                    "config key epsilons[0]: nan is not a number (NaN); set epsilons[0] to a number > 0"),
    "epsilon_inf": (_cfg(epsilons=[1, float("inf")]),
                    "config key epsilons[1]: inf is not a finite number; set epsilons[1] to a number > 0"),
    "hyper_nan": (_with("algorithms.dp-gd", {"grid": "g", "hyper": {"step": float("nan")}}),
                  "config key algorithms.dp-gd.hyper.step: nan is not a number (NaN); set algorithms.dp-gd.hyper.step "
                  "to a finite number"),
    "delta_one": (_cfg(delta=1.0), "config key delta: 1.0 is greater than or equal to the maximum of 1; set delta "
                                   "to a number > 0 and < 1, or null"),
    "delta_above_one": (_cfg(delta=2), "config key delta: 2 is greater than or equal to the maximum of 1; set delta "
                                       "to a number > 0 and < 1, or null"),
    "T_zero_in_grid": (_with("grids.g", [0, 2]), "config key grids.g[0]: 0 is less than the minimum of 1; set "
                                                 "grids.g[0] to an integer >= 1"),
    "T_zero_iterations": (_with("algorithms.dp-gd", {"iterations": [0]}),
                          "config key algorithms.dp-gd.iterations[0]: 0 is less than the minimum of 1; set "
                          "algorithms.dp-gd.iterations[0] to an integer >= 1"),
    "empty_grid": (_with("grids.g", []), "config key grids.g: [] should be non-empty; set grids.g to a non-empty "
                                         "list of distinct integers >= 1"),
    "empty_epsilons": (_cfg(epsilons=[]), "config key epsilons: [] should be non-empty; set epsilons to a non-empty "
                                          "list of distinct numbers > 0"),
    "duplicate_epsilons": (_cfg(epsilons=[1, 1.0]), "config key epsilons: [1, 1.0] has non-unique elements; set "
                                                    "epsilons to a non-empty list of distinct numbers > 0"),
    "seeds_zero": (_cfg(seeds=0), f"config key seeds: 0 is less than the minimum of 1; {SEEDS}"),
    "seeds_text": (_cfg(seeds="two"), f"config key seeds: 'two' is not accepted; {SEEDS}"),
    "duplicate_seeds": (_cfg(seeds=[0, 0]), f"config key seeds: [0, 0] has non-unique elements; {SEEDS}"),
    "duplicate_grid_values": (_with("grids.g", [2, 2, 3]), "config key grids.g: [2, 2, 3] has non-unique elements; "
                                                           "set grids.g to a non-empty list of distinct integers >= 1"),
    "duplicate_iterations": (_with("algorithms.dp-gd", {"iterations": [3, 3]}),
                             "config key algorithms.dp-gd.iterations: [3, 3] has non-unique elements; set "
                             "algorithms.dp-gd.iterations to a non-empty list of distinct integers >= 1"),
    "holdout_one": (_cfg(holdout=1.0),
                    f"config key holdout: 1.0 is greater than or equal to the maximum of 1; {HOLDOUT}"),
    "holdout_negative": (_cfg(holdout=-0.2), f"config key holdout: -0.2 is less than the minimum of 0; {HOLDOUT}"),
    # a numeric string such as "0.2" is read as a number (--config passes nested values as strings)
    "holdout_text": (_cfg(holdout="a fifth"),
                     f"config key holdout: 'a fifth' is not of type 'number', 'null'; {HOLDOUT}"),
    "misspelled_top_key": (_cfg(epsilon=[1]), "config key epsilon: unknown key ('epsilon' was unexpected; did you mean "
                                              "epsilons or precision?); the top level takes "
                                              f"{TOP_KEYS}: rename or remove it"),
    "misspelled_nested_key": (_with("algorithms.dp-gd", {"gird": "g"}),
                              "config key algorithms.dp-gd.gird: unknown key ('gird' was unexpected; did you mean "
                              "grid?); algorithms.dp-gd takes algorithm, epsilons, grid, hyper, iterations, "
                              "max_iterations, max_iterations_by_epsilon: rename or remove it"),
    # values the schema accepts and a job would fail on: refused at load by dpnewton.pipeline.config_checks
    "hyper_misspelled": (_with("algorithms.dp-gd", {"grid": "g", "hyper": {"stpe": 16}}),
        'config key algorithms.dp-gd.hyper: {"stpe": 16} is not a configuration of dp-gd (unknown '
        "hyper-parameter(s) ['stpe']; allowed: ['average', 'reset', 'step']); correct it "
        '(docs/algorithms.md lists the hyper-parameters)'),
    "hyper_out_of_range": (_with("algorithms.dp-gd", {"grid": "g", "hyper": {"step": -1}}),
        'config key algorithms.dp-gd.hyper: {"step": -1} is not a configuration of dp-gd (step=-1 must be '
        '> 0); correct it (docs/algorithms.md lists the hyper-parameters)'),
    "hyper_wrong_type": (_with("algorithms.dp-gd", {"grid": "g", "hyper": {"step": "big"}}),
        'config key algorithms.dp-gd.hyper: {"step": "big"} is not a configuration of dp-gd (a value of '
        "the wrong type: '>' not supported between instances of 'str' and 'int'); correct it "
        '(docs/algorithms.md lists the hyper-parameters)'),
    "hyper_average": (_with("algorithms.hess-clip", {"grid": "g", "hyper": {"average": "last"}}),
        'config key algorithms.hess-clip.hyper: {"average": "last"} is not a configuration of hess-clip '
        "(average='last' is unknown; choose one of none, uniform, tail); correct it (docs/algorithms.md "
        'lists the hyper-parameters)'),
    "dataset_option_unknown": (_with("datasets.synthetic.options", {"n": 200, "d": 4, "rows": 5}),
        "config key datasets.synthetic.options: dataset 'synthetic' does not take option 'rows'; allowed: "
        'allow_download, d, force, n, seed, verify_checksum; correct or remove it'),
    "dataset_option_range": (_with("datasets.synthetic.options", {"n": -5, "d": 4}),
        "config key datasets.synthetic.options: dataset 'synthetic': option n must be an integer >= 1, got "
        '-5; correct or remove it'),
    "epsilon_unrepresentable": (_cfg(epsilons=[1, 1e308]),
        "config key epsilons: epsilon 1e+308 is above 1e+06, the largest epsilon the package's mechanisms "
        "calibrate (no privacy is left there); use a smaller epsilon (the paper's grid ends at 10)"),
    "epsilon_below_conversion": (_cfg(epsilons=[1e-300]),
        'config key epsilons: epsilon 1e-300 has no budget rho at delta=n^-2 = 2.5e-05 on synthetic, '
        "conversion bs16: epsilon=1e-300, delta=2.5e-05, conversion='bs16': epsilon is below 1.98944e-10 = "
        'delta^2/pi, the smallest epsilon bs16 represents at this delta (BS16 Lemma 3.6 bottoms out at rho '
        "= delta^2/pi); use epsilon >= 2.01e-10, a smaller delta, or conversion 'cks' or 'gdp'"),
    "delta_above_one_over_n": (_cfg(delta=0.5),
        'config key delta: on dataset synthetic, delta=0.5 is at least 1/n = 0.005 for n=200 rows: it '
        'allows releasing a row in the clear; pass a delta below 1/n, e.g. the default n^-2 = 2.5e-05 '
        '(omit delta)'),
    "holdout_empties_a_split": (_cfg(holdout=0.999),
        "config key holdout: holdout=0.999 of the 200 rows of 'synthetic' gives 200 test rows; both splits "
        'need at least one row; use a fraction that leaves rows in both splits'),
    "aop_grid": (_with("algorithms.aop", {"grid": "g"}),
        'config key algorithms.aop: aop is not iterative (its runs ignore T), so its T grid [2, 3] must be '
        '[1]; set iterations: [1]'),
    "seed_too_large": (_cfg(seeds=[2**70]),
        'config key seeds: 1180591620717411303424 is above 2**63 - 1, the largest seed the run rows store; '
        'use smaller seeds'),
}

# name -> (CSV text, regex of the data module's message)
DATA_CASES = {
    "nan_feature": ("1,nan,1\n2,3,0\n4,5,1\n", r"features contain 1 NaN and 0 inf"),
    "inf_feature": ("1,2,1\n2,inf,0\n4,5,1\n", r"features contain 0 NaN and 1 inf"),
    "one_label_value": ("1,2,1\n2,3,1\n4,5,1\n", r"exactly two distinct values.*found 1"),
    "three_label_values": ("1,2,0\n2,3,1\n4,5,2\n", r"exactly two distinct values.*found 3"),
    "zero_rows": ("f1,f2,label\n", r"zero rows"),
    "ragged_csv": ("1,2,0\n3,4,5,1\n", r"ragged CSV, line 2 has 4 fields"),
}


def _env():
    return dict(os.environ, PYTHONHASHSEED="0")


def run_snakemake(workdir: Path, cfg: dict, target: str, timeout: int = 300) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_path = workdir / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", target, "--cores", "1",
           "--directory", str(workdir), "--configfile", str(cfg_path)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=_env())


def result_files(workdir: Path) -> list[str]:
    res = workdir / "results"
    return sorted(str(p.relative_to(workdir)) for p in res.rglob("*") if p.is_file()) if res.exists() else []


def _data_case_config(workdir: Path, name: str) -> dict:
    if name in DATA_CASES:
        text, _ = DATA_CASES[name]
        f = workdir / "input" / f"{name}.csv"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        cfg = copy.deepcopy(TINY)
        cfg["datasets"] = {"custom": {"options": {"file": str(f), "format": "csv"}}}
        return cfg
    # checksum cases: a local a1a copy under data_dir that is not the canonical file
    folder = workdir / "data" / "a1a"
    folder.mkdir(parents=True, exist_ok=True)
    if name == "truncated_copy":
        full = SHARED_A1A.read_bytes() if SHARED_A1A.exists() else b"-1 3:1 11:1 14:1\n+1 5:1 7:1 9:1\n" * 50
        (folder / "a1a.t").write_bytes(full[: len(full) // 2])
    else:  # "checksum_mismatch": a well-formed LIBSVM file with other content
        (folder / "a1a.t").write_text("-1 3:1 11:1 14:1\n+1 5:1 7:1 9:1\n")
    cfg = copy.deepcopy(TINY)
    cfg["data_dir"] = str(workdir / "data")
    cfg["datasets"] = {"a1a": {"options": {}}}
    return cfg


CHECKSUM_CASES = {"truncated_copy": r"checksum mismatch for .*a1a\.t",
                  "checksum_mismatch": r"checksum mismatch for .*a1a\.t"}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Run every case (3 at a time); name -> (returncode, combined output, result files)."""
    base = tmp_path_factory.mktemp("config_errors")
    jobs = {}
    for name, (cfg, _) in CONFIG_CASES.items():
        jobs[name] = (base / name, cfg, CONFIG_TARGET)
    for name in list(DATA_CASES) + list(CHECKSUM_CASES):
        wd = base / name
        wd.mkdir()
        jobs[name] = (wd, _data_case_config(wd, name), DATA_TARGET)

    def one(item):
        name, (wd, cfg, target) = item
        res = run_snakemake(wd, cfg, target)
        out = res.stdout + res.stderr
        logs = wd / "logs"
        if logs.exists():  # the failed rule's log (also shown by show-failed-logs)
            out += "".join(p.read_text(errors="replace") for p in logs.rglob("*.log"))
        return name, (res.returncode, out, result_files(wd))

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(one, jobs.items()))


def _check(outcomes, name, pattern):
    rc, out, files = outcomes[name]
    assert rc != 0, f"{name}: snakemake succeeded; output tail:\n{out[-2000:]}"
    assert re.search(pattern, out), f"{name}: message {pattern!r} not in output:\n{out[-3000:]}"
    assert files == [], f"{name}: results written: {files}"
    return out


@pytest.mark.parametrize("name", list(CONFIG_CASES))
def test_bad_config(outcomes, name):
    message = CONFIG_CASES[name][1]
    out = _check(outcomes, name, re.escape(message))
    # the message is a whole line of the output, and the only error text: no schema dump
    assert message in [line.strip() for line in out.splitlines()], name
    assert "Failed validating" not in out and "On instance" not in out and len(out.splitlines()) < 60, out
    # stopped while building the DAG: no job was started
    assert "Select jobs to execute" not in out and "Finished jobid" not in out, name


@pytest.mark.parametrize("name", list(CONFIG_CASES))
def test_the_loader_raises_the_message(name):
    """The same message, in process: load_config (what the workflow's plan() calls) raises it."""
    with pytest.raises((jsonschema.ValidationError, ValueError)) as err:
        load_config(copy.deepcopy(CONFIG_CASES[name][0]))
    assert str(err.value) == CONFIG_CASES[name][1]


@pytest.mark.parametrize("name", list(DATA_CASES))
def test_bad_custom_csv(outcomes, name):
    out = _check(outcomes, name, DATA_CASES[name][1])
    assert f"{name}.csv" in out                       # the message names the file
    assert "Error in rule prepare_data" in out       # failed where the data are read, nothing downstream ran
    assert "Rule: run_job" not in out and "Rule: optimum" not in out


@pytest.mark.parametrize("name", list(CHECKSUM_CASES))
def test_bad_local_copy(outcomes, name):
    out = _check(outcomes, name, CHECKSUM_CASES[name])
    assert "Error in rule prepare_data" in out
    assert "Rule: run_job" not in out and "Rule: optimum" not in out
