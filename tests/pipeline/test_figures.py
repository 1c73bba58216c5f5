"""What the figures show: Figure 2's per-dataset additions (each method's best configuration and each
epsilon's best), the loss figures leaving out an algorithm whose excess loss is on another objective (its
card's ``loss_note``, said in the captions), and the frontier split into Figures 6 and 8."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpnewton.algorithms import ALGORITHMS
from dpnewton.pipeline import figures, plots
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.plan import expand

REPO = Path(__file__).resolve().parents[2]


def _best(rows):
    """best_T rows from (dataset, configuration, base algorithm, epsilon, mean excess loss)."""
    return pd.DataFrame([{"dataset": ds, "algorithm": a, "base_algorithm": b, "conversion": "bs16", "epsilon": e,
                          "excess_loss_mean": m, "excess_loss_se": 0.0} for ds, a, b, e, m in rows])


def test_figure_2_adds_each_methods_best_configuration_and_each_epsilons_best():
    best = _best([
        # dp-gd-tail wins two epsilons of DP-GD; dp-gd-s8 only the last, where it is the best of all
        ("s", "dp-gd", "dp-gd", 0.1, 0.5), ("s", "dp-gd", "dp-gd", 1.0, 0.3), ("s", "dp-gd", "dp-gd", 10.0, 0.2),
        ("s", "dp-gd-tail", "dp-gd", 0.1, 0.4), ("s", "dp-gd-tail", "dp-gd", 1.0, 0.2),
        ("s", "dp-gd-tail", "dp-gd", 10.0, 0.1),
        ("s", "dp-gd-s8", "dp-gd", 0.1, 0.6), ("s", "dp-gd-s8", "dp-gd", 1.0, 0.4),
        ("s", "dp-gd-s8", "dp-gd", 10.0, 0.01),
        # objpert is the best of all at 0.1
        ("s", "objpert", "objpert", 0.1, 0.05), ("s", "objpert", "objpert", 1.0, 0.5),
        ("s", "objpert", "objpert", 10.0, 0.5),
        # hess-clip-tc2 and hess-clip win one epsilon each: the lower geometric mean decides
        ("s", "hess-clip", "hess-clip", 0.1, 0.3), ("s", "hess-clip", "hess-clip", 1.0, 0.9),
        ("s", "hess-clip-tc2", "hess-clip", 0.1, 0.35), ("s", "hess-clip-tc2", "hess-clip", 1.0, 0.25),
        ("t", "dp-gd", "dp-gd", 0.1, 0.5),
    ])
    candidates = dict(zip(best["algorithm"], best["base_algorithm"]))
    shown = figures.best_configurations(best, "bs16", candidates)
    # each epsilon's best (objpert, dp-gd-tail, dp-gd-s8), then each method's: DP-GD's dp-gd-tail, Hess-clip's tc2
    assert shown == {"s": ["objpert", "dp-gd-tail", "dp-gd-s8", "hess-clip-tc2"], "t": ["dp-gd"]}
    # another conversion's rows and configurations outside the candidates are not looked at
    assert figures.best_configurations(best, "gdp", candidates) == {}
    assert figures.best_configurations(best, "bs16", {"dp-gd": "dp-gd"}) == {"s": ["dp-gd"], "t": ["dp-gd"]}


def _params(methods, privacy_utility, minibatch=()):
    styles_in = {m: {"base": b, "average": "none", "variant": m} for m, b in methods.items()}
    return {"figures": {"runtime_algorithms": [], "convergence_algorithms": [], "runtime_epsilon": 1,
                        "convergence_epsilons": [1]},
            "conversion": "bs16", "privacy_utility": list(privacy_utility), "minibatch": list(minibatch),
            "methods": styles_in}


def _drawn_labels(monkeypatch, draw):
    labels = {}

    def fake_save(fig, paths):
        for k, ax in enumerate(fig.axes):
            labels[k] = {ln.get_label() for ln in ax.get_lines()}
        plots.plt.close(fig)

    monkeypatch.setattr(plots, "save", fake_save)
    draw()
    return labels


def test_figure_2_shows_the_winners_the_config_list_leaves_out(monkeypatch):
    best = _best([("s", a, b, e, m) for a, b, m in (("dp-gd", "dp-gd", 0.2), ("dp-gd-tail", "dp-gd", 0.1),
                                                   ("precond-dp-gd", "precond-dp-gd", 0.05),
                                                   ("dp-gd-oracle", "dp-gd-oracle", 0.001),
                                                   ("minibatch-hess-clip", "minibatch-hess-clip", 0.0001))
                  for e in (0.1, 1.0)])
    methods = dict(zip(best["algorithm"], best["base_algorithm"]))
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.7]})
    p = _params(methods, ["dp-gd"], minibatch=["minibatch-hess-clip"])
    styles = plots.method_styles(p["methods"])
    labels = _drawn_labels(monkeypatch, lambda: figures.SPECS["fig2_privacy_utility"].draw(
        {"best": best, "baseline": baseline}, p, ["f.png"], styles))
    # the list's dp-gd, DP-GD's best (the tail average) and the best of all (precond-dp-gd); neither the
    # non-private Oracle nor Figure 4's minibatch method, however low their loss
    assert labels[0] - set(plots.REFERENCES) == {"DP-GD", "dp-gd-tail", "precond-dp-gd"}


def test_an_algorithm_with_a_loss_note_is_left_out_of_the_loss_figures_and_kept_in_figure_7(monkeypatch):
    """Cubic Newton's excess loss is on its own regularised objective: it is not drawn against the others'
    (Figure 2, the frontier), the captions say so from its card, and Figure 7's test metrics keep it."""
    noted = [a for a, s in ALGORITHMS.items() if s.loss_note]
    assert noted == ["cubic-newton"]
    best = _best([("s", a, a, e, m) for a, m in (("cubic-newton", 1e-4), ("dp-gd", 0.1)) for e in (0.1, 1.0)])
    methods = {"cubic-newton": "cubic-newton", "dp-gd": "dp-gd"}
    p = _params(methods, ["cubic-newton", "dp-gd"])
    styles = plots.method_styles(p["methods"])
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.7]})
    fig2 = _drawn_labels(monkeypatch, lambda: figures.SPECS["fig2_privacy_utility"].draw(
        {"best": best, "baseline": baseline}, p, ["f.png"], styles))
    assert fig2[0] - set(plots.REFERENCES) == {"DP-GD"}
    frontier = pd.DataFrame({"dataset": "s", "conversion": "bs16", "epsilon": 1.0,
                             "method": ["cubic-newton", "dp-gd"], "role": ["second-order", "first-order"],
                             "configurations": 1, "budget_index": 0})
    for prefix in ("passes_", "runtime_"):
        frontier = frontier.assign(**{prefix + "budget": 1.0, prefix + "best_excess_loss": [1e-4, 0.1],
                                      prefix + "best_algorithm": frontier["method"], prefix + "best_T": 1,
                                      prefix + "best_cost": 1.0, prefix + "costed": True, prefix + "note": ""})
    for name in ("fig6_frontier", "fig8_frontier_runtime"):
        drawn = _drawn_labels(monkeypatch, lambda: figures.SPECS[name].draw(
            {"frontier": frontier, "baseline": baseline}, p, ["f.png"], styles))
        assert drawn[0] - set(plots.REFERENCES) == {"DP-GD"}, name
    heldout = pd.DataFrame({"dataset": "s", "algorithm": ["cubic-newton", "dp-gd"], "conversion": "bs16",
                            "epsilon": 1.0, "test_accuracy_mean": [0.5, 0.8], "test_accuracy_se": 0.0,
                            "test_log_loss_mean": [0.69, 0.4], "test_log_loss_se": 0.0, "n_test": 10,
                            "optimum_test_accuracy": 0.85, "optimum_test_log_loss": 0.35})
    fig7 = _drawn_labels(monkeypatch, lambda: figures.SPECS["fig7_heldout"].draw(
        {"heldout": heldout}, p, ["f.png"], styles))
    # a pair of rows (accuracy, log-loss) for the paper's methods, one for those beyond it beside DP-GD
    # cubic Newton is shown there, its legend entry marked: it minimises its own objective
    assert fig7[0] - {plots.OPTIMUM_LABEL} == {"DP-GD"} and {"cubic Newton (own objective)", "DP-GD"} <= fig7[2]
    cfg = load_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    assert "cubic-newton" in cfg["algorithms"]
    note = f"Not shown: cubic Newton ({ALGORITHMS['cubic-newton'].loss_note})."
    for name in ("fig2_privacy_utility", "fig6_frontier", "fig8_frontier_runtime"):
        assert note in figures.SPECS[name].caption(cfg, {}), name
    # Figures 1 and 3 name their configurations: the note only when one of them has a loss note
    assert note not in figures.SPECS["fig1_runtime"].caption(cfg, {})
    assert note not in figures.SPECS["fig7_heldout"].caption(cfg, {})
    assert (f"cubic Newton (own objective): {ALGORITHMS['cubic-newton'].loss_note}."
            in figures.SPECS["fig7_heldout"].caption(cfg, {}))


