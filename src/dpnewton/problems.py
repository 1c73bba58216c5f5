"""From a prepared dataset to a :class:`LogisticProblem` with its non-private optimum attached.

The optimum (w*, loss*, ||grad(w*)||, the solver's log) is cached beside the prepared file as
``<stem>.optimum.npz`` plus a JSON sidecar, and reused only while the prepared file's sha256 is
unchanged. With a holdout (:mod:`dpnewton.holdout`) the problem and its optimum are those of the
training split, cached as ``<stem>.holdout~F.optimum.npz`` (+ JSON recording F). All writes are
atomic (temporary file + rename).

The cache is verified on every read (:func:`read_optimum`): the JSON must parse and match the digest
it records of itself (``json_sha256``, :func:`dpnewton.io.json_digest`), the npz must have
the SHA-256 the JSON recorded when both were written (``npz_sha256``; a cache written before that
field existed must at least be a complete zip), and w* and loss* must agree with the JSON's ``d``
and ``loss_opt``. A damaged cache raises :class:`dpnewton.io.DamagedFileError` naming the file and
the fix; unlike a missing or stale cache it is not recomputed on the spot, because in the workflow
the file belongs to rule optimum, whose readers Snakemake would otherwise rerun. The
npz is byte-reproducible (:func:`dpnewton.io.atomic_write_npz`), so recomputing an optimum gives the
same files and checksums, and Snakemake then reruns nothing that read them (docs/pipeline.md).

The loaders take ``precision`` (:data:`dpnewton.loss.PRECISIONS`): the problem is built and its
optimum computed or read in float64, then converted (:meth:`LogisticProblem.with_precision`), so a
float32 problem carries the float64 w* and loss*; a holdout's test problem stays float64.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

from .algorithms.optimum import find_optimum
from .data import load_prepared, prepare
from .holdout import heldout_metrics, holdout_fraction, holdout_label, split_problems
from .io import (JSON_DIGEST_KEY, DamagedFileError, atomic_write_json, atomic_write_npz, check_json_digest, check_npz,
                 file_sha256, json_digest, read_json)
from .loss import LogisticProblem, check_precision


def optimum_paths(prepared: Path, holdout: float | None = None) -> tuple[Path, Path]:
    """Cache files of the optimum: ``<stem>.optimum.npz/.json``, or, for the training split of a
    holdout F, ``<stem>.holdout~F.optimum.npz/.json``, so the two are never confused."""
    prepared = Path(prepared)
    stem = str(prepared.with_suffix(""))
    fraction = holdout_fraction(holdout)
    if fraction is not None:
        stem += f".holdout~{holdout_label(fraction)}"
    return Path(f"{stem}.optimum.npz"), Path(f"{stem}.optimum.json")


def compute_optimum(prepared: Path, out_npz: Path | None = None, out_json: Path | None = None,
                    tol: float = 1e-10, holdout: float | None = None) -> dict:
    """Solve for w* on the prepared dataset (its training split with a holdout) and write the cache;
    returns the JSON summary.

    With a holdout the summary also holds ``holdout``, ``n_test`` (``n`` is the training rows) and
    w*'s ``train_accuracy``, ``test_accuracy`` and ``test_log_loss`` (:mod:`dpnewton.holdout`).
    """
    prepared = Path(prepared)
    fraction = holdout_fraction(holdout)
    default_npz, default_json = optimum_paths(prepared, fraction)
    out_npz, out_json = Path(out_npz or default_npz), Path(out_json or default_json)
    data = load_prepared(prepared)
    problem, test = split_problems(data.X, data.y, data.name, fraction)
    opt = find_optimum(problem, tol=tol)
    if not opt.converged:
        raise RuntimeError(f"the optimum of {prepared} did not converge: ||grad|| = {opt.grad_norm:.3g} "
                           f"after {opt.iterations} Newton steps (tolerance {tol:g})")
    summary = {"dataset": data.name, "prepared_sha256": file_sha256(prepared), "n": problem.n,
               "d": problem.d, "loss_opt": opt.loss, "grad_norm": opt.grad_norm,
               "w_norm": float(np.linalg.norm(opt.w)), "newton_iterations": opt.iterations,
               "tolerance": tol, "stopped_by": opt.criterion,
               "solver": "Newton, pseudo-inverse direction, Armijo halving",
               "log": opt.log}
    if test is not None:
        summary.update(holdout=fraction, n_test=test.n, train_accuracy=problem.accuracy(opt.w),
                       **heldout_metrics(test, opt.w))
    try:
        atomic_write_npz(out_npz, w=opt.w, loss=np.array(opt.loss))
        summary["npz_sha256"] = file_sha256(out_npz)  # what read_optimum checks the npz against
        summary[JSON_DIGEST_KEY] = json_digest(summary)   # and the summary against
        atomic_write_json(out_json, summary)
    except OSError as exc:
        raise ValueError(f"cannot write the optimum cache {out_npz} ({exc.strerror or exc}); "
                         "choose a writable --cache-dir (or --out)") from None
    return summary


def load_problem_from_prepared(prepared: Path, optimum: bool = True, holdout: float | None = None,
                               precision: str = "float64") -> LogisticProblem:
    """The problem of a prepared file (its training split with a holdout), with the cached optimum
    (recomputed if stale or missing), in ``precision``."""
    return load_split_from_prepared(prepared, optimum, holdout, precision)[0]


def load_split_from_prepared(prepared: Path, optimum: bool = True, holdout: float | None = None,
                             precision: str = "float64") -> tuple[LogisticProblem, LogisticProblem | None]:
    """(training problem with the cached optimum, test problem), or (all rows, None) without a holdout.

    A cached optimum is used only if it was computed from this prepared file (sha256) and split. The
    training problem is in ``precision`` with the float64 optimum; the test problem is float64.
    """
    check_precision(precision)
    prepared = Path(prepared)
    fraction = holdout_fraction(holdout)
    data = load_prepared(prepared)
    problem, test = split_problems(data.X, data.y, data.name, fraction)
    if optimum:
        npz, js = optimum_paths(prepared, fraction)
        if not optimum_is_current(npz, js, prepared, fraction):
            compute_optimum(prepared, holdout=fraction)
        problem.set_optimum(*read_optimum(npz, js))
    return problem.with_precision(precision), test


def optimum_fix(npz: Path, js: Path) -> str:
    """The fix of a damaged optimum cache: delete both files; the next load recomputes them, and in
    the workflow `snakemake <npz>` does, byte for byte, so no job that read them reruns."""
    return (f"delete {npz} and {js}, then run `snakemake {npz}` (the target before your other options): "
            "rule optimum recomputes both, byte for byte on the same code and machine, so no job that read "
            "them reruns (outside the workflow the next load recomputes them)")


def optimum_is_current(npz: Path, js: Path, prepared: Path, fraction: float | None) -> bool:
    """Is there a cached optimum of exactly this prepared file (sha256) and holdout fraction? False
    when either file is missing or the cache belongs to other data; a damaged cache raises
    :class:`dpnewton.io.DamagedFileError` (:func:`check_optimum`)."""
    if not (npz.exists() and js.exists()):
        return False
    meta = check_optimum(npz, js)
    return meta.get("prepared_sha256") == file_sha256(prepared) and meta.get("holdout") == fraction


def check_optimum(npz: Path, js: Path) -> dict:
    """The JSON summary of an undamaged optimum cache: the JSON parses and the npz has the SHA-256
    recorded in it (``npz_sha256``), or, for a cache written before that field, a complete zip
    directory. Raises :class:`dpnewton.io.DamagedFileError` naming the damaged file and the fix."""
    fix = optimum_fix(npz, js)
    meta = read_json(js, fix)
    if not isinstance(meta, dict):
        raise DamagedFileError(js, "not an optimum summary (a JSON object)", fix)
    check_json_digest(js, meta, fix)
    recorded = meta.get("npz_sha256")
    if recorded is None:
        check_npz(npz, fix)
    elif file_sha256(npz) != recorded:
        raise DamagedFileError(npz, f"its SHA-256 is not the one recorded in {js.name} when both were written", fix)
    return meta


def read_optimum(npz: Path, js: Path) -> tuple[np.ndarray, float]:
    """(w*, loss*) of a verified optimum cache (:func:`check_optimum`): w* must be a vector of the
    summary's ``d`` entries and loss* a finite number equal to its ``loss_opt``."""
    meta = check_optimum(npz, js)
    fix = optimum_fix(npz, js)
    try:
        with np.load(npz, allow_pickle=False) as f:
            w, loss = np.array(f["w"]), float(f["loss"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise DamagedFileError(npz, f"unreadable ({type(exc).__name__}: {exc})", fix) from None
    if w.ndim != 1 or ("d" in meta and w.shape[0] != meta["d"]):
        raise DamagedFileError(npz, f"w* has shape {w.shape}, {js.name} says d = {meta.get('d')}", fix)
    if not math.isfinite(loss) or ("loss_opt" in meta and loss != meta["loss_opt"]):
        raise DamagedFileError(npz, f"loss* = {loss!r}, {js.name} says {meta.get('loss_opt')!r}", fix)
    return w, loss


def prepare_source(dataset: str | None = None, data_file: str | None = None, data_dir: str | None = None,
                   cache_dir: str = "resources/data", **options):
    """Prepare (or reuse) a named dataset or a user file: the :class:`dpnewton.data.PreparedDataset`."""
    if (dataset is None) == (data_file is None):
        raise ValueError("give exactly one of dataset=NAME or data_file=PATH")
    if data_file is not None:
        return prepare("custom", data_dir=data_dir, cache_dir=cache_dir, file=data_file, **options)
    return prepare(dataset, data_dir=data_dir, cache_dir=cache_dir, **options)


def load_problem(dataset: str | None = None, data_file: str | None = None, data_dir: str | None = None,
                 cache_dir: str = "resources/data", optimum: bool = True, precision: str = "float64",
                 **options) -> LogisticProblem:
    """Prepare (or reuse) a named dataset or a user file, then load it as a problem in ``precision``."""
    check_precision(precision)
    prepared = prepare_source(dataset, data_file, data_dir, cache_dir, **options)
    return load_problem_from_prepared(prepared.path, optimum=optimum, precision=precision)
