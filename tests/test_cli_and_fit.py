"""The `dpnewton` command line and `dpnewton.fit`."""

import json
import subprocess
import sys

import numpy as np
import pytest

import dpnewton
from dpnewton.cli import main

REQUIRED = {"algorithm", "dataset", "epsilon", "delta", "rho", "conversion", "iterations", "seed",
            "excess_loss", "runtime_s", "ledger_rho_total"}


def test_fit_returns_weights_and_ledger():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4))
    y = np.where(X @ np.ones(4) + 0.3 * rng.standard_normal(500) > 0, 1.0, -1.0)
    res = dpnewton.fit(X, y, algorithm="hess-clip", epsilon=1.0, iterations=5, seed=3)
    assert res.weights.shape == (4,)
    assert res.ledger.spent_rho == pytest.approx(res.record["rho"], rel=1e-12)
    assert res.record["delta"] == pytest.approx(1 / 500**2)
    again = dpnewton.fit(X, y, algorithm="hess-clip", epsilon=1.0, iterations=5, seed=3)
    assert np.array_equal(res.weights, again.weights)
    assert np.mean(np.sign(X @ res.weights) == y) > 0.8


def test_fit_rejects_bad_arguments():
    X, y = np.ones((10, 2)), np.array([1.0, -1.0] * 5)
    with pytest.raises(ValueError, match="epsilon=0"):
        dpnewton.fit(X, y, algorithm="dp-gd", epsilon=0, iterations=3)
    with pytest.raises(ValueError, match="algorithm='sgd'"):
        dpnewton.fit(X, y, algorithm="sgd", epsilon=1, iterations=3)


def test_cli_run_synthetic(tmp_path, capsys):
    rc = main(["run", "--dataset", "synthetic", "--algorithm", "qu-clip", "--epsilon", "1", "-T", "3",
               "--seed", "2", "--json", "--cache-dir", str(tmp_path), "--ledger"])
    assert rc == 0
    record = json.loads(capsys.readouterr().out)
    assert REQUIRED <= set(record)
    assert record["ledger_rho_total"] == pytest.approx(record["rho"], rel=1e-12)
    assert sum(e["rho"] for e in record["ledger"]) == pytest.approx(record["rho"], rel=1e-12)
    assert record["delta"] == pytest.approx(1e-8)


@pytest.mark.parametrize("args,message", [
    (["--epsilon", "0", "-T", "3"], "epsilon=0.0"),
    (["--epsilon", "1", "-T", "0"], "iterations=0"),
    (["--epsilon", "1", "-T", "3", "--delta", "2"], "delta=2.0"),
    (["--epsilon", "1", "-T", "3", "--hyper", "grad_frac=2"], "grad_frac=2"),
])
def test_cli_errors_are_one_line_without_traceback(tmp_path, args, message):
    cmd = [sys.executable, "-m", "dpnewton.cli", "run", "--dataset", "synthetic", "--algorithm",
           "hess-clip", "--cache-dir", str(tmp_path), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