@pytest.mark.parametrize("name, measure", [("fig6_frontier", "passes"), ("fig8_frontier_runtime", "runtime_s")])
def test_the_frontier_is_two_figures_one_per_cost_measure(monkeypatch, name, measure):
    """Figure 6 (gradient passes) and Figure 8 (runtime): one row per dataset and group of methods, one column
    per epsilon."""
    seen = {}
    monkeypatch.setattr(plots, "frontier_figure", lambda table, baseline, conversion, paths, m, **kw:
                        seen.update(measure=m))
    figures.SPECS[name].draw({"frontier": pd.DataFrame({"method": []}), "baseline": pd.DataFrame()},
                             {"conversion": "bs16"}, ["f.png"], {})
    assert seen == {"measure": measure}
    assert figures.SPECS[name].caption({"conversion": "bs16", "algorithms": {}}, {}).startswith(
        f"Figure {name[3]}: compute-budget frontier by")


def test_the_committed_figures_are_what_the_default_config_publishes():
    """figures/ holds exactly the figure files `snakemake publish` makes from config/config.yaml (names from
    the plan, as the workflow's figure_files: no stale figure, none missing)."""
    cfg = load_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    plan = expand(cfg, check_data=False)
    formats = cfg["figures"]["formats"]
    expected = {f"{name}.{ext}" for name in figures.figure_names(plan, cfg["figures"]) for ext in formats}
    committed = {p.name for p in (REPO / "figures").iterdir()
                 if p.is_file() and p.name.startswith("fig") and p.suffix.lstrip(".") in formats}
    assert sorted(committed - expected) == [], "stale: remove them (git rm) or publish from config/config.yaml"
    assert sorted(expected - committed) == [], "missing: snakemake --cores 2 && snakemake publish"


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/claims.yaml", "config/paper.yaml"])
def test_no_panel_draws_more_than_eight_methods(configfile):
    """Figures 6 and 8 group the methods into rows of at most MAX_SERIES (8), whole families together: the
    paper's full-batch methods, the minibatch ones, the project's beside DP-GD; Figure 2 keeps to the paper's."""
    cfg = load_config(yaml.safe_load((REPO / configfile).read_text()))
    plan = expand(cfg, check_data=False)
    mini = {plan.base(a) for a in figures.minibatch_names(plan, cfg["figures"])}
    groups = figures.frontier_groups({plan.base(a) for a in plan.algorithms}, mini)
    assert all(0 < len(m) <= figures.MAX_SERIES for _, m in groups)
    assert {a for _, m in groups for a in m} == {plan.base(a) for a in plan.algorithms}
    where = {a: k for k, (_, m) in enumerate(groups) for a in m if a != "dp-gd" or k == 0}
    for family in ("double-noise Newton", "minibatch double-noise Newton"):
        assert len({k for a, k in where.items() if ALGORITHMS[a].family == family}) <= 1, family
    if "minibatch-hess-clip" in where:
        assert where["hess-clip"] != where["minibatch-hess-clip"] and where["qu-clip"] != where["minibatch-qu-clip"]
    assert figures.split_panels([f"x{k}" for k in range(20)]) == [[f"x{k}" for k in range(j, min(j + 8, 20))]
                                                                 for j in (0, 8, 16)]


