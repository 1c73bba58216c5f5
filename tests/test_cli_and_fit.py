"""The `dpnewton` command line and `dpnewton.fit`."""

import json
import subprocess
import sys

import numpy as np
import pytest

import dpnewton
from dpnewton.cli import main
from dpnewton.privacy.neighbouring import LIBRARY_DELTA

REQUIRED = {"algorithm", "dataset", "epsilon", "delta", "rho", "conversion", "iterations", "seed",
            "ledger_rho_total", "evaluation"}


def test_fit_returns_weights_and_ledger():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 4))
    y = np.where(X @ np.ones(4) + 0.3 * rng.standard_normal(500) > 0, 1.0, -1.0)
    res = dpnewton.fit(X, y, algorithm="precond-dp-gd", epsilon=1.0, iterations=5, seed=3)
    assert res.weights.shape == (4,)
    assert res.ledger.spent_rho == pytest.approx(res.record["rho"], rel=1e-12)
    assert res.record["delta"] == LIBRARY_DELTA and res.record["neighbouring"] == "add-remove"   # the library's
    paper = dpnewton.fit(X, y, algorithm="precond-dp-gd", epsilon=1.0, iterations=5, seed=3,
                         neighbouring="add-remove-public-n")
    assert paper.record["delta"] == pytest.approx(1 / 500**2) and not np.array_equal(paper.weights, res.weights)
    again = dpnewton.fit(X, y, algorithm="precond-dp-gd", epsilon=1.0, iterations=5, seed=3)
    assert np.array_equal(res.weights, again.weights)
    assert np.mean(np.sign(X @ res.weights) == y) > 0.8


def test_fit_rejects_bad_arguments():
    X, y = np.ones((10, 2)), np.array([1.0, -1.0] * 5)
    with pytest.raises(ValueError, match="epsilon=0"):
        dpnewton.fit(X, y, algorithm="dp-gd", epsilon=0, iterations=3)
    with pytest.raises(ValueError, match="algorithm='sgd'"):
        dpnewton.fit(X, y, algorithm="sgd", epsilon=1, iterations=3)


def test_cli_run_synthetic(tmp_path, capsys):
    rc = main(["run", "--dataset", "synthetic", "--algorithm", "precond-dp-gd", "--epsilon", "1", "-T", "3",
               "--seed", "2", "--json", "--cache-dir", str(tmp_path), "--ledger"])
    assert rc == 0
    record = json.loads(capsys.readouterr().out)
    assert REQUIRED <= set(record)
    assert record["ledger_rho_total"] == pytest.approx(record["rho"], rel=1e-12)
    assert sum(e["rho"] for e in record["ledger"]) == pytest.approx(record["rho"], rel=1e-12)
    assert record["delta"] == LIBRARY_DELTA and record["neighbouring"] == "add-remove"
    assert {"excess_loss", "train_accuracy", "n"} <= set(record["evaluation"])   # a named (public) dataset


@pytest.mark.parametrize("args,message", [
    (["--epsilon", "0", "-T", "3"], "epsilon=0.0"),
    (["--epsilon", "1", "-T", "0"], "iterations=0"),
    (["--epsilon", "1", "-T", "3", "--delta", "2"], "delta=2.0"),
    (["--epsilon", "1", "-T", "3", "--hyper", "grad_frac=2"], "grad_frac=2"),
])
def test_cli_errors_are_one_line_without_traceback(tmp_path, args, message):
    cmd = [sys.executable, "-m", "dpnewton", "run", "--dataset", "synthetic", "--algorithm",
           "hess-clip", "--neighbouring", "add-remove-public-n", "--cache-dir", str(tmp_path), *args]
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


def _strict_json(text: str):
    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=reject)


