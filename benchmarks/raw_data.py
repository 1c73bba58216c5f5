"""DPLogisticRegression on raw tabular features: the default (private feature ranges) on real data sets,
and an expected-accuracy grid over n, d, classes and epsilon.

    python benchmarks/raw_data.py [--fits 20] [--grid-fits 5]

Part 1: scikit-learn's breast-cancer, wine and digits, raw features, one seeded 80/20 split
(train_test_split(random_state=0, stratify=y)); epsilon 1 and 10; ``fits`` fresh fits per cell
(random_state=None: fresh OS entropy each). Reported: mean and min test accuracy, the majority rate
of the test set, scikit-learn's LogisticRegression on the raw features (non-private) and with a
StandardScaler (the non-private ceiling). Part 2: synthetic raw features (per-feature scales from
1e-2 to 1e3, lognormal or shifted) with labels from a linear softmax model, n in {250, 1000, 4000}
training rows, d in {5, 30}, 2 or 5 classes, epsilon in {0.3, 1, 10}; ``grid_fits`` fresh fits per
cell, 5,000 test rows; the public rule of BudgetWarning (rows_to_beat_constant) beside each cell.
Part 3 (diagnosis, epsilon 1): on an internal 70/30 split of each data set's TRAINING rows (the test
rows are not used), the default against oracle ranges (the exact 5 %/95 % points, not private) with the
model's share or the whole budget, and the private ranges with a model budget of 1e4 (the ranges' loss
alone). Writes results/raw_data.csv, results/raw_data_grid.csv, results/raw_data_diagnosis.csv and
results/raw_data.md (then the hand-written results/raw_data_reading.md).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from common import md_table, write_csv, write_section
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from dpnewton import DPLogisticRegression
from dpnewton.estimator import DEFAULT_PREPROCESSING_SHARE, rows_to_beat_constant
from dpnewton.preprocessing import PrivateFeatureScaler

DATASETS = {"breast-cancer": load_breast_cancer, "wine": load_wine, "digits": load_digits}
EPSILONS = (1.0, 10.0)
PURE_EPSILON = 1.0
"""Also measured: delta = 0 (Laplace ranges, pure objective perturbation; one-vs-rest for 3+ classes, the
softmax model being zCDP)."""
READING = Path(__file__).resolve().parent / "results" / "raw_data_reading.md"
GRID = {"n": (250, 1000, 4000), "d": (5, 30), "classes": (2, 5), "epsilon": (0.3, 1.0, 10.0)}


def private_scores(X, y, Xt, yt, epsilon: float, fits: int, **kwargs) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([DPLogisticRegression(epsilon=epsilon, **kwargs).fit(X, y).score(Xt, yt)
                         for _ in range(fits)])


def nonprivate(X, y, Xt, yt) -> tuple[float, float]:
    """(LogisticRegression on raw features, StandardScaler + LogisticRegression) test accuracy."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = LogisticRegression(max_iter=10_000).fit(X, y).score(Xt, yt)
        scaled = make_pipeline(StandardScaler(), LogisticRegression(max_iter=10_000)).fit(X, y).score(Xt, yt)
    return raw, scaled


def majority(yt) -> float:
    return float(np.max(np.unique(yt, return_counts=True)[1]) / len(yt))


def real_data(fits: int) -> list[dict]:
    rows = []
    for name, loader in DATASETS.items():
        X, y = loader(return_X_y=True)
        X, Xt, y, yt = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
        raw, scaled = nonprivate(X, y, Xt, yt)
        for epsilon, mode in [(e, "default") for e in EPSILONS] + [(PURE_EPSILON, "pure")]:
            start = time.perf_counter()
            kwargs = {"delta": 0.0, "multi_class": "ovr"} if mode == "pure" else {}
            scores = private_scores(X, y, Xt, yt, epsilon, fits, **kwargs)
            rows.append({"dataset": name, "n_train": len(y), "d": X.shape[1], "classes": len(np.unique(y)),
                         "epsilon": epsilon, "delta": "0 (pure)" if mode == "pure" else "default", "fits": fits,
                         "mean_accuracy": scores.mean(),
                         "min_accuracy": scores.min(), "max_accuracy": scores.max(),
                         "fits_below_majority": int(np.sum(scores < majority(yt))), "majority": majority(yt),
                         "nonprivate_raw": raw, "nonprivate_standardized": scaled,
                         "seconds_per_fit": (time.perf_counter() - start) / fits})
            print(rows[-1], flush=True)
    return rows


