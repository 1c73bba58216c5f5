"""Unit tests of the pipeline's aggregation logic on hand-made frames (no Snakemake)."""

import math

import numpy as np
import pandas as pd
import pytest

from dpnewton.pipeline import aggregate as agg
from dpnewton.pipeline import table1 as paper_table1
from dpnewton.pipeline.plan import config_hash, eps_label, expand, job_members, seed_chunks, seed_list
from dpnewton.pipeline.jobs import curve_indices


def make_runs(cells):
    """cells: {(dataset, algorithm, eps, T): [excess losses per seed]}, runtime = T * 0.01 * (1 + seed)."""
    rows = []
    for (ds, alg, eps, T), losses in cells.items():
        for seed, loss in enumerate(losses):
            rows.append({"dataset": ds, "algorithm": alg, "conversion": "bs16", "epsilon": eps, "iterations": T,
                         "seed": seed, "excess_loss": loss, "runtime_s": T * 0.01 * (1 + seed), "rho": 0.5,
                         "ledger_rho_total": 0.5, "delta": 1e-8, "diverged": False, "resets": 0})
    return agg.check_privacy(pd.DataFrame(rows))


def test_summary_mean_se_median():
    runs = make_runs({("s", "a", 1.0, 5): [1.0, 2.0, 4.0]})
    s = agg.summarize(runs)
    assert len(s) == 1
    r = s.iloc[0]
    assert r["n_seeds"] == 3
    assert r["excess_loss_mean"] == pytest.approx(7 / 3)
    assert r["excess_loss_median"] == pytest.approx(2.0)
    # sample variance: squared deviations from 7/3 sum to 14/3, / (3 - 1) = 7/3; s.e. sqrt(7/3) / sqrt(3)
    assert r["excess_loss_se"] == pytest.approx(math.sqrt(7) / 3)
    assert r["runtime_s_mean"] == pytest.approx(0.05 * 2)
    assert bool(r["ledger_ok"])


def test_best_t_argmin_ties_and_edges():
    runs = make_runs({
        ("s", "a", 1.0, 1): [3.0, 3.0], ("s", "a", 1.0, 2): [1.0, 1.0], ("s", "a", 1.0, 4): [2.0, 2.0],
        ("s", "b", 1.0, 1): [1.0, 1.0], ("s", "b", 1.0, 2): [1.0, 1.0], ("s", "b", 1.0, 4): [5.0, 5.0],
        ("s", "c", 1.0, 1): [5.0, 5.0], ("s", "c", 1.0, 2): [4.0, 4.0], ("s", "c", 1.0, 4): [0.5, 0.7],
        ("s", "d", 1.0, 1): [0.2, 0.4],
        ("s", "e", 1.0, 10): [0.1, 0.1], ("s", "e", 1.0, 30): [0.2, 0.2],
    })
    best = agg.best_t(agg.summarize(runs)).set_index("algorithm")
    assert best.loc["a", "best_T"] == 2 and not best.loc["a", "at_edge"] and best.loc["a", "edge"] == ""
    assert best.loc["b", "best_T"] == 1 and best.loc["b", "edge"] == "min"      # tie -> smaller T
    assert not best.loc["b", "at_edge"]                                         # no T below 1 exists
    assert best.loc["e", "best_T"] == 10 and best.loc["e", "edge"] == "low" and best.loc["e", "at_edge"]
    assert best.loc["c", "best_T"] == 4 and best.loc["c", "edge"] == "high"
    assert best.loc["c", "excess_loss_mean"] == pytest.approx(0.6)
    assert best.loc["c", "runtime_s_mean"] == pytest.approx((0.04 + 0.08) / 2)
    assert best.loc["d", "best_T"] == 1 and not best.loc["d", "at_edge"]       # one-value grid: no edge
    # how far an edge cell is from interior: the last step's relative gain
    assert best.loc["c", "edge_neighbour_T"] == 2 and best.loc["c", "edge_neighbour_mean"] == pytest.approx(4)
    assert best.loc["c", "edge_gain"] == pytest.approx((4 - 0.6) / 4)
    assert best.loc["e", "edge_neighbour_T"] == 30 and best.loc["e", "edge_gain"] == pytest.approx(0.5)
    assert pd.isna(best.loc["a", "edge_gain"]) and pd.isna(best.loc["a", "edge_neighbour_T"])
    md = paper_table1.edges_markdown(best.reset_index())
    assert "2 of 5" in md and "| s | c | bs16 | 1 | 4 | high | 0.6 | 2 | 4 | 85% |" in md
    assert (best["selection"].str.contains("non-private")).all()


