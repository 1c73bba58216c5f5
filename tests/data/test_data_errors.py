"""One test per bad input: clear DatasetError, nothing written."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from dpnewton.data import DatasetError, prepare

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def _fails(tmp_path, content, match, name="bad.csv", binary=False, **opts):
    f = tmp_path / name
    if binary:
        f.write_bytes(content)
    else:
        f.write_text(content)
    out = tmp_path / "out" / "o.npz"
    with pytest.raises(DatasetError, match=match) as ei:
        prepare("custom", file=f, out=out, **opts)
    assert str(f) in str(ei.value)  # names the file
    assert isinstance(ei.value, ValueError)
    assert not out.exists() and not out.with_suffix(".json").exists()
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []
    return str(ei.value)


def test_nan(tmp_path):
    msg = _fails(tmp_path, "1,nan,1\n2,3,0\n", "1 NaN and 0 inf")
    assert "data row 0" in msg


def test_inf(tmp_path):
    _fails(tmp_path, "1,2,1\n2,inf,0\n", "0 NaN and 1 inf")


def test_one_label_value(tmp_path):
    _fails(tmp_path, "1,2,1\n2,3,1\n", "exactly two distinct values.*found 1")


def test_three_label_values(tmp_path):
    _fails(tmp_path, "1,2,0\n2,3,1\n4,5,2\n", "exactly two distinct values.*found 3")


def test_zero_rows_csv(tmp_path):
    _fails(tmp_path, "f1,f2,label\n", "zero rows")


def test_zero_rows_libsvm(tmp_path):
    _fails(tmp_path, "", "zero rows", name="bad.svm")


def test_ragged_csv(tmp_path):
    _fails(tmp_path, "1,2,0\n3,4,5,1\n", "ragged CSV, line 2 has 4 fields")


def test_non_numeric_feature(tmp_path):
    _fails(tmp_path, "1,2,0\n3,x,1\n", "non-numeric feature value 'x' at line 2")


def test_malformed_libsvm(tmp_path):
    _fails(tmp_path, "1 a:b\n", "not a valid LIBSVM file", name="bad.svm")


def test_truncated_gzip(tmp_path):
    data = gzip.compress(b"".join(b"%d,%d,%d\n" % (i, i + 1, i % 2) for i in range(2000)))
    _fails(tmp_path, data[: len(data) // 2], "truncated or corrupt", name="bad.csv.gz", binary=True)


def test_checksum_mismatch_local(tmp_path):
    d = tmp_path / "data" / "a1a"
    d.mkdir(parents=True)
    (d / "a1a.t").write_text("+1 1:1\n-1 2:1\n")
    out = tmp_path / "out.npz"
    with pytest.raises(DatasetError) as ei:
        prepare("a1a", data_dir=tmp_path / "data", out=out, allow_download=False)
    msg = str(ei.value)
    assert "checksum mismatch" in msg and str(d / "a1a.t") in msg
    assert "0212d0c4a3996fe6fb6a0ab54033d9f4fa4b60369b6e3bb141821d9ffc40c04d" in msg
    assert "verify_checksum=False" in msg
    assert not out.exists() and not out.with_suffix(".json").exists()


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared datasets folder absent")
def test_truncated_source_file(tmp_path):
    """A truncated copy of a real file fails its checksum (and would fail parsing)."""
    d = tmp_path / "data" / "adult"
    d.mkdir(parents=True)
    (d / "adult.data").write_bytes((SHARED / "adult" / "adult.data").read_bytes()[:100000])
    (d / "adult.test").write_bytes((SHARED / "adult" / "adult.test").read_bytes())
    out = tmp_path / "out.npz"
    with pytest.raises(DatasetError, match="checksum mismatch for .*adult.data.*truncated"):
        prepare("adult", data_dir=tmp_path / "data", out=out, allow_download=False)
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_missing_data_dir(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        prepare("a1a", data_dir=tmp_path / "nope", cache_dir=tmp_path)


def test_missing_data_dir_is_ignored_by_datasets_without_source_files(tmp_path):
    """A config's data_dir absent on this machine must not stop the synthetic data (no files)."""
    built = prepare("synthetic", data_dir=tmp_path / "nope", cache_dir=tmp_path, n=50, d=3)
    assert built.X.shape == (50, 3)


def test_load_prepared_missing(tmp_path):
    from dpnewton.data import load_prepared

    with pytest.raises(DatasetError, match="not found; run 'dpnewton prepare"):
        load_prepared(tmp_path / "x.npz")
