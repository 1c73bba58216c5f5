"""File-format parsers (LIBSVM, CSV, IDX, parquet, whitespace tables).

Each parser turns low-level failures (unreadable file, truncated gzip, text that is not UTF-8,
malformed lines, ragged rows) into :class:`DatasetError` naming the file. Files are read in
bounded chunks: content larger than the memory budget, or a line longer than
:data:`MAX_LINE_BYTES` (both after gunzip), is refused before it is held in memory.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import zlib
from pathlib import Path

import numpy as np

from .errors import DatasetError
from .validate import MEMORY_SHARE, check_memory, format_bytes, memory_budget

_CORRUPT = (EOFError, gzip.BadGzipFile, zlib.error, UnicodeDecodeError)

#: the longest line a text data file may have (after gunzip): 2.8 million 24-byte fields
MAX_LINE_BYTES = 64 * 2**20
_CHUNK = 1 << 20


def os_error(path, exc: OSError) -> DatasetError:
    """The DatasetError for a data file that cannot be opened or read (says which, and the fix)."""
    if isinstance(exc, IsADirectoryError) or Path(path).is_dir():
        return DatasetError(f"{path} is a directory, not a data file; pass the path of a file inside it")
    if isinstance(exc, FileNotFoundError):
        return DatasetError(f"data file {path} does not exist; check the path")
    if isinstance(exc, PermissionError):
        return DatasetError(f"cannot read {path}: permission denied; make it readable (chmod u+r {path}) "
                            "or copy it somewhere you can read")
    return DatasetError(f"cannot read {path}: {exc.strerror or exc}; check the file and its disk")


def open_text(path: Path):
    """Open a text file, transparently decompressing gzip (by magic bytes)."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_limited(path: Path, max_line: int | None = None) -> bytes:
    """The bytes of a file, gunzipped when it starts with the gzip magic, read in chunks of at most
    1 MiB (and at most ``max_line``).

    Refused with :class:`DatasetError` as soon as the content exceeds the memory budget
    (:func:`~dpnewton.data.validate.memory_budget`) or a line exceeds ``max_line`` bytes, so a
    small gzip that expands to gigabytes fails after reading at most that much.
    """
    budget = memory_budget()
    step = _CHUNK if max_line is None else max(1, min(_CHUNK, max_line))
    gz = False
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            if not gz and budget is not None and os.fstat(raw.fileno()).st_size > budget:
                raise DatasetError(
                    f"{path}: {format_bytes(os.fstat(raw.fileno()).st_size)} is more than "
                    f"{format_bytes(budget)} ({MEMORY_SHARE:.0%} of this machine's memory), too large to load; "
                    "use a smaller file or a machine with more memory")
            fh = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
            chunks: list[bytes] = []
            total = line = newlines = 0
            while chunk := fh.read(step):
                total += len(chunk)
                if budget is not None and total > budget:
                    raise DatasetError(
                        f"{path}: {'decompresses to' if gz else 'holds'} more than {format_bytes(budget)} "
                        f"({MEMORY_SHARE:.0%} of this machine's memory), too large to load; use a smaller file "
                        "or a machine with more memory")
                if max_line is not None:  # line: bytes since the last line break (lines inside a chunk are shorter)
                    last = chunk.rfind(b"\n")
                    if last >= 0:
                        if line + chunk.find(b"\n") > max_line:
                            break
                        newlines += chunk.count(b"\n")
                        line = 0
                    line += len(chunk) - last - 1
                    if line > max_line:
                        break
                chunks.append(chunk)
            else:
                return b"".join(chunks)
            raise DatasetError(
                f"{path}: line {newlines + 1} is longer than {format_bytes(max_line)}{' after gunzip' if gz else ''}; "
                "no table row is that long: check that this is the intended data file and that its rows end "
                "in line breaks")
    except _CORRUPT as exc:
        raise DatasetError(
            f"{path}: truncated or corrupt gzip data ({exc}); delete the file and obtain a complete copy"
        ) from None
    except OSError as exc:
        raise os_error(path, exc) from None


def read_bytes_maybe_gzip(path: Path) -> bytes:
    """The bytes of a file, gunzipped when it is gzip (:func:`read_limited`, no line limit)."""
    return read_limited(path)