def test_best_t_ignores_nonfinite_means():
    runs = make_runs({("s", "a", 1.0, 1): [np.inf, 1.0], ("s", "a", 1.0, 2): [2.0, 2.0],
                      ("s", "a", 1.0, 3): [np.nan, 0.1], ("s", "z", 1.0, 1): [np.nan, np.nan]})
    best = agg.best_t(agg.summarize(runs)).set_index("algorithm")
    assert best.loc["a", "best_T"] == 2
    assert pd.isna(best.loc["z", "best_T"]) and bool(best.loc["z", "all_nonfinite"])


def test_table1_ratio_and_min_max():
    runs = make_runs({
        ("s", "dp-gd", 0.1, 100): [0.2, 0.2], ("s", "dp-gd", 0.1, 200): [0.3, 0.3],
        ("s", "dp-gd", 1.0, 200): [0.1, 0.1], ("s", "dp-gd", 1.0, 100): [0.2, 0.2],
        ("s", "hess-clip", 0.1, 5): [0.2, 0.2], ("s", "hess-clip", 1.0, 10): [0.05, 0.05],
        ("t", "hess-clip", 1.0, 10): [0.05, 0.05],   # no DP-GD on t: not in Table 1
    })
    best = agg.best_t(agg.summarize(runs))
    # runtime = first + (best T - 1) x per-update cost; the runs' recorded runtime_s (T * 0.015) is ignored
    costs = {("s", "dp-gd"): (0.002, 0.002), ("s", "hess-clip"): (0.03, 0.03), ("t", "hess-clip"): (1.0, 1.0)}
    long, wide = paper_table1.table1(best, costs, "dp-gd", "hess-clip")
    assert list(wide["dataset"]) == ["s"]
    assert wide.loc[0, "eps=0.1"] == pytest.approx((100 * 0.002) / (5 * 0.03))
    assert wide.loc[0, "eps=1"] == pytest.approx((200 * 0.002) / (10 * 0.03))
    assert wide.loc[0, "min runtime hess-clip (s)"] == pytest.approx(5 * 0.03)
    assert wide.loc[0, "max runtime hess-clip (s)"] == pytest.approx(10 * 0.03)
    assert np.allclose(long["ratio"], long["runtime_s_dp_gd"] / long["runtime_s_hess_clip"])
    md = paper_table1.table1_markdown(wide, "dp-gd", "hess-clip", "bs16")
    assert "| s | 1.33x | 1.33x |" in md and "lone run of best T updates" in md
    # the first update's extra cost counts once per run
    costs = {("s", "dp-gd"): (0.102, 0.002), ("s", "hess-clip"): (0.03, 0.03)}
    long, _ = paper_table1.table1(best, costs, "dp-gd", "hess-clip")
    assert long.loc[0, "runtime_s_dp_gd"] == pytest.approx(0.102 + 99 * 0.002)
    # a configuration that was not timed has no runtime: its ratio is NaN, not a recorded time
    long, wide = paper_table1.table1(best, {("s", "hess-clip"): (0.03, 0.03)}, "dp-gd", "hess-clip")
    assert long["ratio"].isna().all()


def test_privacy_check_kinds():
    runs = pd.DataFrame({"rho": [0.5, 0.5, 0.5, 0.5], "epsilon": [1.0] * 4,
                         "ledger_rho_total": [0.5, 0.4, np.nan, np.nan],
                         "accountant_epsilon": [np.nan, np.nan, 0.99, np.nan]})
    out = agg.check_privacy(runs)
    assert list(out["privacy_check"]) == ["zcdp-ledger", "zcdp-ledger", "accountant", "mechanism"]
    assert list(out["ledger_ok"]) == [True, False, True, True]
    runs.loc[2, "accountant_epsilon"] = 1.1
    assert not agg.check_privacy(runs)["ledger_ok"][2]


