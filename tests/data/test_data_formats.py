"""Preprocessing on small fake files written in the real formats."""

from __future__ import annotations

import gzip
import io
import os
import tarfile

import numpy as np
import pytest

from dpnewton.data import DatasetError, prepare
from dpnewton.data.readers import read_idx
from dpnewton.data.sources import extract_member


def _write_covtype(path, n=300, seed=1):
    rng = np.random.default_rng(seed)
    cont = rng.integers(0, 4000, size=(n, 10))
    binary = rng.integers(0, 2, size=(n, 44))
    cls = rng.integers(1, 8, size=(n, 1))
    cls[:4, 0] = [3, 6, 3, 6]  # make sure both classes occur
    table = np.hstack([cont, binary, cls])
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        for row in table:
            fh.write(",".join(str(int(v)) for v in row) + "\n")
    return table


def test_covertype_fake(tmp_path):
    data_dir = tmp_path / "data"
    table = _write_covtype(data_dir / "covtype" / "covtype.data.gz")
    # the fake's checksum differs from scikit-learn's published one
    with pytest.raises(DatasetError, match="checksum mismatch"):
        prepare("covertype", data_dir=data_dir, cache_dir=tmp_path / "c", allow_download=False)
    pd = prepare("covertype", data_dir=data_dir, cache_dir=tmp_path / "c", verify_checksum=False,
                 allow_download=False)
    # independent expectation
    feats = table[:, :54].astype(float)
    mx = feats.max(axis=0)
    feats[:, mx > 1] /= mx[mx > 1]
    perm = np.arange(len(table))
    np.random.RandomState(10000019).shuffle(perm)
    feats, cls = feats[perm], table[perm, 54]
    keep = (cls == 3) | (cls == 6)
    assert np.array_equal(pd.X[:, 1:], feats[keep])
    assert np.all(pd.X[:, 0] == 1.0)
    assert np.array_equal(pd.y, np.where(cls[keep] == 6, 1.0, -1.0))
    assert pd.X.shape == (int(keep.sum()), 55)
    assert pd.meta["verify_checksum"] is False and pd.meta["sources"][0]["verified"] is False


def _idx(arr: np.ndarray, code: int = 0x08) -> bytes:
    header = bytes([0, 0, code, arr.ndim]) + np.array(arr.shape, dtype=">u4").tobytes()
    return header + arr.astype(np.uint8).tobytes()


