"""benchmarks/float32.py --add: an earlier run's rows are kept exactly where their (method, dataset) or
(dataset, T) is not recomputed, and the verdict table covers what the rows hold."""

import csv

import pytest

from tests.conftest import load_benchmark


@pytest.fixture()
def f32(tmp_path, monkeypatch):
    module = load_benchmark("float32")
    monkeypatch.setattr(module.common, "RESULTS_DIR", tmp_path)
    return module


def write(path, rows):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def cell(method, dataset, eps, ratio):
    return {"dataset": dataset, "method": method, "epsilon": eps, "T": 16, "seeds": 8, "mean_float64": 1.0,
            "mean_float32": 1.0, "difference": 0.0, "se_float64": 0.01, "ratio": ratio, "max_seed_difference": 0.0,
            "max_evaluation_error": 0.0, "update_time_ratio": 1.5}


def test_accuracy_rows_are_kept_by_method_and_dataset(f32, tmp_path):
    write(tmp_path / "acc.csv", [cell(m, d, 1.0, 0.01) for m in ("hess-clip", "hess-add") for d in ("a1a", "adult")])
    kept = f32.kept_rows("acc.csv", {("hess-add", "a1a")}, seeds=8)
    assert [(r["method"], r["dataset"]) for r in kept] == [("hess-clip", "a1a"), ("hess-clip", "adult"),
                                                            ("hess-add", "adult")]
    assert kept[0]["T"] == 16 and kept[0]["ratio"] == 0.01
    with pytest.raises(SystemExit, match="other seeds"):
        f32.kept_rows("acc.csv", set(), seeds=4)


def test_verdicts_cover_only_the_pairs_present(f32):
    cells = [cell("hess-clip", "a1a", e, r) for e, r in ((0.1, 0.01), (10.0, 0.2))]
    cells.append(cell("qu-add", "adult", 1.0, 0.05))
    verdicts = f32.verdicts(cells)
    assert [(v["method"], v["dataset"], v["verdict"]) for v in verdicts] == [
        ("hess-clip", "a1a", "keep float64"), ("qu-add", "adult", "float32 safe")]
    assert verdicts[0]["max_ratio"] == 0.2 and verdicts[0]["at_epsilon"] == 10.0


def test_long_rows_are_kept_by_dataset_and_T(f32, tmp_path):
    write(tmp_path / "long.csv", [{"dataset": d, "T": T, "seed": s, "last_float64": 0.5}
                                  for d, T in (("a1a", 9600), ("adult", 38400)) for s in (0, 1)])
    kept = f32.kept_long_rows("long.csv", {("a1a", 9600)})
    assert kept == [{"dataset": "adult", "T": 38400, "seed": 0, "last_float64": 0.5},
                    {"dataset": "adult", "T": 38400, "seed": 1, "last_float64": 0.5}]
