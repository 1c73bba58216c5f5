"""Synthetic data determinism and the ``prepare`` CLI sub-command."""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pytest

from dpnewton.data import DatasetError, prepare
from dpnewton.data.cli import main, register


def test_synthetic_shape_and_determinism(tmp_path):
    a = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "a.npz")
    b = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "b.npz", force=True)
    c = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "c.npz", seed=1)
    assert a.X.shape == (10000, 100) and a.meta["bias"] is False
    assert np.allclose(np.linalg.norm(a.X, axis=1), 1.0)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)
    assert a.meta["options"] == {"seed": 0, "n": 10000, "d": 100}
    # labels follow the logistic model with w* = 1: positives have larger <x, 1> on average
    m = a.X.sum(axis=1)
    assert m[a.y == 1].mean() > m[a.y == -1].mean()


def test_synthetic_options_and_errors(tmp_path):
    s = prepare("synthetic", cache_dir=tmp_path, n=50, d=3, seed=7)
    assert s.X.shape == (50, 3)
    umask = os.umask(0)
    os.umask(umask)
    for f in (s.path, s.path.with_suffix(".json")):  # readable like any other file, not 0600
        assert f.stat().st_mode & 0o777 == 0o666 & ~umask
    with pytest.raises(DatasetError, match="option n must be a positive integer"):
        prepare("synthetic", cache_dir=tmp_path, n=0)
    with pytest.raises(DatasetError, match="does not take option 'prep'"):
        prepare("synthetic", cache_dir=tmp_path, prep="v1")
    with pytest.raises(DatasetError, match="unknown dataset 'nope'"):
        prepare("nope", cache_dir=tmp_path)


def test_cli_register_and_run(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="dpnewton")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["prepare", "synthetic", "--seed", "3", "--n", "200", "--d", "5",
                              "--cache-dir", str(tmp_path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out.splitlines()
    side = tmp_path / "synthetic.json"
    assert out[0] == str(side)
    assert "n=200 d=5" in out[1] and "-1:" in out[1] and "+1:" in out[1]
    meta = json.loads(side.read_text())
    assert meta["options"]["seed"] == 3


def test_cli_custom_file(tmp_path, capsys):
    f = tmp_path / "my.csv"
    f.write_text("a,b,label\n1,2,yes\n3,4,no\n5,6,yes\n")
    assert main(["prepare", "custom", "--file", str(f), "--out", str(tmp_path / "my.npz")]) == 0
    out = capsys.readouterr().out
    assert "n=3 d=3" in out
    meta = json.loads((tmp_path / "my.json").read_text())
    assert meta["label_mapping"] == {"no": -1.0, "yes": 1.0}


def test_cli_error_exit_2(tmp_path, capsys):
    f = tmp_path / "bad.csv"
    f.write_text("1,2,0\n3,4\n")
    with pytest.raises(SystemExit) as ei:
        main(["prepare", "custom", "--file", str(f), "--out", str(tmp_path / "o.npz")])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "ragged CSV" in err and str(f) in err and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()
