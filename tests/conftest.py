"""Shared fixtures: small synthetic problems with known optimum, and the shared data folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from dpnewton import loss
from dpnewton.algorithms.optimum import find_optimum
from dpnewton.loss import LogisticProblem

SHARED_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str):
    """benchmarks/<name>.py as a module. The scripts import their siblings (common.py, ...) by name from
    their own folder; those names are removed from sys.modules afterwards (the module keeps its
    references), so that no other test sees them."""
    before = set(sys.modules)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
        for sibling in {p.stem for p in BENCHMARKS.glob("*.py")} & (set(sys.modules) - before):
            sys.modules.pop(sibling)
    return module


def make_problem(n: int = 400, d: int = 6, seed: int = 0, scale: float = 1.0) -> LogisticProblem:
    """Unit-sphere features, w_true = scale * ones, Bernoulli(sigmoid) labels; optimum attached."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    p = 1.0 / (1.0 + np.exp(-X @ (scale * np.ones(d))))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    problem = LogisticProblem.from_xy(X, y, name=f"toy{seed}")
    opt = find_optimum(problem)
    problem.set_optimum(opt.w, opt.loss)
    return problem


@pytest.fixture(scope="session")
def toy_problem() -> LogisticProblem:
    return make_problem()


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"{SHARED_DATASETS} is absent (tests that use the real data files need it)")
    return SHARED_DATASETS


@pytest.fixture
def blocked_pass(monkeypatch):
    """The blocked pass over Z (one gemv pair per run and block) at every stack width, where a run's bits are
    those of the run alone (``loss.GEMM_MIN_RUNS`` raised above any batch)."""
    monkeypatch.setattr(loss, "GEMM_MIN_RUNS", 10 ** 9)