def test_solver_steps_of_one_shot_rows():
    runs = make_runs({("s", "objpert", 1.0, 1): [0.1, 0.2, 0.3], ("s", "a", 1.0, 5): [1.0]})
    events = ['[{"mechanism": "m", "solver_iterations": 4}]', '[{"mechanism": "m", "solver_iterations": 7}]',
              '[{"mechanism": "m", "solver_iterations": 4}, {"mechanism": "m", "solver_iterations": 2}]',
              '[{"mechanism": "gaussian", "rho": 0.5}]']
    out = agg.with_solver_steps(runs.assign(accounting_events=events))
    assert out["solver_steps"].iloc[:3].tolist() == [4.0, 7.0, 6.0] and math.isnan(out["solver_steps"].iloc[3])
    s = agg.summarize(out).set_index("algorithm")
    assert s.loc["objpert", "solver_steps_mean"] == pytest.approx(17 / 3)
    assert math.isnan(s.loc["a", "solver_steps_mean"])
    assert agg.with_solver_steps(runs)["solver_steps"].isna().all()     # rows without events


def test_trivial_baseline():
    b = agg.trivial_baseline([{"dataset": "x", "loss_opt": 0.3, "n": 10, "d": 2}])
    assert b.loc[0, "trivial_excess_loss"] == pytest.approx(math.log(2) - 0.3)


def test_best_curves_select_best_T_runs():
    runs = make_runs({("s", "a", 1.0, 2): [1.0, 1.0], ("s", "a", 1.0, 3): [0.5, 0.5]})
    best = agg.best_t(agg.summarize(runs))
    curves = pd.DataFrame([{"dataset": "s", "algorithm": "a", "conversion": "bs16", "epsilon": 1.0, "seed": s,
                            "iterations": T, "iterate": k, "excess_loss": float(k + s), "elapsed_s": 0.1 * k}
                           for T in (2, 3) for s in (0, 1) for k in range(T + 1)])
    bc = agg.best_curves(curves, best)
    assert set(bc["iterations"]) == {3} and len(bc) == 4
    assert list(bc["excess_loss_mean"]) == [0.5, 1.5, 2.5, 3.5]


def test_labels_seeds_chunks_and_curve_indices():
    assert [eps_label(e) for e in (0.01, 0.03, 1, 1.0, 10, 0.3)] == ["0.01", "0.03", "1", "1", "10", "0.3"]
    assert float(eps_label(0.1234567891)) == 0.1234567891
    assert seed_list(3) == [0, 1, 2]
    assert seed_chunks([0, 1, 2, 3, 4], 2) == [("0-1", [0, 1]), ("2-3", [2, 3]), ("4-4", [4])]
    assert seed_chunks([0, 1, 2], None) == [("0-2", [0, 1, 2])]
    assert list(curve_indices(5, 200)) == [0, 1, 2, 3, 4, 5]
    idx = curve_indices(5000, 100)
    assert idx[0] == 0 and idx[-1] == 5000 and len(idx) <= 102 and np.all(np.diff(idx) > 0)
    assert len(curve_indices(10, 0)) == 0


def _cfg(**kw):
    cfg = {"datasets": {"synthetic": {"options": {"n": 100, "d": 3}}, "a1a": {"optional": True}},
           "data_dir": "/nonexistent-dpnewton-dir", "epsilons": [0.1, 1], "seeds": 4, "seeds_per_job": 2,
           "grids": {"g": [3, 1, 2]}, "algorithms": {"dp-gd": {"grid": "g"}, "hess-clip": {"iterations": [1, 5]}},
           "conversion_study": {"enabled": True, "algorithm": "hess-clip", "conversions": ["bs16", "cks"],
                                "epsilons": [1]},
           "figures": {"runtime_epsilon": 1, "convergence_epsilons": [0.1]}}
    cfg.update(kw)
    return cfg


def cells(plan) -> dict[tuple, tuple[dict, dict]]:
    """(dataset, configuration, conversion, epsilon label, chunk) -> (member, its job's spec) over every job
    (a lockstep job holds several cells: dpnewton.pipeline.plan.job_members)."""
    return {(j.dataset, m["algorithm"], m["conversion"], m["eps_label"], j.chunk): (m, j.spec)
            for j in plan.jobs for m in job_members(j.spec).values()}


def test_expand_jobs_optional_dataset_and_study():
    plan = expand(_cfg())
    assert list(plan.datasets) == ["synthetic"] and "a1a" in plan.dropped
    assert plan.algorithms["dp-gd"]["iterations"] == [1, 2, 3]
    # 1 dataset x 2 algorithms x 2 eps x 2 chunks + study (cks at eps=1) x 2 chunks, of which dp-gd's (lockstep)
    # are one job per chunk
    assert len(cells(plan)) == 8 + 2 and len(plan.jobs) == 6 + 2
    assert {j.conversion for j in plan.jobs} == {"bs16", "cks"}
    j = plan.job_index[("synthetic", "hess-clip", "cks", "1", "2-3")]
    assert j.spec["seeds"] == [2, 3] and j.spec["epsilon"] == 1.0 and j.spec["curves_max_points"] > 0
    member, spec = cells(plan)[("synthetic", "dp-gd", "bs16", "0.1", "0-1")]
    assert member["curves_max_points"] > 0 and spec["curves_max_points"] > 0


