"""Compute-budget frontier (dpnewton.pipeline.frontier): known answers on hand-made tables, the
pass-equivalent accounting, the crossover rule and its tie rule, and one tiny pipeline run (the session's reference
run of tests/workflow/test_determinism.py) that produces the table and Figure 6."""

from __future__ import annotations

import math
import shutil
import subprocess

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpnewton.algorithms import ALGORITHMS, ROLES
from dpnewton.algorithms import costs as C
from dpnewton.pipeline import frontier as F

N, D = 1000, 10
#: hess-clip's passes per update at (N, D): 1 + G + E
HESS = 1.0 + C.GRAM_PER_D * D + C.EIGH_PER_D2_OVER_N * D * D / N
INF = float("inf")
ROOT = Path(__file__).resolve().parents[2]


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


def test_frontier_point_carries_its_se_and_seed_count():
    """The s.e. and seed count are those of the (configuration, T) that attains the frontier value."""
    s = summary()
    s = s.assign(excess_loss_se=np.arange(len(s)) / 100.0, n_seeds=np.arange(len(s)) + 2)
    budgets = {("s", "passes"): [1.0, 4.0], ("s", "runtime_s"): [0.5]}
    long = F.frontier_long(s, {"s": (N, D)}, COSTS, budgets)
    r = value(long, "passes", "dp-gd", 4.0)  # dp-gd-s16 at T=4: row 5 of the summary
    assert (r["best_algorithm"], r["best_T"], r["best_excess_loss_se"], r["best_n_seeds"]) == ("dp-gd-s16", 4, 0.05, 7)
    r = value(long, "passes", "dp-gd", 1.0)  # dp-gd at T=1: row 0
    assert (r["best_excess_loss_se"], r["best_n_seeds"]) == (0.0, 2)
    r = value(long, "runtime_s", "dp-gd", 0.5)  # nothing within the budget: no s.e., no seed count
    assert math.isnan(r["best_excess_loss_se"]) and pd.isna(r["best_n_seeds"])
    table = F.frontier_table(s, {"s": (N, D)}, COSTS)
    assert str(table["passes_best_n_seeds"].dtype) == "Int64" and table["passes_best_excess_loss_se"].notna().any()
    # a summary without them (and a table written before the frontier carried them) reads as NaN
    old = F.frontier_table(summary(), {"s": (N, D)}, COSTS)
    assert old["passes_best_excess_loss_se"].isna().all() and old["passes_best_n_seeds"].isna().all()
    long = F.to_long(old.drop(columns=[F.PREFIX[m] + c for m in F.MEASURES for c in F.SPREAD]))
    assert list(long.columns) == F.LONG_COLUMNS and long["best_excess_loss_se"].isna().all()


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


def long_frontier(values: dict, budgets=(1.0, 2.0, 4.0, 8.0), measure="passes", se: dict | None = None,
                  n_seeds: int = 4) -> pd.DataFrame:
    """A long frontier from {(dataset, method): [mean at each budget]}; with ``se`` ({(dataset, method): s.e.
    at every budget}) each point carries its s.e. and ``n_seeds``, without it neither (an old table)."""
    rows = []
    for (ds, method), vs in values.items():
        for k, (b, v) in enumerate(zip(budgets, vs)):
            rows.append({"dataset": ds, "conversion": "bs16", "epsilon": 1.0, "measure": measure, "budget_index": k,
                         "budget": b, "method": method, "role": F.role(method), "best_excess_loss": v})
            if se is not None:
                rows[-1].update(best_excess_loss_se=se[(ds, method)], best_n_seeds=n_seeds)
    return pd.DataFrame(rows)


def test_crossover_rule_without_standard_errors():
    """A frontier without s.e. (a table written before it carried them): each budget by the lowest mean
    alone, untested; an exact tie goes to the first-order method."""
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
    # budget 1 has no finite second-order loss: first order is best there without a test
    assert (a["first_order_budgets"], a["tied_budgets"], a["tested_budgets"], a["untested_budgets"]) == (2, 0, 0, 3)
    b = x.loc["b"]
    assert (b["second_order_budgets"], b["first_order_budgets"], b["untested_budgets"]) == (0, 4, 4)
    assert math.isnan(b["crossover_budget"]) and b["note"] == ""
    c = x.loc["c"]
    assert (c["second_order_from"], c["second_order_to"], c["second_order_winner"]) == (4.0, 8.0, "hess-add")
    assert math.isnan(c["crossover_budget"])
    assert x.loc["d"]["second_order_budgets"] == 0 and "no method" in x.loc["d"]["note"]
    assert [F.untested(x.loc[k]) for k in "abcd"] == [True, True, True, False]