def oracle_bounds(X) -> list[tuple[float, float]]:
    """The exact 5 % and 95 % points per feature (NOT private: the diagnosis's reference)."""
    lo, hi = np.percentile(X, 5, axis=0), np.percentile(X, 95, axis=0)
    return list(zip(lo, np.where(hi > lo, hi, lo + 1e-9 * (1 + np.abs(lo)))))


def diagnosis(fits: int) -> list[dict]:
    """Where the accuracy goes at epsilon 1 (module docstring, part 3)."""
    share, rows = DEFAULT_PREPROCESSING_SHARE, []
    for name, loader in DATASETS.items():
        X, y = loader(return_X_y=True)
        X, _, y, _ = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
        X, Xv, y, yv = train_test_split(X, y, test_size=0.3, random_state=1, stratify=y)

        def private_ranges():
            scaler = PrivateFeatureScaler(epsilon=share).fit(X)
            return list(zip(scaler.lower_, scaler.upper_))

        settings = {"default (private ranges, model 1 - share)": lambda: {"epsilon": 1.0},
                    "oracle ranges, model 1 - share": lambda: {"epsilon": 1 - share, "bounds": oracle_bounds(X)},
                    "oracle ranges, model 1": lambda: {"epsilon": 1.0, "bounds": oracle_bounds(X)},
                    "private ranges, model 1e4": lambda: {"epsilon": 1e4, "bounds": private_ranges()},
                    "oracle ranges, model 1e4": lambda: {"epsilon": 1e4, "bounds": oracle_bounds(X)}}
        for setting, kwargs in settings.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scores = np.array([DPLogisticRegression(**kwargs()).fit(X, y).score(Xv, yv) for _ in range(fits)])
            rows.append({"dataset": name, "n_internal": len(y), "setting": setting, "fits": fits,
                         "mean_accuracy": scores.mean(), "min_accuracy": scores.min(), "majority": majority(yv)})
            print(rows[-1], flush=True)
    return rows


def synthetic(n: int, d: int, classes: int, seed: int):
    """Raw features x = scale_f * u_f + shift_f (u standard normal or lognormal), labels from
    softmax(W u) with ||W_k|| = 3: the same task at every feature scale."""
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.uniform(-2, 3, d)
    shifts = scales * rng.uniform(0, 5, d)
    W = rng.standard_normal((classes, d))
    W *= 3.0 / np.linalg.norm(W, axis=1, keepdims=True)

    def draw(m):
        U = rng.standard_normal((m, d))
        logits = U @ W.T
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        labels = (rng.random((m, 1)) > np.cumsum(p, axis=1)).sum(axis=1)
        return U * scales + shifts, labels

    return draw(n), draw(5000)


def grid(fits: int) -> list[dict]:
    rows = []
    for classes in GRID["classes"]:
        for d in GRID["d"]:
            for n in GRID["n"]:
                (X, y), (Xt, yt) = synthetic(n, d, classes, seed=1000 * classes + 10 * d + n)
                raw, scaled = nonprivate(X, y, Xt, yt)
                for epsilon in GRID["epsilon"]:
                    scores = private_scores(X, y, Xt, yt, epsilon, fits)
                    rule = rows_to_beat_constant((1 - DEFAULT_PREPROCESSING_SHARE) * epsilon, d, 1)
                    rows.append({"n": n, "d": d, "classes": classes, "epsilon": epsilon, "fits": fits,
                                 "mean_accuracy": scores.mean(), "min_accuracy": scores.min(),
                                 "majority": majority(yt), "nonprivate_standardized": scaled,
                                 "rule_rows": rule})
                    print(rows[-1], flush=True)
    return rows