def test_run_json_is_strict_json(tmp_path, capsys):
    assert main(["run", "--dataset", "synthetic", "--algorithm", "dp-gd", "--epsilon", "1", "-T", "2",
                 "--seed", "0", "--json", "--cache-dir", str(tmp_path)]) == 0
    record = _strict_json(capsys.readouterr().out)
    assert record["evaluation"]["train_accuracy"] is not None and record["seed"] == 0
    from dpnewton.io import to_json

    assert to_json({"a": float("nan"), "b": [np.inf, np.float64(-np.inf), 1.5]}) == \
        '{"a": null, "b": [null, null, 1.5]}'


def _write_csv(path, X, labels):
    with open(path, "w") as fh:
        fh.write(",".join(f"f{j}" for j in range(X.shape[1])) + ",label\n")
        for row, label in zip(X, labels):
            fh.write(",".join(repr(float(v)) for v in row) + f",{label}\n")


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_save_model_and_predict_round_trip(tmp_path, capsys, suffix):
    from dpnewton.model import LinearModel

    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 3))
    labels = np.where(X @ np.array([2.0, -1.0, 0.5]) + 0.3 > 0, "spam", "ham")
    train = tmp_path / "train.csv"
    _write_csv(train, X, labels)
    model_file = tmp_path / f"model{suffix}"
    assert main(["run", "--data", str(train), "--algorithm", "precond-dp-gd", "--epsilon", "2", "-T", "4",
                 "--seed", "5", "--json", "--cache-dir", str(tmp_path / "cache"),
                 "--save-model", str(model_file)]) == 0
    record = _strict_json(capsys.readouterr().out)
    model = LinearModel.load(model_file)
    assert model.classes == ("ham", "spam") and model.n_features == 3
    # nothing computed from the exact data leaves with the model or, unasked, in the output
    assert not {"n", "excess_loss", "train_accuracy", "runtime_s", "evaluation"} & (set(model.privacy) | set(record))
    assert model.privacy["rho"] == record["rho"] and model.privacy["epsilon"] == 2.0
    assert sum(e["rho"] for e in model.privacy["ledger"]) == pytest.approx(record["rho"], rel=1e-12)
    # independent replay: the same run on the prepared rows [1, x] (bias column first)
    from dpnewton.experiment import run_algorithm
    from dpnewton.loss import LogisticProblem

    y = np.where(labels == "spam", 1.0, -1.0)
    problem = LogisticProblem.from_xy(np.hstack([np.ones((500, 1)), X]), y)
    (replay,) = run_algorithm(problem, "custom", "precond-dp-gd", 2.0, [5], [4], neighbouring="add-remove")
    np.testing.assert_allclose(model.coef, replay.w[1:], rtol=1e-12)
    assert model.intercept == pytest.approx(replay.w[0], rel=1e-12)

    assert main(["predict", "--model", str(model_file), "--data", str(train)]) == 0
    out = capsys.readouterr()
    expected = np.where(X @ replay.w[1:] + replay.w[0] > 0, "spam", "ham")
    assert out.out.split() == expected.tolist()
    accuracy = float(np.mean(expected == labels))
    assert f"accuracy {accuracy:.6g}" in out.err and accuracy > 0.8
    assert main(["predict", "--model", str(model_file), "--data", str(train), "--json"]) == 0
    payload = _strict_json(capsys.readouterr().out)
    assert payload["predictions"] == expected.tolist() and payload["accuracy"] == pytest.approx(accuracy)


def test_predict_errors_name_the_problem(tmp_path, capsys):
    from dpnewton.model import LinearModel

    model = tmp_path / "m.json"
    LinearModel(np.array([1.0, -1.0]), 0.5, ("0", "1"), {"epsilon": 1.0}).save(model)
    data = tmp_path / "three.csv"
    _write_csv(data, np.ones((4, 3)), ["0", "1", "0", "1"])
    assert main(["predict", "--model", str(model), "--data", str(data)]) == 2
    assert "the model has 2 features" in capsys.readouterr().err
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    assert main(["predict", "--model", str(bad), "--data", str(data)]) == 2
    assert "not a readable dpnewton model" in capsys.readouterr().err
    assert main(["run", "--dataset", "synthetic", "--algorithm", "dp-gd", "--epsilon", "1", "-T", "2",
                 "--save-model", str(tmp_path / "m.pkl"), "--cache-dir", str(tmp_path)]) == 2
    assert "must end in .json or .npz" in capsys.readouterr().err