def _write_fmnist(d, n=40, gz=True, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    images[0, 0, 0], images[1, 0, 0] = 0, 255
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    labels[:2] = [0, 3]
    d.mkdir(parents=True, exist_ok=True)
    for name, arr in (("train-images-idx3-ubyte.gz", images), ("train-labels-idx1-ubyte.gz", labels)):
        raw = _idx(arr)
        (d / name).write_bytes(gzip.compress(raw) if gz else raw)
    return images, labels


def test_fashion_mnist_fake(tmp_path):
    data_dir = tmp_path / "data"
    images, labels = _write_fmnist(data_dir / "fashion-mnist")
    pd = prepare("fashion-mnist", data_dir=data_dir, cache_dir=tmp_path / "c", verify_checksum=False,
                 allow_download=False)
    i0, i1 = np.nonzero(labels == 0)[0], np.nonzero(labels == 3)[0]
    assert pd.X.shape == (len(i0) + len(i1), 784) and pd.meta["bias"] is False
    expected = images[np.concatenate([i0, i1])].reshape(-1, 784) / 255.0 * 2.0 - 1.0
    assert np.allclose(pd.X, expected, atol=1e-6)
    assert pd.X.min() >= -1.0 and pd.X.max() <= 1.0
    assert np.array_equal(pd.y, np.r_[-np.ones(len(i0)), np.ones(len(i1))])
    assert pd.meta["sources"][0]["origin"] == "data_dir"


def test_idx_plain_and_truncated(tmp_path):
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    p = tmp_path / "x.idx"
    p.write_bytes(_idx(arr))
    assert np.array_equal(read_idx(p), arr)
    p.write_bytes(_idx(arr)[:-3])
    with pytest.raises(DatasetError, match="truncated"):
        read_idx(p)
    g = tmp_path / "x.idx.gz"
    g.write_bytes(gzip.compress(_idx(arr))[:-10])
    with pytest.raises(DatasetError, match="truncated or corrupt gzip"):
        read_idx(g)
    p.write_bytes(b"\x08\x03\x00\x00")
    with pytest.raises(DatasetError, match="not an IDX file"):
        read_idx(p)


def test_custom_libsvm_and_csv(tmp_path):
    svm = tmp_path / "d.svm"
    svm.write_text("1 1:0.5 3:1\n0 2:2\n1 1:1.5\n")
    pd = prepare("custom", file=svm, out=tmp_path / "s.npz")
    assert pd.X.shape == (3, 4) and np.array_equal(pd.y, [1.0, -1.0, 1.0])
    assert pd.meta["label_mapping"] == {"0": -1.0, "1": 1.0}
    assert np.array_equal(pd.X[:, 1:], [[0.5, 0, 1], [0, 2, 0], [1.5, 0, 0]])
    csvf = tmp_path / "d.csv"
    csvf.write_text("lab,f1,f2\n2,1.0,2.0\n1,3.0,4.0\n")
    pd = prepare("custom", file=csvf, out=tmp_path / "c.npz", label_column="lab", bias=False)
    assert pd.X.shape == (2, 2) and np.array_equal(pd.y, [1.0, -1.0]) and pd.meta["bias"] is False
    pd = prepare("custom", file=csvf, out=tmp_path / "c2.npz", label_column=0, standardize=True)
    assert np.allclose(pd.X[:, 1:], [[-1, -1], [1, 1]])
    other = tmp_path / "d.data"
    other.write_text("1,2,0\n")
    with pytest.raises(DatasetError, match="pass format="):
        prepare("custom", file=other, out=tmp_path / "o.npz")
    with pytest.raises(DatasetError, match="needs file=PATH"):
        prepare("custom", out=tmp_path / "o.npz")


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = "/etc/passwd"
                tar.addfile(info)


def test_safe_extraction(tmp_path):
    arc = tmp_path / "a.tar.gz"
    _tar(arc, [("docs/readme.txt", b"x", "file"), ("data/bio_train.dat", b"1 2 3\n", "file")])
    out = extract_member(arc, "bio_train.dat", tmp_path / "out" / "bio_train.dat")
    assert out.read_bytes() == b"1 2 3\n"
    for members, msg in [
        ([("/abs/bio_train.dat", b"x", "file")], "unsafe path"),
        ([("../bio_train.dat", b"x", "file")], "unsafe path"),
        ([("bio_train.dat", b"", "sym")], "link or special file"),
        ([("bio_train.dat", b"", "hard")], "link or special file"),
        ([("other.dat", b"x", "file")], "no member"),
    ]:
        bad = tmp_path / "bad.tar.gz"
        _tar(bad, members)
        target = tmp_path / "x" / "bio_train.dat"
        with pytest.raises(DatasetError, match=msg):
            extract_member(bad, "bio_train.dat", target)
        assert not target.exists()
    trunc = tmp_path / "t.tar.gz"
    trunc.write_bytes(arc.read_bytes()[:40])
    with pytest.raises(DatasetError, match="truncated or corrupt"):
        extract_member(trunc, "bio_train.dat", tmp_path / "y" / "bio_train.dat")
    assert not (tmp_path / "y" / "bio_train.dat").exists()
    for sub in ("x", "y"):  # no partial or temporary files anywhere
        assert not (tmp_path / sub).exists() or not os.listdir(tmp_path / sub)


def test_protein_archive_member_checked_by_blob(tmp_path):
    """A tarball whose bio_train.dat is not the canonical one is rejected after extraction."""
    d = tmp_path / "data" / "protein"
    d.mkdir(parents=True)
    _tar(d / "data_kddcup04.tar.gz", [("bio_train.dat", b"1 2 0 0.5\n", "file")])
    with pytest.raises(DatasetError, match="git blob id"):
        prepare("protein", data_dir=tmp_path / "data", cache_dir=tmp_path / "c", allow_download=False)
    assert not (tmp_path / "c" / "downloads" / "bio_train.dat").exists()
    assert not list((tmp_path / "c").glob("*.npz"))
