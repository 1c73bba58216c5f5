"""A configuration keeps one colour, line style and label across the figures (its algorithm's colour, a shade
per tuning variant), configurations stay apart, and no text sits over the data."""

import colorsys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from matplotlib.colors import to_hex, to_rgb

from dpnewton.algorithms import ALGORITHMS
from dpnewton.pipeline import plots
from dpnewton.pipeline.config import load_config
from dpnewton.pipeline.figures import drawn_names, style_order
from dpnewton.pipeline.plan import expand

REPO = Path(__file__).resolve().parents[2]


def _hue_gap(a: str, b: str) -> float:
    gap = abs(colorsys.rgb_to_hls(*to_rgb(a))[0] - colorsys.rgb_to_hls(*to_rgb(b))[0])
    return min(gap, 1.0 - gap)  # hue is an angle: 0.999 and 0.0 are neighbours


def test_every_registered_algorithm_has_its_own_colour_in_every_run():
    """An algorithm's colour and marker are its card's, not its place in the registry, a config's order or a
    figure's subset; a method with a non-private step is dashed and says so in its label."""
    styles = plots.method_styles(list(ALGORITHMS))
    for name, style in styles.items():
        assert (style["color"], style["marker"]) == (ALGORITHMS[name].colour, ALGORITHMS[name].marker)
    taken = {}
    for name, card in ALGORITHMS.items():
        assert card.colour not in taken, (f"card {name!r} has colour {card.colour}, already card "
                                          f"{taken.get(card.colour)!r}'s: give it colour='#rrggbb' of its own, "
                                          f"not one of {sorted(taken)}")
        taken[card.colour] = name
    assert plots.method_styles(["objpert", "dp-gd"]) == {a: styles[a] for a in ("dp-gd", "objpert")}
    for name, style in styles.items():
        nonprivate = ALGORITHMS[name].role == "non-private step"
        assert (style["ls"] == "--") == nonprivate
        own = " (own objective)" if ALGORITHMS[name].loss_note else ""
        assert style["label"] == plots.label(name) + (" (non-private step)" if nonprivate else "") + own
    # neither the trivial line's black nor the floor's dots is a method's
    assert not {"#000000", "#737373"} & set(taken) and ":" not in plots.LINES.values()


def test_a_full_batch_method_and_its_minibatch_variant_look_apart():
    """Hess-clip vs minibatch-hess-clip (and the QU pair): hues at least 0.08 apart and different markers."""
    for soi in ("hess", "qu"):
        for mod in ("clip", "add"):
            full, mini = ALGORITHMS[f"{soi}-{mod}"], ALGORITHMS[f"minibatch-{soi}-{mod}"]
            assert full.family != mini.family and full.marker != mini.marker
            assert _hue_gap(full.colour, mini.colour) >= 0.08, (full.name, mini.name)


def test_adding_cards_changes_no_existing_style():
    """A 17th and an 18th card (registered as a plugin registers, removed afterwards) leave every existing
    card's colour, marker and line style as they were."""
    import dataclasses

    from dpnewton.algorithms import register

    before = plots.method_styles(list(ALGORITHMS))
    added = []
    try:
        for k, colour in enumerate(("#123456", "#654321")):
            card = dataclasses.replace(ALGORITHMS["dp-gd"], name=f"style-test-{k}", colour=colour, marker="h")
            added.append(register(card).name)
        after = plots.method_styles(list(ALGORITHMS))
    finally:
        for name in added:
            ALGORITHMS.pop(name)
    assert {n: after[n] for n in before} == before
    assert [after[n]["color"] for n in added] == ["#123456", "#654321"]


def test_configurations_are_shades_and_line_styles_of_their_algorithm():
    """Tuning variants of an algorithm get shades of its colour (and markers), an averaged release the
    dash-dot line of its variant; the legend lists an algorithm's configurations together."""
    methods = {"hess-clip": {"base": "hess-clip", "average": "none", "variant": "{}"},
               "dp-gd-s8": {"base": "dp-gd", "average": "none", "variant": "s8"},
               "dp-gd": {"base": "dp-gd", "average": "none", "variant": "{}"},
               "dp-gd-tail": {"base": "dp-gd", "average": "tail", "variant": "{}"},
               "dp-gd-tail-s8": {"base": "dp-gd", "average": "tail", "variant": "s8"}}
    styles = plots.method_styles(methods)
    assert list(styles) == ["dp-gd-s8", "dp-gd-tail-s8", "dp-gd", "dp-gd-tail", "hess-clip"]
    hue = {n: colorsys.rgb_to_hls(*to_rgb(s["color"]))[0] for n, s in styles.items()}
    assert styles["dp-gd-s8"]["color"] == ALGORITHMS["dp-gd"].colour
    assert styles["dp-gd"]["color"] != styles["dp-gd-s8"]["color"]
    assert abs(hue["dp-gd"] - hue["dp-gd-s8"]) < 0.01
    assert styles["dp-gd"]["marker"] != styles["dp-gd-s8"]["marker"]
    for last, tail in (("dp-gd", "dp-gd-tail"), ("dp-gd-s8", "dp-gd-tail-s8")):
        assert styles[tail]["color"] == styles[last]["color"]
        assert (styles[last]["ls"], styles[tail]["ls"]) == ("-", "-.")


