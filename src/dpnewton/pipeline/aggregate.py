"""Aggregation of run rows: per-T summaries, non-private best-T selection, baselines, Table 1.

All functions take and return pandas frames so they can be unit-tested on hand-made data.

* Standard error = sample standard deviation (ddof=1) / sqrt(#seeds) (:data:`SE_DDOF`); the official
  code divides the ddof=0 standard deviation, 13 % smaller at 4 seeds (docs/algorithms.md §9.1). One
  seed has no standard error (NaN).
* Means and medians propagate NaN/inf: a seed that diverged makes its (cell, T) non-finite, and
  non-finite means never win the selection.
* Best T per (dataset, algorithm, conversion, epsilon) = argmin over the T grid of the mean
  excess loss of the released model (the last iterate, or the averaged one with ``average``) over
  seeds; ties go to the smaller T; non-finite means never win.
  This uses the excess loss itself, so it is *non-private* tuning (as in the paper).
* Accuracies and the test log-loss (``train_accuracy``, and with a holdout ``test_accuracy`` and
  ``test_log_loss``) are summarised like the excess loss, and reported at the best T chosen on
  the (training) excess loss: they play no part in the selection.
* Reference: ``ridge_floor`` (F*, :mod:`dpnewton.floor`) is the expected excess loss of
  Gaussian-perturbed ridge ERM on the local quadratic model at w*, with the best ridge lambda: a
  yardstick, **not a lower bound**; ``excess_over_floor`` = best-T mean excess loss / F*.
* ``edge`` is ``high`` for a best T equal to the largest grid value and ``low`` for the smallest
  one when it is above 1 (grids with more than one value only); ``at_edge`` flags both: the grid
  may be too narrow there. A best T = 1 at the bottom of the grid is ``min`` and not an edge:
  no smaller T exists.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import (CSV_DIGEST_KEY, DELETE_FIX, DamagedFileError, atomic_path, atomic_write_parquet, check_csv,
                  check_parquet, parquet_footer, read_csv, read_parquet)
from . import frontier as fr
from .selection import best_t as best_mean_t

GROUP = ["dataset", "algorithm", "conversion", "epsilon"]
SELECTION = "non-private: argmin over T of mean excess loss over seeds"
#: the standard error's ddof: 1, the sample standard deviation (the official code's is 0)
SE_DDOF = 1
LEDGER_RTOL = 1e-9
#: per-run metrics summarised as <name>_mean and <name>_se when the rows have them
METRICS = ["train_accuracy", "test_accuracy", "test_log_loss"]
HELDOUT_COLUMNS = GROUP + ["best_T", "n_seeds", "excess_loss_mean", "excess_loss_se", "train_accuracy_mean",
                           "test_accuracy_mean", "test_accuracy_se", "test_log_loss_mean", "test_log_loss_se"]


#: text columns of the job CSVs (read as strings: a hex hash like "1234e5" must not become a float)
TEXT_COLUMNS = ["dataset", "algorithm", "conversion", "eps_label", "nonprivate", "hyper", "accounting_events",
                "config_hash", "package_version", "git_revision", "python_version", "numpy_version",
                "scipy_version", "dp_accounting_version", "snakemake_version", "blas_vendor", "blas_version",
                "cpu_model", "platform", "dataset_sha256", "timestamp_utc"]
"""Columns read as text (a version such as 1.10 must not become the number 1.1)."""


#: the fix of a damaged run job file
RUN_FIX = "delete it and run `snakemake {path}` (the target before your other options): rule run_job recomputes it"


#: numeric columns of the job CSVs that the tables are computed from (a value that is not a number is damage)
NUMBER_COLUMNS = ["epsilon", "delta", "rho", "seed", "iterations", "excess_loss", "runtime_s", "resets", "n", "d",
                  "loss_opt", "ledger_rho_total", "accountant_epsilon"] + METRICS


def read_rows(path) -> pd.DataFrame:
    """A run job's rows, verified: :func:`dpnewton.io.check_csv` (complete, its row count and content
    digest, at least one row), :func:`check_numbers` and :func:`check_job_rows` (every seed of the file
    has the same T values). A damaged file raises :class:`dpnewton.io.DamagedFileError` naming it and
    the fix; it is never aggregated."""
    frame = read_csv(path, min_rows=1, fix=RUN_FIX, dtype={c: str for c in TEXT_COLUMNS})
    check_numbers(frame, path)
    check_job_rows(frame, path)
    for c in TEXT_COLUMNS:
        if c in frame:
            frame[c] = frame[c].fillna("")
    return frame


def check_numbers(frame: pd.DataFrame, path) -> None:
    """Every :data:`NUMBER_COLUMNS` value is a number (NaN and infinities are numbers); the first one
    that is not raises :class:`dpnewton.io.DamagedFileError` naming its column and row (a file without
    a content digest, or a digest recomputed by hand, is still caught here)."""
    for column in [c for c in NUMBER_COLUMNS if c in frame and not pd.api.types.is_numeric_dtype(frame[c])]:
        parsed = pd.to_numeric(frame[column], errors="coerce")
        bad = parsed.isna() & frame[column].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise DamagedFileError(path, f"row {row + 1} has {frame[column].iloc[row]!r} in column {column}, "
                                         "which takes numbers", RUN_FIX)


def check_job_rows(frame: pd.DataFrame, path) -> None:
    """A job runs every seed at every T of each member's (possibly extended) grid, so each seed of a
    (configuration, conversion, epsilon) in its rows file has the same set of T values (a lockstep job,
    :func:`dpnewton.pipeline.plan.group_jobs`, holds several of each); a file that lost rows (also one
    written before rows files carried their count) fails this unless it lost every T of whole seeds."""
    if not {"seed", "iterations"} <= set(frame.columns):
        return
    keys = [c for c in ("algorithm", "conversion", "epsilon") if c in frame]
    for name, part in (frame.groupby(keys) if keys else [((), frame)]):
        grids = part.groupby("seed")["iterations"].agg(lambda t: tuple(sorted(t)))
        if grids.nunique() > 1:
            counts = ", ".join(f"seed {s}: {len(g)}" for s, g in grids.items())
            what = " ".join(f"epsilon {v:g}" if k == "epsilon" else str(v) for k, v in zip(keys, name))
            raise DamagedFileError(path, f"the seeds of {what or 'its runs'} have different numbers of runs "
                                         f"({counts})", RUN_FIX)


def load_rows(paths) -> pd.DataFrame:
    """Every run row of the job files ``paths`` (each verified by :func:`read_rows`), with the
    privacy check (:func:`check_privacy`) and ``solver_steps``."""
    runs = pd.concat([read_rows(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()
    if runs.empty:
        raise ValueError("no run rows to aggregate")
    return with_solver_steps(check_privacy(runs))


def with_solver_steps(runs: pd.DataFrame) -> pd.DataFrame:
    """Add ``solver_steps``: the Newton steps a one-shot mechanism (AOP, objpert) took to solve its
    perturbed objective, summed over the ``solver_iterations`` of the row's ``accounting_events``
    (NaN for a row without them: the iterative methods). The frontier costs a one-shot run by it."""
    def steps(events: str) -> float:
        try:
            parsed = json.loads(events) if events else []
        except ValueError:
            return float("nan")
        counts = [e["solver_iterations"] for e in parsed if isinstance(e, dict) and "solver_iterations" in e]
        return float(sum(counts)) if counts else float("nan")

    events = runs["accounting_events"] if "accounting_events" in runs else pd.Series("", index=runs.index)
    return runs.assign(solver_steps=[steps(e) for e in events.fillna("")])


def check_privacy(runs: pd.DataFrame) -> pd.DataFrame:
    """Add ``privacy_check`` (how the run was accounted) and ``ledger_ok``.

    * ``zcdp-ledger``: the per-release rho sum (``ledger_rho_total``) must equal the budget rho;
    * ``accountant``: runs calibrated by an RDP accountant (subsampled Gaussian) have no zCDP
      ledger; their ``accountant_epsilon`` must not exceed the target epsilon;
    * ``mechanism``: one-shot mechanisms with their own (epsilon, delta) split (AOP); nothing to
      sum, recorded in ``accounting_events``; ``ledger_ok`` is True.
    """
    runs = runs.copy()
    ledger = pd.to_numeric(runs["ledger_rho_total"], errors="coerce")
    acc = pd.to_numeric(runs["accountant_epsilon"], errors="coerce") if "accountant_epsilon" in runs \
        else pd.Series(np.nan, index=runs.index)
    kind = np.where(ledger.notna(), "zcdp-ledger", np.where(acc.notna(), "accountant", "mechanism"))
    ok = np.where(kind == "zcdp-ledger", np.isclose(ledger, runs["rho"], rtol=LEDGER_RTOL, atol=0.0),
                  np.where(kind == "accountant", acc <= runs["epsilon"] * (1 + 1e-9), True))
    runs["privacy_check"] = kind
    runs["ledger_ok"] = ok.astype(bool)
    return runs


def _se(x: pd.Series) -> float:
    x = x.to_numpy(dtype=float)
    if len(x) <= SE_DDOF or not np.isfinite(x).all():
        return float("nan")
    return float(np.std(x, ddof=SE_DDOF) / math.sqrt(len(x)))


def _mean(x: pd.Series) -> float:
    return float(np.mean(x.to_numpy(dtype=float)))  # NaN/inf propagate: a diverged seed is not dropped


def _median(x: pd.Series) -> float:
    return float(np.median(x.to_numpy(dtype=float)))


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, algorithm, conversion, epsilon, T): mean / s.e. / median over seeds."""
    keys = GROUP + ["iterations"]
    g = runs.groupby(keys, sort=True)
    out = g.agg(
        n_seeds=("seed", "nunique"),
        excess_loss_mean=("excess_loss", _mean),
        excess_loss_se=("excess_loss", _se),
        excess_loss_median=("excess_loss", _median),
        runtime_s_mean=("runtime_s", _mean),
        runtime_s_se=("runtime_s", _se),
        runtime_s_median=("runtime_s", _median),
        rho=("rho", "first"),
        delta=("delta", "first"),
        diverged=("diverged", "sum"),
        resets=("resets", "sum"),
    ).reset_index()
    if "ledger_ok" in runs:
        out["ledger_ok"] = g["ledger_ok"].all().to_numpy()
    out["reset_fraction"] = out["resets"] / (out["n_seeds"] * out["iterations"]).clip(lower=1)
    for col in ("grid_extended",):
        if col in runs:
            out[col] = g[col].agg(lambda x: bool(pd.Series(x).astype(str).str.lower().eq("true").any())).to_numpy()
    for col in ("base_algorithm", "hyper"):
        if col in runs:
            out[col] = g[col].first().to_numpy()
    if "probe_rejected_T" in runs:   # the T search's seed-0 probe (dpnewton.pipeline.t_search.TSearch)
        out["probe_rejected_T"] = g["probe_rejected_T"].agg(lambda x: int(pd.to_numeric(x).fillna(0).max())).to_numpy()
    if "solver_steps" in runs:
        out["solver_steps_mean"] = g["solver_steps"].agg(_mean).to_numpy()
    for col in METRICS:
        if col in runs:
            out[f"{col}_mean"] = g[col].agg(_mean).to_numpy()
            out[f"{col}_se"] = g[col].agg(_se).to_numpy()
    return out


