"""The privacy ledger file of a run job: ``<rows stem>.ledger.parquet`` beside its rows, one row per noisy
release of every run (:data:`LEDGER_COLUMNS`), written before the rows and read back verified."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import atomic_write_parquet, read_parquet

log = logging.getLogger("dpnewton.pipeline")

#: one row per noisy release: the run (and the job's config hash), then the ledger entry's fields
#: (:class:`dpnewton.privacy.ledger.LedgerEntry`); ``release`` numbers the run's releases from 0
LEDGER_COLUMNS = ["dataset", "algorithm", "conversion", "epsilon", "seed", "iterations", "config_hash",
                  "release", "step", "quantity", "sensitivity", "sigma", "rho"]


def ledger_path(rows_out: str | Path) -> Path:
    """The privacy ledger of a job: ``<rows stem>.ledger.parquet`` beside its rows CSV."""
    rows_out = Path(rows_out)
    return rows_out.with_name(rows_out.name.removesuffix(".csv") + ".ledger.parquet")


def ledger_frame(ledger, record: dict, config_hash: str) -> pd.DataFrame:
    """One run's releases (:data:`LEDGER_COLUMNS`) from its :class:`~dpnewton.privacy.ledger.PrivacyLedger`
    and its result ``record`` (the run's identity)."""
    entries = ledger.entries
    frame = pd.DataFrame({
        "release": np.arange(len(entries), dtype=np.int64),
        "step": np.array([e.step for e in entries], dtype=np.int64),
        "quantity": [e.quantity for e in entries],
        "sensitivity": np.array([e.sensitivity for e in entries], dtype=float),
        "sigma": np.array([e.sigma for e in entries], dtype=float),
        "rho": np.array([e.rho for e in entries], dtype=float)})
    ident = {"dataset": record["dataset"], "algorithm": record["algorithm"], "conversion": record["conversion"],
             "epsilon": float(record["epsilon"]), "seed": int(record["seed"]),
             "iterations": int(record["iterations"]), "config_hash": config_hash}
    return frame.assign(**ident)[LEDGER_COLUMNS].astype({c: "category" for c in LEDGER_TEXT})


def unit_ledger(unit: dict, path: Path) -> pd.DataFrame:
    """The ledger rows of a unit's runs; an empty frame (logged) for a unit resumed from a checkpoint
    written before checkpoints kept the ledger."""
    if unit.get("ledger") is None:
        log.warning("checkpoint %s predates the privacy ledger: its runs have no rows in the ledger file", path)
        return _empty_ledger()
    frames = [f for f in unit["ledger"] if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else _empty_ledger()


def _empty_ledger() -> pd.DataFrame:
    types = {"release": "int64", "step": "int64", "seed": "int64", "iterations": "int64", "epsilon": "float64",
             "sensitivity": "float64", "sigma": "float64", "rho": "float64"}
    return pd.DataFrame({c: pd.Series(dtype=types.get(c, "object")) for c in LEDGER_COLUMNS})


#: ledger columns stored as parquet dictionaries (few distinct values) and as deltas (counters):
#: a DP-GD job of 6 million releases takes 0.4 MB instead of 51 MB
LEDGER_TEXT = ["dataset", "algorithm", "conversion", "config_hash", "quantity"]
LEDGER_COUNTERS = ["release", "step"]


def write_ledger(path: str | Path, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Write the job's ledger frames as one parquet file (atomic, page CRCs, zstd; text columns as
    categories); returns the frame."""
    frames = [f for f in frames if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else _empty_ledger()
    frame = frame.astype({c: "category" for c in LEDGER_TEXT})
    atomic_write_parquet(path, frame, compression="zstd",
                         use_dictionary=[c for c in LEDGER_COLUMNS if c not in LEDGER_COUNTERS],
                         column_encoding={c: "DELTA_BINARY_PACKED" for c in LEDGER_COUNTERS})
    return frame


def read_ledger(rows_out: str | Path) -> pd.DataFrame:
    """The privacy ledger of the job whose rows file is ``rows_out`` (:func:`ledger_path`), verified
    (:func:`dpnewton.io.read_parquet`): one row per release of every run, :data:`LEDGER_COLUMNS`."""
    return read_parquet(ledger_path(rows_out), fix=f"delete it and {rows_out}, then run `snakemake {rows_out}` "
                                                  "(the target before your other options): rule run_job "
                                                  "recomputes both")