def _drawn_styles(monkeypatch, draw):
    seen = {}

    def fake_save(fig, paths):
        for ax in fig.axes:
            for ln in ax.get_lines():
                seen[ln.get_label()] = (to_hex(ln.get_color()), ln.get_linestyle())
        plots.plt.close(fig)

    monkeypatch.setattr(plots, "save", fake_save)
    draw()
    return seen


def _frontier(method="objpert", role="one-shot"):
    frontier = pd.DataFrame({"dataset": "s", "conversion": "bs16", "epsilon": 1.0, "method": [method] * 2,
                             "role": role, "configurations": 1, "budget_index": [0, 1]})
    for prefix in ("passes_", "runtime_"):
        frontier = frontier.assign(**{prefix + "budget": [1.0, 10.0], prefix + "best_excess_loss": [0.02, 0.01],
                                      prefix + "best_algorithm": method, prefix + "best_T": 1,
                                      prefix + "best_cost": 1.0, prefix + "costed": True, prefix + "note": ""})
    return frontier


def test_a_method_has_the_same_style_in_figure_2_and_figure_6(tmp_path, monkeypatch):
    styles = plots.method_styles(["dp-gd", "hess-clip", "qu-clip", "objpert"])
    best = pd.DataFrame({"dataset": "s", "algorithm": ["objpert", "objpert", "qu-clip", "qu-clip"],
                         "conversion": "bs16", "epsilon": [0.1, 1.0, 0.1, 1.0],
                         "excess_loss_mean": [0.05, 0.01, 0.04, 0.02], "excess_loss_se": 0.0})
    baseline = pd.DataFrame({"dataset": ["s"], "trivial_excess_loss": [0.1]})
    fig2 = _drawn_styles(monkeypatch, lambda: plots.privacy_utility(
        best, baseline, ["qu-clip", "objpert"], "bs16", [tmp_path / "f2.png"], styles=styles))
    fig6 = _drawn_styles(monkeypatch, lambda: plots.frontier_figure(
        _frontier(), baseline, "bs16", [tmp_path / "f6.png"], styles=styles))
    for name in ("objpert", "qu-clip"):
        assert fig2[plots.label(name)] == (styles[name]["color"], styles[name]["ls"])
    assert fig6[plots.label("objpert")] == (styles["objpert"]["color"], styles["objpert"]["ls"])


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/claims.yaml", ".test/config/config.yaml"])
def test_every_configuration_has_its_own_style(configfile):
    """Every configuration a shipped config declares, and each base algorithm (Figures 6 and 8 draw one line per
    algorithm), has its own (colour, line style), and its algorithm's hue."""
    cfg = load_config(yaml.safe_load((REPO / configfile).read_text()))
    plan = expand(cfg, check_data=False)
    drawn = drawn_names(plan, cfg["figures"])
    assert set(drawn) <= set(plan.algorithms) and len(drawn) > 1
    methods = style_order(plan, drawn)
    styles = plots.method_styles(methods)
    bases = {plan.base(a) for a in plan.algorithms}
    assert set(styles) == set(plan.algorithms) | bases
    assert len({(s["color"], s["ls"]) for s in styles.values()}) == len(styles)
    for name in styles:
        base = methods[name]["base"]
        assert _hue_gap(styles[name]["color"], styles[base]["color"]) <= 0.01, (name, base)
    # the algorithm's own line (Figures 6 and 8) is its card's colour
    assert all(styles[b]["color"] == ALGORITHMS[b].colour for b in bases)


def test_legend_notes_and_title_sit_outside_the_panels(tmp_path, monkeypatch):
    """Figure 2's instability note and the shared legend are below the panels, the title above them:
    no text over the data."""
    figs = []
    monkeypatch.setattr(plots, "save", lambda fig, paths: figs.append(fig))
    best = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "algorithm": "dp-gd", "conversion": "bs16",
                         "epsilon": [0.1, 1.0] * 2, "excess_loss_mean": [0.05, 0.01, 0.04, 0.02],
                         "excess_loss_se": 0.0, "unstable_fraction": [0.5, 0.0, 0.25, 0.0]})
    baseline = pd.DataFrame({"dataset": ["a", "b"], "trivial_excess_loss": [0.1, 0.1]})
    plots.privacy_utility(best, baseline, ["dp-gd"], "bs16", [tmp_path / "f.png"])
    (fig,) = figs
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    assert all(not ax.texts for ax in fig.axes)
    (legend,) = fig.legends
    (title,) = [t for t in fig.texts if t.get_text().startswith("Privacy-utility trade-off")]
    (note,) = [t for t in fig.texts if t is not title]
    assert "a: DP-GD 50% at eps=0.1" in note.get_text() and "b: DP-GD 25% at eps=0.1" in note.get_text()
    bottom = min(p.y0 for p in panels)
    assert legend.get_window_extent(renderer).y1 <= bottom and note.get_window_extent(renderer).y1 <= bottom
    assert title.get_window_extent(renderer).y0 >= max(p.y1 for p in panels)
    plots.plt.close(fig)


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
