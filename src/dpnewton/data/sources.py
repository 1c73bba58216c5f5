"""Finding, downloading and verifying source files; safe archive extraction.

Lookup order for a :class:`SourceFile` (first hit wins):

1. ``data_dir/<subdir>/<filename>`` and ``data_dir/<filename>`` (explicit argument,
   falling back to the ``DPNEWTON_DATA_DIR`` environment variable);
2. directories where an OS package installed the file (e.g. Debian
   ``dataset-fashion-mnist``);
3. the download cache ``cache_dir/downloads/<filename>``;
4. an HTTPS download (certificate verified), checksum verified before the file is
   renamed into the download cache.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import ssl
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

from ..io import atomic_path
from .errors import DatasetError

CHUNK = 1 << 20
DOWNLOAD_TIMEOUT = 60.0
MAX_DOWNLOAD_BYTES = 2 << 30  # 2 GiB: refuse anything larger

#: The URL opener, callable(url, timeout) -> file-like response (a test may monkeypatch ``_opener``).
Opener = Callable[[str, float], object]


def _default_opener(url: str, timeout: float):
    context = ssl.create_default_context()  # verifies certificates and host names
    return urllib.request.urlopen(url, timeout=timeout, context=context)  # noqa: S310


_opener: Opener = _default_opener

#: Directories where OS packages install data files (Debian ``dataset-*`` packages).
INSTALLED_DIRS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"fashion-mnist": ("/usr/share/datasets/fashion-mnist",)}
)


@dataclass(frozen=True)
class SourceFile:
    """One input file of a dataset.

    ``sha256`` holds every accepted digest of the file bytes (e.g. the Debian
    re-packed and the original gzip of Fashion-MNIST).  An empty tuple means no
    published digest exists; such files are only accepted if the loader verifies
    their content some other way (protein: git blob id of the extracted member).
    """

    filename: str
    subdir: str
    urls: tuple[str, ...] = ()
    sha256: tuple[str, ...] = ()
    installed_key: str | None = None  # key into INSTALLED_DIRS

    def __post_init__(self) -> None:
        bad = []
        if not isinstance(self.urls, tuple) or not all(isinstance(u, str) for u in self.urls):
            bad.append(f"urls must be a tuple of strings, got {self.urls!r}")
        if not isinstance(self.sha256, tuple) or not all(
                isinstance(h, str) and re.fullmatch("[0-9a-f]{64}", h) for h in self.sha256):
            bad.append(f"sha256 must be a tuple of 64-digit lower-case hex digests, got {self.sha256!r}")
        if self.installed_key is not None and self.installed_key not in INSTALLED_DIRS:
            bad.append(f"installed_key {self.installed_key!r} is not a key of INSTALLED_DIRS")
        if bad:
            raise DatasetError(f"source file {self.filename!r}: " + "; ".join(bad))


@dataclass(frozen=True)
class ResolvedFile:
    path: Path
    sha256: str
    origin: str  # "data_dir" | "installed" | "download_cache" | "downloaded" | "user" | "extracted"
    verified: bool  # digest matched a published/recorded value


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def git_blob_id(path: str | os.PathLike) -> str:
    """``git hash-object`` of a file (sha1 over ``b"blob <size>\\0" + content``)."""
    size = os.path.getsize(path)
    h = hashlib.sha1(f"blob {size}\0".encode())  # noqa: S324 - identity, not security
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    if data_dir is None:
        env = os.environ.get("DPNEWTON_DATA_DIR")
        data_dir = env or None
    if data_dir is None:
        return None
    p = Path(data_dir).expanduser()
    if not p.is_dir():
        raise DatasetError(
            f"data directory {str(p)!r} does not exist or is not a directory; "
            "pass an existing folder (e.g. --data-dir ../shared/datasets) or omit it"
        )
    return p


def local_candidates(src: SourceFile, data_dir: Path | None, cache_dir: Path) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    if data_dir is not None:
        out.append((data_dir / src.subdir / src.filename, "data_dir"))
        out.append((data_dir / src.filename, "data_dir"))
    if src.installed_key:
        for d in INSTALLED_DIRS[src.installed_key]:
            out.append((Path(d) / src.filename, "installed"))
    out.append((cache_dir / "downloads" / src.filename, "download_cache"))
    return out


def check_digest(path: Path, src: SourceFile, verify: bool) -> ResolvedFile:
    digest = sha256_file(path)
    ok = digest in src.sha256
    if src.sha256 and verify and not ok:
        raise DatasetError(
            f"checksum mismatch for {path}: sha256 {digest}, expected "
            f"{' or '.join(src.sha256)}. The file is corrupt, truncated or a different "
            f"version; delete it and put the canonical file there (download from "
            f"{src.urls[0] if src.urls else 'its original source'}), or pass "
            "verify_checksum=False to use a modified file on purpose"
        )
    return ResolvedFile(path, digest, "", ok)


def find_local(src: SourceFile, data_dir: Path | None, cache_dir: Path, verify: bool) -> ResolvedFile | None:
    for path, origin in local_candidates(src, data_dir, cache_dir):
        if path.is_file():
            r = check_digest(path, src, verify)
            return ResolvedFile(r.path, r.sha256, origin, r.verified)
    return None


def resolve(
    src: SourceFile,
    data_dir: Path | None,
    cache_dir: Path,
    *,
    verify: bool = True,
    allow_download: bool = True,
) -> ResolvedFile:
    """Return a verified local copy of ``src``, downloading it if needed."""
    found = find_local(src, data_dir, cache_dir, verify)
    if found is not None:
        return found
    target = cache_dir / "downloads" / src.filename
    errors: list[str] = []
    if allow_download and src.urls:
        if verify and not src.sha256:
            # Callers that can verify content another way call download() directly.
            errors.append("no published checksum to verify a download against")
        else:
            for url in src.urls:
                try:
                    path = download(url, target, src.sha256 if verify else ())
                    return ResolvedFile(path, sha256_file(path), "downloaded", bool(src.sha256) and verify)
                except DatasetError as exc:
                    if "checksum mismatch" in str(exc) or "truncated" in str(exc):
                        raise
                    errors.append(str(exc))
    raise missing_error(src, data_dir, cache_dir, errors, allow_download)


def missing_error(src: SourceFile, data_dir: Path | None, cache_dir: Path,
                  errors: Sequence[str] = (), allow_download: bool = True) -> DatasetError:
    looked = [str(p) for p, _ in local_candidates(src, data_dir, cache_dir)]
    where = (
        f"put it at {data_dir / src.subdir / src.filename} (then pass the same data_dir)"
        if data_dir is not None
        else f"put it at {cache_dir / 'downloads' / src.filename} "
             f"or pass data_dir=DIR with DIR/{src.subdir}/{src.filename}"
    )
    url = f"; download it from {' or '.join(src.urls)}" if src.urls else ""
    why = ""
    if not allow_download:
        why = " (downloads disabled)"
    elif errors:
        why = " (download failed: " + "; ".join(errors) + ")"
    return DatasetError(
        f"missing source file {src.filename!r}{why}. Looked in: {', '.join(looked)}{url}; {where}"
    )


def _check_url(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return  # local test servers only
    if parts.scheme == "file":
        return  # local mirror
    raise DatasetError(f"refusing to download {url}: only https:// URLs are allowed")


def download(url: str, target: str | os.PathLike, sha256: Iterable[str] = (), *,
             timeout: float = DOWNLOAD_TIMEOUT) -> Path:
    """Download ``url`` to ``target`` atomically; verify sha256 before the rename.

    Nothing is left at ``target`` (or as a temporary file) on failure.
    """
    _check_url(url)
    target = Path(target)
    expected = tuple(sha256)
    with atomic_path(target, suffix=".part") as tmp:
        h = hashlib.sha256()
        total = 0
        try:
            resp = _opener(url, timeout)
            try:
                length = None
                headers = getattr(resp, "headers", None)
                if headers is not None and headers.get("Content-Length"):
                    length = int(headers.get("Content-Length"))
                with open(tmp, "wb") as out:
                    while True:
                        chunk = resp.read(CHUNK)
                        if not chunk:
                            break
                        total += len(chunk)
                        if total > MAX_DOWNLOAD_BYTES:
                            raise DatasetError(f"download of {url} exceeds {MAX_DOWNLOAD_BYTES} bytes; refusing")
                        h.update(chunk)
                        out.write(chunk)
            finally:
                close = getattr(resp, "close", None)
                if close:
                    close()
        except DatasetError:
            raise
        except http.client.IncompleteRead as exc:
            raise DatasetError(
                f"truncated download of {url}: got {total + len(exc.partial)} bytes, "
                f"{exc.expected} more expected; nothing was written to {target}; retry or place "
                "the file there by hand"
            ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            raise DatasetError(f"could not download {url}: {exc}") from None
        if length is not None and total != length:
            raise DatasetError(
                f"truncated download of {url}: got {total} of {length} bytes; "
                f"nothing was written to {target}; retry or place the file there by hand"
            )
        digest = h.hexdigest()
        if expected and digest not in expected:
            raise DatasetError(
                f"checksum mismatch for download {url}: sha256 {digest} ({total} bytes), expected "
                f"{' or '.join(expected)}; the file was discarded and nothing was written to "
                f"{target}. Retry later or place the canonical file there by hand"
            )
    return target


def extract_member(archive: Path, member: str, target: Path) -> Path:
    """Extract one regular-file member of a tar archive to ``target`` atomically.

    Absolute names, ``..`` components, links and special files are rejected; the
    member is matched by its base name after these checks.
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            chosen = None
            for info in tar:
                name = info.name
                parts = Path(name).parts
                if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
                    if Path(name).name == member:
                        raise DatasetError(f"unsafe path {name!r} in archive {archive}; refusing to extract")
                    continue
                if Path(name).name != member:
                    continue
                if not info.isreg():
                    raise DatasetError(
                        f"member {name!r} of {archive} is a link or special file; refusing to extract"
                    )
                chosen = info
                break
            if chosen is None:
                raise DatasetError(f"archive {archive} has no member {member!r}; delete it and download again")
            src = tar.extractfile(chosen)
            assert src is not None
            with atomic_path(target, suffix=".part") as tmp, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
            return target
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DatasetError(
            f"cannot read archive {archive} (truncated or corrupt: {exc}); delete it and download again"
        ) from None
