"""Dataset-specific preprocessing recipes: the resolvers and builders a
:class:`~.registry.DatasetSpec` names.

A *resolver* ``resolve(spec, ctx, opts) -> {role: ResolvedFile}`` finds and verifies the input
files (cheap, used for the cache check); a *builder* ``build(spec, files, opts, ctx) -> Built``
parses and preprocesses them and returns X before the per-row unit-ball projection, with the
bias column prepended where the dataset has one. :func:`needs` declares the spec keys a function
reads, so a spec that lacks one fails when it is defined.

Decisions documented here:

* protein: a constant feature column (zero std) is centred and left at 0 (divided
  by 1, like StandardScaler) instead of producing NaN as the official code would;
  such columns are listed in the sidecar (``constant_columns``).
* fashion-mnist: pixel scaling is done in float32 exactly like torchvision's
  ``ToTensor`` + ``Normalize(0.5, 0.5)``, then widened to float64; rows are ordered
  class 0 first, then class 3 (as the official loader does).
* covertype: all 581012 rows are scaled and shuffled (RandomState(10000019)) as in
  dpml-benchmark, then rows of class 3 (-1) and 6 (+1) are kept in shuffled order.
  How the official binary file was built is unknown; if the official label file is
  found next to the data its agreement is recorded (``official_y_match``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numpy as np
from scipy.special import expit

from .errors import DatasetError
from .readers import open_text, os_error, read_csv, read_idx, read_libsvm, read_npy
from .sources import (
    ResolvedFile,
    SourceFile,
    download,
    extract_member,
    find_local,
    git_blob_id,
    local_candidates,
    missing_error,
    resolve,
    sha256_file,
)
from .validate import check_features, map_labels

if TYPE_CHECKING:
    from .registry import DatasetSpec


@dataclass
class Context:
    """Where a resolver looks for files (``data_dir``, downloads under ``cache_dir``); whether it verifies them
    and may download."""

    data_dir: Path | None
    cache_dir: Path
    verify: bool = True
    allow_download: bool = True


@dataclass
class Built:
    """A builder's result: X, y in {-1, +1}, the preprocessing version and label mapping recorded in the sidecar,
    and further sidecar fields (``meta``)."""

    X: np.ndarray
    y: np.ndarray
    prep_version: str
    label_mapping: dict[str, float]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Needs:
    """The spec keys a resolver or builder reads: roles of ``sources``, keys of ``extra`` and ``options``."""

    sources: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


F = TypeVar("F", bound=Callable)


def needs(*, sources=(), extra=(), options=()) -> Callable[[F], F]:
    """Declare the spec keys the decorated resolver or builder reads (its ``needs`` attribute)."""
    declared = Needs(tuple(sources), tuple(extra), tuple(options))

    def mark(fn: F) -> F:
        fn.needs = declared
        return fn

    return mark


def prepend_bias(X: np.ndarray) -> np.ndarray:
    return np.hstack((np.ones((X.shape[0], 1)), X))


def npy_bytes_sha256(a: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a))
    return hashlib.sha256(buf.getvalue()).hexdigest()


# --------------------------------------------------------------------------- resolvers


def resolve_sources(spec: DatasetSpec, ctx: Context, opts: dict) -> dict[str, ResolvedFile]:
    """The default resolver: every source file, looked up, downloaded and verified (:func:`.sources.resolve`)."""
    return {
        role: resolve(src, ctx.data_dir, ctx.cache_dir, verify=ctx.verify, allow_download=ctx.allow_download)
        for role, src in spec.sources.items()
    }


@needs(options=("file",))
def resolve_custom(spec: DatasetSpec, ctx: Context, opts: dict) -> dict[str, ResolvedFile]:
    f = opts.get("file")
    if not f:
        raise DatasetError("dataset 'custom' needs file=PATH (CLI: prepare custom --file my.csv)")
    p = Path(f).expanduser()
    if p.is_dir():
        raise DatasetError(f"custom data file {str(p)!r} is a directory, not a data file; "
                           "pass the path of a file inside it")
    if not p.is_file():
        raise DatasetError(f"custom data file {str(p)!r} does not exist; check the path passed as file=")
    try:
        digest = sha256_file(p)
    except OSError as exc:
        raise os_error(p, exc) from None
    return {"data": ResolvedFile(p.resolve(), digest, "user", False)}


@needs(sources=("dat", "parquet", "archive"), extra=("member", "member_git_blob"))
def resolve_protein(spec: DatasetSpec, ctx: Context, opts: dict) -> dict[str, ResolvedFile]:
    blob = spec.extra["member_git_blob"]
    dat: SourceFile = spec.sources["dat"]
    for path, origin in local_candidates(dat, ctx.data_dir, ctx.cache_dir):
        if path.is_file():
            _check_blob(path, blob, ctx.verify)
            return {"data": ResolvedFile(path, sha256_file(path), origin, True)}
    pq = find_local(spec.sources["parquet"], ctx.data_dir, ctx.cache_dir, ctx.verify)
    if pq is not None:
        return {"data": pq}
    arc_src: SourceFile = spec.sources["archive"]
    target = ctx.cache_dir / "downloads" / dat.filename
    arc = None
    for path, origin in local_candidates(arc_src, ctx.data_dir, ctx.cache_dir):
        if path.is_file():
            arc = path
            break
    errors: list[str] = []
    if arc is None and ctx.allow_download:
        for url in arc_src.urls:
            try:
                arc = download(url, ctx.cache_dir / "downloads" / arc_src.filename)
                break
            except DatasetError as exc:
                errors.append(str(exc))
    if arc is None:
        raise DatasetError(
            str(missing_error(arc_src, ctx.data_dir, ctx.cache_dir, errors, ctx.allow_download))
            + f" (alternatively put {dat.filename} or {spec.sources['parquet'].filename} in "
            + f"{ctx.data_dir / 'protein' if ctx.data_dir else ctx.cache_dir / 'downloads'})"
        )
    tmp = target.with_name(target.name + ".unverified")
    extract_member(arc, spec.extra["member"], tmp)
    try:
        _check_blob(tmp, blob, ctx.verify, archive=arc)
        tmp.replace(target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return {"data": ResolvedFile(target, sha256_file(target), "extracted", True)}


def _check_blob(path: Path, blob: str, verify: bool, archive: Path | None = None) -> None:
    got = git_blob_id(path)
    if verify and got != blob:
        src = f" (extracted from {archive})" if archive else ""
        raise DatasetError(
            f"checksum mismatch for {path}{src}: git blob id {got}, expected {blob}; "
            "delete it and obtain the canonical KDD Cup 2004 bio_train.dat, or pass verify_checksum=False"
        )


# --------------------------------------------------------------------------- builders


@needs(sources=("data",), extra=("n_features",), options=("prep",))
def build_libsvm_named(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict,
                       ctx: Context | None = None) -> Built:
    from sklearn.preprocessing import StandardScaler  # imported on use: scikit-learn costs ~0.6 s at start-up

    prep = opts["prep"]
    if prep not in ("v1", "v2"):
        raise DatasetError(f"dataset {spec.name!r}: prep must be 'v1' or 'v2', got {prep!r}")
    path = files["data"].path
    X, raw = read_libsvm(path, spec.extra["n_features"])
    y, mapping = map_labels(raw, str(path))
    X = StandardScaler().fit_transform(X)
    if prep == "v1":
        norms = np.linalg.norm(X, axis=1)
        X = X / np.where(norms > 0, norms, 1.0)[:, None]
    return Built(prepend_bias(X), y, f"{spec.name}-{prep}", mapping)


@needs(sources=("train", "test"), extra=("seed", "official_x_npy_sha256"))
def build_adult(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict, ctx: Context | None = None) -> Built:
    def rows(path: Path) -> list[list[str]]:
        with open_text(path) as fh:
            return [r for r in csv.reader(fh) if " ?" not in r]

    train, test = files["train"].path, files["test"].path
    # As in dpml-benchmark: the last two reader rows (a blank line and the last record)
    # of each file are dropped, and the banner line of adult.test.
    table = rows(train)[:-2] + rows(test)[1:-2]
    widths = {len(r) for r in table}
    if widths != {15}:
        raise DatasetError(
            f"{train} / {test}: expected 15 comma-separated fields per record, found {sorted(widths)}; "
            "use the canonical UCI adult.data and adult.test files"
        )
    cols = list(zip(*table))
    continuous = [0, 2, 4, 10, 11, 12]
    onehot, cont = [], []
    for i in range(14):
        col = np.array(cols[i])
        if i in continuous:
            v = np.array([int(s) for s in col])
            cont.append(v / v.max())
        else:
            cats, codes = np.unique(col, return_inverse=True)
            block = np.zeros((col.shape[0], cats.shape[0]))
            block[np.arange(col.shape[0]), codes.reshape(-1)] = 1.0
            onehot.append(block)
    labels = np.array([-1.0 if s in (" <=50K", " <=50K.") else 1.0 for s in cols[14]])
    X = np.column_stack(onehot + cont)
    rs = np.random.RandomState(spec.extra["seed"])
    perm = np.arange(X.shape[0])
    rs.shuffle(perm)  # same stream and permutation as np.random.shuffle on the full table
    X, y = np.ascontiguousarray(X[perm]), labels[perm]
    digest = npy_bytes_sha256(X)
    match = digest == spec.extra["official_x_npy_sha256"]
    if not match:
        warnings.warn(f"adult: X differs from the official adult_processed_x.npy (sha256 {digest})", stacklevel=2)
    return Built(prepend_bias(X), y, "adult-dpml1", {"<=50K": -1.0, ">50K": 1.0},
                 {"x_npy_sha256": digest, "official_x_match": bool(match)})


@needs(sources=("data",), extra=("seed", "negative_class", "positive_class", "official_y_file"))
def build_covertype(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict,
                    ctx: Context | None = None) -> Built:
    import pandas as pd  # imported on use: pandas costs ~0.2 s at start-up

    path = files["data"].path
    try:
        df = pd.read_csv(path, header=None, compression="gzip", dtype=np.float64)
    except (EOFError, OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DatasetError(
            f"{path}: cannot parse covtype data ({type(exc).__name__}: {exc}); the file is truncated, "
            "corrupt or not the UCI covtype.data.gz (55 comma-separated integers per row)"
        ) from None
    table = df.to_numpy()
    if table.ndim != 2 or table.shape[1] != 55 or np.isnan(table).any():
        raise DatasetError(
            f"{path}: expected 55 comma-separated fields on every row (54 features + class); "
            f"got {table.shape[1]} columns{' with missing fields' if np.isnan(table).any() else ''}"
        )
    feats, cls = table[:, :54].copy(), table[:, 54]
    if not np.isin(cls, np.arange(1, 8)).all():
        raise DatasetError(f"{path}: class column must hold integers 1..7")
    mx = feats.max(axis=0)
    scale = mx > 1
    feats[:, scale] = feats[:, scale] / mx[scale]
    perm = np.arange(table.shape[0])
    np.random.RandomState(spec.extra["seed"]).shuffle(perm)
    feats, cls = feats[perm], cls[perm]
    neg, pos = spec.extra["negative_class"], spec.extra["positive_class"]
    keep = (cls == neg) | (cls == pos)
    X = feats[keep]
    y = np.where(cls[keep] == pos, 1.0, -1.0)
    meta: dict[str, Any] = {"n_raw_rows": int(table.shape[0])}
    official_y = None
    if ctx is not None and ctx.data_dir is not None:
        sub, fname = spec.extra["official_y_file"]
        official_y = ctx.data_dir / sub / fname
    if official_y is not None and official_y.is_file():
        oy = read_npy(official_y)
        meta["official_y_match"] = bool(oy.shape == y.shape and np.array_equal(oy.astype(np.float64), y))
    return Built(prepend_bias(X), y, "covertype-v1", {str(neg): -1.0, str(pos): 1.0}, meta)


@needs(options=("seed", "n", "d"))
def build_synthetic(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict, ctx: Context | None = None) -> Built:
    seed, n, d = opts["seed"], opts["n"], opts["d"]
    for k, v in (("seed", seed), ("n", n), ("d", d)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (0 if k == "seed" else 1):
            raise DatasetError(f"synthetic: option {k} must be a {'non-negative' if k == 'seed' else 'positive'} "
                               f"integer, got {v!r}")
    rng = np.random.default_rng(np.random.SeedSequence(int(seed)))
    g = rng.standard_normal((int(n), int(d)))
    X = g / np.linalg.norm(g, axis=1, keepdims=True)
    p = expit(X @ np.ones(int(d)))
    y = np.where(rng.random(int(n)) < p, 1.0, -1.0)
    return Built(X, y, "synthetic-v1", {"-1": -1.0, "+1": 1.0}, {"w_star": "ones"})


@needs(sources=("images", "labels"), extra=("negative_class", "positive_class"))
def build_fashion_mnist(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict,
                        ctx: Context | None = None) -> Built:
    img_path, lab_path = files["images"].path, files["labels"].path
    images, labels = read_idx(img_path), read_idx(lab_path)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise DatasetError(
            f"{img_path} / {lab_path}: images {images.shape} and labels {labels.shape} do not match; "
            "use the train-images/train-labels pair of the same release"
        )
    neg, pos = spec.extra["negative_class"], spec.extra["positive_class"]
    i0, i1 = np.nonzero(labels == neg)[0], np.nonzero(labels == pos)[0]
    idx = np.concatenate((i0, i1))
    px = images[idx].reshape(idx.shape[0], -1).astype(np.float32)
    X = ((px / np.float32(255.0) - np.float32(0.5)) / np.float32(0.5)).astype(np.float64)
    y = np.concatenate((-np.ones(i0.shape[0]), np.ones(i1.shape[0])))
    return Built(X, y, "fashion-mnist-v1", {str(neg): -1.0, str(pos): 1.0})


@needs(extra=("n_total", "n_sample", "seed", "indices_sha256"))
def build_protein(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict, ctx: Context | None = None) -> Built:
    import pandas as pd  # imported on use: pandas costs ~0.2 s at start-up

    path = files["data"].path
    try:
        if path.name.endswith(".parquet.brotli") or path.suffix == ".parquet":
            table = pd.read_parquet(path).to_numpy(dtype=np.float64)
        else:
            table = pd.read_csv(path, sep=r"\s+", header=None, float_precision="round_trip").to_numpy(
                dtype=np.float64)
    except (OSError, ValueError, EOFError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DatasetError(f"{path}: cannot read protein data ({type(exc).__name__}: {exc}); "
                           "obtain a complete bio_train.dat / bio_train.parquet.brotli") from None
    n_total = spec.extra["n_total"]
    if table.shape != (n_total, 77):
        raise DatasetError(f"{path}: expected {n_total} rows x 77 columns (block, example, label, 74 features), "
                           f"got {table.shape}")
    raw_y, feats = table[:, 2], table[:, 3:]
    idx = np.random.RandomState(spec.extra["seed"]).choice(n_total, spec.extra["n_sample"], replace=False)
    idx_hash = hashlib.sha256(idx.astype("<i8").tobytes()).hexdigest()
    if idx_hash != spec.extra["indices_sha256"]:
        raise DatasetError(f"protein: subsample indices sha256 {idx_hash} differs from the official "
                           f"{spec.extra['indices_sha256']}; this numpy's legacy RandomState stream changed")
    y, mapping = map_labels(raw_y[idx], str(path))
    X = feats[idx]
    mean, std = np.mean(X, axis=0), np.std(X, axis=0)
    const = np.nonzero(std == 0)[0]
    X = (X - mean) / np.where(std == 0, 1.0, std)
    return Built(prepend_bias(X), y, "protein-v2", mapping,
                 {"indices_sha256": idx_hash, "constant_columns": [int(c) for c in const]})


def read_table(path: Path, fmt: str | None = None, label_column=None, n_features: int | None = None):
    """A user's LIBSVM or CSV/TSV file: (format, finite features X, raw labels, CSV label column).

    The format comes from ``fmt`` or the file name (.csv/.tsv, .svm/.libsvm/.svmlight, optionally
    .gz); the CSV label column is reported by header name, or by index when there is no header.
    """
    name = path.name.lower().removesuffix(".gz")
    if fmt is None:
        if name.endswith((".csv", ".tsv")):
            fmt = "csv"
        elif name.endswith((".svm", ".libsvm", ".svmlight")):
            fmt = "libsvm"
        else:
            raise DatasetError(f"{path}: cannot infer the format from the file name; pass format='csv' or "
                               "format='libsvm' (CLI: --format)")
    if fmt == "csv":
        X, raw, header, col = read_csv(path, label_column, "\t" if name.endswith(".tsv") else ",")
        label_column = col if header is None else header[col]
    elif fmt == "libsvm":
        if label_column is not None:
            raise DatasetError(f"{path}: a label column applies to CSV files only (a LIBSVM label is the first "
                               "field of its line); drop label_column (CLI: --label-column)")
        X, raw = read_libsvm(path, n_features)
    else:
        raise DatasetError(f"unknown format {fmt!r} for {path}; use 'csv' or 'libsvm'")
    check_features(X, str(path))
    return fmt, X, raw, label_column


@needs(options=("format", "label_column", "n_features", "standardize", "bias"))
def build_custom(spec: DatasetSpec, files: dict[str, ResolvedFile], opts: dict, ctx: Context | None = None) -> Built:
    path = files["data"].path
    fmt, X, raw, label_column = read_table(path, opts.get("format"), opts.get("label_column"), opts.get("n_features"))
    meta: dict[str, Any] = {"format": fmt}
    if label_column is not None:
        meta["label_column"] = label_column
    y, mapping = map_labels(raw, str(path))
    if opts.get("standardize"):
        from sklearn.preprocessing import StandardScaler  # imported on use: scikit-learn costs ~0.6 s at start-up

        X = StandardScaler().fit_transform(X)
    if opts.get("bias", True):
        X = prepend_bias(X)
    return Built(X, y, f"custom-{fmt}-v1", mapping, meta)

