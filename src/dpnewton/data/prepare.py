"""prepare(): resolve sources, build, validate, write .npz + JSON sidecar, reuse cache.

The sidecar records the SHA-256 of the arrays (``x_sha256``, ``y_sha256``: :func:`load_prepared`
checks them), of the npz file itself (``npz_sha256``: :func:`check_prepared_file`, the workflow's
start check, compares it without loading the arrays) and of the sidecar's own fields (``json_sha256``,
:func:`dpnewton.io.json_digest`). The npz is byte-reproducible
(:func:`dpnewton.io.atomic_write_npz`), so a rebuild from the same sources gives the same file.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from ..io import (JSON_DIGEST_KEY, DamagedFileError, atomic_path, atomic_write_npz, check_json_digest, check_npz,
                  file_sha256, json_digest, read_json)
from .errors import DatasetError
from .loaders import Context
from .registry import COMMON_OPTIONS, get_spec
from .sources import resolve_data_dir
from .validate import check_prepared, label_counts

#: bump when any recipe changes in a way that alters outputs (invalidates caches)
FORMAT = "dpnewton-prepared/1"


@dataclass(frozen=True)
class PreparedDataset:
    """Features X (float64, n x d, bias prepended where applicable, *not* row-projected),
    labels y (float64 in {-1, +1}), dataset name and the sidecar dict ``meta``."""

    name: str
    X: np.ndarray
    y: np.ndarray
    meta: dict[str, Any] = field(repr=False)
    path: Path | None = None

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    def summary(self) -> str:
        c = self.meta.get("label_counts") or label_counts(self.y)
        return f"{self.name}: n={self.n} d={self.d} labels -1: {c['-1']}, +1: {c['+1']}"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def sidecar_path(out: Path) -> Path:
    return out.with_suffix(".json")


def _out_path(name: str, out, cache_dir: Path) -> Path:
    p = Path(out).expanduser() if out is not None else cache_dir / f"{name}.npz"
    if p.suffix != ".npz":
        p = p.with_name(p.name + ".npz")
    return p


def _split_options(spec, options: dict) -> tuple[dict, dict]:
    common = dict(COMMON_OPTIONS)
    opts = dict(spec.options)
    for k, v in options.items():
        if k in common:
            common[k] = v
        elif k in opts:
            opts[k] = v
        else:
            allowed = sorted(set(spec.options) | set(COMMON_OPTIONS))
            raise DatasetError(
                f"dataset {spec.name!r} does not take option {k!r}; allowed: {', '.join(allowed) or 'none'}"
            )
    if opts.get("file") is not None:
        opts["file"] = str(opts["file"])
    try:
        json.dumps(opts)
    except TypeError as exc:
        raise DatasetError(f"dataset {spec.name!r}: option values must be plain JSON values ({exc})") from None
    return opts, common


def check_options(name: str, options: dict) -> None:
    """The checks of a dataset's options that need no data, as :func:`prepare` would meet them: every
    name is one of the dataset's options or :data:`~.registry.COMMON_OPTIONS`, every value is a plain
    JSON value of its default's type (a default of None takes any value; an integer default takes
    integers, of its default's sign: a positive default takes integers >= 1, 0 takes integers >= 0).
    Raises :class:`DatasetError` naming the option."""
    spec = get_spec(name)
    _split_options(spec, options)
    defaults = {**COMMON_OPTIONS, **spec.options}
    for key, value in options.items():
        default = defaults[key]
        if default is None:
            continue
        if isinstance(default, bool):
            ok, takes = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            low = 1 if default > 0 else 0 if default == 0 else None
            ok = isinstance(value, int) and not isinstance(value, bool) and (low is None or value >= low)
            takes = "an integer" + ("" if low is None else f" >= {low}")
        elif isinstance(default, float):
            ok, takes = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
        else:
            ok, takes = isinstance(value, type(default)), f"a {type(default).__name__}"
        if not ok:
            raise DatasetError(f"dataset {name!r}: option {key} must be {takes}, got {value!r}")


def _atomic_write(target: Path, write) -> None:
    with atomic_path(target) as tmp, open(tmp, "wb") as fh:
        write(fh)


def _array_sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def prepare(name: str, data_dir=None, out=None, cache_dir="resources/data", **options) -> PreparedDataset:
    """Build (or reuse from cache) the prepared dataset ``name``.

    Writes ``out`` (default ``cache_dir/<name>.npz``) and a JSON sidecar next to it
    (same stem, ``.json``).  Options: dataset-specific ones (see ``DATASETS[name].options``)
    plus ``verify_checksum`` (default True), ``allow_download`` (default True) and
    ``force`` (rebuild even if the cache is valid).
    """
    spec = get_spec(name)
    opts, common = _split_options(spec, options)
    cache_dir = Path(cache_dir).expanduser()

    # Only datasets with source files look in data_dir: a synthetic or custom dataset must not fail
    # because a configured data_dir is absent on this machine.
    ctx = Context(resolve_data_dir(data_dir) if spec.sources else None, cache_dir,
                  bool(common["verify_checksum"]),
                  bool(common["allow_download"]))
    out_path = _out_path(name, out, cache_dir)
    side = sidecar_path(out_path)

    files = spec.resolve(spec, ctx, opts)
    sources = [
        {"role": role, "file": rf.path.name, "path": str(rf.path), "sha256": rf.sha256,
         "origin": rf.origin, "verified": rf.verified}
        for role, rf in sorted(files.items())
    ]
    key_material = {
        "format": FORMAT, "name": name, "options": {k: v for k, v in opts.items() if k != "file"},
        "sources": sorted((s["role"], s["sha256"]) for s in sources),
        "verify_checksum": ctx.verify,
    }
    cache_key = hashlib.sha256(json.dumps(key_material, sort_keys=True).encode()).hexdigest()

    if not common["force"] and out_path.is_file() and side.is_file():
        try:
            cached = load_prepared(out_path)
            if cached.meta.get("cache_key") == cache_key:
                return cached
        except DatasetError:
            pass  # stale or damaged: rebuild below

    built = spec.build(spec, files, opts, ctx)
    X, y = check_prepared(built.X, built.y, f"dataset {name!r}")
    if ctx.verify and spec.sources and spec.shape[0] is not None and X.shape != tuple(spec.shape):
        raise DatasetError(
            f"dataset {name!r}: built shape {X.shape} differs from the documented {tuple(spec.shape)}; "
            f"the source files ({', '.join(s['path'] for s in sources)}) are not the canonical ones"
        )
    meta: dict[str, Any] = {
        "format": FORMAT,
        "name": name,
        "description": spec.description,
        "preprocessing": built.prep_version,
        "n": int(X.shape[0]),
        "d": int(X.shape[1]),
        "bias": bool(opts.get("bias", spec.bias)),
        "row_projection": "not applied (done by the numerical core)",
        "label_counts": label_counts(y),
        "label_mapping": built.label_mapping,
        "options": opts,
        "verify_checksum": ctx.verify,
        "sources": sources,
        "x_sha256": _array_sha256(X),
        "y_sha256": _array_sha256(y),
        "cache_key": cache_key,
        "dpnewton_version": _version("dpnewton"),
        "numpy_version": np.__version__,
        "scikit_learn_version": _version("scikit-learn"),
        **built.meta,
    }
    try:
        atomic_write_npz(out_path, X=X, y=y, name=np.array(name), preprocessing=np.array(built.prep_version),
                         cache_key=np.array(cache_key))
        meta["npz_sha256"] = file_sha256(out_path)
        meta[JSON_DIGEST_KEY] = json_digest(meta)
        _atomic_write(side, lambda fh: fh.write((json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()))
    except OSError as exc:
        raise DatasetError(f"cannot write {out_path} / {side}: {exc}; "
                           "choose a writable --out or --cache-dir (cache_dir)") from None
    return PreparedDataset(name, X, y, meta, out_path)


def load_prepared(path) -> PreparedDataset:
    """Read a prepared ``.npz`` (``allow_pickle=False``) and its JSON sidecar; check they agree."""
    p = Path(path).expanduser()
    if p.suffix == ".json":
        p = p.with_suffix(".npz")
    side = sidecar_path(p)
    if not p.is_file() or not side.is_file():
        missing = p if not p.is_file() else side
        raise DatasetError(f"prepared file {missing} not found; run 'dpnewton prepare NAME --out {p}' first")
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
        with np.load(p, allow_pickle=False) as z:
            X, y = z["X"], z["y"]
            name, key = str(z["name"]), str(z["cache_key"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        raise DatasetError(f"{p}: unreadable prepared dataset ({type(exc).__name__}: {exc}); "
                           "delete it and run prepare again") from None
    try:
        check_json_digest(side, meta)
    except DamagedFileError as exc:
        raise DatasetError(f"{side}: {exc.problem}; delete it and run prepare again") from None
    if meta.get("cache_key") != key or meta.get("name") != name:
        raise DatasetError(f"{p} and {side} do not belong together (different build); run prepare again")
    if X.dtype != np.float64 or y.dtype != np.float64 or X.ndim != 2 or y.shape != (X.shape[0],):
        raise DatasetError(f"{p}: arrays have unexpected dtype/shape; delete it and run prepare again")
    if meta.get("x_sha256") != _array_sha256(X) or meta.get("y_sha256") != _array_sha256(y):
        raise DatasetError(f"{p}: array contents do not match the sidecar hashes; delete it and run prepare again")
    return PreparedDataset(name, X, y, meta, p)


def prepared_fix(path) -> str:
    """The fix of a damaged prepared file: delete it and its sidecar and prepare it again."""
    p = Path(path)
    return (f"delete {p} and {sidecar_path(p)}, then run `snakemake {p}` (the target before your other options): "
            f"rule prepare_data recomputes both, and the jobs made from them rerun (outside the workflow: "
            f"`dpnewton prepare NAME --out {p}`)")


def check_prepared_file(path, fix: str | None = None) -> dict:
    """The sidecar of an undamaged prepared file, without loading its arrays: the sidecar parses and the
    npz has the SHA-256 it recorded (``npz_sha256``), or, for a sidecar written before that field, every
    member of the npz passes its zip CRC (a flipped byte inside X fails). Raises
    :class:`dpnewton.io.DamagedFileError` naming the damaged file and ``fix`` (:func:`prepared_fix`)."""
    p = Path(path)
    fix = fix or prepared_fix(p)
    meta = read_json(sidecar_path(p), fix)
    if not isinstance(meta, dict):
        raise DamagedFileError(sidecar_path(p), "not a prepared dataset's sidecar (a JSON object)", fix)
    check_json_digest(sidecar_path(p), meta, fix)
    recorded = meta.get("npz_sha256")
    if recorded is not None:
        if file_sha256(p) != recorded:
            raise DamagedFileError(p, f"its SHA-256 is not the one recorded in {sidecar_path(p).name} when both "
                                      "were written", fix)
        return meta
    check_npz(p, fix)
    try:
        with zipfile.ZipFile(p) as zf:
            bad = zf.testzip()
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise DamagedFileError(p, f"unreadable npz ({type(exc).__name__}: {exc})", fix) from None
    if bad is not None:
        raise DamagedFileError(p, f"its member {bad} fails its CRC", fix)
    return meta