def test_a_diverged_cell_is_marked_not_stretching_the_axis(monkeypatch):
    """A mean excess loss above DIVERGED x the trivial one is a hollow marker at the top edge, off the y-range,
    and the notes name it and the epsilon of each unstable share."""
    figs = []
    monkeypatch.setattr(plots, "save", lambda fig, paths: figs.append(fig))
    best = pd.DataFrame({"dataset": "a", "algorithm": ["dp-gd"] * 3 + ["hess-clip"] * 3, "conversion": "bs16",
                         "epsilon": [0.1, 1.0, 10.0] * 2, "excess_loss_mean": [0.05, 0.01, 1e-3, 50.0, 0.02, 2e-3],
                         "excess_loss_se": 0.0, "unstable_fraction": [0.0, 0.0, 0.0, 1.0, 0.25, 0.0]})
    baseline = pd.DataFrame({"dataset": ["a"], "trivial_excess_loss": [0.1]})
    plots.privacy_utility(best, baseline, ["dp-gd", "hess-clip"], "bs16", ["f.png"])
    (fig,) = figs
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert ax.get_ylim()[1] < plots.DIVERGED * 0.1
    note = "\n".join(t.get_text() for t in fig.texts).replace("\n    ", " ")
    assert "a: Hess-clip at eps=0.1" in note and "Hess-clip 100% at eps=0.1, 25% at eps=1" in note
    hollow = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "none"]
    assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [0.1]
    plots.plt.close(fig)