def test_crossover_tie_rule_known_answers():
    """Means that differ by far less than their s.e. tie (no role wins); by far more, the lower wins. Each
    budget compares the lowest mean with the lowest of the other role, not with the runner-up of its own."""
    fr = long_frontier({
        # near: 0.01 apart, s.e. 0.05 (t = 0.14): a tie at both budgets, not a second-order win
        ("near", "dp-gd"): [0.30, 0.20], ("near", "hess-clip"): [0.29, 0.19],
        # far: 0.3 and 0.2 apart, s.e. 0.001: second order wins at 1, first order at 2 (the crossover)
        ("far", "dp-gd"): [0.5, 0.1], ("far", "hess-clip"): [0.2, 0.3],
        # own: qu-clip ties hess-clip (same role) but dp-gd is far above: second order wins
        ("own", "dp-gd"): [0.3, 0.3], ("own", "hess-clip"): [0.10, 0.10], ("own", "qu-clip"): [0.11, 0.11],
        # wide: 0.1 apart, but dp-gd's s.e. is 0.1 (t = 1): a tie; an exact tie of means is a tie too
        ("wide", "dp-gd"): [0.2, 0.1], ("wide", "hess-clip"): [0.1, 0.1]},
        budgets=(1.0, 2.0),
        se={("near", "dp-gd"): 0.05, ("near", "hess-clip"): 0.05, ("far", "dp-gd"): 0.001,
            ("far", "hess-clip"): 0.001, ("own", "dp-gd"): 0.001, ("own", "hess-clip"): 0.05,
            ("own", "qu-clip"): 0.05, ("wide", "dp-gd"): 0.1, ("wide", "hess-clip"): 0.001})
    o = F.budget_outcomes(fr).set_index(["dataset", "budget"])
    assert o["outcome"].to_dict() == {
        ("far", 1.0): "second-order", ("far", 2.0): "first-order", ("near", 1.0): "tie", ("near", 2.0): "tie",
        ("own", 1.0): "second-order", ("own", 2.0): "second-order", ("wide", 1.0): "tie", ("wide", 2.0): "tie"}
    assert o.loc[("own", 1.0), "rival"] == "dp-gd" and o.loc[("wide", 2.0), "p_value"] == 1.0
    sd = 0.05 * math.sqrt(4)
    want = stats.ttest_ind_from_stats(0.29, sd, 4, 0.30, sd, 4, equal_var=False).pvalue
    assert o.loc[("near", 1.0), "p_value"] == pytest.approx(want) and want > 0.8
    assert o["tested"].all() and (o.loc[("far", 1.0), "p_value"] < 1e-6)
    x = F.crossover(fr).set_index("dataset")
    near, far = x.loc["near"], x.loc["far"]
    assert (near["second_order_budgets"], near["tied_budgets"], near["first_order_budgets"]) == (0, 2, 0)
    assert (near["tied_from"], near["tied_to"], near["tested_budgets"]) == (1.0, 2.0, 2)
    assert near["second_order_winner"] == "" and math.isnan(near["crossover_budget"])
    assert (far["second_order_budgets"], far["tied_budgets"], far["first_order_budgets"]) == (1, 0, 1)
    assert (far["second_order_winner"], far["crossover_budget"], far["first_order_winner"]) == ("hess-clip", 2.0,
                                                                                                 "dp-gd")
    assert not any(F.untested(x.loc[k]) for k in x.index)
    # the same means without s.e.: the lowest mean wins everywhere, untested
    plain = F.crossover(fr.drop(columns=F.SPREAD)).set_index("dataset")
    assert (plain.loc["near", "second_order_budgets"], plain.loc["near", "tied_budgets"]) == (2, 0)
    assert F.untested(plain.loc["near"]) and plain.loc["wide", "first_order_budgets"] == 1   # exact tie: first order