def markdown(real: list[dict], cells: list[dict], diag: list[dict], fits: int, grid_fits: int,
             seconds: float) -> str:
    fmt = {c: ".3f" for c in ("mean_accuracy", "min_accuracy", "max_accuracy", "majority", "nonprivate_raw",
                              "nonprivate_standardized")}
    fmt.update({"seconds_per_fit": ".2f", "epsilon": "g", "rule_rows": ",.0f"})
    pivot = []
    for key in sorted({(c["classes"], c["d"], c["n"]) for c in cells}):
        row = {"classes": key[0], "d": key[1], "n": key[2]}
        for c in cells:
            if (c["classes"], c["d"], c["n"]) == key:
                row[f"eps {c['epsilon']:g}"] = f"{c['mean_accuracy']:.2f} ({c['min_accuracy']:.2f})"
                row["majority"] = f"{c['majority']:.2f}"
                row["non-private"] = f"{c['nonprivate_standardized']:.2f}"
        pivot.append(row)
    eps_cols = [f"eps {e:g}" for e in GRID["epsilon"]]
    return "\n".join([
        "# DPLogisticRegression on raw features (the default: private feature ranges)", "",
        f"`python benchmarks/raw_data.py --fits {fits} --grid-fits {grid_fits}` ({seconds:.0f} s). "
        f"Default estimator (objective perturbation; {DEFAULT_PREPROCESSING_SHARE:g} of (epsilon, delta) to the "
        "private feature ranges, the rest to the model; delta = the library default), raw features, "
        "fresh OS entropy per fit. Raw rows: results/raw_data.csv, results/raw_data_grid.csv.", "",
        "## Real data (seeded stratified 80/20 split)", "",
        md_table(real, ["dataset", "n_train", "d", "classes", "epsilon", "delta", "fits", "mean_accuracy",
                        "min_accuracy", "max_accuracy", "fits_below_majority", "majority", "nonprivate_raw",
                        "nonprivate_standardized", "seconds_per_fit"], fmt), "",
        "nonprivate_raw: scikit-learn LogisticRegression on the raw features; nonprivate_standardized: with a "
        "(non-private) StandardScaler, the ceiling. More than two classes: one softmax model (the default "
        "multi_class='softmax'), the model's budget spent once; delta 0 (pure): one-vs-rest, the "
        "softmax model being zCDP.", "",
        "## Where the accuracy goes at epsilon 1 (internal split of the training rows)", "",
        f"Share = {DEFAULT_PREPROCESSING_SHARE:g}; oracle ranges are the exact 5 %/95 % points (not private); "
        "'model 1e4': the model nearly noiseless, so the row shows the ranges' loss alone.", "",
        md_table(diag, ["dataset", "n_internal", "setting", "fits", "mean_accuracy", "min_accuracy", "majority"],
                 fmt), "",
        "## Expected accuracy against n, d, classes and epsilon (synthetic raw features)", "",
        f"Mean test accuracy (min of {grid_fits} fits) of the default estimator; features on scales 1e-2 .. 1e3, "
        "labels from a linear softmax model; 5,000 test rows. Non-private: StandardScaler + LogisticRegression.", "",
        md_table(pivot, ["classes", "d", "n", *eps_cols, "majority", "non-private"]), "",
        "Public rule of BudgetWarning (rows_to_beat_constant = 20 x models x d / epsilon_model), per cell:", "",
        md_table(cells, ["classes", "d", "n", "epsilon", "mean_accuracy", "majority", "rule_rows"], fmt),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", type=int, default=20)
    parser.add_argument("--grid-fits", type=int, default=5)
    args = parser.parse_args()
    start = time.perf_counter()
    with threadpool_limits(1):
        real = real_data(args.fits)
        cells = grid(args.grid_fits)
        diag = diagnosis(args.grid_fits)
    write_csv("raw_data.csv", real)
    write_csv("raw_data_grid.csv", cells)
    write_csv("raw_data_diagnosis.csv", diag)
    text = markdown(real, cells, diag, args.fits, args.grid_fits, time.perf_counter() - start)
    if READING.exists():   # the hand-written reading of the committed run (not a section of benchmarks/README.md)
        text = text.rstrip() + "\n\n" + READING.read_text()
    write_section("raw_data", text, readme=False)


if __name__ == "__main__":
    main()
