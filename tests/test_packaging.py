"""The package declares its type hints (PEP 561): py.typed exists and pyproject ships it."""

import tomllib
from pathlib import Path

import dpnewton

ROOT = Path(__file__).resolve().parents[1]


def test_py_typed_is_present_and_shipped():
    assert (Path(dpnewton.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["dpnewton"]
