"""Rule ``resources``: the ``benchmark:`` files of the jobs -> one row of resource use per rule.

Snakemake writes one TSV per job of a rule with a ``benchmark:`` directive (``prepare_data``,
``optimum`` / ``optimum_holdout``, ``run_job``, ``time_updates``): wall time ``s``, peak resident
memory ``max_rss`` (MB), CPU time ``cpu_time`` (user + system, s), and more. The table has, per
rule: the number of jobs with a benchmark file (and of those without one: jobs made before the
directive existed, or not run), and for wall time, CPU time and max RSS the mean, the quantiles
q50 / q90 / q99, the maximum and (times only) the sum. It is what a cluster profile is sized from
(``docs/cluster.md``): per-job memory and run time limits with a margin over the maximum.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import atomic_path

log = logging.getLogger("dpnewton.pipeline")

#: benchmark-file column -> table column prefix
MEASURES = {"s": "wall_s", "cpu_time": "cpu_s", "max_rss": "max_rss_mb"}
QUANTILES = (0.5, 0.9, 0.99)
COLUMNS = (["rule", "n_jobs", "n_missing"]
           + [f"{p}_{stat}" for p in MEASURES.values()
              for stat in ("mean", *(f"q{round(100 * q)}" for q in QUANTILES), "max")]
           + ["wall_s_sum", "cpu_s_sum"])


def read_benchmark(path: str | Path) -> pd.DataFrame:
    """One Snakemake benchmark TSV (one row per repeat; '-' where a measure was unavailable)."""
    frame = pd.read_csv(path, sep="\t", na_values=["-", "NA"])
    return frame[[c for c in MEASURES if c in frame]].apply(pd.to_numeric, errors="coerce")


def summarize(benchmarks: dict[str, list[str]]) -> pd.DataFrame:
    """``benchmarks``: rule -> the benchmark files its jobs write. Files that do not exist are
    counted in ``n_missing``; a rule with no file at all gets NaN statistics."""
    rows = []
    for rule, paths in benchmarks.items():
        found = [p for p in paths if Path(p).is_file()]
        frames = [read_benchmark(p).mean(numeric_only=True).to_frame().T for p in found]
        jobs = (pd.concat(frames, ignore_index=True) if frames
                else pd.DataFrame(columns=list(MEASURES), dtype=float))
        row = {"rule": rule, "n_jobs": len(found), "n_missing": len(paths) - len(found)}
        for src, prefix in MEASURES.items():
            x = jobs[src].dropna().to_numpy(dtype=float) if src in jobs else np.zeros(0)
            ok = len(x) > 0
            row[f"{prefix}_mean"] = float(x.mean()) if ok else np.nan
            for q in QUANTILES:
                row[f"{prefix}_q{round(100 * q)}"] = float(np.quantile(x, q)) if ok else np.nan
            row[f"{prefix}_max"] = float(x.max()) if ok else np.nan
            if prefix != "max_rss_mb":
                row[f"{prefix}_sum"] = float(x.sum()) if ok else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def write_resources(benchmarks: dict[str, list[str]], parquet: str | Path, csv: str | Path) -> pd.DataFrame:
    """Entry point of the rule: summarize and write the table (parquet + CSV mirror, atomically)."""
    table = summarize({r: list(p) for r, p in benchmarks.items()})
    for r in table.itertuples():
        log.info("%s: %d jobs (%d without a benchmark file), wall q50 %.3g s / max %.3g s, CPU sum %.4g s, "
                 "max RSS %.4g MB", r.rule, r.n_jobs, r.n_missing, r.wall_s_q50, r.wall_s_max, r.cpu_s_sum,
                 r.max_rss_mb_max)
    with atomic_path(parquet, suffix=".parquet") as tmp:
        table.to_parquet(tmp, index=False)
    with atomic_path(csv, suffix=".csv") as tmp:
        table.to_csv(tmp, index=False)
    return table
