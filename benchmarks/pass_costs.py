"""Pass-equivalent constants of :mod:`dpnewton.pipeline.frontier`: the cost of a Gram pass and of a
d x d eigendecomposition in units of one gradient pass over Z.

A *gradient pass* is what one DP-GD update costs: the margins m = Z w and the gradient Z^T r
(r = expit(-m)), two matrix-vector products over the n x d rows. A *Gram pass* is the SOI of a
double-noise step, Z^T diag(c) Z (n d^2 flops: compute-bound, so it costs more than a gradient pass
and the ratio grows about linearly with d). An *eigh* is ``numpy.linalg.eigh`` of a d x d symmetric
matrix (d^3). Everything runs with BLAS on one thread, as the run jobs.

The three are fitted as per-element time constants

    t_grad = a n d,   t_gram = b n d^2,   t_eigh = c d^3

(median over the shapes below of t/(n d), t/(n d^2), t/d^3), so that in gradient passes

    Gram pass = (b / a) d,          eigh = (c / a) d^2 / n.

The ratios b/a and c/a are what dpnewton/algorithms/costs.py stores (GRAM_PER_D, EIGH_PER_D2_OVER_N). The shapes
cover the datasets of the configs (a1a-like 1605 x 123, protein-like 145751 x 74 scaled down,
synthetic 400 x 5) and a wider d. Output: benchmarks/results/pass_costs.csv and pass_costs.md.

Run: ``python benchmarks/pass_costs.py`` (about half a minute).
"""

from __future__ import annotations

import csv
import json
import platform
import time
from pathlib import Path

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_info, threadpool_limits

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = [(400, 5), (1605, 123), (5000, 20), (20000, 50), (50000, 74), (20000, 200)]
SECONDS = 0.3


def _time(fn, seconds=SECONDS) -> float:
    """Median seconds per call over repeated batches lasting about ``seconds`` in total."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    k = max(1, int(seconds / 5 / one))
    per = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        per.append((time.perf_counter() - t0) / k)
    return float(np.median(per))


def measure(n: int, d: int, rng) -> dict:
    Z = rng.standard_normal((n, d))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    w = rng.standard_normal(d) * 0.1
    c = rng.random(n) * 0.25
    A = Z.T @ (c[:, None] * Z) / n + 1e-3 * np.eye(d)

    def grad():
        return Z.T @ expit(-(Z @ w)) / n

    def gram():
        return Z.T @ (c[:, None] * Z) / n

    def eigh():
        return np.linalg.eigh(A)

    tg, tG, tE = _time(grad), _time(gram), _time(eigh)
    return {"n": n, "d": d, "grad_s": tg, "gram_s": tG, "eigh_s": tE, "gram_over_grad": tG / tg,
            "eigh_over_grad": tE / tg, "a": tg / (n * d), "b": tG / (n * d * d), "c": tE / d ** 3}


def main() -> None:
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        rows = [measure(n, d, rng) for n, d in SHAPES]
    a = float(np.median([r["a"] for r in rows]))
    b = float(np.median([r["b"] for r in rows]))
    c = float(np.median([r["c"] for r in rows]))
    for r in rows:
        r["gram_model"] = b / a * r["d"]
        r["eigh_model"] = c / a * r["d"] ** 2 / r["n"]
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "pass_costs.csv", "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    env = {"python": platform.python_version(), "numpy": np.__version__,
           "cpu": platform.processor() or platform.machine(),
           "blas": sorted({f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info()}),
           "threads": 1}
    lines = ["# Pass-equivalent constants (benchmarks/pass_costs.py)", "",
             f"Environment: {json.dumps(env)}", "",
             "Per-element constants (medians over shapes): gradient pass a n d, Gram pass b n d^2, eigh c d^3.", "",
             f"* GRAM_PER_D = b / a = **{b / a:.4g}** (a Gram pass = {b / a:.3g} d gradient passes)",
             f"* EIGH_PER_D2_OVER_N = c / a = **{c / a:.4g}** (an eigh = {c / a:.3g} d^2 / n gradient passes)", "",
             "| n | d | gradient pass (ms) | Gram pass (ms) | eigh (ms) | Gram / gradient | model "
             "| eigh / gradient | model |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['d']} | {1e3 * r['grad_s']:.4g} | {1e3 * r['gram_s']:.4g} "
                     f"| {1e3 * r['eigh_s']:.4g} "
                     f"| {r['gram_over_grad']:.3g} | {r['gram_model']:.3g} | {r['eigh_over_grad']:.3g} "
                     f"| {r['eigh_model']:.3g} |")
    lines += ["", "The model is a rough per-element fit: BLAS efficiency varies with the shape (small d is "
              "overhead-bound), so a pass-equivalent is an estimate within a small factor, not a measurement of "
              "any one dataset."]
    (RESULTS / "pass_costs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
