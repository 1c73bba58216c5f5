"""Packaging: the type hints are shipped (PEP 561), and ``pip install dpnewton`` (the library, without
the ``benchmark`` extra) is enough for the estimator, ``dpnewton.fit`` and the library's commands, while
the benchmark's modules name the extra to install."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import dpnewton

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: the distributions only the benchmark (pipeline, tables, figures, reports) needs
BENCHMARK_ONLY = {"pandas", "pyarrow", "matplotlib", "seaborn", "pyyaml", "jsonschema"}
#: their import names, which BLOCKER makes look not installed
BLOCKED_MODULES = ("pandas", "pyarrow", "matplotlib", "seaborn", "yaml", "jsonschema")
BLOCKER = f"""
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""
INSTALL = 'pip install "dpnewton[benchmark]"'


def _without_benchmark(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter, on the dpnewton under test, in which the benchmark-only packages
    cannot be imported."""
    path = os.pathsep.join(filter(None, [str(Path(dpnewton.__file__).parents[1]), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", BLOCKER + code, *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "PYTHONPATH": path})


def _name(requirement: str) -> str:
    """The distribution name of a PEP 508 requirement (``pandas>=2.1`` -> ``pandas``)."""
    for stop in "<>=!~[;( ":
        requirement = requirement.split(stop)[0]
    return requirement.strip().lower()


def test_py_typed_is_present_and_shipped():
    assert (Path(dpnewton.__file__).parent / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["dpnewton"]


def test_import_dpnewton_loads_no_pandas_and_no_pipeline():
    """The library's import (``dpnewton.fit``) stays small: no pandas, matplotlib or pipeline modules."""
    code = ("import sys, dpnewton; heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'matplotlib', 'seaborn', 'snakemake') or m.startswith('dpnewton.pipeline')); print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_core_dependencies_are_the_library_s_and_the_benchmark_extra_has_the_rest():
    project = PYPROJECT["project"]
    core = {_name(r) for r in project["dependencies"]}
    assert core == {"numpy", "scipy", "scikit-learn", "dp-accounting", "threadpoolctl"}
    extras = project["optional-dependencies"]
    assert BENCHMARK_ONLY <= {_name(r) for r in extras["benchmark"]}
    assert "dpnewton[benchmark]" in extras["workflow"]  # the workflow runs the benchmark's modules


LIBRARY_USE = """
import warnings
import numpy as np
from sklearn.pipeline import make_pipeline
import dpnewton
from dpnewton import DPLogisticRegression
from dpnewton.algorithms import ALGORITHMS
from dpnewton.cli import main
from dpnewton.preprocessing import PrivateFeatureScaler
from dpnewton.privacy import epsilon_to_rho

warnings.simplefilter("ignore")  # the PrivacyWarning about data-dependent preprocessing
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 3)) * [1.0, 10.0, 100.0]  # raw, unscaled features
y2, y3 = (X[:, 0] > 0).astype(int), np.digitize(X[:, 0], [-0.5, 0.5])
fits = [({}, y2), ({}, y3), ({"delta": 0}, y2), ({"delta": 0, "multi_class": "ovr"}, y3),
        ({"bounds": [(-5, 5), (-50, 50), (-500, 500)]}, y2), ({"data_norm": 500.0}, y3)]
for options, y in fits:
    model = DPLogisticRegression(epsilon=1.0, random_state=0, **options).fit(X, y)
    assert set(model.predict(X)) <= set(y) and 0.0 <= model.score(X, y) <= 1.0, options
pipe = make_pipeline(PrivateFeatureScaler(epsilon=0.5, random_state=0), DPLogisticRegression(random_state=0))
assert 0.0 <= pipe.fit(X, y2).score(X, y2) <= 1.0
result = dpnewton.fit(X, 2.0 * y2 - 1.0, "dp-gd", epsilon=1.0, iterations=3, seed=0)
assert result.weights.shape == (3,) and result.record["epsilon"] == 1.0
assert epsilon_to_rho(1.0, 1e-6, "bs16") > 0 and "dp-gd" in ALGORITHMS

np.savetxt("train.csv", np.column_stack([X, y2]), delimiter=",")
assert main(["run", "--data", "train.csv", "--algorithm", "objpert", "--epsilon", "1", "--json",
             "--save-model", "model.json"]) == 0
assert main(["predict", "--model", "model.json", "--data", "train.csv"]) == 0
assert main(["conversions", "--epsilon", "1", "--delta", "1e-6"]) == 0
print("library ok")
"""


def test_the_library_and_its_commands_run_without_the_benchmark_packages(tmp_path):
    res = _without_benchmark(LIBRARY_USE, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.rstrip().endswith("library ok")


def test_the_benchmark_s_modules_name_the_extra_when_its_packages_are_missing(tmp_path):
    """``import dpnewton.pipeline...`` stops with the install command; a command that reads a benchmark
    dataset with pandas (``dpnewton prepare covertype``) prints that command on one line, no traceback."""
    res = _without_benchmark("import dpnewton.pipeline.jobs", cwd=tmp_path)
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: dpnewton.pipeline needs pandas") and INSTALL in last, last

    source = tmp_path / "data" / "covtype" / "covtype.data.gz"
    source.parent.mkdir(parents=True)
    source.write_bytes(b"")  # never parsed: reading it needs pandas
    res = _without_benchmark("from dpnewton.cli import main; sys.exit(main(sys.argv[1:]))",
                             "prepare", "covertype", "--data-dir", str(tmp_path / "data"),
                             "--cache-dir", str(tmp_path / "cache"), "--no-download",
                             "--option", "verify_checksum=false", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("dpnewton prepare: error: ") and "pandas" in res.stderr and INSTALL in res.stderr