def decode_text(path: Path, data: bytes) -> str:
    """``data`` as UTF-8 text (a UTF-8 byte-order mark is dropped); anything else is a DatasetError
    that says the file is not UTF-8 and how to convert it."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        reason, source = "it starts with a UTF-16 byte-order mark", "UTF-16"
    elif b"\x00" in data:
        reason, source = "it contains NUL bytes, as UTF-16 text and binary files do", "UTF-16"
    else:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            reason, source = f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not valid UTF-8", "LATIN1"
    raise DatasetError(f"{path}: not UTF-8 text ({reason}); convert it to UTF-8, e.g. "
                       f"iconv -f {source} -t UTF-8 {Path(path).name} > converted{Path(path).suffix}")


def read_libsvm(path: Path, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dense float64 features and float64 raw labels of a LIBSVM/svmlight file."""
    from sklearn.datasets import load_svmlight_file  # imported on use: scikit-learn costs ~0.6 s at start-up

    data = read_limited(path, MAX_LINE_BYTES)
    if not data.strip():
        raise DatasetError(f"{path}: zero rows (empty file); check that the file is complete and non-empty")
    decode_text(path, data)  # a UTF-16 file is named as such, not as malformed LIBSVM
    try:
        X, y = load_svmlight_file(io.BytesIO(data), n_features=n_features, dtype=np.float64)
    except (ValueError, RuntimeError, OverflowError) as exc:
        raise DatasetError(
            f"{path}: not a valid LIBSVM file ({exc}); expected lines 'label index:value ...' "
            "with increasing 1-based indices" + (f" below {n_features + 1}" if n_features else "")
        ) from None
    n, d = X.shape
    check_memory(8.0 * n * d, f"{path}: the dense {n} x {d} float64 feature matrix",
                 f"the largest feature index is {d}: number the features 1, 2, ... without gaps")
    return np.asarray(X.toarray(), dtype=np.float64), np.asarray(y, dtype=np.float64)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def read_csv(path: Path, label_column: int | str | None = None, delimiter: str = ","):
    """Parse a CSV table. Returns (X float64, raw labels, header or None, label column index).

    A first row with any non-numeric field is taken as a header. Every row must have
    the same number of fields (blank lines are skipped).
    """
    rows: list[tuple[int, list[str]]] = []
    text = decode_text(path, read_limited(path, MAX_LINE_BYTES))
    try:
        for lineno, row in enumerate(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), start=1):
            if not row or all(not f.strip() for f in row):
                continue
            rows.append((lineno, [f.strip() for f in row]))
    except csv.Error as exc:
        raise DatasetError(f"{path}: malformed CSV ({exc}); fix the quoting in the file") from None
    header = None
    if rows and not all(_is_number(f) for f in rows[0][1]):
        header = rows.pop(0)[1]
    width = len(header) if header is not None else (len(rows[0][1]) if rows else 0)
    for lineno, row in rows:
        if len(row) != width:
            raise DatasetError(
                f"{path}: ragged CSV, line {lineno} has {len(row)} fields but the table has {width}; "
                "every row needs the same number of comma-separated fields"
            )
    if not rows:
        raise DatasetError(f"{path}: zero rows (no data lines); check that the file is complete and non-empty")
    if width < 2:
        raise DatasetError(f"{path}: need at least one feature column and one label column, found {width} column(s)")
    col = _label_index(path, label_column, header, width)
    feats = [i for i in range(width) if i != col]
    X = np.empty((len(rows), len(feats)), dtype=np.float64)
    for r, (lineno, row) in enumerate(rows):
        for c, i in enumerate(feats):
            try:
                X[r, c] = float(row[i])
            except ValueError:
                raise DatasetError(
                    f"{path}: non-numeric feature value {row[i]!r} at line {lineno}, column {i + 1}; "
                    "all feature columns must be numbers (encode categories first)"
                ) from None
    labels = [row[col] for _, row in rows]
    if all(_is_number(v) for v in labels):
        raw = np.array([float(v) for v in labels], dtype=np.float64)
    else:
        raw = np.array(labels, dtype=str)
    return X, raw, header, col


def _label_index(path: Path, label_column, header, width: int) -> int:
    if label_column is None:
        return width - 1
    if isinstance(label_column, str) and not label_column.lstrip("-").isdigit():
        if header is None or label_column not in header:
            raise DatasetError(
                f"{path}: label column {label_column!r} not found"
                + (f" in header {header}" if header else " (the file has no header row)")
                + "; pass label_column as a header name or a 0-based index"
            )
        return header.index(label_column)
    idx = int(label_column)
    if not -width <= idx < width:
        raise DatasetError(f"{path}: label column index {idx} out of range for {width} columns")
    return idx % width


_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """Parse an IDX file (MNIST format), gzip-compressed or not."""
    data = read_bytes_maybe_gzip(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DatasetError(f"{path}: not an IDX file (bad magic number); expected an MNIST-format idx file")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetError(f"{path}: truncated IDX header; obtain a complete copy of the file")
    dims = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != need:
        raise DatasetError(
            f"{path}: truncated or oversized IDX data: header says {dims} ({need} bytes), "
            f"file holds {len(data) - header} bytes; obtain a complete copy of the file"
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)


def read_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise DatasetError(f"{path}: unreadable or truncated .npy file ({exc}); obtain a complete copy") from None