def best_t(summary: pd.DataFrame) -> pd.DataFrame:
    """Best T per (dataset, algorithm, conversion, epsilon) with the grid-edge flag."""
    rows = []
    for key, grp in summary.groupby(GROUP, sort=True):
        grp = grp.sort_values("iterations")
        grid = grp["iterations"].to_numpy()
        means = grp["excess_loss_mean"].to_numpy(dtype=float)
        finite = np.isfinite(means)
        base = dict(zip(GROUP, key))
        base.update(grid_min=int(grid.min()), grid_max=int(grid.max()), grid_size=len(grid),
                    grid=" ".join(str(int(t)) for t in grid), selection=SELECTION)
        if not finite.any():
            rows.append({**base, "best_T": np.nan, "at_edge": False, "edge": "", "all_nonfinite": True,
                         **_edge_neighbour(grid, means, 0, "")})
            continue
        i = int(np.flatnonzero(grid == best_mean_t(pd.Series(means, index=grid)))[0])
        best = grp.iloc[i]
        T = int(best["iterations"])
        edge = ""
        if len(grid) > 1:
            edge = ("high" if T == grid.max() else "low" if T == grid.min() and T > 1
                    else "min" if T == grid.min() else "")
        if edge in ("low", "high") and _probed_past(best, T, edge):
            edge = "probed"
        rec = {**base, "best_T": T, "at_edge": edge in ("low", "high"), "edge": edge, "all_nonfinite": False,
               **_edge_neighbour(grid, means, i, edge)}
        for col in best.index:
            if col not in GROUP and col != "iterations":
                rec[col] = best[col]
        rows.append(rec)
    out = pd.DataFrame(rows)
    out["best_T"] = out["best_T"].astype("Int64")
    out["edge_neighbour_T"] = out["edge_neighbour_T"].astype("Int64")
    return out


