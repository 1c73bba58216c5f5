"""Download path against a local HTTP server on 127.0.0.1 (never a real host)."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import os
import threading

import numpy as np
import pytest

from dpnewton.data import DATASETS, DatasetError, prepare, registry
from dpnewton.data.sources import download

PAYLOAD = b"+1 1:1 3:1\n-1 2:1\n-1 1:1 2:1\n+1 3:1\n"
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path == "/good":
            body, length = PAYLOAD, len(PAYLOAD)
        elif self.path == "/truncated":
            body, length = PAYLOAD[:10], len(PAYLOAD)
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_download_ok(server, tmp_path):
    target = tmp_path / "dl" / "f.txt"
    assert download(server + "/good", target, [SHA]) == target
    assert target.read_bytes() == PAYLOAD
    assert os.listdir(target.parent) == ["f.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not the temporary file's 0600


def test_download_checksum_mismatch(server, tmp_path):
    target = tmp_path / "dl" / "f.txt"
    with pytest.raises(DatasetError, match="checksum mismatch for download .*nothing was written"):
        download(server + "/good", target, ["0" * 64])
    assert not target.exists() and os.listdir(target.parent) == []


def test_download_truncated(server, tmp_path):
    target = tmp_path / "dl" / "f.txt"
    with pytest.raises(DatasetError, match="truncated download"):
        download(server + "/truncated", target, [SHA])
    assert not target.exists() and os.listdir(target.parent) == []


def test_download_http_error_and_scheme(server, tmp_path):
    with pytest.raises(DatasetError, match="could not download"):
        download(server + "/missing", tmp_path / "f", [SHA])
    with pytest.raises(DatasetError, match="only https"):
        download("http://example.com/x", tmp_path / "f", [SHA])
    assert not (tmp_path / "f").exists()


def test_download_file_url(tmp_path):
    src = tmp_path / "src.txt"
    src.write_bytes(PAYLOAD)
    out = download(src.as_uri(), tmp_path / "out" / "f.txt", [SHA])
    assert out.read_bytes() == PAYLOAD


def _patched(monkeypatch, url, sha):
    spec = DATASETS["a1a"]
    src = dataclasses.replace(spec.sources["data"], urls=(url,), sha256=(sha,))
    fake = dataclasses.replace(spec, sources={"data": src}, shape=(None, None))
    monkeypatch.setattr(registry, "DATASETS", {**DATASETS, "a1a": fake})


def test_prepare_downloads_into_cache(server, tmp_path, monkeypatch):
    _patched(monkeypatch, server + "/good", SHA)
    pd = prepare("a1a", cache_dir=tmp_path)
    assert pd.X.shape == (4, 124) and np.array_equal(pd.y, [1.0, -1.0, -1.0, 1.0])
    assert (tmp_path / "downloads" / "a1a.t").read_bytes() == PAYLOAD
    assert pd.meta["sources"][0]["origin"] == "downloaded"
    again = prepare("a1a", cache_dir=tmp_path)  # second run: local download cache
    assert np.array_equal(pd.X, again.X)


def test_prepare_rejects_bad_download(server, tmp_path, monkeypatch):
    _patched(monkeypatch, server + "/good", "f" * 64)
    with pytest.raises(DatasetError, match="checksum mismatch"):
        prepare("a1a", cache_dir=tmp_path)
    _patched(monkeypatch, server + "/truncated", SHA)
    with pytest.raises(DatasetError, match="truncated download"):
        prepare("a1a", cache_dir=tmp_path)
    assert os.listdir(tmp_path / "downloads") == []
    assert not (tmp_path / "a1a.npz").exists()


def test_prepare_unavailable(tmp_path, monkeypatch):
    _patched(monkeypatch, "http://127.0.0.1:9/nothing", SHA)  # port 9: connection refused
    with pytest.raises(DatasetError) as ei:
        prepare("a1a", cache_dir=tmp_path, data_dir=tmp_path)
    msg = str(ei.value)
    assert "missing source file 'a1a.t'" in msg
    assert "http://127.0.0.1:9/nothing" in msg
    assert str(tmp_path / "a1a" / "a1a.t") in msg
    assert not (tmp_path / "a1a.npz").exists()
