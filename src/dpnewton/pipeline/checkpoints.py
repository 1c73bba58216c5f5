"""The per-(grid round, seed) checkpoints of a run job (:mod:`.jobs`): each finished unit is written
atomically with the SHA-256 of its contents, and reused by a rerun of the same spec only if its key and
digest match."""

from __future__ import annotations

import hashlib
import logging
import pickle
from pathlib import Path

import pandas as pd

from ..io import atomic_path

log = logging.getLogger("dpnewton.pipeline")


def checkpoint_dir(rows_out: str | Path) -> Path:
    """The folder of a job's per-(grid round, seed) checkpoints: ``<rows>.partial``."""
    rows_out = Path(rows_out)
    return rows_out.with_name(rows_out.name + ".partial")


def save_checkpoint(path: Path, key: dict, unit: dict) -> None:
    """Write a finished unit atomically as ``{'key', 'sha256', 'body'}``: ``body`` is the pickled
    unit and ``sha256`` its digest, which :func:`load_checkpoint` checks before trusting the unit."""
    body = pickle.dumps(unit, protocol=pickle.HIGHEST_PROTOCOL)
    with atomic_path(path, suffix=".pkl") as tmp:
        with open(tmp, "wb") as fh:
            pickle.dump({"key": key, "sha256": hashlib.sha256(body).hexdigest(), "body": body}, fh,
                        protocol=pickle.HIGHEST_PROTOCOL)


def load_checkpoint(path: Path, key: dict) -> dict | None:
    """A finished unit (a run job's {'rows', 'curves', 'paths', 'seconds', 'ledger'}) if ``path`` holds one for
    exactly ``key``, else None.

    ``seconds`` is the wall time the unit took when it was computed and ``ledger`` its runs' ledger
    frames (None in checkpoints written before they were kept). A unit is trusted only if its body
    matches the SHA-256 saved with it (:func:`save_checkpoint`; checkpoints written before the digest
    existed are read as they are). A file that cannot be read or fails the digest (it is written
    atomically, so only a foreign or damaged file), or that belongs to another spec, seed or T grid,
    is ignored, logged, and recomputed (then overwritten).
    """
    if not path.exists():
        return None
    try:
        saved = pd.read_pickle(path)
        if not isinstance(saved, dict) or saved.get("key") != key:
            log.info("ignoring checkpoint %s: it belongs to another spec, seed or T grid", path)
            return None
        unit = checkpoint_body(saved)
    except Exception as err:  # noqa: BLE001 -- any unreadable checkpoint is recomputed, never trusted
        log.warning("ignoring damaged checkpoint %s (%s); its unit is recomputed", path, err)
        return None
    body = {k: v for k, v in unit.items() if k != "key"}     # a checkpoint from before the digest is its unit
    return {**body, "seconds": unit.get("seconds"), "ledger": unit.get("ledger")}


def checkpoint_body(saved: dict) -> dict:
    """The unit of a loaded checkpoint; ValueError when its body does not match its SHA-256."""
    if "body" not in saved:  # written before checkpoints carried a digest
        return saved
    if hashlib.sha256(saved["body"]).hexdigest() != saved.get("sha256"):
        raise ValueError("its contents do not match the SHA-256 saved with them")
    return pickle.loads(saved["body"])


def resumed_note(unit: dict) -> str:
    """Progress-line suffix of a unit loaded from its checkpoint, with the time its first attempt took
    (the log of that attempt is overwritten by the rerun; benchmarks/pipeline.py --analyze sums it)."""
    seconds = unit.get("seconds")
    return " [from checkpoint]" if seconds is None else f" [from checkpoint, computed in {seconds:.1f}s]"