def test_a_group_without_results_gets_no_row(monkeypatch):
    """Figure 8 by runtime: the minibatch methods are not timed, so their row is left out (and named), not
    drawn as empty panels."""
    figs = []
    monkeypatch.setattr(plots, "save", lambda fig, paths: figs.append(fig))
    frontier = pd.DataFrame({"dataset": "s", "conversion": "bs16", "epsilon": 1.0, "method": ["dp-gd", "dp-sgd"],
                             "role": "first-order", "configurations": 1, "budget_index": 0})
    for prefix in ("passes_", "runtime_"):
        frontier = frontier.assign(**{prefix + "budget": 1.0, prefix + "best_algorithm": frontier["method"],
                                      prefix + "best_T": 1, prefix + "best_cost": 1.0, prefix + "costed": True,
                                      prefix + "note": ""})
    frontier = frontier.assign(passes_best_excess_loss=[0.1, 0.2], runtime_best_excess_loss=[0.1, float("nan")])
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.7]})
    groups = [("full batch", ["dp-gd"]), ("minibatch", ["dp-sgd"])]
    plots.frontier_figure(frontier, baseline, "bs16", ["f.png"], "passes", groups=groups)
    plots.frontier_figure(frontier, baseline, "bs16", ["f.png"], "runtime_s", groups=groups)
    passes, runtime = ([a for a in f.axes if a.get_visible()] for f in figs)
    assert len(passes) == 2 and len(runtime) == 1
    assert "No row (no method of the group timed): minibatch (s)" in "".join(t.get_text() for t in figs[1].texts)
    plots.plt.close("all")
