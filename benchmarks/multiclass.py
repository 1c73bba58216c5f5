"""Multiclass rules for private logistic regression: softmax (one model, one budget) vs one-vs-rest.

Data: scikit-learn's iris (3 classes), wine (3) and digits (10), each split 80/20 (stratified,
``random_state`` = :data:`SPLIT_SEED`). Features are standardised by a NON-private StandardScaler fitted
on the training rows: this isolates the multiclass rule (private preprocessing is a separate part of the
protocol, not measured here). Rows [x, 1] are divided by sqrt(d + 1) and projected onto the unit ball.

Rules, each at epsilon in {0.1, 1, 10}, delta = 1e-5, 20 seeds (a run's generator from its identity,
:class:`dpnewton.seeding.RunIdentity`):

* ``softmax-bohning`` / ``softmax-gd``: :func:`dpnewton.multinomial.fit_multinomial` with its public T rule;
* ``ovr-dp-gd``: ``DPLogisticRegression(algorithm="dp-gd")``, one-vs-rest with rho/K per model (zCDP
  composition), T = softmax-gd's T, tail averaging, the library's step 4 (1/L of the binary loss);
* ``ovr-objpert``: today's default, ``DPLogisticRegression()`` (objective perturbation, one-vs-rest with
  (epsilon/K, delta/K) per model), data_norm = sqrt(d + 1) on the standardised features;
* ``sklearn``: non-private ``LogisticRegression`` (multinomial, C = 1), and ``majority``: the majority
  class rate of the test set.

Reported: mean and min test accuracy over the seeds. ``--t-grid`` runs both softmax methods at each T in
:data:`T_GRID` instead (the study behind :data:`dpnewton.multinomial.DEFAULT_ITERATIONS`; same run
identities, so its T = 20 / 100 columns repeat the main table's softmax cells).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import warnings

import numpy as np
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from common import RESULTS_DIR, md_table, write_section
from dpnewton.estimator import DPLogisticRegression
from dpnewton.multinomial import METHODS, default_iterations, fit_multinomial
from dpnewton.seeding import RunIdentity

DATASETS = {"iris": load_iris, "wine": load_wine, "digits": load_digits}
EPSILONS = (0.1, 1.0, 10.0)
DELTA = 1e-5
SEEDS = range(20)
SPLIT_SEED = 0
T_GRID = (5, 10, 20, 50, 100, 200)


def prepared(name: str):
    """(Z_train, y_train, Z_test, y_test, d): standardised (non-private scaler), [x, 1]/sqrt(d+1)."""
    X, y = DATASETS[name](return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, stratify=y, random_state=SPLIT_SEED)
    scaler = StandardScaler().fit(X_tr)
    d = X.shape[1]

    def rows(X):
        Z = np.hstack([scaler.transform(X), np.ones((len(X), 1))]) / math.sqrt(d + 1)
        return Z / np.maximum(np.linalg.norm(Z, axis=1), 1.0)[:, None]

    return rows(X_tr), y_tr, rows(X_te), y_te, scaler.transform(X_tr), scaler.transform(X_te), d


def softmax_accuracy(Z, y, Z_te, y_te, K, eps, seed, method, T, dataset):
    rng = RunIdentity(dataset, f"softmax-{method}", eps, seed, T).generator()
    W, _, _ = fit_multinomial(Z, y, K, eps, DELTA, rng, method=method, iterations=T)
    return float(np.mean(np.argmax(Z_te @ W.T, axis=1) == y_te))


def estimator_accuracy(X, y, X_te, y_te, d, eps, seed, **kw):
    model = DPLogisticRegression(epsilon=eps, delta=DELTA, data_norm=math.sqrt(d + 1), random_state=seed, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return float(model.score(X_te, y_te))


def run(t_grid: bool) -> list[dict]:
    rows = []
    for name in DATASETS:
        Z, y, Z_te, y_te, X, X_te, d = prepared(name)
        K = int(y.max()) + 1
        ref = LogisticRegression(max_iter=5000).fit(X, y).score(X_te, y_te)
        majority = float(np.max(np.bincount(y_te)) / len(y_te))
        for eps in EPSILONS:
            cells = {}
            if t_grid:
                rows.extend(row(name, len(y), d, K, eps, f"softmax-{method}", T,
                                [softmax_accuracy(Z, y, Z_te, y_te, K, eps, s, method, T, name) for s in SEEDS])
                            for method in METHODS for T in T_GRID)
                continue
            for method in METHODS:
                T = default_iterations(method)
                cells[f"softmax-{method}"] = ([softmax_accuracy(Z, y, Z_te, y_te, K, eps, s, method, T, name)
                                               for s in SEEDS], T)
            T = default_iterations("gd")
            cells["ovr-dp-gd"] = ([estimator_accuracy(X, y, X_te, y_te, d, eps, s, algorithm="dp-gd", iterations=T,
                                                      hyper={"average": "tail"}) for s in SEEDS], T)
            cells["ovr-objpert"] = ([estimator_accuracy(X, y, X_te, y_te, d, eps, s, algorithm="objpert")
                                     for s in SEEDS], 1)
            cells["sklearn"] = ([ref], "")
            cells["majority"] = ([majority], "")
            rows.extend(row(name, len(y), d, K, eps, rule, T, acc) for rule, (acc, T) in cells.items())
    return rows


def row(dataset, n_train, d, K, eps, rule, T, acc) -> dict:
    out = {"dataset": dataset, "n_train": n_train, "p": d + 1, "K": K, "epsilon": eps, "rule": rule, "T": T,
           "fits": len(acc), "mean_accuracy": round(float(np.mean(acc)), 4),
           "min_accuracy": round(float(np.min(acc)), 4)}
    print(out, file=sys.stderr, flush=True)
    return out


def write(rows: list[dict], stem: str) -> None:
    with open(RESULTS_DIR / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read(stem: str) -> list[dict]:
    path = RESULTS_DIR / f"{stem}.csv"
    return list(csv.DictReader(path.open())) if path.exists() else []


def pivot(rows: list[dict], column) -> tuple[list[dict], list[str]]:
    """One row per (dataset, epsilon), one column per ``column(row)``: 'mean (min)' accuracy."""
    table, cols = {}, []
    for r in rows:
        key, col = (r["dataset"], r["epsilon"]), column(r)
        mean, low = float(r["mean_accuracy"]), float(r["min_accuracy"])
        cell = f"{mean:.3f}" if r["fits"] == "1" else f"{mean:.3f} ({low:.3f})"
        table.setdefault(key, {"dataset": f"{r['dataset']} (n={r['n_train']}, p={r['p']}, K={r['K']})",
                               "epsilon": r["epsilon"]})[col] = cell
        cols += [col] if col not in cols else []
    return list(table.values()), ["dataset", "epsilon"] + cols


def markdown() -> str:
    parts = [__doc__.split("\n\n", 1)[1].strip(), ""]
    main = read("multiclass")
    if main:
        rows, cols = pivot(main, lambda r: r["rule"] + (f" T={r['T']}" if r["rule"].startswith("softmax") else ""))
        parts += ["### Test accuracy, mean (min) over 20 fits", "", md_table(rows, cols), ""]
    grid = read("multiclass_t_grid")
    if grid:
        rows, cols = pivot(grid, lambda r: f"{r['rule'].removeprefix('softmax-')} T={r['T']}")
        parts += ["### Softmax methods over T (`--t-grid`), mean (min) over 20 fits", "", md_table(rows, cols), ""]
    return "\n".join(parts)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--t-grid", action="store_true", help="run the softmax methods at every T of T_GRID instead")
    parser.add_argument("--tables", action="store_true", help="only rebuild multiclass.md from the committed CSVs")
    args = parser.parse_args(argv)
    if not args.tables:
        write(run(args.t_grid), "multiclass_t_grid" if args.t_grid else "multiclass")
    write_section("multiclass", markdown(), readme=False)


if __name__ == "__main__":
    main()
