"""Atomic file writes, and files that let their readers detect damage.

Every write goes to a temporary file in the target folder, is fsynced, then renamed: an interrupted
write never leaves a file that looks complete under its final name. A file can still be damaged
afterwards (cut short by a copy, a full disk, a hand edit), so the result files carry what their
readers need to notice it:

* CSV (:func:`atomic_write_csv`): two last columns, :data:`ROWS_COLUMN` with the file's row count
  and :data:`DIGEST_COLUMN` with the SHA-256 of its records without that column (:func:`records_digest`),
  in every row; :func:`check_csv` also requires the final line break and the header's field count.
  A table's CSV mirror has neither: its parquet twin records the mirror's SHA-256
  (:func:`dpnewton.pipeline.aggregate.write_frame`);
* parquet (:func:`atomic_write_parquet`): the footer (row count, schema; missing in a cut file), a
  CRC per data page and a digest of the whole frame in the footer, verified by :func:`read_parquet`;
* JSON (:func:`atomic_write_json` with ``digest``): the object's own SHA-256 in a field
  (:func:`json_digest`), verified by :func:`read_json` (``protocol.json``, the sidecars below);
* npz (:func:`atomic_write_npz`): the zip directory at the end of the file (:func:`check_npz`); a
  prepared dataset and the optimum cache also record the npz's SHA-256 in their JSON sidecar
  (:mod:`dpnewton.data.prepare`, :mod:`dpnewton.problems`), and the sidecar its own
  (:func:`json_digest`).

A check that fails raises :class:`DamagedFileError`: one line naming the file, what is wrong and
the fix (delete the file; the rule that made it recomputes it).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

_UMASK = os.umask(0)
os.umask(_UMASK)

#: the fix of a damaged result file, unless its reader names a better one (``{path}``: the file).
#: Snakemake does not remake a missing file that nothing out of date needs, so the fix names it as the
#: target, which must come before options that take several values (``--configfile``)
DELETE_FIX = ("delete it; what made it makes it again (in the workflow: run `snakemake {path}`, the target "
              "before your other options)")
#: the date of every entry of an npz written by :func:`atomic_write_npz` (the earliest a zip can hold)
FIXED_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _strict(obj):
    """``obj`` with numpy values as Python ones and non-finite floats as None (JSON ``null``)."""
    if isinstance(obj, dict):
        return {key: _strict(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(value) for value in obj]
    if isinstance(obj, np.ndarray):
        return _strict(obj.tolist())
    if isinstance(obj, np.generic):
        return _strict(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def to_json(obj, **kw) -> str:
    """Strict JSON (RFC 8259): NaN and infinities become ``null``, so any parser reads it."""
    return json.dumps(_strict(obj), allow_nan=False, **kw)


def atomic_write_json(path, obj, digest: bool = False) -> None:
    """``obj`` as strict, indented JSON; with ``digest``, plus its own :func:`json_digest` in the field
    :data:`JSON_DIGEST_KEY`, which :func:`read_json` verifies."""
    if digest:
        obj = {**obj, JSON_DIGEST_KEY: json_digest(obj)}
    atomic_write_text(path, to_json(obj, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------------
# Files that carry their own integrity check, and their verified readers
# ---------------------------------------------------------------------------------------------
class DamagedFileError(ValueError):
    """A file that fails its integrity check. The message names the file, what is wrong and the fix."""

    def __init__(self, path, problem: str, fix: str = DELETE_FIX):
        self.path, self.problem, self.fix = str(path), problem, fix.replace("{path}", str(path))
        super().__init__(f"{path} is damaged ({problem}): {self.fix}")


#: the next-to-last column of every CSV written by :func:`atomic_write_csv`: the number of data rows the
#: file was written with, in every row, so that a reader can tell a complete file from a cut one
ROWS_COLUMN = "file_rows"
#: the last column of every CSV written by :func:`atomic_write_csv`: :func:`records_digest` of the file
#: without this column, in every row, so that a reader can tell a changed value from the written one
DIGEST_COLUMN = "file_sha256"


def records_digest(records: list[list[str]]) -> str:
    """SHA-256 of CSV records (header included) as text: canonical JSON of the list of lists of fields.
    A changed, added or removed character inside any field changes it; the CSV quoting does not."""
    return hashlib.sha256(json.dumps(records, separators=(",", ":")).encode()).hexdigest()


def _records(text: str, sep: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=sep))


def atomic_write_csv(path, frame: pd.DataFrame, count_rows: bool = True) -> pd.DataFrame:
    """Write ``frame`` as CSV (no index), atomically; with ``count_rows`` the last two columns are
    :data:`ROWS_COLUMN` (``len(frame)``) and :data:`DIGEST_COLUMN` (:func:`records_digest` of the file
    without it), in every row; :func:`check_csv` verifies both. Returns the frame as written, without
    the digest (which covers every value, timings included)."""
    if not count_rows:
        with atomic_path(path, suffix=".csv") as tmp:
            frame.to_csv(tmp, index=False)
        return frame
    frame = frame.drop(columns=[ROWS_COLUMN, DIGEST_COLUMN], errors="ignore").assign(**{ROWS_COLUMN: len(frame)})
    with atomic_path(path, suffix=".csv") as tmp:
        frame.assign(**{DIGEST_COLUMN: records_digest(_records(frame.to_csv(index=False)))}).to_csv(tmp, index=False)
    return frame


def check_csv(path, min_rows: int = 0, expected_rows: int | None = None, fix: str = DELETE_FIX,
              sep: str = ",", expected_sha256: str | None = None) -> int:
    """The number of data rows of a complete, unchanged CSV file (fields separated by ``sep``); raises
    :class:`DamagedFileError` otherwise.

    Complete means: the text ends with a line break (a file cut inside a row does not); every record
    has the header's number of fields; with a :data:`ROWS_COLUMN`, every row holds the number of rows
    the file has (a file cut at a row boundary lacks rows); at least ``min_rows`` rows; and exactly
    ``expected_rows`` rows when given (a table's CSV mirror against its parquet twin). Unchanged means:
    with a :data:`DIGEST_COLUMN` last, every row holds the :func:`records_digest` of the records without
    it (one changed digit fails); with ``expected_sha256``, the file's bytes have that SHA-256 (a
    table's CSV mirror, whose twin records it). A file without the columns (written before they existed,
    or by another tool) gets the checks it allows, so one cut exactly at a row boundary or with a
    changed value passes.
    """
    try:
        raw = Path(path).read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DamagedFileError(path, f"unreadable: {exc}", fix) from None
    if not raw.endswith(b"\n"):
        raise DamagedFileError(path, "empty file" if not raw else "it ends inside a row: the file was cut short", fix)
    records = _records(text, sep)
    header, body = records[0], records[1:]
    short = next((i for i, r in enumerate(body, 1) if len(r) != len(header)), None)
    if short is not None:
        raise DamagedFileError(path, f"row {short} has {len(body[short - 1])} fields, the header {len(header)}", fix)
    if ROWS_COLUMN in header:
        column = header.index(ROWS_COLUMN)
        written = {r[column] for r in body}
        if written and written != {str(len(body))}:
            raise DamagedFileError(path, f"it holds {len(body)} rows and was written with "
                                         f"{' or '.join(sorted(written))}", fix)
    if len(body) < min_rows:
        raise DamagedFileError(path, f"it holds {len(body)} rows, at least {min_rows} expected", fix)
    if expected_rows is not None and len(body) != expected_rows:
        raise DamagedFileError(path, f"it holds {len(body)} rows, {expected_rows} expected", fix)
    if header and header[-1] == DIGEST_COLUMN:
        recorded = {r[-1] for r in body}
        if body and recorded != {records_digest([r[:-1] for r in records])}:
            raise DamagedFileError(path, f"its contents do not match the SHA-256 in its {DIGEST_COLUMN} column: "
                                         "a value was changed after it was written", fix)
    if expected_sha256 is not None and hashlib.sha256(raw).hexdigest() != expected_sha256:
        raise DamagedFileError(path, "its SHA-256 is not the one its parquet twin recorded when both were written",
                               fix)
    return len(body)


def read_csv(path, min_rows: int = 0, fix: str = DELETE_FIX, **kwargs) -> pd.DataFrame:
    """:func:`check_csv` (with ``kwargs``' ``sep``), then ``pandas.read_csv(path, **kwargs)`` without the
    :data:`ROWS_COLUMN` and :data:`DIGEST_COLUMN`."""
    import pandas as pd  # imported on use: pandas costs ~0.2 s at start-up (the CLI imports this module)

    check_csv(path, min_rows=min_rows, fix=fix, sep=kwargs.get("sep", ","))
    return pd.read_csv(path, **kwargs).drop(columns=[ROWS_COLUMN, DIGEST_COLUMN], errors="ignore")


#: the parquet footer key of :func:`frame_digest` (written by :func:`atomic_write_parquet`)
DIGEST_KEY = b"dpnewton.frame_sha256"
#: the parquet footer key of the SHA-256 of a table's CSV mirror (:func:`parquet_footer`)
CSV_DIGEST_KEY = b"dpnewton.csv_sha256"


def frame_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of a frame's column names, row count and values (``pandas.util.hash_pandas_object``
    per row, which hashes by value: a column read back with another dtype of the same values gives
    the same digest)."""
    from pandas.util import hash_pandas_object  # imported on use (see read_csv)

    h = hashlib.sha256(json.dumps([str(c) for c in frame.columns]).encode())
    h.update(str(len(frame)).encode())
    if len(frame.columns):
        h.update(hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()


def atomic_write_parquet(path, frame: pd.DataFrame, metadata: dict[bytes, bytes] | None = None,
                         **options) -> None:
    """Write ``frame`` as parquet (no index), atomically, with a CRC per data page and the frame's
    :func:`frame_digest` in the footer's metadata (:data:`DIGEST_KEY`), plus ``metadata``; ``options``
    go to ``pyarrow.parquet.write_table`` (encodings, compression). The file is read back and verified
    (:func:`read_parquet`) before it takes its name, so every file written verifies."""
    import pyarrow as pa  # imported on use, as pandas
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **(metadata or {}),
                                           DIGEST_KEY: frame_digest(frame).encode()})
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, write_page_checksum=True, **options)
        read_parquet(tmp, fix="this is a bug of the writer: report it")


