"""Bad input through the command line: every case ends with exit status 2 and a one-line message
naming the problem (no traceback), never hangs, and writes nothing (no model file; no cache when the
check comes before the data).

Memory limits are tested with the machine's memory fixed by monkeypatching
``dpnewton.data.validate.physical_memory``, so that no case can start a 30 GiB allocation on a
large machine.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import resource
import signal
import sys
import time
import warnings

import numpy as np
import pytest

from dpnewton.cli import main
from dpnewton.data import readers, validate

GiB = 2**30


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail (TimeoutError) instead of hanging when the block runs longer than ``seconds``."""
    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def cli(capsys, *args, seconds: float = 30):
    """(exit status, stdout, stderr) of ``dpnewton ARGS`` run in-process under a deadline."""
    with deadline(seconds):
        code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(result, *needles, absent=()):
    """Assert exit status 2, one line on stderr naming every needle, no traceback; return the line."""
    code, out, err = result
    assert code == 2, (code, out, err)
    line = err.strip()
    assert line.startswith("dpnewton ") and ": error: " in line, err
    assert "\n" not in line and "Traceback" not in err, err
    assert out == ""
    for needle in needles:
        assert needle in line, (needle, line)
    for needle in absent:
        assert needle not in line, (needle, line)
    return line


def write_csv(path, n=40, label_first=False, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = (X[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    if label_first:
        rows = ["y,a,b,c"] + [f"{lab}," + ",".join(f"{v:.6f}" for v in row) for row, lab in zip(X, y)]
    else:
        rows = ["a,b,c,label"] + [",".join(f"{v:.6f}" for v in row) + f",{lab}" for row, lab in zip(X, y)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def csv(tmp_path):
    return write_csv(tmp_path / "tiny.csv")


PAPER = ("--neighbouring", "add-remove-public-n")   # delta = n^-2; every algorithm is calibrated for it


def run_args(data, cache, *extra, algorithm="dp-gd", epsilon=1, T=3):
    return ["run", "--data", data, "--cache-dir", cache, "--algorithm", algorithm, "--epsilon", epsilon,
            "-T", T, "--json", *extra]


@pytest.fixture
def small_memory(monkeypatch):
    """The machine has 16 GiB (budget 8 GiB) whatever it really has."""
    monkeypatch.setattr(validate, "physical_memory", lambda: 16 * GiB)


# ------------------------------------------------------------------ conversions: bounded, clear errors


def test_run_epsilon_below_bs16_floor_on_a_small_file(tmp_path, csv, capsys):
    """n = 40, delta = n^-2: bs16 represents epsilon >= delta^2/pi = 1.24e-7 only (this used to loop)."""
    model = tmp_path / "m.json"
    line = refused(cli(capsys, *run_args(csv, tmp_path / "cache", "--save-model", model, *PAPER, epsilon="1e-12")),
                   "epsilon=1e-12", "delta=0.000625", "bs16", "1.2434e-07", "delta^2/pi", "'cks'")
    assert "epsilon >= 1.26e-07" in line
    assert not model.exists()


def test_run_epsilon_below_floor_with_delta_is_refused_before_the_data(tmp_path, capsys):
    cache = tmp_path / "cache"
    refused(cli(capsys, "run", "--dataset", "synthetic", "--cache-dir", cache, "--algorithm", "dp-gd", "-T", 5,
                "--epsilon", "0.01", "--delta", "0.5"),
            "epsilon=0.01", "delta=0.5", "bs16", "0.0795775")
    assert not cache.exists()


def test_run_synthetic_at_tiny_epsilon_finishes(tmp_path, capsys):
    """delta = 1e-8 (n = 10000): epsilon 1e-12 is above bs16's floor 3.2e-17, so the run completes."""
    code, out, err = cli(capsys, "run", "--dataset", "synthetic", "--cache-dir", tmp_path / "cache", "--algorithm",
                         "dp-gd", "-T", 5, "--epsilon", "1e-12", "--json", *PAPER)
    assert code == 0, err
    assert '"rho": 3.18' in out


def test_conversions_command_refuses_an_unrepresentable_epsilon(capsys):
    refused(cli(capsys, "conversions", "--epsilon", "1e-12", "--delta", "1e-5", seconds=10),
            "epsilon=1e-12", "delta=1e-05", "bs16", "3.1831e-11")


def test_conversions_command_refuses_overflow_and_handles_tiny_delta(capsys):
    refused(cli(capsys, "conversions", "--epsilon", "1e300", "--delta", "1e-5", seconds=10),
            "epsilon=1e+300", "floating point", "smaller epsilon")
    code, out, err = cli(capsys, "conversions", "--epsilon", "1", "--delta", "1e-300", seconds=10)
    assert code == 0, err
    assert '"cks": 0.000366' in out


def test_floor_refuses_before_the_data(tmp_path, csv, capsys):
    cache = tmp_path / "cache"
    refused(cli(capsys, "floor", "--data", csv, "--cache-dir", cache, "--epsilon", "1e-12", "--delta", "1e-3"),
            "epsilon=1e-12", "bs16", "3.1831e-07")
    assert not cache.exists()


def test_estimator_with_an_unrepresentable_epsilon_raises_quickly():
    from dpnewton import DPLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    y = (X[:, 0] > 0).astype(int)
    unrepresentable = r"epsilon=1e-12.*bs16.*delta\^2/pi"
    with deadline(20), warnings.catch_warnings(), pytest.raises(ValueError, match=unrepresentable):
        warnings.simplefilter("ignore")
        DPLogisticRegression(epsilon=1e-12, delta=1e-4, algorithm="dp-gd", iterations=10,
                             conversion="bs16").fit(X, y)
    with deadline(20), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            DPLogisticRegression(epsilon=1e-10).fit(X, y)
        except ValueError as exc:
            assert "epsilon=1e-10" in str(exc)


# ------------------------------------------------------------------ the data contract of `run`


def test_run_help_documents_the_data_layout(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in ("--format {csv,libsvm}", "--label-column", "The label is the last column",
                   "header when any of its fields is not a number", "the smaller one", "is class -1",
                   "LIBSVM"):
        assert needle in text, needle


def test_format_hint_names_an_existing_option(tmp_path, capsys):
    data = write_csv(tmp_path / "table.txt")
    line = refused(cli(capsys, *run_args(data, tmp_path / "cache")), "table.txt", "cannot infer the format")
    assert "--format" in line
    code, out, err = cli(capsys, *run_args(data, tmp_path / "cache", "--format", "csv", "--evaluate"))
    assert code == 0, err
    assert '"n": 40' in out


def test_libsvm_via_format_option(tmp_path, capsys):
    data = tmp_path / "table.txt"
    rng = np.random.default_rng(1)
    data.write_text("".join(f"{1 if v > 0 else -1} 1:{v:.4f} 2:{w:.4f}\n" for v, w in rng.standard_normal((30, 2))))
    code, out, err = cli(capsys, *run_args(data, tmp_path / "cache", "--format", "libsvm", "--evaluate"))
    assert code == 0, err
    assert '"n": 30' in out and '"d": 3' in out


@pytest.mark.parametrize("column", ["y", "0", "-4"])
def test_label_column_option(tmp_path, capsys, column):
    data = write_csv(tmp_path / "first.csv", label_first=True)
    code, out, err = cli(capsys, *run_args(data, tmp_path / "cache", "--label-column", column, "--evaluate"))
    assert code == 0, err
    assert '"n": 40' in out and '"d": 4' in out


def test_without_label_column_the_last_column_is_the_label(tmp_path, capsys):
    data = write_csv(tmp_path / "first.csv", label_first=True)
    refused(cli(capsys, *run_args(data, tmp_path / "cache")), "exactly two distinct values", "found 40")


def test_unknown_label_column_and_layout_options_on_the_wrong_source(tmp_path, csv, capsys):
    refused(cli(capsys, *run_args(csv, tmp_path / "cache", "--label-column", "nope")), "'nope'", "header")
    refused(cli(capsys, *run_args(csv, tmp_path / "cache", "--format", "libsvm", "--label-column", "1")),
            "--label-column", "CSV")
    cache = tmp_path / "cache2"
    refused(cli(capsys, "run", "--dataset", "synthetic", "--format", "csv", "--cache-dir", cache, "--algorithm",
                "dp-gd", "--epsilon", 1, "-T", 3), "--format", "--data")
    assert not cache.exists()


# ------------------------------------------------------------------ unreadable files: no tracebacks


def test_directory_as_data_file(tmp_path, capsys):
    folder = tmp_path / "data.csv"
    folder.mkdir()
    refused(cli(capsys, *run_args(folder, tmp_path / "cache")), "is a directory", absent=("does not exist",))
    write_csv(tmp_path / "train.csv")
    model = tmp_path / "m.json"
    assert cli(capsys, *run_args(tmp_path / "train.csv", tmp_path / "cache", "--save-model", model))[0] == 0
    refused(cli(capsys, "predict", "--model", model, "--data", folder), "is a directory",
            absent=("not found",))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_utf16_csv(tmp_path, csv, capsys, encoding):
    data = tmp_path / "wide.csv"
    data.write_bytes(csv.read_text().encode(encoding))
    refused(cli(capsys, *run_args(data, tmp_path / "cache")), "not UTF-8", "UTF-16", "iconv",
            absent=("truncated", "corrupt"))


def test_latin1_csv(tmp_path, csv, capsys):
    data = tmp_path / "latin.csv"
    data.write_bytes(csv.read_text().replace("label", "étiquette").encode("latin-1"))
    refused(cli(capsys, *run_args(data, tmp_path / "cache")), "not UTF-8", "0xe9", absent=("truncated",))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_without_permission(tmp_path, csv, capsys):
    csv.chmod(0)
    try:
        refused(cli(capsys, *run_args(csv, tmp_path / "cache")), "permission denied", str(csv))
    finally:
        csv.chmod(0o644)


def _failing_open(exc):
    def fake_open(*args, **kwargs):
        raise exc
    return fake_open


@pytest.mark.parametrize("exc,needles", [
    (PermissionError(errno.EACCES, "Permission denied"), ("cannot read", "permission denied", "chmod")),
    (OSError(errno.EIO, "Input/output error"), ("cannot read", "Input/output error")),
])
def test_read_errors_of_the_data_file(tmp_path, csv, capsys, monkeypatch, exc, needles):
    """The operating system refuses to read the file (as it does for a mode-000 file when not root)."""
    monkeypatch.setattr(readers, "open", _failing_open(exc), raising=False)
    refused(cli(capsys, *run_args(csv, tmp_path / "cache")), str(csv), *needles)


@pytest.mark.parametrize("exc,needles", [
    (MemoryError(), ("out of memory", "smaller")),
    (OSError(errno.ENOSPC, "No space left on device", "/somewhere/x.npz"),
     ("/somewhere/x.npz", "No space left on device", "disk space")),
    (PermissionError(errno.EACCES, "Permission denied", "/somewhere/x.npz"), ("/somewhere/x.npz", "permissions")),
])
def test_memory_and_os_errors_reach_the_user_as_one_line(tmp_path, csv, capsys, monkeypatch, exc, needles):
    import dpnewton.problems

    monkeypatch.setattr(dpnewton.problems, "load_problem_from_prepared", _failing_open(exc))
    model = tmp_path / "m.json"
    refused(cli(capsys, *run_args(csv, tmp_path / "cache", "--save-model", model)), *needles)
    assert not model.exists()


def test_unwritable_optimum_cache(tmp_path, csv, capsys, monkeypatch):
    import dpnewton.problems

    monkeypatch.setattr(dpnewton.problems, "atomic_write_npz",
                        _failing_open(PermissionError(errno.EACCES, "Permission denied")))
    refused(cli(capsys, *run_args(csv, tmp_path / "cache", "--evaluate")), "optimum cache", "Permission denied",
            "--cache-dir")


# ------------------------------------------------------------------ refused before the run


@pytest.mark.parametrize("target,needles", [
    ("missing/model.json", ("does not exist", "mkdir -p")),
    ("plain.txt/model.json", ("plain.txt is a file, not a folder",)),
    ("plain.txt/deeper/model.npz", ("plain.txt is a file, not a folder",)),
])
def test_save_model_into_a_folder_that_cannot_be_written(tmp_path, csv, capsys, target, needles):
    (tmp_path / "plain.txt").write_text("not a folder\n")
    cache = tmp_path / "cache"
    refused(cli(capsys, *run_args(csv, cache, "--save-model", tmp_path / target)), "--save-model", *needles)
    assert not cache.exists()  # refused before the data were prepared
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt", "tiny.csv"]


@pytest.mark.parametrize("algorithm,hyper,needles", [
    ("hess-clip", "grad_frac=abc", ("grad_frac", "a number", "'abc'")),
    ("dp-gd", "step=abc", ("step", "a number")),
    ("dp-gd", "reset=1", ("reset", "true or false")),
    ("precond-dp-gd", "refresh=2.5", ("refresh", "an integer")),
    ("hess-clip", "grad_frac=2", ("grad_frac", "(0, 1)")),
    ("dp-gd", "average=sometimes", ("average", "sometimes")),
    ("dp-gd", "no_such_key=1", ("no_such_key", "allowed")),
    ("dp-gd", "step", ("KEY=VALUE",)),
])
def test_bad_hyper_is_refused_before_the_data(tmp_path, csv, capsys, algorithm, hyper, needles):
    cache = tmp_path / "cache"
    refused(cli(capsys, *run_args(csv, cache, "--hyper", hyper, *PAPER, algorithm=algorithm)), *needles)
    assert not cache.exists()


def test_good_hyper_values_pass_the_check(tmp_path, csv, capsys):
    code, out, err = cli(capsys, *run_args(csv, tmp_path / "cache", "--hyper", "step=2", "--hyper", "average=tail"))
    assert code == 0, err
    code, out, err = cli(capsys, *run_args(csv, tmp_path / "cache", "--hyper", "grad_frac=0.5", *PAPER,
                                           algorithm="hess-clip"))
    assert code == 0, err


def test_bad_seed_is_refused_before_the_data(tmp_path, csv, capsys):
    cache = tmp_path / "cache"
    refused(cli(capsys, *run_args(csv, cache, "--seed", "-1")), "--seed -1", ">= 0")
    assert not cache.exists()
    with pytest.raises(SystemExit) as exc:  # not an integer: argparse's usage error
        main([str(a) for a in run_args(csv, cache, "--seed", "abc")])
    assert exc.value.code == 2
    assert "--seed" in capsys.readouterr().err
    assert not cache.exists()


# ------------------------------------------------------------------ resource limits, checked up front


@pytest.mark.parametrize("T", [1_000_001, 10**7, 10**13])
def test_huge_T_is_refused_before_any_data(tmp_path, csv, capsys, T):
    cache = tmp_path / "cache"
    refused(cli(capsys, *run_args(csv, cache, T=T)), f"iterations={T}", "above the cap of 1,000,000")
    assert not cache.exists()


@pytest.fixture
def tiny_memory(monkeypatch):
    """The machine has 64 MiB (budget 32 MiB) whatever it really has."""
    monkeypatch.setattr(validate, "physical_memory", lambda: 64 * 2**20)


def test_huge_T_is_refused_before_allocating(tmp_path, csv, capsys, tiny_memory):
    """(T + 1) x 25 bytes of per-iteration records at T = 10^6 is 23.8 MiB with d = 4; with the averaging
    sums over the budget only for dp-sgd, which keeps its T + 1 iterates (+ 8 d bytes each: 54.4 MiB)."""
    cache = tmp_path / "cache"
    refused(cli(capsys, *run_args(csv, cache, *PAPER, algorithm="dp-sgd", T=10**6)),
            "-T 1000000", "d=4", "54.4 MiB", "32 MiB", "smaller -T")


def test_libsvm_with_a_huge_feature_index(tmp_path, capsys, small_memory):
    data = tmp_path / "huge.svm"
    data.write_bytes(b"1 2000000000:1.0\n-1 1:1.0\n")
    assert data.stat().st_size == 26
    refused(cli(capsys, *run_args(data, tmp_path / "cache")),
            "huge.svm", "2 x 2000000000", "29.8 GiB", "number the features")


def test_gzip_expanding_to_one_huge_line_is_refused_early(tmp_path, capsys):
    """2048 gzip members of 1 MiB of '1': a 2 MB file holding one 2 GiB line."""
    data = tmp_path / "bomb.csv.gz"
    data.write_bytes(gzip.compress(b"1" * 2**20) * 2048)
    assert data.stat().st_size < 3 * 2**20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    refused(cli(capsys, *run_args(data, tmp_path / "cache")), "bomb.csv.gz", "line 1 is longer than 64 MiB",
            "after gunzip")
    assert time.perf_counter() - start < 10
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # kilobytes on Linux
    assert grown_kib < 512 * 1024 * (1024 if sys.platform == "darwin" else 1)


def test_gzip_larger_than_memory_is_refused(tmp_path, capsys, monkeypatch):
    """Short lines, 48 MiB in all, on a machine of 64 MiB (budget 32 MiB)."""
    monkeypatch.setattr(validate, "physical_memory", lambda: 64 * 2**20)
    data = tmp_path / "many.csv.gz"
    data.write_bytes(gzip.compress(b"0.5,1\n" * (2**20 // 6)) * 48)
    refused(cli(capsys, *run_args(data, tmp_path / "cache")), "many.csv.gz", "decompresses to more than 32 MiB")


def test_library_default_delta_checks_epsilon_before_the_data(tmp_path, capsys):
    """Under add-remove the default delta is the public 1e-10, so an epsilon bs16 cannot represent at
    it is refused before any data is prepared."""
    cache = tmp_path / "cache"
    refused(cli(capsys, "run", "--dataset", "synthetic", "--cache-dir", cache, "--algorithm", "dp-gd", "-T", 5,
                "--epsilon", "1e-22"),
            "epsilon=1e-22", "delta=1e-10", "bs16", "3.1831e-21")
    assert not cache.exists()
