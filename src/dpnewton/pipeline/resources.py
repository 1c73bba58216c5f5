"""Rule ``resources``: the ``benchmark:`` files of the jobs -> one row of resource use per rule.

Snakemake writes one TSV per job of a rule with a ``benchmark:`` directive (``prepare_data``,
``optimum`` / ``optimum_holdout``, ``run_job``, ``time_updates``): wall time ``s``, peak resident
memory ``max_rss`` (MB), CPU time ``cpu_time`` (user + system, s), and more. The table has, per
rule: the number of jobs with a benchmark file (and of those without one: jobs made before the
directive existed, or not run), and for wall time, CPU time and max RSS the mean, the quantiles
q50 / q90 / q99, the maximum and (times only) the sum. It is what a cluster profile is sized from
(``docs/cluster.md``): per-job memory and run time limits with a margin over the maximum.

A benchmark file carries no row count or digest (Snakemake writes it), so :func:`read_benchmark`
checks what it can: a complete tab-separated file (:func:`dpnewton.io.check_csv`), at least one row,
and a wall time ``s`` that is a number in every row.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import DamagedFileError, read_csv
from .aggregate import write_frame

log = logging.getLogger("dpnewton.pipeline")

#: benchmark-file column -> table column prefix
MEASURES = {"s": "wall_s", "cpu_time": "cpu_s", "max_rss": "max_rss_mb"}
QUANTILES = (0.5, 0.9, 0.99)
COLUMNS = (["rule", "n_jobs", "n_missing"]
           + [f"{p}_{stat}" for p in MEASURES.values()
              for stat in ("mean", *(f"q{round(100 * q)}" for q in QUANTILES), "max")]
           + ["wall_s_sum", "cpu_s_sum"])


#: the fix of a damaged benchmark file (Snakemake does not rerun a job whose benchmark file is missing)
BENCHMARK_FIX = ("delete it and run snakemake again: its job then counts as one without a benchmark file "
                 "(`n_missing`); `--forcerun` of the job's rule measures it again")


def read_benchmark(path: str | Path) -> pd.DataFrame:
    """One Snakemake benchmark TSV (one row per repeat; '-' where a measure was unavailable), checked
    (module docstring); a damaged file raises :class:`dpnewton.io.DamagedFileError` naming it and the fix."""
    frame = read_csv(path, min_rows=1, fix=BENCHMARK_FIX, sep="\t", na_values=["-", "NA"])
    measures = frame[[c for c in MEASURES if c in frame]].apply(pd.to_numeric, errors="coerce")
    if "s" not in measures:
        raise DamagedFileError(path, f"its header has no wall-time column `s` ({', '.join(frame.columns)})",
                               BENCHMARK_FIX)
    if measures["s"].isna().any():
        raise DamagedFileError(path, "a wall time `s` is not a number", BENCHMARK_FIX)
    return measures


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
    """Entry point of the rule: summarize and write the table (parquet with page CRCs and digest, CSV
    mirror; atomically, :mod:`dpnewton.io`)."""
    table = summarize({r: list(p) for r, p in benchmarks.items()})
    for r in table.itertuples():
        log.info("%s: %d jobs (%d without a benchmark file), wall q50 %.3g s / max %.3g s, CPU sum %.4g s, "
                 "max RSS %.4g MB", r.rule, r.n_jobs, r.n_missing, r.wall_s_q50, r.wall_s_max, r.cpu_s_sum,
                 r.max_rss_mb_max)
    write_frame(table, parquet, csv)
    return table
