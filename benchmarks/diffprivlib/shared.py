"""Helpers shared by both sides of the diffprivlib comparison; numpy and the standard library only.

Imported by ``compare.py`` (dpnewton's venv) and ``run_diffprivlib.py`` (diffprivlib's venv), so
both compute the test metrics, the fit timing and the result rows the same way. Must not import
dpnewton, scikit-learn or diffprivlib.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

PROB_CLIP = 1e-15
"""Probabilities are clipped to [PROB_CLIP, 1 - PROB_CLIP] before the log-loss."""

BLAS_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "BLIS_NUM_THREADS": "1", "VECLIB_MAXIMUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}
"""One BLAS thread: set before numpy is imported (both scripts do it on their first lines)."""

ROW_FIELDS = ["dataset", "epsilon", "method", "library", "rep", "random_state", "status", "accuracy",
              "log_loss", "fit_wall_s", "fit_cpu_s", "coef_norm", "w_norm", "delta", "n_iter",
              "data_norm", "n_train", "n_test", "d", "warnings", "message"]
"""Columns of the per-repetition CSV. coef_norm: ||(coef_, intercept_)|| in the units of the raw
features; w_norm: dpnewton's optimizer weights on the scaled rows [x, 1] / data_norm, i.e.
data_norm * coef_norm (blank for the other methods)."""


def test_metrics(y_test: np.ndarray, labels: np.ndarray, p_pos: np.ndarray, pred: np.ndarray) -> dict:
    """Accuracy of ``pred`` and log-loss of P(labels[1]) = ``p_pos`` on ``y_test``."""
    p = np.clip(np.asarray(p_pos, dtype=np.float64), PROB_CLIP, 1.0 - PROB_CLIP)
    pos = np.asarray(y_test) == labels[1]
    log_loss = -float(np.mean(np.where(pos, np.log(p), np.log1p(-p))))
    accuracy = float(np.mean(np.asarray(pred) == np.asarray(y_test)))
    return {"accuracy": accuracy, "log_loss": log_loss}


def coef_norm(coef, intercept) -> float:
    return float(np.sqrt(np.sum(np.square(coef)) + np.sum(np.square(intercept))))


@contextmanager
def timed_fit(ignore=()):
    """Time the block (wall and process CPU time) and record its warnings.

    Yields a dict that gets ``fit_wall_s``, ``fit_cpu_s`` and ``warnings`` (a ';'-joined list of
    "Category: first 80 chars of the message", deduplicated; ``ignore`` are category names left out).
    """
    out: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield out
        finally:
            out["fit_wall_s"] = time.perf_counter() - w0
            out["fit_cpu_s"] = time.process_time() - c0
            seen = []
            for w in caught:
                name = w.category.__name__
                text = f"{name}: {str(w.message)[:80]}"
                if name not in ignore and text not in seen:
                    seen.append(text)
            out["warnings"] = "; ".join(seen)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def load_split(path: Path) -> dict:
    """One dataset's split as written by compare.py: arrays and scalars of the .npz."""
    with np.load(path, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    for k in ("dataset",):
        out[k] = str(out[k])
    for k in ("data_norm", "data_norm_diffprivlib"):
        out[k] = float(out[k])
    return out
