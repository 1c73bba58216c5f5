"""The T-grid search with a seed-0 probe, replayed on the recorded losses of the claims run.

The pipeline's T search (:func:`dpnewton.pipeline.jobs.run_job`) runs every seed of a job at every T
of the declared grid, then extends the grid one T per round (:func:`~dpnewton.pipeline.t_search.next_extension`):
while the best T (:func:`dpnewton.pipeline.selection.best_t` of the means over seeds) is the largest T
so far it runs T x factor, while it is the smallest (and > 1) max(1, T // factor), every seed each time.

Probe rule (:func:`dpnewton.pipeline.t_search.probe_passes`, ``tuning.probe_first_seed``): in each extension
round the smallest seed runs the new T alone first. If its excess loss at the new T is above every seed's
excess loss at the current best T (best by the mean over all seeds, so every seed's loss there is finite;
a non-finite probe never passes), the search stops there: the other seeds do not run the new T, the T
does not join the grid and no later round follows.
A passed probe lets the other seeds run it, which gives the state of the full rule; so the probe rule
can only stop the recorded sequence early, never choose another T. The replay asserts this: at every
recorded round the new T is the one ``next_extension`` proposes for the rows so far, the declared
grids are protocol.json's, and every job has every seed at every T. For comparison the replay also
runs two stricter probe tests (:data:`RULES`): the probe against its own loss at the best T, and against
the mean over seeds there.

Input: the claims run's tables at a git commit (``runs.parquet``, ``best_T.csv``, ``protocol.json``
under benchmarks/claims_run/results/tables/, read with ``git show``) or a folder holding them.
Per job (dataset, algorithm, conversion, epsilon): the stopping round, the runs the probe rule would
not run and their ``runtime_s``, the best T under both rules (the full one checked against
best_T.csv) and the mean excess loss at the probe rule's best T over the full rule's best mean.
``runtime_s`` is each run's timed update time (the library's update timer, a batch's step time
shared equally among its runs), not the job's wall time: loading, losses, curves and writing are
outside it, and a probe run alone forgoes the batch's sharing (dp-gd, dp-gd-oracle, precond-dp-gd
run their seeds as one batch), which the replay does not charge.

Writes results/t_search_replay.csv (per job), the section results/t_search_replay.md and rebuilds
benchmarks/README.md (with ``--out`` elsewhere: the CSV, the section and its env json there only).
Reads tables only (pandas); about a minute on one core:

    python benchmarks/t_search_replay.py [--commit 7397001] [--tables DIR] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

import common
from dpnewton.pipeline.t_search import next_extension, probe_passes as pipeline_probe_passes
from dpnewton.pipeline.selection import best_t, mean_per_t

NAME = "t_search_replay"
TABLES = "benchmarks/claims_run/results/tables"
KEYS = ["dataset", "algorithm", "conversion", "epsilon"]
#: base algorithms whose seeds run as one batch (iterate_batched): a lone probe run loses the sharing
BATCHED = ("dp-gd", "dp-gd-oracle", "precond-dp-gd")
#: the saving and the share of cells keeping their best T stated when the rule was proposed
REPORTED_SAVED, REPORTED_KEPT = 0.202, 0.987
NO_CAP = 2 ** 62
#: probe tests: does the first seed's loss at the new T let the round go on? ``max`` is the pipeline's
#: (not above every seed's loss at the current best T); ``seed`` / ``mean`` compare with its own loss /
#: the mean over seeds at the best T instead, for comparison only
RULES = {"max": "not above every seed's loss at the best T (the pipeline's rule)",
         "seed": "below its own loss at the best T",
         "mean": "below the mean over seeds at the best T"}
ADOPTED = "max"


def probe_passes(rule: str, at_new: float, at_best: np.ndarray, probe_at_best: float) -> bool:
    """The probe test of ``rule`` (:data:`RULES`); ``at_best``: every seed's loss at the current best T,
    all finite (the best T's mean is finite). A non-finite probe never passes (NaN compares False)."""
    if rule == "seed":
        return bool(at_new < probe_at_best)
    if rule == "mean":
        return bool(at_new < float(np.mean(at_best)))
    if rule == "max":
        return pipeline_probe_passes(at_new, [float(x) for x in at_best])
    raise ValueError(f"unknown probe rule {rule!r}: one of {', '.join(RULES)}")


def replay_job(rows: pd.DataFrame, factor: int = 2, declared: list[int] | None = None, rule: str = ADOPTED) -> dict:
    """Replay the probe rule on the rows of one job (columns seed, iterations, excess_loss, runtime_s,
    grid_round); ``declared``: the declared grid to check round 0 against; ``rule``: the probe test.

    Returns the job's record: ``rounds`` (extension rounds recorded), ``stop_round`` (the round whose
    probe fails, 0 when none does), ``best_T_full`` / ``best_T_probe``, the mean excess loss at each and
    ``mean_ratio`` (probe / full), runs and ``runtime_s`` in total, in extension rounds, ``*_saved`` (the
    runs the probe rule does not run) and ``runtime_wasted_probe_s`` (the failed probe's run, included
    in the cost), ``probe_runtime_passed_s`` (the passed probes' runs)."""
    rows = rows[["seed", "iterations", "excess_loss", "runtime_s", "grid_round"]].sort_values(
        ["grid_round", "iterations", "seed"])
    seeds = sorted(int(s) for s in rows["seed"].unique())
    first = seeds[0]
    per_t = rows.groupby("iterations")["seed"].agg(lambda s: sorted(int(x) for x in s))
    assert all(s == seeds for s in per_t), "every seed runs every T exactly once"
    round_t = rows.groupby("grid_round")["iterations"].unique()
    assert list(round_t.index) == list(range(len(round_t))), "grid rounds 0, 1, 2, ..."
    grid = sorted(int(t) for t in round_t.loc[0])
    if declared is not None:
        assert grid == sorted(declared), f"round 0 {grid} is not the declared grid {sorted(declared)}"
    full_means = mean_per_t(rows)
    full_best = best_t(full_means)
    loss = rows.set_index(["seed", "iterations"])["excess_loss"]
    full = rows[rows["grid_round"] == 0]       # the rows of the recorded (full) search so far
    state = full                                # the probe rule's, the same until it stops
    rounds = len(round_t) - 1
    stop_round, passed_s = 0, 0.0
    saved = wasted = rows.iloc[:0]
    ext = {"factor": factor, "max_iterations": NO_CAP}
    for k in range(1, rounds + 1):
        ts = [int(t) for t in round_t.loc[k]]
        proposed = next_extension(full[["iterations", "excess_loss"]].to_dict("records"), grid, ext)
        assert ts == proposed, f"round {k} ran T={ts}; the rule proposes {proposed} for the rows before it"
        this = rows[rows["grid_round"] == k]
        if not stop_round:
            # until it stops, the probe rule's rows are the full search's: it is offered the recorded T
            new_t, current = ts[0], best_t(mean_per_t(state))
            at_best = state.loc[state["iterations"] == current, "excess_loss"].to_numpy(dtype=float)
            if probe_passes(rule, float(loss[(first, new_t)]), at_best, float(loss[(first, current)])):
                passed_s += float(this.loc[this["seed"] == first, "runtime_s"].sum())
            else:
                stop_round = k
                saved = rows[(rows["grid_round"] > k) | ((rows["grid_round"] == k) & (rows["seed"] != first))]
                wasted = this[this["seed"] == first]
        full = pd.concat([full, this])
        grid = sorted(grid + ts)
        if not stop_round:
            state = full
    # the probe rule's grid is the recorded rounds before its stop: it stopped earlier, chose no other T
    assert sorted(state["grid_round"].unique()) == list(range(stop_round or rounds + 1))
    final = next_extension(rows[["iterations", "excess_loss"]].to_dict("records"), list(full_means.index), ext)
    assert not final or final[0] > max(full_means.index), f"the downward step to T={final} was never run"
    probe_means = mean_per_t(state)
    probe_best = best_t(probe_means)
    mean_full = float(full_means[full_best]) if full_best is not None else np.nan
    mean_probe = float(full_means[probe_best]) if probe_best is not None else np.nan
    ext_rows = rows[rows["grid_round"] > 0]
    return {"seeds": len(seeds), "rounds": rounds, "stop_round": stop_round,
            "stop": "none" if not stop_round else ("last round" if stop_round == rounds else "earlier round"),
            "grid_full": " ".join(str(int(t)) for t in full_means.index),
            "grid_probe": " ".join(str(int(t)) for t in probe_means.index),
            "best_T_full": full_best, "best_T_probe": probe_best, "same_best_T": probe_best == full_best,
            "mean_full": mean_full, "mean_probe": mean_probe,
            "mean_ratio": mean_probe / mean_full if mean_full > 0 else (1.0 if mean_probe == mean_full else np.nan),
            "runs": len(rows), "runs_extension": len(ext_rows), "runs_saved": len(saved),
            "runtime_s": float(rows["runtime_s"].sum()), "runtime_extension_s": float(ext_rows["runtime_s"].sum()),
            "runtime_saved_s": float(saved["runtime_s"].sum()),
            "runtime_wasted_probe_s": float(wasted["runtime_s"].sum()), "probe_runtime_passed_s": passed_s}


def replay(runs: pd.DataFrame, factor: int = 2, grids: dict | None = None, rule: str = ADOPTED) -> pd.DataFrame:
    """:func:`replay_job` for every job of ``runs`` (KEYS), one row per job with its keys and base algorithm."""
    out = []
    for key, rows in runs.groupby(KEYS, sort=True):
        rec = replay_job(rows, factor, (grids or {}).get(key[1]), rule)
        base = rows["base_algorithm"].iloc[0] if "base_algorithm" in rows else key[1]
        out.append({**dict(zip(KEYS, key)), "base": base, **rec})
    return pd.DataFrame(out)


# ---- input ---------------------------------------------------------------------------------------
def read_tables(commit: str | None, folder: Path | None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(runs, best_T, protocol) from ``folder`` or from the claims run's tables at ``commit``."""
    def raw(name: str) -> bytes:
        if folder is not None:
            return (folder / name).read_bytes()
        return common.committed_file(commit, f"{TABLES}/{name}")

    runs = pd.read_parquet(io.BytesIO(raw("runs.parquet")))
    best = pd.read_csv(io.BytesIO(raw("best_T.csv")))
    return runs, best, json.loads(raw("protocol.json"))


def with_published(jobs: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """``jobs`` with the published best T (best_T.csv) as ``best_T_published``."""
    published = best[KEYS + ["best_T"]].rename(columns={"best_T": "best_T_published"})
    return jobs.merge(published, on=KEYS, how="left", validate="one_to_one")


# ---- summaries -----------------------------------------------------------------------------------
def summarize(jobs: pd.DataFrame, by: str | None = None) -> pd.DataFrame:
    """Savings and kept best T, over all ``jobs`` or per value of ``by``."""
    groups = [("all", jobs)] if by is None else list(jobs.groupby(by, sort=True))
    out = []
    for name, g in groups:
        ext = g[g["rounds"] > 0]
        changed = g[~g["same_best_T"]]
        runtime, extension, saved = g["runtime_s"].sum(), g["runtime_extension_s"].sum(), g["runtime_saved_s"].sum()
        out.append({by or "scope": name, "jobs": len(g), "extended": len(ext),
                    "stopped_last": int((g["stop"] == "last round").sum()),
                    "stopped_earlier": int((g["stop"] == "earlier round").sum()),
                    "runs_saved": int(g["runs_saved"].sum()),
                    "runs_saved_pct": 100 * g["runs_saved"].sum() / g["runs"].sum(),
                    "runtime_h": runtime / 3600, "runtime_saved_h": saved / 3600,
                    "saved_pct_of_all": 100 * saved / runtime,
                    "saved_pct_of_extension": 100 * saved / extension if extension > 0 else np.nan,
                    "wasted_probe_pct": 100 * g["runtime_wasted_probe_s"].sum() / runtime,
                    "same_best_T_pct": 100 * g["same_best_T"].mean(),
                    "same_best_T_pct_extended": 100 * ext["same_best_T"].mean() if len(ext) else np.nan,
                    "changed": len(changed),
                    "ratio_median": float(changed["mean_ratio"].median()) if len(changed) else np.nan,
                    "ratio_max": float(changed["mean_ratio"].max()) if len(changed) else np.nan})
    return pd.DataFrame(out)


def readings(jobs: pd.DataFrame) -> dict[str, float]:
    """The saved and kept shares (%) under the denominators a summary could use."""
    ext, bs16 = jobs[jobs["rounds"] > 0], jobs[jobs["conversion"] == "bs16"]
    saved, wasted = jobs["runtime_saved_s"].sum(), jobs["runtime_wasted_probe_s"].sum()
    stopped, runtime = jobs["stop_round"] > 0, jobs["runtime_s"].sum()
    return {"runtime saved / runtime of all runs": 100 * saved / runtime,
            "runtime saved / runtime of the extended jobs": 100 * saved / ext["runtime_s"].sum(),
            "runtime saved / runtime of extension rounds": 100 * saved / jobs["runtime_extension_s"].sum(),
            "runtime saved incl. the failed probes / runtime of all runs": 100 * (saved + wasted) / runtime,
            "runtime saved / runtime of all runs, bs16 jobs":
                100 * bs16["runtime_saved_s"].sum() / bs16["runtime_s"].sum(),
            "runs saved / all runs": 100 * jobs["runs_saved"].sum() / jobs["runs"].sum(),
            "runs saved / extension-round runs": 100 * jobs["runs_saved"].sum() / jobs["runs_extension"].sum(),
            "runs saved incl. the failed probes / all runs": 100 * (jobs["runs_saved"].sum() + stopped.sum())
            / jobs["runs"].sum(),
            "jobs keeping their best T / all jobs": 100 * jobs["same_best_T"].mean(),
            "jobs keeping their best T / extended jobs": 100 * ext["same_best_T"].mean(),
            "jobs keeping their best T / bs16 jobs": 100 * bs16["same_best_T"].mean()}


# ---- section -------------------------------------------------------------------------------------
PER_JOB = ["dataset", "algorithm", "base", "conversion", "epsilon", "rounds", "stop_round", "stop", "best_T_full",
           "best_T_probe", "best_T_published", "mean_ratio", "runs_saved", "runtime_saved_s", "runs",
           "runs_extension", "runtime_s", "runtime_extension_s", "runtime_wasted_probe_s", "probe_runtime_passed_s",
           "mean_full", "mean_probe", "grid_full", "grid_probe", "seeds"]
SUMMARY_COLS = ["jobs", "extended", "stopped_last", "stopped_earlier", "runs_saved", "runs_saved_pct", "runtime_h",
                "runtime_saved_h", "saved_pct_of_all", "saved_pct_of_extension", "wasted_probe_pct", "same_best_T_pct",
                "same_best_T_pct_extended", "changed", "ratio_median", "ratio_max"]
FMT = {"runs_saved_pct": ".1f", "runtime_h": ".2f", "runtime_saved_h": ".2f", "saved_pct_of_all": ".1f",
       "saved_pct_of_extension": ".1f", "wasted_probe_pct": ".1f", "same_best_T_pct": ".1f",
       "same_best_T_pct_extended": ".1f", "ratio_median": ".3f", "ratio_max": ".3f", "epsilon": "g",
       "mean_ratio": ".3f", "mean_full": ".4g", "mean_probe": ".4g", "rule_seed": ".1f", "rule_mean": ".1f",
       "rule_max": ".1f"}


def summary_table(jobs: pd.DataFrame, by: str | None = None) -> str:
    return common.md_table(summarize(jobs, by).to_dict("records"), [by or "scope"] + SUMMARY_COLS, FMT)


def section(jobs: pd.DataFrame, variants: dict[str, pd.DataFrame], source: str, batch_penalty: float) -> str:
    total = summarize(jobs).iloc[0]
    read = {rule: readings(v) for rule, v in variants.items()}
    compare = [{"reading": r, **{f"rule_{rule}": read[rule][r] for rule in variants}} for r in read[ADOPTED]]
    changed = jobs[~jobs["same_best_T"]].sort_values("mean_ratio", ascending=False)
    published = jobs["best_T_published"]
    batched = jobs["base"].isin(BATCHED)
    penalty = batch_penalty * jobs.loc[batched, "probe_runtime_passed_s"].sum()
    head = read[ADOPTED]
    kind = jobs[jobs["stop_round"] > 0].groupby("stop").agg(
        jobs=("stop", "size"), changed=("same_best_T", lambda x: int((~x).sum())),
        h=("runtime_saved_s", lambda x: x.sum() / 3600)).reindex(["last round", "earlier round"], fill_value=0)
    own = read.get("seed", {})
    md = [
        f"Replay of the claims run's recorded losses ({source}): {int(total['jobs'])} jobs = (dataset, "
        f"configuration, conversion, epsilon), {int(jobs['runs'].sum())} runs of seeds "
        f"0..{int(jobs['seeds'].max()) - 1}; "
        f"{int(total['extended'])} jobs extended their declared grid. Probe rule (the pipeline's): in every "
        "extension round seed 0 runs the new T first; if its excess loss there is above every seed's at the current "
        "best T (best by the mean over seeds) the search stops: the other seeds skip that T and no later round runs. "
        "Both best T are `dpnewton.pipeline.selection.best_t` of the means over seeds; the full-grid one equals "
        f"best_T.csv for {int((published == jobs['best_T_full']).sum())} of {int(published.notna().sum())} jobs. "
        "Asserted on every job: each recorded round's T is the one `next_extension` proposes for the rows before "
        "it (so a passed probe leaves the full rule's state and the probe rule can only stop earlier), round 0 "
        "is protocol.json's grid and every seed ran every T. Cost = `runtime_s`, each run's timed update time "
        "(a batch's step time shared among its runs), not job wall time.",
        "",
        "**Overall** (`t_search_replay.csv` per job; `saved_pct_of_all` = runtime_s of the runs the probe rule "
        "skips / runtime_s of all runs, `saved_pct_of_extension` the same / runtime_s of the extension rounds' "
        "runs; `wasted_probe_pct`: the failed probes' runs, already netted out; `stopped_last` / "
        "`stopped_earlier`: the probe fails in the job's last recorded round (where the full rule ran the T only "
        "to find it worse) / in an earlier one; `ratio_*`: mean excess loss at the probe rule's best T over the "
        "full search's best mean, over the `changed` jobs):", "",
        summary_table(jobs), "",
        "**By algorithm family** (base algorithm):", "", summary_table(jobs, "base"), "",
        "**By epsilon:**", "", summary_table(jobs, "epsilon"), "",
        "**By conversion:**", "", summary_table(jobs, "conversion"), "",
        "**Jobs whose best T changes** (largest loss ratio first):", "",
        common.md_table(changed.to_dict("records"),
                        ["dataset", "algorithm", "conversion", "epsilon", "rounds", "stop_round", "best_T_full",
                         "best_T_probe", "mean_full", "mean_probe", "mean_ratio"], FMT), "",
        f"**Other denominators and probe tests** (%; the request for the rule reported {100 * REPORTED_SAVED:.1f} % "
        f"saved and {100 * REPORTED_KEPT:.1f} % of cells keeping their best T). Probe tests: "
        + "; ".join(f"`{rule}`: the probe's loss {text}" for rule, text in RULES.items() if rule in variants) + ".", "",
        common.md_table(compare, ["reading"] + [f"rule_{rule}" for rule in variants], FMT), "",
        "### Reading the replay", "",
        f"The probe rule skips {head['runtime saved / runtime of all runs']:.1f} % of the claims run's timed update "
        f"time ({total['runtime_saved_h']:.2f} of {total['runtime_h']:.2f} h; "
        f"{head['runtime saved / runtime of extension rounds']:.1f} % of the extension rounds'), and "
        f"{head['jobs keeping their best T / all jobs']:.1f} % of all jobs "
        f"({head['jobs keeping their best T / extended jobs']:.1f} % of the extended ones) keep their best T. "
        f"Most of it ({kind.loc['last round', 'h']:.2f} h) is the last recorded round, which the full rule runs on "
        f"every seed only to find the new T worse ({int(kind.loc['last round', 'jobs'])} jobs; "
        f"{int(kind.loc['last round', 'changed'])} change their best T, where the full search ended at T = 1 or its "
        f"cap); the other {kind.loc['earlier round', 'h']:.2f} h come from {int(kind.loc['earlier round', 'jobs'])} "
        "jobs whose seed 0 stops the search before the full rule's best T, so all of them change it, and over the "
        f"{int(total['changed'])} changed jobs the chosen model's mean excess loss is {total['ratio_median']:.3f}x "
        f"the full search's (median; at worst {total['ratio_max']:.3f}x). "
        f"This rule comes near the {100 * REPORTED_SAVED:.1f} % / {100 * REPORTED_KEPT:.1f} % reported when the "
        "probe was proposed; the stricter test against the probe's own loss at the best T saves more "
        f"({own.get('runtime saved / runtime of all runs', np.nan):.1f} %) but keeps the best T of fewer jobs "
        f"({own.get('jobs keeping their best T / all jobs', np.nan):.1f} %), so the pipeline uses this one. "
        f"A lone probe is charged its batch share here; at {1 + batch_penalty:.2f}x that share for the batched "
        f"families ({', '.join(BATCHED)}; batching.md's batch gain), the passed probes would cost "
        f"{100 * penalty / jobs['runtime_s'].sum():.1f} % more and the saving would be "
        f"{head['runtime saved / runtime of all runs'] - 100 * penalty / jobs['runtime_s'].sum():.1f} %; job wall "
        "time, which adds loading, loss curves and one more batch per round, is not replayed.",
    ]
    return "\n".join(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commit", default="7397001", help="git commit holding the claims run's tables")
    ap.add_argument("--tables", type=Path, help="a folder with runs.parquet, best_T.csv, protocol.json (not git)")
    ap.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    ap.add_argument("--batch-penalty", type=float, default=0.35,
                    help="extra cost of a lone probe run over its batch share, for the batched families")
    args = ap.parse_args()
    runs, best, protocol = read_tables(None if args.tables else args.commit, args.tables)
    factor, grids = int(protocol["grid_extension_factor"]), protocol.get("grids")
    variants = {rule: replay(runs, factor, grids, rule) for rule in RULES}
    jobs = with_published(variants[ADOPTED], best)
    source = f"`{args.tables}`" if args.tables else f"`{TABLES}/` at commit {args.commit}"
    md = section(jobs, variants, source, args.batch_penalty)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    jobs[PER_JOB].to_csv(out / f"{NAME}.csv", index=False)
    if out == common.RESULTS_DIR.resolve():
        common.write_section(NAME, md)
    else:
        (out / f"{NAME}.md").write_text(md.rstrip() + "\n")
        (out / f"{NAME}.env.json").write_text(json.dumps(common.environment(), indent=1, default=str))
    print(md)


if __name__ == "__main__":
    main()