def check_parquet(path, fix: str = DELETE_FIX) -> int:
    """The row count in a parquet file's footer; :class:`DamagedFileError` when the footer is not
    there or not readable (a cut file). Reads the footer only (cheap); :func:`read_parquet` reads
    the pages too."""
    import pyarrow.parquet as pq  # imported on use, as pandas

    try:
        return int(pq.read_metadata(path).num_rows)
    except Exception as exc:  # noqa: BLE001 -- pyarrow raises several types for a damaged footer
        raise DamagedFileError(path, f"not a complete parquet file: {exc}", fix) from None


def parquet_footer(path, key: bytes, fix: str = DELETE_FIX) -> str | None:
    """The value of ``key`` in a parquet file's footer metadata (None when absent); a file without a
    readable footer is a :class:`DamagedFileError` (:func:`check_parquet`)."""
    import pyarrow.parquet as pq  # imported on use, as pandas

    check_parquet(path, fix)
    value = (pq.read_schema(path).metadata or {}).get(key)
    return None if value is None else value.decode(errors="replace")


def read_parquet(path, fix: str = DELETE_FIX, **kwargs) -> pd.DataFrame:
    """``pandas.read_parquet`` verified: the footer (:func:`check_parquet`), every page's CRC, and the
    frame against the :func:`frame_digest` in the footer (not when ``kwargs`` select a part of the
    file). Files written without them (before they existed, or by other tools) get the checks they
    allow. Any failure is a :class:`DamagedFileError` naming the file and the fix."""
    import pandas as pd  # imported on use (see read_csv)
    import pyarrow.parquet as pq

    check_parquet(path, fix)
    try:
        recorded = (pq.read_schema(path).metadata or {}).get(DIGEST_KEY)
        frame = pd.read_parquet(path, page_checksum_verification=True, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- a damaged page can fail in many ways (OSError, decoding, ...)
        raise DamagedFileError(path, f"a page does not read back ({type(exc).__name__}: {exc})", fix) from None
    if recorded is not None and not kwargs and frame_digest(frame) != recorded.decode(errors="replace"):
        raise DamagedFileError(path, "its contents do not match the digest recorded in its footer", fix)
    return frame


def atomic_write_npz(path, **arrays) -> None:
    """``numpy.savez`` (uncompressed), atomically and byte-reproducible: the zip entries carry a fixed
    date (1980-01-01) instead of the time of writing, so equal arrays give equal files (and equal
    checksums, which is what keeps Snakemake from rerunning the jobs that read a recomputed file)."""
    with atomic_path(path, suffix=".npz") as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, value in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=FIXED_ZIP_DATE)
                info.external_attr = 0o644 << 16
                with zf.open(info, "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.asanyarray(value), allow_pickle=False)


def file_sha256(path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_npz(path, fix: str = DELETE_FIX) -> list[str]:
    """The member names of a complete ``.npz``; :class:`DamagedFileError` when its zip directory
    (at the end of the file) is missing or unreadable (a cut file). Reads the directory only."""
    try:
        with zipfile.ZipFile(path) as zf:
            return zf.namelist()
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise DamagedFileError(path, f"not a complete npz file: {exc}", fix) from None


#: the field of a JSON object that holds the object's own digest (:func:`json_digest`)
JSON_DIGEST_KEY = "json_sha256"


def json_digest(obj: dict) -> str:
    """SHA-256 of a JSON object's canonical text (sorted keys, no spaces, NaN as null) without its
    :data:`JSON_DIGEST_KEY` field: written into the object, it lets a reader tell a changed value."""
    body = {k: v for k, v in obj.items() if k != JSON_DIGEST_KEY}
    return hashlib.sha256(to_json(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def check_json_digest(path, obj: dict, fix: str = DELETE_FIX) -> dict:
    """``obj`` (read from ``path``) if it matches the :func:`json_digest` it records (an object without
    one, written before it existed, is returned as it is); :class:`DamagedFileError` otherwise."""
    recorded = obj.get(JSON_DIGEST_KEY)
    if recorded is not None and recorded != json_digest(obj):
        raise DamagedFileError(path, f"its contents do not match the SHA-256 in its {JSON_DIGEST_KEY} field: a value "
                                     "was changed after it was written", fix)
    return obj


def read_json(path, fix: str = DELETE_FIX):
    """``json.loads`` of a file, verified: a file that does not parse, or an object that does not match
    the :func:`json_digest` it records (:func:`check_json_digest`), is a :class:`DamagedFileError`."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DamagedFileError(path, f"not complete JSON: {exc}", fix) from None
    return check_json_digest(path, obj, fix) if isinstance(obj, dict) else obj


def damaged(checks) -> list[DamagedFileError]:
    """Run ``check(path)`` for every ``(path, check)`` whose path exists (a missing file is not
    damaged: its rule makes it); the :class:`DamagedFileError` of each damaged file, once per file
    (a check may name another file than its own, e.g. a table's damaged parquet twin), in order."""
    errors = {}
    for path, check in checks:
        if Path(path).exists():
            try:
                check(path)
            except DamagedFileError as exc:
                errors.setdefault(exc.path, exc)
    return list(errors.values())


def damage_report(errors: list[DamagedFileError]) -> str:
    """One line for the damaged files: the first one's message, and the paths of the others."""
    if len(errors) == 1:
        return str(errors[0])
    others = ", ".join(e.path for e in errors[1:6]) + (", ..." if len(errors) > 6 else "")
    return f"{len(errors)} result files are damaged, first {errors[0]}; the others ({others}) likewise"
