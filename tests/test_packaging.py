"""The package declares its type hints (PEP 561): py.typed exists and pyproject ships it."""

import tomllib
from pathlib import Path

import dpnewton

ROOT = Path(__file__).resolve().parents[1]


def test_py_typed_is_present_and_shipped():
    assert (Path(dpnewton.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["dpnewton"]


def test_import_dpnewton_loads_no_pandas_and_no_pipeline():
    """The library's import (``dpnewton.fit``) stays small: no pandas, matplotlib or pipeline modules."""
    import subprocess
    import sys

    code = ("import sys, dpnewton; heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'matplotlib', 'seaborn', 'snakemake') or m.startswith('dpnewton.pipeline')); print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
