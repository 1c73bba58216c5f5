"""Compute-budget frontier (dpnewton.pipeline.frontier): known answers on hand-made tables, the
pass-equivalent accounting, the crossover rule, and one tiny pipeline run (the session's reference
run of tests/workflow/test_determinism.py) that produces the table and Figure 6."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from dpnewton.algorithms import ALGORITHMS, ROLES
from dpnewton.algorithms import costs as C
from dpnewton.pipeline import frontier as F

N, D = 1000, 10
#: hess-clip's passes per update at (N, D): 1 + G + E
HESS = 1.0 + C.GRAM_PER_D * D + C.EIGH_PER_D2_OVER_N * D * D / N
INF = float("inf")


def summary() -> pd.DataFrame:
    """Two methods, three Ts: dp-gd (configurations dp-gd and dp-gd-s16) and hess-clip."""
    rows = []
    means = {("dp-gd", "dp-gd"): [0.5, 0.3, INF], ("dp-gd-s16", "dp-gd"): [0.6, 0.3, 0.1],
             ("hess-clip", "hess-clip"): [float("nan"), 0.2, 0.05]}
    for (alg, base), ms in means.items():
        for T, m in zip([1, 2, 4], ms):
            rows.append({"dataset": "s", "algorithm": alg, "conversion": "bs16", "epsilon": 1.0, "iterations": T,
                         "excess_loss_mean": m, "base_algorithm": base,
                         "hyper": '{"step": 16.0}' if alg == "dp-gd-s16" else "{}"})
    return pd.DataFrame(rows)


#: lone-run costs (first, per update): dp-gd-s16 was not timed
COSTS = {("s", "dp-gd"): (1.0, 0.5), ("s", "hess-clip"): (3.0, 2.0)}


def value(long, measure, method, budget):
    r = long[(long["measure"] == measure) & (long["method"] == method) & np.isclose(long["budget"], budget)]
    assert len(r) == 1
    return r.iloc[0]


def test_pass_frontier_known_values():
    budgets = {("s", "passes"): [0.5, 1.0, 2.0, 3.9, 4.0, HESS, 2 * HESS, 4 * HESS],
               ("s", "runtime_s"): [0.5]}
    long = F.frontier_long(summary(), {"s": (N, D)}, COSTS, budgets)
    # a budget below every cost: NaN
    r = value(long, "passes", "dp-gd", 0.5)
    assert math.isnan(r["best_excess_loss"]) and r["best_algorithm"] == "" and pd.isna(r["best_T"])
    r = value(long, "passes", "dp-gd", 1.0)
    assert (r["best_excess_loss"], r["best_algorithm"], r["best_T"], r["best_cost"]) == (0.5, "dp-gd", 1, 1.0)
    # a tie (0.3 at T=2 in both configurations, same cost): the configuration name decides
    for b in (2.0, 3.9):  # T=4 (4 passes) is outside 3.9
        r = value(long, "passes", "dp-gd", b)
        assert (r["best_excess_loss"], r["best_algorithm"], r["best_T"]) == (0.3, "dp-gd", 2)
    # at 4 passes: dp-gd's T=4 is inf (never wins), dp-gd-s16's T=4 wins
    r = value(long, "passes", "dp-gd", 4.0)
    assert (r["best_excess_loss"], r["best_algorithm"], r["best_T"]) == (0.1, "dp-gd-s16", 4)
    assert r["configurations"] == 2 and r["costed"] == 2
    # hess-clip: T=1 has a NaN mean, so its first budget has nothing
    assert math.isnan(value(long, "passes", "hess-clip", HESS)["best_excess_loss"])
    assert value(long, "passes", "hess-clip", 2 * HESS)["best_excess_loss"] == 0.2
    r = value(long, "passes", "hess-clip", 4 * HESS)
    assert r["best_excess_loss"] == 0.05 and r["best_cost"] == pytest.approx(4 * HESS)
    assert set(long["role"]) == {"first-order", "second-order"}


def test_runtime_frontier_untimed_configuration():
    budgets = {("s", "runtime_s"): [0.9, 1.0, 1.5, 2.5, 5.0, 9.0], ("s", "passes"): [1.0]}
    long = F.frontier_long(summary(), {"s": (N, D)}, COSTS, budgets)
    assert math.isnan(value(long, "runtime_s", "dp-gd", 0.9)["best_excess_loss"])
    assert value(long, "runtime_s", "dp-gd", 1.0)["best_excess_loss"] == 0.5
    # dp-gd-s16 (not timed) never fits: at 2.5 s dp-gd's T=4 is inf, so T=2 of dp-gd stays best
    r = value(long, "runtime_s", "dp-gd", 2.5)
    assert (r["best_excess_loss"], r["best_algorithm"], r["best_T"], r["best_cost"]) == (0.3, "dp-gd", 2, 1.5)
    assert r["costed"] == 1 and r["note"] == "1 of 2 configurations not costed"
    assert value(long, "runtime_s", "hess-clip", 5.0)["best_excess_loss"] == 0.2
    assert value(long, "runtime_s", "hess-clip", 9.0)["best_excess_loss"] == 0.05
    # no timed configuration at all: NaN everywhere, said in the note
    long = F.frontier_long(summary(), {"s": (N, D)}, {}, budgets)
    r = long[(long["measure"] == "runtime_s")]
    assert r["best_excess_loss"].isna().all() and set(r["note"]) == {"not timed"} and (r["costed"] == 0).all()


def test_one_shot_cost_from_its_newton_steps():
    """objpert took 4 Newton steps on average: 5 fused passes (1 + G), 4 factorisations (E) and the final
    gradient check in passes; 5 lone-run hess-clip updates (first 3 s, then 2 s each) in runtime."""
    G, E = C.GRAM_PER_D * D, C.EIGH_PER_D2_OVER_N * D * D / N
    assert C.solve_passes(4, N, D) == pytest.approx(5 * 2.31 + 4 * 0.2166 + 1)
    assert C.solve_passes(4, N, D) == pytest.approx(5 * (1 + G) + 4 * E + 1)
    assert math.isnan(C.solve_passes(float("nan"), N, D))
    one_shot = pd.DataFrame([{"dataset": "s", "algorithm": "objpert", "conversion": "bs16", "epsilon": 1.0,
                              "iterations": 1, "excess_loss_mean": 0.04, "base_algorithm": "objpert", "hyper": "{}",
                              "solver_steps_mean": 4.0}])
    s = pd.concat([summary().assign(solver_steps_mean=np.nan), one_shot], ignore_index=True)
    passes = C.solve_passes(4, N, D)
    budgets = {("s", "passes"): [passes * 0.99, passes], ("s", "runtime_s"): [10.9, 11.0]}
    long = F.frontier_long(s, {"s": (N, D)}, COSTS, budgets)
    assert math.isnan(value(long, "passes", "objpert", passes * 0.99)["best_excess_loss"])
    r = value(long, "passes", "objpert", passes)
    assert (r["best_excess_loss"], r["best_T"], r["role"]) == (0.04, 1, "one-shot")
    assert r["note"] == F.one_shot_note("objpert", "passes")
    assert math.isnan(value(long, "runtime_s", "objpert", 10.9)["best_excess_loss"])
    r = value(long, "runtime_s", "objpert", 11.0)
    note = "modelled: (Newton steps + 1) x the timed hess-clip update"      # objpert's card: timed_as hess-clip
    assert (r["best_excess_loss"], r["best_cost"], r["note"]) == (0.04, 11.0, note)
    # not a candidate of the winner by budget: the crossover rows are those of the other methods alone
    assert F.crossover(long).equals(F.crossover(F.frontier_long(summary(), {"s": (N, D)}, COSTS, budgets)))
    # without a timed hess-clip or recorded steps, no cost
    long = F.frontier_long(s, {"s": (N, D)}, {("s", "dp-gd"): (1.0, 0.5)}, budgets)
    assert value(long, "runtime_s", "objpert", 11.0)["note"] == "not timed"
    long = F.frontier_long(s.assign(solver_steps_mean=np.nan), {"s": (N, D)}, COSTS, budgets)
    assert value(long, "passes", "objpert", passes)["note"] == "no pass count"


def test_table_is_wide_monotone_and_round_trips():
    table = F.frontier_table(summary(), {"s": (N, D)}, COSTS)
    assert list(table.columns) == F.COLUMNS
    assert len(table) == 2 * F.N_BUDGETS  # two methods x the fixed budget count
    for _, g in table.groupby("method"):
        for m in F.MEASURES:
            v = g.sort_values("budget_index")[F.PREFIX[m] + "best_excess_loss"].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            assert (np.diff(v) <= 0).all()  # best so far: never increases with the budget
    # every runtime-derived column starts with runtime_ (dropped by the determinism comparison)
    assert all(c.startswith("runtime_") for c in table.columns if c not in F.KEYS and not c.startswith("passes_"))
    long = F.to_long(table)
    assert list(long.columns) == F.LONG_COLUMNS and len(long) == 2 * len(table)


def test_budget_grid():
    g = F.budget_grid([2.0, float("nan"), 0.0, 200.0, float("inf")], 3)
    assert g == pytest.approx([2.0, 20.0, 200.0])
    assert np.isnan(F.budget_grid([float("nan")], 4)).all() and len(F.budget_grid([], 4)) == 4


def test_pass_equivalents():
    G, E = C.GRAM_PER_D * D, C.EIGH_PER_D2_OVER_N * D * D / N
    assert F.pass_equivalents("dp-gd", N, D) == (1.0, 1.0)
    for alg in ("hess-clip", "hess-add", "qu-clip", "qu-add"):
        assert F.pass_equivalents(alg, N, D) == pytest.approx((1 + G + E, 1 + G + E))
    assert F.pass_equivalents("dp-sgd", N, D) == pytest.approx((0.1, 0.1))
    assert F.pass_equivalents("dp-sgd", N, D, {"batch_size": 250}) == pytest.approx((0.25, 0.25))
    assert F.pass_equivalents("minibatch-qu-clip", N, D, {"batch_frac": 0.2}) == pytest.approx(
        (0.2 + 0.2 * G + E,) * 2)
    assert F.pass_equivalents("precond-dp-gd", N, D) == pytest.approx((1 + G + E, 1.0))
    assert F.pass_equivalents("precond-dp-gd", N, D, {"refresh": 5}) == pytest.approx((1 + G + E, 1 + (G + E) / 5))
    assert F.pass_equivalents("dp-gd-oracle", N, D) == (5.5, 5.5)
    assert F.pass_equivalents("damped-newton", N, D) == pytest.approx((1 + G + 2 * E,) * 2)
    assert F.pass_equivalents("cubic-newton", N, D, {"max_inner": 100}) == pytest.approx((1 + G + 100 * D / N,) * 2)
    assert all(math.isnan(x) for x in F.pass_equivalents("aop", N, D))
    assert F.run_passes("dp-gd", N, D, 0) == 0.0
    assert F.run_passes("hess-clip", N, D, 3) == pytest.approx(3 * (1 + G + E))
    assert F.run_passes("precond-dp-gd", N, D, 3) == pytest.approx(1 + G + E + 2)
    # a Gram pass costs more than a gradient pass at the d of the datasets (benchmarks/pass_costs.md)
    assert C.GRAM_PER_D * 50 > 1


def long_frontier(values: dict, budgets=(1.0, 2.0, 4.0, 8.0), measure="passes") -> pd.DataFrame:
    rows = []
    for (ds, method), vs in values.items():
        for k, (b, v) in enumerate(zip(budgets, vs)):
            rows.append({"dataset": ds, "conversion": "bs16", "epsilon": 1.0, "measure": measure, "budget_index": k,
                         "budget": b, "method": method, "role": F.role(method), "best_excess_loss": v})
    return pd.DataFrame(rows)


def test_crossover_rule():
    nan = float("nan")
    fr = long_frontier({
        # cell a: second order best at 2 and 4, a tie at 8 goes to first order; the oracle is lower
        # everywhere but has a non-private step and is not a candidate
        ("a", "dp-gd"): [0.5, 0.4, 0.3, 0.1], ("a", "hess-clip"): [nan, 0.3, 0.2, 0.1],
        ("a", "dp-gd-oracle"): [0.01] * 4,
        # cell b: first order best everywhere
        ("b", "dp-gd"): [0.1] * 4, ("b", "qu-clip"): [0.2] * 4,
        # cell c: second order from 4 to the end
        ("c", "dp-sgd"): [0.5, 0.4, 0.3, 0.3], ("c", "hess-add"): [nan, nan, 0.2, 0.1],
        # cell d: nothing finite
        ("d", "dp-gd"): [nan] * 4, ("d", "hess-clip"): [INF] * 4})
    x = F.crossover(fr).set_index("dataset")
    a = x.loc["a"]
    assert (a["second_order_from"], a["second_order_to"], a["second_order_budgets"], a["budgets"]) == (2.0, 4.0, 2, 4)
    assert (a["second_order_winner"], a["crossover_budget"], a["first_order_winner"]) == ("hess-clip", 8.0, "dp-gd")
    b = x.loc["b"]
    assert b["second_order_budgets"] == 0 and math.isnan(b["crossover_budget"]) and "first-order" in b["note"]
    c = x.loc["c"]
    assert (c["second_order_from"], c["second_order_to"], c["second_order_winner"]) == (4.0, 8.0, "hess-add")
    assert math.isnan(c["crossover_budget"]) and "stays best" in c["note"]
    assert x.loc["d"]["second_order_budgets"] == 0 and "no method" in x.loc["d"]["note"]


def test_claims_section_from_frontier():
    from dpnewton.pipeline.claims.rankings import budget_section
    from dpnewton.pipeline.claims.rules import winner_by_budget

    x = F.crossover(long_frontier({("a", "dp-gd"): [0.5, 0.4, 0.3, 0.1],
                                   ("a", "hess-clip"): [float("nan"), 0.3, 0.2, 0.1]}))
    text = winner_by_budget(x.iloc[0])
    assert text == ("second order best at 2/4 budgets in [2, 4] passes (by hess-clip); "
                    "dp-gd overtakes at 8 passes")
    lines = budget_section(x.assign(reading=[text]), ("dp-gd", "hess-clip", "damped-newton"))
    assert lines[1].startswith("## Winner by compute budget") and lines[-1].endswith(f"| {text} |")
    assert ("second order = hess-clip; first order = dp-gd. damped-newton have non-private steps and none are"
            in lines[3])
    assert budget_section(None, ()) == [] and budget_section(x.iloc[:0], ()) == []


@pytest.mark.slow
def test_pipeline_table_and_figure(tmp_path_factory):
    from tests.workflow.test_determinism import REPO, env, reference_run, snakemake_cmd

    ref = reference_run(tmp_path_factory)
    table = pd.read_parquet(ref / "results" / "tables" / "frontier.parquet")
    csv = pd.read_csv(ref / "results" / "tables" / "frontier.csv")
    assert list(table.columns) == F.COLUMNS and len(csv) == len(table) > 0
    assert set(table["method"]) == {"hess-clip", "qu-add", "dp-gd", "dp-sgd"}
    # qu-add and dp-sgd are not timed in that config: no runtime frontier, said in the note
    untimed = table[table["method"].isin(["qu-add", "dp-sgd"])]
    assert untimed["runtime_best_excess_loss"].isna().all() and set(untimed["runtime_note"]) == {"not timed"}
    assert table[table["method"] == "hess-clip"]["runtime_best_excess_loss"].notna().any()
    assert table["passes_best_excess_loss"].notna().any()
    # the best over every budget is the best-T cell's mean (the largest budget admits every T)
    best = pd.read_parquet(ref / "results" / "tables" / "best_T.parquet")
    last = table[table["budget_index"] == F.N_BUDGETS - 1].set_index(["method", "epsilon"])
    for r in best.itertuples():
        assert last.loc[(r.algorithm, r.epsilon), "passes_best_excess_loss"] == pytest.approx(r.excess_loss_mean)
    # Figure 6 in a copy: the reference run is shared, and other tests compare their files with its
    work = tmp_path_factory.mktemp("frontier_figure")
    shutil.copytree(ref, work, symlinks=True, dirs_exist_ok=True)
    target = "results/figures/fig6_frontier.png"
    res = subprocess.run(snakemake_cmd(work)[:1] + ["-m", "snakemake", target] + snakemake_cmd(work)[4:],
                         cwd=REPO, capture_output=True, text=True, timeout=600, env=env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (work / target).stat().st_size > 10_000
    assert not (ref / target).exists()


def test_every_algorithm_has_one_role():
    """Every card's role is one of ROLES; the second- and first-order sets partition the
    candidates, and precond-dp-gd (DP-GD with a released curvature) is second order, as in the claims'
    "Beyond the paper"."""
    assert {s.role for s in ALGORITHMS.values()} <= set(ROLES)
    assert set(F.SECOND_ORDER) | set(F.FIRST_ORDER) == {a for a, s in ALGORITHMS.items()
                                                         if s.role in ("first-order", "second-order")}
    assert not set(F.SECOND_ORDER) & set(F.FIRST_ORDER)
    assert F.role("precond-dp-gd") == "second-order" and F.role("dp-gd") == "first-order"
    assert F.role("no-such-method") == "other"
