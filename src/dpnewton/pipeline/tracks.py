"""The two tracks beside the oracle-tuned one: end-to-end private selection and fixed rules.

The pipeline's main track picks T and the hyper-parameters non-privately (the argmin over the grid of
the mean true excess loss over seeds, :mod:`.selection`): an upper bound on what tuning can give, and
labelled so. The two tracks here answer what a user really gets (docs/algorithms.md §14):

* ``private-selection``: the whole tuning is private. One repetition is one run of
  :func:`dpnewton.tuning.private_select` (Papernot & Steinke 2022) at the cell's total (epsilon,
  delta): K ~ the declared count distribution, each candidate a configuration drawn uniformly from
  the method's declared grid (``variants`` x ``iterations``), the output the candidate with the
  lowest private score. The row records the *selected* model's true excess loss (what the benchmark
  measures, never released), the public accounting, and, marked ``secret_``, what the guarantee does
  not cover (K, the candidates' total iterations: the tuning's compute cost).
* ``fixed-rule``: no tuning. Each method runs once per repetition at one configuration fixed before
  any data is seen, by a documented rule (:data:`ITERATION_RULES`), at the full budget.

A job is one (track, dataset, method, epsilon) with all repetitions; each repetition is
checkpointed like the run jobs' units (:func:`dpnewton.pipeline.jobs.save_checkpoint`, verified by
:func:`~dpnewton.pipeline.checkpoints.load_checkpoint`), so an interrupted job resumes with identical
results. Its rows file carries its row count (:func:`dpnewton.io.atomic_write_csv`), which
:func:`read_track_rows` verifies. Beside it, written first, the privacy ledger of the released model
of each repetition as the run jobs keep it (:func:`dpnewton.pipeline.run_ledger.ledger_path`,
:data:`~dpnewton.pipeline.run_ledger.LEDGER_COLUMNS`, ``algorithm`` = the method): a fixed-rule run's
releases, which sum to its ``rho``, or the selected candidate's (the optimizer's releases and its
score, which sum to ``candidate_rho``; no rows when K = 0), read verified by :func:`read_track_ledger`.
The losing candidates' ledgers are secret (docs/algorithms.md §14.1) and are not written. Every draw
derives from the repetition's seed (:func:`repetition_seed`), so results do not depend on batching
or order. A job's problem is the run jobs': the training split with a holdout, Z in the config's
``precision``; each enters the spec only when it is not the default (off, float64), so the jobs of a
config without them keep their hashes.
"""

from __future__ import annotations

import hashlib
import logging
import math
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..experiment import last_iterate_only, resolve_budget, run_at_rho
from ..io import atomic_write_csv, read_csv, read_parquet
from ..privacy import PrivacyLedger
from ..problems import load_split_from_prepared
from ..tuning import CONVERSION_LABEL, private_select
from .aggregate import write_frame
from .checkpoints import checkpoint_dir, load_checkpoint, save_checkpoint
from .jobs import flatten_record, provenance, utc_timestamp
from .run_ledger import ledger_frame, ledger_path, unit_ledger, write_ledger
from .plan import eps_label

log = logging.getLogger("dpnewton.pipeline")

def snr_iterations(n: int, d: int, rho: float, cap: int) -> int:
    """DP-GD's T by the signal-to-noise rule: the largest T whose per-step noise has an expected
    norm no larger than the gradient's norm bound.

    A full-batch step releases the mean gradient (norm <= 1 for projected rows, sensitivity 1/n,
    docs/algorithms.md §6.1) with rho/T, i.e. noise N(0, sigma^2 I) with sigma = (1/n) sqrt(T/(2 rho));
    its expected squared norm d sigma^2 = d T / (2 rho n^2) is <= 1 iff T <= 2 rho n^2 / d. Public
    inputs only (n, d, rho); clamped to [1, cap]."""
    return int(min(max(1, math.floor(2.0 * rho * n * n / d)), cap))


#: name -> T as a function of (n, d, rho, cap): the fixed rules of the no-tuning track
ITERATION_RULES = {"snr": snr_iterations}


