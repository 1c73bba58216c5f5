"""A method keeps one colour and line style across the figures of a run, and methods stay apart."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from dpnewton.pipeline import plots
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.figures import drawn_names, style_order
from dpnewton.pipeline.plan import expand

REPO = Path(__file__).resolve().parents[2]


def test_twenty_methods_get_twenty_distinct_styles():
    names = [f"m{k}" for k in range(20)]
    styles = plots.method_styles(names)
    assert len({(s["color"], s["ls"]) for s in styles.values()}) == 20
    # neither the non-private dash of Figure 6 nor the floor's dots is a method's line
    assert {s["ls"] for s in styles.values()} <= {"-", "-."}
    # a repeated name keeps its first slot
    assert plots.method_styles(["a", "b", "a"]) == plots.method_styles(["a", "b"])


def _drawn_styles(monkeypatch, draw):
    seen = {}

    def fake_save(fig, paths):
        for ax in fig.axes:
            for ln in ax.get_lines():
                seen[ln.get_label()] = (ln.get_color(), ln.get_linestyle())
        plots.plt.close(fig)

    monkeypatch.setattr(plots, "save", fake_save)
    draw()
    return seen


def test_a_method_has_the_same_style_in_figure_2_and_figure_7(tmp_path, monkeypatch):
    methods = ["dp-gd", "hess-clip", "qu-clip", "objpert"]
    styles = plots.method_styles(methods)
    best = pd.DataFrame({"dataset": "s", "algorithm": ["objpert", "objpert", "qu-clip", "qu-clip"],
                         "conversion": "bs16", "epsilon": [0.1, 1.0, 0.1, 1.0],
                         "excess_loss_mean": [0.05, 0.01, 0.04, 0.02], "excess_loss_se": 0.0})
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.1]})
    fig2 = _drawn_styles(monkeypatch, lambda: plots.privacy_utility(
        best, baseline, ["qu-clip", "objpert"], "bs16", [tmp_path / "f2.png"], styles=styles))
    frontier = pd.DataFrame({"dataset": "s", "conversion": "bs16", "epsilon": 1.0, "method": ["objpert"] * 2,
                             "role": "one-shot", "configurations": 1, "budget_index": [0, 1]})
    for prefix in ("passes_", "runtime_"):
        frontier = frontier.assign(**{prefix + "budget": [1.0, 10.0], prefix + "best_excess_loss": [0.02, 0.01],
                                      prefix + "best_algorithm": "objpert", prefix + "best_T": 1,
                                      prefix + "best_cost": 1.0, prefix + "costed": True, prefix + "note": ""})
    fig6 = _drawn_styles(monkeypatch, lambda: plots.frontier_figure(
        frontier, baseline, "bs16", [tmp_path / "f7.png"], styles=styles))
    for name in ("objpert", "qu-clip"):
        colour, ls = styles[name]["color"], styles[name]["ls"]
        assert fig2[plots.label(name)] == (colour, ls)
    assert fig6[plots.label("objpert")] == (styles["objpert"]["color"], styles["objpert"]["ls"])
    # the config's order decides, not the figure's subset: objpert is the 4th method in both
    assert fig2[plots.label("objpert")][0] == plots.plt.get_cmap("tab10").colors[3]


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/claims.yaml", ".test/config/config.yaml"])
def test_every_name_a_figure_draws_has_its_own_style(configfile):
    """The shipped configs declare up to 33 configurations, more than the 20 (colour, line style) pairs: the
    names the figures draw (Figure 6's base algorithms, the configurations the figure lists name, or all of
    them when the privacy-utility list is empty, as in the default config) still get distinct pairs."""
    cfg = load_config(yaml.safe_load((REPO / configfile).read_text()))
    plan = expand(cfg, check_data=False)
    drawn = drawn_names(plan, cfg["figures"])
    assert set(drawn) <= set(plan.algorithms) and len(drawn) > 1
    bases = [plan.base(a) for a in plan.algorithms]
    styles = plots.method_styles(style_order(plan, drawn))
    shown = list(dict.fromkeys(bases + drawn))
    assert len({(styles[m]["color"], styles[m]["ls"]) for m in shown}) == len(shown)
    # precond-dp-gd and hess-clip were both solid blue in Figure 6 when styles followed the config's order
    if "precond-dp-gd" in bases:
        assert styles["precond-dp-gd"] != styles["hess-clip"]


def test_figure_3_has_a_log_iteration_axis_from_zero(tmp_path, monkeypatch):
    """The Oracle runs thousands of iterations and the Newton runs tens: on a linear axis the latter vanish."""
    axes = []
    monkeypatch.setattr(plots, "save", lambda fig, paths: axes.extend(fig.axes))
    curves = pd.DataFrame({"dataset": "s", "conversion": "bs16", "epsilon": 1.0,
                           "algorithm": ["hess-clip"] * 3 + ["dp-gd-oracle"] * 3, "iterate": [0, 4, 8, 0, 500, 5000],
                           "iterations": [8] * 3 + [5000] * 3, "excess_loss_mean": [0.3, 0.1, 0.05, 0.3, 0.1, 0.01],
                           "excess_loss_se": 0.0})
    plots.convergence(curves, ["dp-gd-oracle", "hess-clip"], [1.0], "bs16", [tmp_path / "f3.png"])
    (ax,) = axes
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] == 0.0 and ax.get_xlim()[1] >= 5000
    plots.plt.close("all")


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg"])
def test_a_figure_file_is_the_same_bytes_when_drawn_again(tmp_path, fmt):
    def draw(path):
        fig, ax = plots.plt.subplots()
        ax.plot([1, 2, 3], [3, 1, 2])
        plots.save(fig, [path])
        return path.read_bytes()

    assert draw(tmp_path / f"a.{fmt}") == draw(tmp_path / f"b.{fmt}")
