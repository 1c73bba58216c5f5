"""Small-n audit of every estimator algorithm: 3 vs 4 rows, the flipped-label canary.

    python benchmarks/small_n_audit.py [--trials 30000] [--pilot 10000] [--only ALGORITHM ...]

For each algorithm of ``dpnewton.estimator.supported_algorithms()`` at epsilon = 2, delta = 1e-5, T = 1,
at both levels of :data:`dpnewton.audit.small_n.LEVELS` (the released weights; the likelihood ratio of
the releases): the estimator's mechanism (variant ``none``, relation add-remove) and the broken variants
the audit must catch: ``public-n`` (noise calibrated with n public; the zCDP methods) and ``overspend``
(4 epsilon spent, epsilon claimed). Method: :mod:`dpnewton.audit.small_n`. Writes
benchmarks/results/small_n_audit.csv (one row per algorithm, variant and level, atomically); with
``--only`` the rows of the other algorithms are kept from the existing file.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pandas as pd
from threadpoolctl import threadpool_limits

from dpnewton.algorithms import get_algorithm
from dpnewton.audit.small_n import LEVELS, audit_small_n
from dpnewton.estimator import supported_algorithms

OUT = Path(__file__).parent / "results" / "small_n_audit.csv"


def variants(algorithm: str) -> tuple[str, ...]:
    """``public-n`` only where the noise reads n: the zCDP methods (objpert's public-n rule differs only by
    its 1e-12 solver slack)."""
    return ("none", "public-n", "overspend") if get_algorithm(algorithm).plan is not None else ("none", "overspend")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30_000)
    parser.add_argument("--pilot", type=int, default=10_000)
    parser.add_argument("--only", nargs="+", choices=supported_algorithms(), default=supported_algorithms())
    args = parser.parse_args()
    rows = []
    with threadpool_limits(1):
        for algorithm in args.only:
            for variant in variants(algorithm):
                for level in LEVELS:
                    start = time.perf_counter()
                    outcome = audit_small_n(algorithm, variant, level, args.trials, args.pilot)
                    rows.append({**outcome.as_dict(), "seconds": round(time.perf_counter() - start, 1)})
                    print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    if set(args.only) != set(supported_algorithms()) and OUT.exists():
        kept = pd.read_csv(OUT)
        table = pd.concat([kept[~kept["algorithm"].isin(args.only)], table], ignore_index=True)
    table = table[list(rows[0])].sort_values(["algorithm", "variant", "level"], kind="stable")
    tmp = OUT.with_suffix(".tmp")
    table.to_csv(tmp, index=False)
    os.replace(tmp, OUT)


if __name__ == "__main__":
    main()
