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


def _xy(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.where(X @ np.ones(d) > 0, 1.0, -1.0)


def test_default_fits_draw_fresh_noise_and_explicit_seeds_replay():
    X, y = _xy()
    fits = [dpnewton.fit(X, y, algorithm="dp-gd", epsilon=1.0, iterations=5, excess_loss=False)
            for _ in range(2)]
    assert not np.array_equal(fits[0].weights, fits[1].weights)
    assert fits[0].record["seed"] is None
    seeded = [dpnewton.fit(X, y, algorithm="dp-gd", epsilon=1.0, iterations=5, seed=7, excess_loss=False)
              for _ in range(2)]
    assert np.array_equal(seeded[0].weights, seeded[1].weights)


def test_default_noise_does_not_cancel_between_neighbouring_datasets():
    """With a shared fixed seed, fits on D and D minus one row differ by far less than the noise;
    with fresh noise they differ by as much as two fits on D (the defect a default seed had)."""
    X, y = _xy(n=2000)

    def gap(seeds, rows):
        a = dpnewton.fit(X, y, algorithm="dp-gd", epsilon=1.0, iterations=5, seed=seeds[0],
                         excess_loss=False).weights
        b = dpnewton.fit(X[rows], y[rows], algorithm="dp-gd", epsilon=1.0, iterations=5, seed=seeds[1],
                         excess_loss=False).weights
        return float(np.linalg.norm(a - b))

    neighbour = np.arange(1, 2000)
    noise_scale = gap((0, 1), slice(None))  # two seeds, same data: the size of the noise
    assert gap((0, 0), neighbour) < 0.1 * noise_scale
    assert gap((None, None), neighbour) > 0.3 * noise_scale


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_fit_rejects_bad_seeds(seed):
    X, y = _xy()
    with pytest.raises(ValueError, match="seed="):
        dpnewton.fit(X, y, algorithm="dp-gd", epsilon=1.0, iterations=2, seed=seed, excess_loss=False)
