"""Real-data tests; they need /work/shared/datasets (../shared/datasets from the repo)."""

from __future__ import annotations

import hashlib
import io
import lzma
from pathlib import Path

import numpy as np
import pytest

from dpnewton.data import DATASETS, DatasetError, load_prepared, prepare

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
FMNIST_DIR = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(scope="module")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared datasets folder {SHARED} is absent")
    return SHARED


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _counts(y):
    return int((y == -1).sum()), int((y == 1).sum())


def _check_common(pd, n, d):
    assert pd.X.shape == (n, d) and pd.y.shape == (n,)
    assert pd.X.dtype == np.float64 and pd.y.dtype == np.float64
    assert set(np.unique(pd.y)) == {-1.0, 1.0}
    assert pd.meta["n"] == n and pd.meta["d"] == d
    assert all(s["verified"] for s in pd.meta["sources"])


@pytest.mark.shared_data
def test_a1a_v2(shared, cache):
    pd = prepare("a1a", data_dir=shared, cache_dir=cache)
    _check_common(pd, 30956, 124)
    assert _counts(pd.y) == (23510, 7446)
    assert pd.meta["label_counts"] == {"-1": 23510, "+1": 7446}
    assert pd.meta["preprocessing"] == "a1a-v2"
    assert np.all(pd.X[:, 0] == 1.0)
    # standardised columns (zero-variance columns stay at 0)
    assert np.allclose(pd.X[:, 1:].mean(axis=0), 0.0, atol=1e-12)
    std = pd.X[:, 1:].std(axis=0)
    assert np.all(np.isclose(std, 1.0) | np.isclose(std, 0.0))
    assert pd.meta["sources"][0]["sha256"] == DATASETS["a1a"].sources["data"].sha256[0]
    for key in ("dpnewton_version", "numpy_version", "options", "x_sha256"):
        assert key in pd.meta


@pytest.mark.shared_data
def test_a1a_v1_rows_unit_norm(shared, cache):
    pd = prepare("a1a", data_dir=shared, cache_dir=cache, prep="v1", out=cache / "a1a_v1.npz")
    _check_common(pd, 30956, 124)
    assert pd.meta["preprocessing"] == "a1a-v1"
    assert np.allclose(np.linalg.norm(pd.X, axis=1), np.sqrt(2.0))


@pytest.mark.shared_data
def test_adult_matches_official(shared, cache):
    pd = prepare("adult", data_dir=shared, cache_dir=cache)
    _check_common(pd, 45220, 105)
    assert _counts(pd.y) == (34014, 11206)
    assert np.all(pd.X[:, 0] == 1.0)
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(pd.X[:, 1:]))
    digest = hashlib.sha256(buf.getvalue()).hexdigest()
    assert digest == "5b2cf15c827da9d9b073d36a28c93637117dbdcdde0733910822be05570a4149"
    assert pd.meta["official_x_match"] is True
    official_y = np.load(shared / "adult" / "adult_processed_y.npy", allow_pickle=False)
    assert np.array_equal(official_y, pd.y)
    official_x = np.load(io.BytesIO(lzma.open(shared / "adult" / "adult_processed_x.npy.xz").read()),
                         allow_pickle=False)
    assert np.array_equal(official_x, pd.X[:, 1:])


@pytest.mark.shared_data
def test_protein(shared, cache):
    pd = prepare("protein", data_dir=shared, cache_dir=cache)
    _check_common(pd, 50000, 75)
    assert _counts(pd.y) == (50000 - 476, 476)
    assert pd.meta["indices_sha256"] == "f63ddd35e9259658eb4cc0f485248fe8abfc815f4b09cbb0288378b83a6a708b"
    idx = np.random.RandomState(3000).choice(145751, 50000, replace=False)
    assert hashlib.sha256(idx.astype("<i8").tobytes()).hexdigest() == pd.meta["indices_sha256"]
    assert np.all(pd.X[:, 0] == 1.0)
    assert np.allclose(pd.X[:, 1:].mean(axis=0), 0.0, atol=1e-10)
    assert np.allclose(pd.X[:, 1:].std(axis=0), 1.0)


@pytest.mark.shared_data
@pytest.mark.parametrize("name,n,d,neg,pos", [
    ("a5a", 6414, 124, 4845, 1569), ("a6a", 11220, 124, 8528, 2692), ("a9a", 32561, 124, 24720, 7841),
    ("w5a", 9888, 301, 9607, 281), ("w7a", 24692, 301, 23952, 740), ("w8a", 49749, 301, 48270, 1479),
    ("phishing", 11055, 69, 4898, 6157),
])
def test_extra_libsvm(shared, cache, name, n, d, neg, pos):
    pd = prepare(name, data_dir=shared, cache_dir=cache)
    _check_common(pd, n, d)
    assert _counts(pd.y) == (neg, pos)


@pytest.mark.shared_data
def test_cache_reuse_and_invalidation(shared, tmp_path):
    out = tmp_path / "a1a.npz"
    first = prepare("a1a", data_dir=shared, out=out)
    mtime = out.stat().st_mtime_ns
    again = prepare("a1a", data_dir=shared, out=out)
    assert out.stat().st_mtime_ns == mtime  # reused, not rewritten
    assert np.array_equal(first.X, again.X)
    v1 = prepare("a1a", data_dir=shared, out=out, prep="v1")  # options changed -> rebuilt
    assert v1.meta["preprocessing"] == "a1a-v1"
    assert out.stat().st_mtime_ns != mtime
    loaded = load_prepared(out)
    assert loaded.meta["preprocessing"] == "a1a-v1" and np.array_equal(loaded.X, v1.X)
    assert load_prepared(tmp_path / "a1a.json").name == "a1a"
    # a damaged prepared file is detected by load_prepared and rebuilt by prepare
    out.write_bytes(out.read_bytes()[:100])
    with pytest.raises(DatasetError, match="unreadable prepared dataset"):
        load_prepared(out)
    assert prepare("a1a", data_dir=shared, out=out, prep="v1").X.shape == (30956, 124)


@pytest.mark.shared_data
def test_covertype_reports_missing_raw_file(shared, tmp_path):
    with pytest.raises(DatasetError) as ei:
        prepare("covertype", data_dir=shared, cache_dir=tmp_path, allow_download=False)
    msg = str(ei.value)
    assert "covtype.data.gz" in msg and str(shared / "covtype" / "covtype.data.gz") in msg
    assert "https://" in msg
    assert not list(tmp_path.glob("*.npz"))


@pytest.mark.skipif(not (FMNIST_DIR / "train-images-idx3-ubyte.gz").is_file(),
                    reason="Debian package dataset-fashion-mnist not installed")
def test_fashion_mnist_debian(tmp_path):
    pd = prepare("fashion-mnist", cache_dir=tmp_path, allow_download=False)
    _check_common(pd, 12000, 784)
    assert _counts(pd.y) == (6000, 6000)
    assert pd.X.min() == -1.0 and pd.X.max() == 1.0
    assert pd.meta["sources"][0]["origin"] == "installed"
    assert np.all(pd.y[:6000] == -1) and np.all(pd.y[6000:] == 1)