def test_expand_errors_name_the_problem():
    with pytest.raises(ValueError, match="nope"):
        expand(_cfg(algorithms={"nope": {"grid": "g"}}))
    plan = expand(_cfg(algorithms={"nope": {"grid": "g"}, "dp-gd": {"grid": "g"}}, missing_algorithms="skip"))
    assert plan.skipped_algorithms == ["nope"] and list(plan.algorithms) == ["dp-gd"]
    with pytest.raises(ValueError, match="missing_grid"):
        expand(_cfg(algorithms={"dp-gd": {"grid": "missing_grid"}}))
    with pytest.raises(ValueError, match="a1a"):
        expand(_cfg(datasets={"a1a": {}}))


def test_variants_epsilon_restriction_studies_and_extension_spec():
    cfg = _cfg(algorithms={
        "dp-gd": {"grid": "g"},
        "dp-gd-s16": {"algorithm": "dp-gd", "grid": "g", "hyper": {"step": 16.0}, "max_iterations": 12},
        "hess-clip-reset": {"algorithm": "hess-clip", "iterations": [1, 5], "hyper": {"reset": True},
                            "epsilons": [0.1]},
    }, seeds_per_job=None, tuning={"extend_grid": True, "factor": 2, "max_extensions": 2},
        conversion_study=[{"algorithms": ["dp-gd", "hess-clip-reset"], "conversions": ["gdp"], "epsilons": [0.1]},
                          {"algorithm": "dp-gd", "conversions": ["official-fsolve"]}])
    plan = expand(cfg)
    assert plan.base("dp-gd-s16") == "dp-gd" and plan.base("hess-clip-reset") == "hess-clip"
    keys = {(a, c, e) for _, a, c, e, _ in cells(plan)}
    assert ("hess-clip-reset", "bs16", "1") not in keys and ("hess-clip-reset", "gdp", "0.1") in keys
    assert ("dp-gd", "official-fsolve", "1") in keys and ("dp-gd-s16", "gdp", "0.1") not in keys
    member, spec = cells(plan)[("synthetic", "dp-gd-s16", "bs16", "1", "0-3")]
    assert spec["base_algorithm"] == "dp-gd" and member["hyper"] == {"step": 16.0}
    assert member["extend"] == {"factor": 2, "max_iterations": 12, "probe_first_seed": True}
    assert cells(plan)[("synthetic", "dp-gd", "bs16", "1", "0-3")][0]["extend"]["max_iterations"] == 12
    from dpnewton.pipeline.plan import protocol_summary
    p = protocol_summary(plan)
    assert p["configurations_per_algorithm"] == {"dp-gd": 2}  # reset runs are not tuning configurations
    assert p["grid_extension"]["dp-gd-s16"] == 12
    from dpnewton.pipeline.protocol_text import protocol_markdown
    md = protocol_markdown(p)
    assert ("conversion: bs16 for every algorithm; conversion study: dp-gd, hess-clip-reset under gdp at epsilon 0.1; "
            "conversion study: dp-gd under official-fsolve;") in md
    assert "dp-gd-s16 (= dp-gd with {'step': 16.0}): " in md and "T x 2, repeatedly" in md
    assert "Caps: dp-gd 12; dp-gd-s16 12;" in md and "configurations per algorithm (tuning budget): dp-gd 2;" in md
    with pytest.raises(ValueError, match="not a registered algorithm"):
        expand(_cfg(algorithms={"x": {"algorithm": "nope", "grid": "g"}}))