def _probed_past(best: pd.Series, T: int, edge: str) -> bool:
    """Whether the T search's first-seed probe ran the next T beyond this edge and stopped the search
    there (``probe_rejected_T``, :func:`dpnewton.pipeline.t_search.probe_passes`): seed 0 did worse at it
    than every seed at the best T, so the best T is interior on that evidence (edge "probed", not an edge)."""
    probe = best.get("probe_rejected_T", 0)
    probe = 0 if pd.isna(probe) else int(probe)
    return probe > T if edge == "high" else 0 < probe < T


def _edge_neighbour(grid: np.ndarray, means: np.ndarray, i: int, edge: str) -> dict:
    """For a best T at an edge: the next T inwards and the relative gain of the last move,
    (mean at that T - mean at the best T) / mean at that T: how far the cell still is from an
    interior optimum (a large gain means the next extension would likely improve further)."""
    if edge not in ("low", "high"):
        return {"edge_neighbour_T": np.nan, "edge_neighbour_mean": np.nan, "edge_gain": np.nan}
    j = i - 1 if edge == "high" else i + 1
    gain = (means[j] - means[i]) / means[j] if np.isfinite(means[j]) and means[j] > 0 else np.nan
    return {"edge_neighbour_T": int(grid[j]), "edge_neighbour_mean": float(means[j]), "edge_gain": float(gain)}