def test_model_from_prepared_splits_the_bias_weight():
    from dpnewton.model import LinearModel

    meta = {"bias": True, "label_mapping": {"b": 1.0, "a": -1.0}, "name": "custom", "format": "csv"}
    model = LinearModel.from_prepared(np.array([0.5, 1.0, -2.0]), meta, {})
    assert model.intercept == 0.5 and model.coef.tolist() == [1.0, -2.0] and model.classes == ("a", "b")
    assert model.predict(np.array([[1.0, 0.0], [0.0, 1.0]])).tolist() == ["b", "a"]
    plain = LinearModel.from_prepared(np.array([0.5, 1.0]), {**meta, "bias": False}, {})
    assert plain.intercept == 0.0 and plain.coef.tolist() == [0.5, 1.0]


def test_run_on_own_data_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    """A user's file is prepared in a temporary folder: no prepared copy or non-private optimum is left
    in the current folder; objpert needs no -T; the output holds no evaluation unless asked."""
    X, y = _xy(200, 3)
    train = tmp_path / "mine.csv"
    _write_csv(train, X, np.where(y > 0, "yes", "no"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["run", "--data", str(train), "--algorithm", "objpert", "--epsilon", "1", "--json"]) == 0
    record = _strict_json(capsys.readouterr().out)
    assert list(work.iterdir()) == [] and "evaluation" not in record and "n" not in record
    assert main(["run", "--data", str(train), "--algorithm", "objpert", "--epsilon", "1", "--json",
                 "--evaluate"]) == 0
    assert "excess_loss" in _strict_json(capsys.readouterr().out)["evaluation"] and list(work.iterdir()) == []
    keep = tmp_path / "keep"
    keep.mkdir()
    assert main(["run", "--data", str(train), "--algorithm", "objpert", "--epsilon", "1", "--cache-dir",
                 str(keep)]) == 0
    assert f"kept the prepared copy of {train} in {keep}" in capsys.readouterr().err and any(keep.iterdir())


@pytest.mark.parametrize("args, message", [
    (["--algorithm", "dp-gd", "--epsilon", "1"], "dp-gd is iterative: give the number of updates with -T"),
    (["--algorithm", "dp-gd", "--epsilon", "0.01", "-T", "3", "--conversion", "official-fsolve"],
     "conversion='official-fsolve' is refused here"),
    (["--algorithm", "dp-gd", "--epsilon", "1", "-T", "3", "--hyper", "reset=true"], "is not private"),
])
def test_run_refuses_before_any_data(tmp_path, capsys, args, message):
    assert main(["run", "--data", str(tmp_path / "absent.csv"), *args]) == 2
    assert message in capsys.readouterr().err


def test_long_runs_report_progress_on_stderr(tmp_path, monkeypatch, capsys):
    """A run longer than progress.EVERY_SECONDS says how far it is (here: every update)."""
    from dpnewton.algorithms import progress

    monkeypatch.setattr(progress, "EVERY_SECONDS", 0.0)
    assert main(["run", "--dataset", "synthetic", "--algorithm", "dp-gd", "--epsilon", "1", "-T", "3",
                 "--seed", "0", "--json", "--cache-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "dpnewton: dp-gd on synthetic at epsilon 1, T = 3, seed 0: update 2 of 3 (67 %)" in err
    monkeypatch.setattr(progress, "EVERY_SECONDS", 3600.0)
    assert main(["run", "--dataset", "synthetic", "--algorithm", "dp-gd", "--epsilon", "1", "-T", "3",
                 "--seed", "0", "--json", "--cache-dir", str(tmp_path)]) == 0
    assert "update" not in capsys.readouterr().err                       # short runs say nothing
