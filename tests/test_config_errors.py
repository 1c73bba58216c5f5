"""Pipeline level: every bad input stops Snakemake with a clear error and no results.

Each case writes a tiny config (derived from the tiny synthetic config below, itself a cut-down
``config/test.yaml``) into its own working directory and runs the real pipeline with a real target
(not a dry run), so a case the validation misses would visibly produce ``results/`` files:

* config cases: the config is rejected while the Snakefile is parsed (JSON schema in
  ``workflow/schemas/config.schema.yaml`` or ``dpnewton.pipeline.config.expand``), so no job runs;
* data cases: a ``custom`` dataset pointing at a bad CSV file, or a local copy of a real dataset
  whose checksum does not match; ``prepare_data`` fails with the data module's message and leaves
  neither a prepared file nor any other result (``logs/`` may exist).

All cases run in a pool of 3 concurrent Snakemake processes (module fixture) to keep the wall time
low; each test then checks its own case. Measured on the shared 2-core machine at load 8-12:
24 cases, 2 min 42 s wall, about 75 CPU-s (each case is one Snakemake start-up + parse, plus one
prepare_data job for the data cases).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
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


# name -> (config, regex that the output must contain, naming the offending key/value)
CONFIG_CASES = {
    "unknown_algorithm": (_with("algorithms.hess-clipp", {"grid": "g"}), r"'hess-clipp' is not a registered"),
    "unknown_dataset": (_with("datasets.synthetc", {"options": {}}), r"'synthetc' is not one of"),
    "epsilon_zero": (_cfg(epsilons=[0, 1]), r"0 is less than or equal to the minimum of 0"),
    "epsilon_negative": (_cfg(epsilons=[-0.5]), r"-0\.5 is less than or equal to the minimum of 0"),
    "delta_one": (_cfg(delta=1.0), r"1\.0 is greater than or equal to the maximum of 1"),
    "delta_above_one": (_cfg(delta=2), r"2 is greater than or equal to the maximum of 1"),
    "T_zero_in_grid": (_with("grids.g", [0, 2]), r"0 is less than the minimum of 1"),
    "T_zero_iterations": (_with("algorithms.dp-gd", {"iterations": [0]}), r"0 is less than the minimum of 1"),
    "empty_grid": (_with("grids.g", []), r"\[\] should be non-empty"),
    "empty_epsilons": (_cfg(epsilons=[]), r"\[\] should be non-empty"),
    "duplicate_epsilons": (_cfg(epsilons=[1, 1.0]),
                           r"(epsilons \[1, 1\.0\] contain duplicates|\[1, 1\.0\] has non-unique elements)"),
    "duplicate_seeds": (_cfg(seeds=[0, 0]), r"\[0, 0\] (is not valid|has non-unique)"),
    "duplicate_grid_values": (_with("grids.g", [2, 2, 3]), r"\[2, 2, 3\] has non-unique elements"),
    "duplicate_iterations": (_with("algorithms.dp-gd", {"iterations": [3, 3]}), r"\[3, 3\] has non-unique elements"),
    "holdout_one": (_cfg(holdout=1.0),
                    r"1\.0 is greater than or equal to the maximum of 1(.|\n)*instance\['holdout'\]"),
    "holdout_negative": (_cfg(holdout=-0.2), r"-0\.2 is less than the minimum of 0(.|\n)*instance\['holdout'\]"),
    # a numeric string such as "0.2" is read as a number (--config passes nested values as strings)
    "holdout_text": (_cfg(holdout="a fifth"), r"'a fifth' is not of type 'number', 'null'(.|\n)*instance\['holdout'\]"),
    "misspelled_top_key": (_cfg(epsilon=[1]), r"'epsilon' was unexpected"),
    "misspelled_nested_key": (_with("algorithms.dp-gd", {"gird": "g"}), r"'gird' was unexpected"),
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
    out = _check(outcomes, name, CONFIG_CASES[name][1])
    # stopped while parsing: no job was started
    assert "Select jobs to execute" not in out and "Finished jobid" not in out, name


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