def add_cell_stability(best: pd.DataFrame, runs: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """Add per-cell ``unstable_fraction`` (runs over every T that diverged or ended no better than the
    trivial output w = 0) and ``reset_iteration_fraction`` (share of iterations where the explosion
    reset fired) to the best-T table."""
    triv = dict(zip(baseline["dataset"], baseline["trivial_excess_loss"]))
    r = runs[GROUP + ["excess_loss", "resets", "iterations"]].copy()
    ex = r["excess_loss"].astype(float)
    r["_bad"] = ~np.isfinite(ex) | (ex >= r["dataset"].map(triv).astype(float))
    g = r.groupby(GROUP, sort=True).agg(unstable_fraction=("_bad", "mean"), _resets=("resets", "sum"),
                                         _iters=("iterations", "sum")).reset_index()
    g["reset_iteration_fraction"] = g["_resets"] / g["_iters"].clip(lower=1)
    g = g.drop(columns=["_resets", "_iters"])
    out = best.drop(columns=[c for c in ("unstable_fraction", "reset_iteration_fraction") if c in best])
    return out.merge(g, on=GROUP, how="left")


def heldout_table(best: pd.DataFrame, optima: list[dict]) -> pd.DataFrame:
    """Held-out metrics per (dataset, algorithm, conversion, epsilon) at the cell's best T.

    Best T is the one :func:`best_t` selected on the training excess loss (non-private). Per
    dataset, the holdout fraction, the split sizes and the non-private optimum's (fitted on the
    training split) train/test accuracy and test log-loss, from the optimum summaries, are the
    reference a private method is compared with.
    """
    missing = [o.get("dataset") for o in optima if "test_log_loss" not in o]
    if missing:
        raise ValueError(f"the optima of {missing} have no held-out metrics: they were computed without a holdout")
    ref = pd.DataFrame([{"dataset": o["dataset"], "holdout": o["holdout"], "n_train": o["n"], "n_test": o["n_test"],
                         "optimum_train_accuracy": o["train_accuracy"], "optimum_test_accuracy": o["test_accuracy"],
                         "optimum_test_log_loss": o["test_log_loss"]} for o in optima])
    absent = [c for c in HELDOUT_COLUMNS if c not in best]
    if absent:
        raise ValueError(f"the best-T table has no {absent}: the run rows carry no held-out metrics")
    out = best[HELDOUT_COLUMNS].merge(ref, on="dataset", how="left")
    out["selection"] = SELECTION + " (training split)"
    return out.sort_values(GROUP).reset_index(drop=True)


def floor_cells(best: pd.DataFrame) -> list[tuple]:
    """The (dataset, conversion, epsilon, delta) of every cell of the best-T table, once each (delta
    as the runs recorded it: n^-2 of the training n unless the config sets one)."""
    cols = ["dataset", "conversion", "epsilon", "delta"]
    cells = best[cols].drop_duplicates(["dataset", "conversion", "epsilon"]).sort_values(cols[:3])
    return [(r.dataset, r.conversion, float(r.epsilon), float(r.delta)) for r in cells.itertuples(index=False)]


def add_floor_ratio(best: pd.DataFrame, floor: pd.DataFrame) -> pd.DataFrame:
    """Add ``ridge_floor`` (F*, the Gaussian ridge floor of the local quadratic model - not a lower
    bound; :mod:`dpnewton.floor`) and ``excess_over_floor`` = mean excess loss at best T / F* to every
    cell of the best-T table. Rows, their order and every other column are unchanged."""
    f = floor[["dataset", "conversion", "epsilon", "ridge_floor"]]
    out = best.drop(columns=[c for c in ("ridge_floor", "excess_over_floor") if c in best])
    out = out.merge(f, on=["dataset", "conversion", "epsilon"], how="left", validate="many_to_one")
    ex = out["excess_loss_mean"].to_numpy(dtype=float)
    F = out["ridge_floor"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["excess_over_floor"] = np.where(F > 0, ex / F, np.nan)
    return out


def trivial_baseline(optima: list[dict]) -> pd.DataFrame:
    """Excess loss of the trivial output w = 0: ln 2 - loss* per dataset."""
    rows = [{"dataset": o["dataset"], "n": o.get("n"), "d": o.get("d"), "loss_opt": o["loss_opt"],
             "trivial_excess_loss": math.log(2.0) - o["loss_opt"]} for o in optima]
    return pd.DataFrame(rows).sort_values("dataset").reset_index(drop=True)


def frontier(summary: pd.DataFrame, baseline: pd.DataFrame, costs: dict) -> pd.DataFrame:
    """The compute-budget frontier table (:func:`dpnewton.pipeline.frontier.frontier_table`): per
    (dataset, conversion, epsilon, measure, budget, method) the best mean excess loss over the method's
    configurations and Ts within the budget (runtime from the timing stage's lone-run model, or
    gradient passes over Z); ``n`` and ``d`` from the baseline table. Non-private selection."""
    return fr.frontier_table(summary, fr.dims_from_baseline(baseline), costs)


def write_frame(frame: pd.DataFrame, parquet_path, csv_path=None) -> None:
    """Parquet (typed, page CRCs, its frame digest) plus a CSV mirror of the same rows whose SHA-256
    the parquet footer records (:data:`dpnewton.io.CSV_DIGEST_KEY`; :func:`check_table_csv`), both
    atomic; the parquet first, so a mirror is never newer than the digest it is checked against."""
    if csv_path is None:
        atomic_write_parquet(parquet_path, frame)
        return
    text = frame.to_csv(index=False).encode()
    atomic_write_parquet(parquet_path, frame, metadata={CSV_DIGEST_KEY: hashlib.sha256(text).hexdigest().encode()})
    with atomic_path(csv_path, suffix=".csv") as tmp:
        tmp.write_bytes(text)


def check_table_csv(csv_path, parquet_path, fix: str = DELETE_FIX) -> int:
    """A table's CSV mirror is complete and unchanged when it holds its parquet twin's rows and has the
    SHA-256 the twin recorded (:func:`dpnewton.io.check_csv`; a twin written before it recorded one
    gives the row count only); returns the count."""
    return check_csv(csv_path, expected_rows=check_parquet(parquet_path, fix), fix=fix,
                     expected_sha256=parquet_footer(parquet_path, CSV_DIGEST_KEY, fix))


def load_curves(paths) -> pd.DataFrame:
    """The run jobs' curves files, each verified (:func:`dpnewton.io.read_parquet`)."""
    frames = [read_parquet(p, fix=RUN_FIX) for p in paths if Path(p).exists()]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=["dataset", "algorithm", "conversion", "epsilon", "seed", "iterations",
                                     "iterate", "excess_loss", "elapsed_s"])
    return pd.concat(frames, ignore_index=True)


def best_curves(curves: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """Mean and s.e. over seeds of the per-iterate curves of each cell's best-T runs."""
    if curves.empty:
        return pd.DataFrame(columns=GROUP + ["iterations", "iterate", "n_seeds", "excess_loss_mean",
                                             "excess_loss_se", "elapsed_s_mean"])
    b = best.dropna(subset=["best_T"])[GROUP + ["best_T"]].rename(columns={"best_T": "iterations"})
    b["iterations"] = b["iterations"].astype(int)
    c = curves.merge(b, on=GROUP + ["iterations"])
    out = c.groupby(GROUP + ["iterations", "iterate"], sort=True).agg(
        n_seeds=("seed", "nunique"), excess_loss_mean=("excess_loss", _mean),
        excess_loss_se=("excess_loss", _se), elapsed_s_mean=("elapsed_s", "mean")).reset_index()
    return out