def repetition_seed(track: str, method: str, repetition: int) -> int:
    """The seed of one repetition: 63 bits of SHA-256(track|method|repetition). Labels that share a
    base algorithm (``dp-gd`` with and without averaging) so draw independent candidates."""
    digest = hashlib.sha256(f"dpnewton-track|{track}|{method}|{int(repetition)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def fixed_iterations(spec: dict, n: int, d: int, rho: float) -> int:
    """The fixed-rule track's T: an integer, or a rule of :data:`ITERATION_RULES` capped at
    ``spec['max_iterations']``."""
    rule = spec["iterations"]
    if isinstance(rule, str):
        if rule not in ITERATION_RULES:
            raise ValueError(f"iterations rule {rule!r} is unknown; choose one of {sorted(ITERATION_RULES)}")
        return ITERATION_RULES[rule](n, d, rho, int(spec["max_iterations"]))
    return int(rule)


def _selection_unit(problem, spec: dict, rep: int) -> tuple[dict, PrivacyLedger | None, str]:
    seed = repetition_seed(spec["track"], spec["method"], rep)
    configs = spec["configurations"]
    dist = dict(spec["distribution"])
    name = dist.pop("name")
    t0 = time.perf_counter()
    res = private_select(problem, spec["base_algorithm"], [{"iterations": c["iterations"], "hyper": c["hyper"]}
                                                           for c in configs],
                         float(spec["epsilon"]), spec["delta"], (name, dist), seed=seed,
                         score_frac=float(spec["score_frac"]), score_clip=float(spec["score_clip"]),
                         dataset=spec["dataset"])
    took = time.perf_counter() - t0
    rec = res.record
    variant = None
    if res.config is not None:
        T, hyper = res.config
        variant = next(c["variant"] for c in configs if c["iterations"] == T and c["hyper"] == hyper)
    public = rec.public()
    ledger = None if rec.selected is None else rec.ledgers[rec.selected]
    return {
        "selected_variant": variant, "selected_iterations": None if res.config is None else res.config[0],
        "selected_hyper": {} if res.config is None else res.config[1], "private_score": res.score,
        "excess_loss": float(problem.excess_loss(res.w)), "train_accuracy": float(problem.accuracy(res.w)),
        "n_configurations": rec.n_configurations, "distribution": public["distribution"],
        "expected_k": public["expected_k"], "candidate_rho": rec.accounting.candidate_rho,
        "rho_optimizer": rec.rho_optimizer, "rho_score": rec.rho_score,
        "epsilon_spent": rec.accounting.epsilon, "delta": rec.accounting.delta,
        "theorem": rec.accounting.theorem,
        # not covered by the guarantee (PS22 needs K hidden): benchmark bookkeeping only
        "secret_realised_k": rec.realised_k,
        "secret_candidate_iterations": int(sum(c["iterations"] for c in rec.candidates)),
        "n_releases": 0 if ledger is None else len(ledger.entries), "runtime_s": took, "seed": seed,
    }, ledger, CONVERSION_LABEL


def _fixed_unit(problem, spec: dict, rep: int) -> tuple[dict, PrivacyLedger | None, str]:
    seed = repetition_seed(spec["track"], spec["method"], rep)
    delta, rho = resolve_budget(float(spec["epsilon"]), spec["delta"], problem.n, spec["conversion"])
    T = fixed_iterations(spec, problem.n, problem.d, rho)
    t0 = time.perf_counter()
    (res,) = run_at_rho(problem, spec["dataset"], spec["base_algorithm"], float(spec["epsilon"]), delta,
                        spec["conversion"], rho, [(seed, T)], dict(spec["hyper"]), loss_iterates=last_iterate_only)
    took = time.perf_counter() - t0
    return {
        "selected_variant": spec["variant"], "selected_iterations": T, "selected_hyper": dict(spec["hyper"]),
        "iteration_rule": spec["iterations"] if isinstance(spec["iterations"], str) else "fixed",
        "excess_loss": float(res.released_excess_loss),
        "train_accuracy": float("nan") if res.train_accuracy is None else float(res.train_accuracy),
        # an (epsilon, delta)-calibrated method (aop, objpert) spends no rho: NaN, as in the run rows
        "n_configurations": 1, "rho": rho if res.ledger.entries else float("nan"), "delta": delta,
        "conversion": spec["conversion"],
        "ledger_rho_total": res.ledger.spent_rho if res.ledger.entries else float("nan"),
        "n_releases": len(res.ledger.entries), "secret_candidate_iterations": T, "runtime_s": took, "seed": seed,
    }, res.ledger, spec["conversion"]


#: track -> its repetition: (the row's track-specific fields, the released model's
#: :class:`~dpnewton.privacy.ledger.PrivacyLedger` or None, the conversion label of its ledger rows)
UNITS = {"private-selection": _selection_unit, "fixed-rule": _fixed_unit}


def track_problem(prepared: str | Path, spec: dict):
    """The problem a track job runs on: the run jobs' (the training split when ``spec`` has a
    ``holdout``, Z in ``spec['precision']``, default float64)."""
    problem, _ = load_split_from_prepared(Path(prepared), holdout=spec.get("holdout"),
                                          precision=spec.get("precision", "float64"))
    return problem


def run_track_job(prepared: str | Path, spec: dict, rows_out: str | Path, source_dir: str | Path | None = None,
                  ledger_out: str | Path | None = None) -> pd.DataFrame:
    """Run every repetition of one track job (``spec``: :func:`expand_tracks`), write its ledger
    (``ledger_out``, default :func:`~dpnewton.pipeline.run_ledger.ledger_path` of the rows), then its rows;
    returns the rows as written (with their ``file_rows`` column)."""
    if spec["track"] not in UNITS:
        raise ValueError(f"track {spec['track']!r} is unknown; choose one of {list(UNITS)}")
    problem = track_problem(prepared, spec)
    prov = provenance(spec, prepared, source_dir)
    partial = checkpoint_dir(rows_out)
    reps = [int(r) for r in spec["repetitions"]]
    log.info("track %s: %s on %s, eps=%s, %d repetitions, n=%d d=%d %s config_hash=%s", spec["track"],
             spec["method"], spec["dataset"], spec["eps_label"], len(reps), problem.n, problem.d,
             problem.precision, prov["config_hash"])
    rows, ledgers = [], []
    for k, rep in enumerate(reps, 1):
        key = {"config_hash": prov["config_hash"], "repetition": rep}
        unit = partial / f"repetition{rep}.pkl"
        done = load_checkpoint(unit, key)
        resumed = done is not None
        if not resumed:
            fields, ledger, conversion = UNITS[spec["track"]](problem, spec, rep)
            row = {"track": spec["track"], "dataset": spec["dataset"], "method": spec["method"],
                   "base_algorithm": spec["base_algorithm"], "epsilon": float(spec["epsilon"]),
                   "eps_label": spec["eps_label"], "repetition": rep, "n": problem.n, "d": problem.d,
                   **fields, **prov, "timestamp_utc": utc_timestamp()}
            done = {"rows": [flatten_record(row)], "curves": [], "ledger": _ledger(ledger, row, conversion)}
            save_checkpoint(unit, key, done)
        row = done["rows"][0]
        rows.append(row)
        ledgers.append(unit_ledger(done, unit))
        log.info("progress %d/%d repetitions: T=%s (%s) excess_loss=%.6g%s", k, len(reps),
                 row["selected_iterations"], row["selected_variant"], row["excess_loss"],
                 " [from checkpoint]" if resumed else "")
    write_ledger(ledger_path(rows_out) if ledger_out is None else ledger_out, ledgers)
    frame = atomic_write_csv(rows_out, pd.DataFrame(rows))  # last, with its row count (dpnewton.io.check_csv)
    shutil.rmtree(partial, ignore_errors=True)
    return frame


def _ledger(ledger: PrivacyLedger | None, row: dict, conversion: str) -> list[pd.DataFrame]:
    """The ledger rows of one repetition's released model (none without one: K = 0)."""
    if ledger is None:
        return []
    record = {"dataset": row["dataset"], "algorithm": row["method"], "conversion": conversion,
              "epsilon": row["epsilon"], "seed": row["seed"], "iterations": row["selected_iterations"]}
    return [ledger_frame(ledger, record, row["config_hash"])]


#: the fix of a damaged track ledger: its rows file goes with it (the ledger is written first)
LEDGER_FIX = ("delete it and {rows}, then run `snakemake {rows}` (the target before your other options): "
              "rule run_track recomputes both")


def read_track_ledger(rows_out: str | Path) -> pd.DataFrame:
    """The privacy ledger of the track job whose rows file is ``rows_out``, verified
    (:func:`dpnewton.io.read_parquet`): one row per release of each repetition's released model,
    :data:`~dpnewton.pipeline.run_ledger.LEDGER_COLUMNS`."""
    return read_parquet(ledger_path(rows_out), fix=LEDGER_FIX.replace("{rows}", str(rows_out)))


# ---------------------------------------------------------------------------------------------
# jobs from the config, and the table
# ---------------------------------------------------------------------------------------------
def track_stem(track: str, dataset: str, method: str, eps_label: str) -> str:
    return f"results/tracks/{track}/{dataset}/{method}/eps~{eps_label}"


def _variant(plan, label: str, name: str) -> dict:
    if name not in plan.algorithms:
        raise ValueError(f"config tracks: method {label!r} names variant {name!r}, which is not a key of "
                         f"algorithms ({', '.join(plan.algorithms)})")
    return plan.algorithms[name]


def _selection_methods(plan, entry: dict) -> dict[str, dict]:
    """label -> {'base', 'configurations'}: every (variant, T) of the declared grid, variants first."""
    out = {}
    for label, m in entry["methods"].items():
        variants = [(v, _variant(plan, label, v)) for v in m["variants"]]
        bases = {a["base"] for _, a in variants}
        if len(bases) != 1:
            raise ValueError(f"config tracks.selection.methods.{label}: its variants run different "
                             f"algorithms {sorted(bases)}; one method selects over one algorithm")
        configs = [{"variant": v, "iterations": int(T), "hyper": dict(a["hyper"])}
                   for v, a in variants for T in sorted({int(t) for t in m["iterations"]})]
        out[label] = {"base": bases.pop(), "configurations": configs}
    return out


def expand_tracks(cfg: dict, plan) -> list[tuple[str, dict]]:
    """(output stem, job spec) of every track job of a filled config (``cfg['tracks']``; absent = none).

    ``plan``: the config's :class:`dpnewton.pipeline.config.Plan` (datasets, variants, epsilons). The
    holdout and ``precision`` enter the specs only when they are not the default (off, float64)."""
    entry = cfg.get("tracks")     # no schema default: absent = no tracks
    if not entry:
        return []
    epsilons = entry["epsilons"] if entry["epsilons"] is not None else cfg["epsilons"]
    datasets = [d for d in (entry["datasets"] or list(plan.datasets)) if d in plan.datasets]
    reps = list(range(int(entry["repetitions"])))
    precision = cfg.get("precision", "float64")      # no schema default (absent = float64), as in plan.expand
    common = {"delta": cfg["delta"], "repetitions": reps, **({"holdout": plan.holdout} if plan.holdout else {}),
              **({"precision": precision} if precision != "float64" else {})}
    jobs = []
    selection = entry.get("selection")
    methods = _selection_methods(plan, selection) if selection else {}
    fixed = (entry.get("fixed") or {}).get("methods", {})
    for ds in datasets:
        for e in epsilons:
            base = {**common, "dataset": ds, "dataset_options": plan.datasets[ds]["options"],
                    "epsilon": float(e), "eps_label": eps_label(e)}
            for label, m in methods.items():
                spec = {**base, "track": "private-selection", "method": label, "base_algorithm": m["base"],
                        "configurations": m["configurations"], "distribution": dict(selection["distribution"]),
                        "score_frac": selection["score_frac"], "score_clip": selection["score_clip"]}
                jobs.append((track_stem("private-selection", ds, label, spec["eps_label"]), spec))
            for label, f in fixed.items():
                a = _variant(plan, label, f["variant"])
                spec = {**base, "track": "fixed-rule", "method": label, "base_algorithm": a["base"],
                        "variant": f["variant"], "hyper": dict(a["hyper"]), "iterations": f["iterations"],
                        "max_iterations": f["max_iterations"], "conversion": cfg["conversion"]}
                jobs.append((track_stem("fixed-rule", ds, label, spec["eps_label"]), spec))
    return jobs


TABLE_KEYS = ["track", "dataset", "method", "epsilon"]


def track_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (track, dataset, method, epsilon): the mean excess loss of the released model over the
    repetitions with its standard error, the number of configurations, E[K], the selected T's
    median and range, and the mean iterations spent by all candidates (the tuning's compute)."""
    g = rows.groupby(TABLE_KEYS, sort=True)
    out = g.agg(repetitions=("excess_loss", "size"), excess_loss=("excess_loss", "mean"),
                excess_loss_sd=("excess_loss", "std"), n_configurations=("n_configurations", "first"),
                median_T=("selected_iterations", "median"), min_T=("selected_iterations", "min"),
                max_T=("selected_iterations", "max"),
                mean_candidate_iterations=("secret_candidate_iterations", "mean")).reset_index()
    out["excess_loss_se"] = out["excess_loss_sd"] / np.sqrt(out["repetitions"])
    if "expected_k" in rows:
        out = out.merge(g["expected_k"].first().reset_index(), on=TABLE_KEYS, how="left")
    return out.drop(columns="excess_loss_sd")


#: track -> the name of its table under results/tables/ (and of rule tracks_table's output)
TABLE_NAMES = {"private-selection": "private_selection", "fixed-rule": "fixed_rule"}


#: the fix of a damaged track rows file
ROWS_FIX = "delete it and run `snakemake {path}` (the target before your other options): rule run_track recomputes it"


def read_track_rows(path) -> pd.DataFrame:
    """A track job's rows, verified (:func:`dpnewton.io.check_csv`: complete, its row count, at least
    one row); a damaged file raises :class:`dpnewton.io.DamagedFileError` naming it and the fix."""
    return read_csv(path, min_rows=1, fix=ROWS_FIX, dtype={"eps_label": str})


def write_track_tables(row_files, outputs: dict[str, tuple[str | Path, str | Path]]) -> pd.DataFrame:
    """The tables of the jobs' row files (:func:`track_table`; each file verified by
    :func:`read_track_rows`), one per track: ``outputs`` maps a track to its (parquet, csv) paths; a
    track without jobs gets an empty table. Written atomically (parquet with page CRCs, a CSV mirror)."""
    frames = [read_track_rows(f) for f in row_files]
    table = track_table(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame(columns=TABLE_KEYS)
    for track, (parquet, csv) in outputs.items():
        part = table[table["track"] == track]
        write_frame(part, parquet, csv)
    return table
