"""Bad CLI/data-level input (the checks that do not need the pipeline): exit status 2
and a one-line message naming the problem, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_input")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(40) > 0, 1, -1)
    path = d / "tiny.csv"
    lines = ["a,b,c,label"] + [",".join(f"{v:.6f}" for v in row) + f",{lab}" for row, lab in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path, d / "cache"


def _run(args):
    return subprocess.run([sys.executable, "-m", "dpnewton", *args], capture_output=True, text=True,
                          timeout=120)


def _base(csv_file, **over):
    path, cache = csv_file
    opts = {"--algorithm": "dp-gd", "--epsilon": "1", "-T": "3"}
    opts.update(over)
    args = ["run", "--data", str(path), "--cache-dir", str(cache)]
    for k, v in opts.items():
        args += [k, v]
    return args


def test_good_input_runs(csv_file):
    proc = _run(_base(csv_file))
    assert proc.returncode == 0, proc.stderr
    assert '"algorithm": "dp-gd"' in proc.stdout


@pytest.mark.parametrize("override,needle", [
    ({"--epsilon": "0"}, "epsilon"),
    ({"--epsilon": "-1"}, "epsilon"),
    ({"--epsilon": "nan"}, "epsilon"),
    ({"--algorithm": "no-such-algorithm"}, "no-such-algorithm"),
    ({"-T": "0"}, "iterations"),
    ({"-T": "-2"}, "iterations"),
    ({"--delta": "1"}, "delta"),
    ({"--delta": "1.5"}, "delta"),
    ({"--delta": "0"}, "delta"),
])
def test_bad_run_arguments_exit_2_with_one_line(csv_file, capsys, override, needle):
    """In-process (an uncaught exception would fail the test); one case also runs as a real process below."""
    from dpnewton.cli import main

    assert main(_base(csv_file, **override)) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert needle in lines[0] and lines[0].startswith("dpnewton run: error:")
    assert out == ""


def test_bad_argument_in_a_real_process_has_no_traceback(csv_file):
    proc = _run(_base(csv_file, **{"-T": "0"}))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_data_file_exit_2(tmp_path, capsys):
    from dpnewton.cli import main

    assert main(["run", "--data", str(tmp_path / "absent.csv"), "--cache-dir", str(tmp_path),
                 "--algorithm", "dp-gd", "--epsilon", "1", "-T", "1"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
