"""From a prepared dataset to a :class:`LogisticProblem` with its non-private optimum attached.

The optimum (w*, loss*, ||grad(w*)||, the solver's log) is cached beside the prepared file as
``<stem>.optimum.npz`` plus a JSON sidecar, and reused only while the prepared file's sha256 is
unchanged. All writes are atomic (temporary file + rename).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .algorithms.optimum import find_optimum
from .io import atomic_write_json, atomic_write_npz
from .loss import LogisticProblem


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def optimum_paths(prepared: Path) -> tuple[Path, Path]:
    prepared = Path(prepared)
    stem = prepared.with_suffix("")
    return Path(f"{stem}.optimum.npz"), Path(f"{stem}.optimum.json")


def compute_optimum(prepared: Path, out_npz: Path | None = None, out_json: Path | None = None,
                    tol: float = 1e-10) -> dict:
    """Solve for w* on the prepared dataset and write the cache; returns the JSON summary."""
    from .data import load_prepared

    prepared = Path(prepared)
    default_npz, default_json = optimum_paths(prepared)
    out_npz, out_json = Path(out_npz or default_npz), Path(out_json or default_json)
    data = load_prepared(prepared)
    problem = LogisticProblem.from_xy(data.X, data.y, name=data.name)
    opt = find_optimum(problem, tol=tol)
    if not opt.converged:
        raise RuntimeError(f"the optimum of {prepared} did not converge: ||grad|| = {opt.grad_norm:.3g} "
                           f"after {opt.iterations} Newton steps (tolerance {tol:g})")
    summary = {"dataset": data.name, "prepared_sha256": file_sha256(prepared), "n": problem.n,
               "d": problem.d, "loss_opt": opt.loss, "grad_norm": opt.grad_norm,
               "w_norm": float(np.linalg.norm(opt.w)), "newton_iterations": opt.iterations,
               "tolerance": tol, "solver": "Newton, pseudo-inverse direction, Armijo halving",
               "log": opt.log}
    atomic_write_npz(out_npz, w=opt.w, loss=np.array(opt.loss))
    atomic_write_json(out_json, summary)
    return summary


def load_problem_from_prepared(prepared: Path, optimum: bool = True) -> LogisticProblem:
    """The problem of a prepared file, with the cached optimum (recomputed if stale or missing)."""
    from .data import load_prepared

    prepared = Path(prepared)
    data = load_prepared(prepared)
    problem = LogisticProblem.from_xy(data.X, data.y, name=data.name)
    if optimum:
        npz, js = optimum_paths(prepared)
        fresh = False
        if npz.exists() and js.exists():
            meta = json.loads(js.read_text())
            fresh = meta.get("prepared_sha256") == file_sha256(prepared)
        if not fresh:
            compute_optimum(prepared)
        with np.load(npz, allow_pickle=False) as f:
            problem.set_optimum(f["w"], float(f["loss"]))
    return problem


def load_problem(dataset: str | None = None, data_file: str | None = None, data_dir: str | None = None,
                 cache_dir: str = "resources/data", optimum: bool = True, **options) -> LogisticProblem:
    """Prepare (or reuse) a named dataset or a user file, then load it as a problem."""
    from .data import prepare

    if (dataset is None) == (data_file is None):
        raise ValueError("give exactly one of dataset=NAME or data_file=PATH")
    if data_file is not None:
        prepared = prepare("custom", data_dir=data_dir, cache_dir=cache_dir, file=data_file, **options)
    else:
        prepared = prepare(dataset, data_dir=data_dir, cache_dir=cache_dir, **options)
    return load_problem_from_prepared(prepared.path, optimum=optimum)