def test_per_epsilon_caps_change_only_their_jobs():
    algos = {"dp-gd": {"grid": "g", "max_iterations": 12}}
    cfg = _cfg(algorithms=algos, tuning={"extend_grid": True, "factor": 2}, seeds_per_job=None,
               conversion_study=[{"algorithm": "dp-gd", "conversions": ["gdp"], "epsilons": [0.5]}])
    before = expand(cfg)
    cfg["algorithms"]["dp-gd"]["max_iterations_by_epsilon"] = {1: 48, "0.5": 24}
    after = expand(cfg)
    caps = {k: m["extend"]["max_iterations"] for k, (m, _) in cells(after).items()}
    assert caps[("synthetic", "dp-gd", "bs16", "1", "0-3")] == 48
    assert caps[("synthetic", "dp-gd", "gdp", "0.5", "0-3")] == 24   # a study-only epsilon
    assert caps[("synthetic", "dp-gd", "bs16", "0.1", "0-3")] == 12
    changed = {k for k, (m, _) in cells(after).items() if m != cells(before)[k][0]}
    assert changed == {("synthetic", "dp-gd", "bs16", "1", "0-3"), ("synthetic", "dp-gd", "gdp", "0.5", "0-3")}
    # the cells of one lockstep job (dp-gd on a dataset and chunk) share its spec hash: it reruns as a whole
    assert {config_hash(spec) for _, spec in cells(after).values()}.isdisjoint(
        config_hash(spec) for _, spec in cells(before).values())
    from dpnewton.pipeline.plan import protocol_summary
    assert protocol_summary(after)["grid_extension"]["dp-gd"] == {"default": 12, "1": 48, "0.5": 24}
    for bad, match in [({3: 48}, "not one this entry runs at"), ({"x": 48}, "not an epsilon"),
                       ({1: 2}, "below the grid maximum")]:
        cfg["algorithms"]["dp-gd"]["max_iterations_by_epsilon"] = bad
        with pytest.raises(ValueError, match=match):
            expand(cfg)


def test_a_dataset_pass_cap_enters_its_jobs_extension_rule():
    algos = {"dp-gd": {"grid": "g", "max_iterations": 12}}
    cfg = _cfg(algorithms=algos, tuning={"extend_grid": True, "factor": 2}, seeds_per_job=None)
    before = expand(cfg)
    cfg["datasets"]["synthetic"]["max_passes"] = 500
    after = expand(cfg)
    for k, (m, _) in cells(after).items():
        assert m["extend"] == {**cells(before)[k][0]["extend"], "max_passes": 500}
    from dpnewton.pipeline.plan import protocol_summary
    assert protocol_summary(after)["dataset_max_passes"] == {"synthetic": 500}
    assert protocol_summary(before)["dataset_max_passes"] == {}


def test_pass_cap_in_iterations_known_answers():
    from dpnewton.pipeline.frontier import pass_equivalents
    from dpnewton.pipeline.t_search import pass_capped

    ext = {"factor": 2, "max_iterations": 307200, "max_passes": 76800}
    assert pass_capped(ext, "dp-gd", 12000, 784)["max_iterations"] == 76800        # one pass per step
    first, per = pass_equivalents("hess-clip", 12000, 784)
    cap = pass_capped(ext, "hess-clip", 12000, 784)["max_iterations"]
    assert first + (cap - 1) * per <= 76800 < first + cap * per                     # the largest T that fits
    first, per = pass_equivalents("precond-dp-gd", 12000, 784)
    assert per == 1.0 and pass_capped(ext, "precond-dp-gd", 12000, 784)["max_iterations"] == int(76800 - first) + 1
    assert pass_capped({**ext, "max_iterations": 256}, "hess-clip", 12000, 784)["max_iterations"] == min(256, cap)
    assert pass_capped({**ext, "max_passes": 1}, "hess-clip", 12000, 784)["max_iterations"] == 1   # at least T = 1
    assert pass_capped(ext, "aop", 12000, 784) == ext                               # no pass count: unchanged
    assert pass_capped({"factor": 2, "max_iterations": 9}, "dp-gd", 10, 2) == {"factor": 2, "max_iterations": 9}
    assert pass_capped(None, "dp-gd", 10, 2) is None


def test_grid_extension_rule():
    from dpnewton.pipeline.t_search import next_extension

    def rows(means):
        return [{"iterations": T, "excess_loss": m + d} for T, m in means.items() for d in (-0.01, 0.01)]

    ext = {"factor": 2, "max_iterations": 40}
    assert next_extension(rows({10: 0.5, 20: 0.3}), [10, 20], ext) == [40]
    assert next_extension(rows({10: 0.5, 20: 0.3, 40: 0.2}), [10, 20, 40], ext) == []       # cap reached
    assert next_extension(rows({10: 0.2, 20: 0.3}), [10, 20], ext) == [5]                   # low edge: down
    assert next_extension(rows({3: 0.2, 6: 0.3}), [3, 6], ext) == [1]
    assert next_extension(rows({1: 0.2, 2: 0.3}), [1, 2], ext) == []                        # T = 1: the floor
    assert next_extension(rows({5: 0.4, 10: 0.2, 20: 0.3}), [10, 20, 5], ext) == []         # interior
    assert next_extension(rows({5: 0.6, 10: 0.5, 20: float("nan")}), [5, 10, 20], ext) == []  # non-finite never wins
    assert next_extension(rows({10: float("nan"), 20: float("inf")}), [10, 20], ext) == []
    assert next_extension(rows({10: 0.5, 20: 0.3}), [10, 20], None) == []
    assert next_extension(rows({1: 0.5}), [1], ext) == []                                   # one-shot methods