def test_crossover_counts_a_point_without_se_as_untested():
    """A point with no s.e. or a single seed cannot be tested: that budget is read by the lowest mean."""
    from dpnewton.pipeline.claims.rules import winner_by_budget

    fr = long_frontier({("s", "dp-gd"): [0.3, 0.1], ("s", "hess-clip"): [0.29, 0.2]}, budgets=(1.0, 2.0),
                       se={("s", "dp-gd"): 0.001, ("s", "hess-clip"): 0.001})
    fr.loc[(fr["method"] == "hess-clip") & (fr["budget"] == 1.0), "best_excess_loss_se"] = float("nan")
    o = F.budget_outcomes(fr)
    assert o["tested"].tolist() == [False, True] and o["outcome"].tolist() == ["second-order", "first-order"]
    r = F.crossover(fr).iloc[0]
    assert (r["tested_budgets"], r["untested_budgets"]) == (1, 1) and not F.untested(r)
    assert winner_by_budget(r) == ("second order significantly best at 1/2 budgets (1 passes, by hess-clip), "
                                   "tied at 0, first order at 1; crossover at 2 passes (dp-gd significantly best); 1 "
                                   "of the 2 budgets untested (no s.e.: read by the lowest mean)")
    one_seed = F.budget_outcomes(long_frontier({("s", "dp-gd"): [0.3], ("s", "hess-clip"): [0.2]}, budgets=(1.0,),
                                               se={("s", "dp-gd"): 0.0, ("s", "hess-clip"): 0.0}, n_seeds=1))
    assert not one_seed["tested"].iloc[0] and one_seed["outcome"].iloc[0] == "second-order"


@pytest.mark.skipif(not (ROOT / "figures/claims/frontier.csv").exists(), reason="the published bundle is committed")
def test_committed_frontier_without_se_reads_as_untested():
    table = pd.read_csv(ROOT / "figures/claims/frontier.csv")
    x = F.crossover(F.to_long(table))
    assert len(x) and (x["tested_budgets"] == 0).all() and (x["tied_budgets"] == 0).all()
    assert all(F.untested(r) or r["note"] for _, r in x.iterrows())


def test_claims_section_from_frontier():
    from dpnewton.pipeline.claims.rankings import budget_section
    from dpnewton.pipeline.claims.rules import winner_by_budget
    from dpnewton.pipeline.significance import STATED

    values = {("a", "dp-gd"): [0.5, 0.4, 0.3, 0.1], ("a", "hess-clip"): [float("nan"), 0.3, 0.2, 0.1]}
    x = F.crossover(long_frontier(values))
    text = winner_by_budget(x.iloc[0])
    assert text == ("untested (no s.e. over seeds in the frontier table): second order lowest at 2/4 budgets (in "
                    "[2, 4] passes, by hess-clip), first order at 2; crossover at 8 passes (dp-gd lowest)")
    methods = ("dp-gd", "hess-clip", "damped-newton")
    lines = budget_section(x.assign(reading=[text]), methods)
    assert lines[1].startswith("## Winner by compute budget") and lines[-1].endswith(f"| {text} |")
    assert ("second order = hess-clip; first order = dp-gd. damped-newton have non-private steps and none are"
            in lines[3])
    assert "no standard errors over seeds" in lines[3] and STATED not in lines
    assert budget_section(None, ()) == [] and budget_section(x.iloc[:0], ()) == []
    # with standard errors: 0.3 vs 0.4 and 0.2 vs 0.3 are far apart at s.e. 0.001, 0.1 vs 0.1 ties
    x = F.crossover(long_frontier(values, se={("a", "dp-gd"): 0.001, ("a", "hess-clip"): 0.001}))
    text = winner_by_budget(x.iloc[0])
    assert text == ("second order significantly best at 2/4 budgets (in [2, 4] passes, by hess-clip), tied at 1 "
                    "(8 passes), first order at 1; no crossover within the grid")
    lines = budget_section(x.assign(reading=[text]), methods)
    assert lines[3] == STATED and "*significantly best* when p < 0.05" in lines[5]


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