def test_cell_stability_and_reset_fraction():
    runs = make_runs({("s", "a", 1.0, 4): [0.1, float("inf"), 0.9, 0.2]})
    runs.loc[0, "resets"] = 2
    best = agg.best_t(agg.summarize(runs))
    out = agg.add_cell_stability(best, runs, pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.69]}))
    assert out["unstable_fraction"].iloc[0] == 0.5
    assert out["reset_iteration_fraction"].iloc[0] == pytest.approx(2 / 16)
    s = agg.summarize(runs)
    assert s["reset_fraction"].iloc[0] == pytest.approx(2 / 16)


def test_metrics_are_reported_at_the_T_chosen_on_excess_loss():
    # T = 2 has the lower (training) excess loss, T = 1 the better test metrics: T = 2 is reported
    runs = make_runs({("s", "a", 1.0, 1): [2.0, 2.0], ("s", "a", 1.0, 2): [1.0, 1.0]})
    runs["train_accuracy"] = [0.6, 0.7, 0.8, 0.9]
    runs["test_accuracy"] = [0.9, 0.95, 0.5, 0.7]
    runs["test_log_loss"] = [0.3, 0.4, 0.6, 0.8]
    summary = agg.summarize(runs)
    t2 = summary[summary["iterations"] == 2].iloc[0]
    assert t2["train_accuracy_mean"] == pytest.approx(0.85) and t2["test_accuracy_mean"] == pytest.approx(0.6)
    assert t2["test_log_loss_se"] == pytest.approx(0.1)    # deviations +-0.1: sd sqrt(0.02 / 1), / sqrt(2)
    best = agg.best_t(summary)
    assert best.loc[0, "best_T"] == 2 and best.loc[0, "test_accuracy_mean"] == pytest.approx(0.6)
    opt = {"dataset": "s", "n": 80, "n_test": 20, "holdout": 0.2, "loss_opt": 0.3, "train_accuracy": 0.91,
           "test_accuracy": 0.88, "test_log_loss": 0.35}
    h = agg.heldout_table(best, [opt])
    assert len(h) == 1 and h.loc[0, "best_T"] == 2
    assert h.loc[0, "test_log_loss_mean"] == pytest.approx(0.7) and h.loc[0, "optimum_test_accuracy"] == 0.88
    assert (h.loc[0, "n_train"], h.loc[0, "n_test"], h.loc[0, "holdout"]) == (80, 20, 0.2)
    assert "non-private" in h.loc[0, "selection"]
    # without a holdout there is nothing to report
    with pytest.raises(ValueError, match="without a holdout"):
        agg.heldout_table(best, [{"dataset": "s", "n": 100, "loss_opt": 0.3}])
    with pytest.raises(ValueError, match="no held-out metrics"):
        agg.heldout_table(agg.best_t(agg.summarize(runs.drop(columns=["test_accuracy"]))), [opt])
    # rows without metrics (hand-made, older) give the same tables as before
    plain = agg.summarize(runs.drop(columns=["train_accuracy", "test_accuracy", "test_log_loss"]))
    assert not any(c.startswith(("train_", "test_")) for c in plain.columns)


def test_holdout_enters_the_job_specs_only_when_on():
    from dpnewton.pipeline.plan import protocol_summary

    off = expand(_cfg())
    for value in (None, 0):
        same = expand(_cfg(holdout=value))
        assert same.holdout is None
        assert [config_hash(j.spec) for j in same.jobs] == [config_hash(j.spec) for j in off.jobs]
        assert "holdout" not in protocol_summary(same)
    on = expand(_cfg(holdout=0.2))
    assert on.holdout == 0.2 and all(j.spec["holdout"] == 0.2 for j in on.jobs)
    assert protocol_summary(on)["holdout"]["fraction"] == 0.2
    with pytest.raises(ValueError, match="holdout"):
        expand(_cfg(holdout=1.0))
