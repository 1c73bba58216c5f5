"""The workflow's figures: one table, :data:`SPECS`, each entry with its inputs, draw function and caption.

Each name is the stem of its files ``results/figures/<name>.<format>`` (and of ``figures/`` copies) and the
``{fig}`` wildcard of the one figure rule (``workflow/rules/plots.smk``); the rule's script calls
:func:`draw_figure`, its report caption (``workflow/report/figure.rst``) prints :meth:`Figure.caption`, and
``workflow/rules/common.smk`` makes the figures whose :attr:`Figure.made` holds for the config. Adding a
figure is one entry here plus its draw function in :mod:`.plots` (docs/extending.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..algorithms import ALGORITHMS
from . import plots
from .tables import read_table

NONPRIVATE_T = "Best T is selected **non-privately**."


@dataclass(frozen=True)
class Figure:
    #: report label and job message
    title: str
    #: input name (a key of the tables the draw function gets) -> table stem, ``results/tables/<stem>.parquet``
    inputs: dict[str, str]
    #: draw(tables, params, outputs, styles): tables = input name -> DataFrame (verified reads), params = the
    #: rule's params, outputs = the file paths to write, styles = the run's colour per method
    draw: Callable[[dict, dict, list, dict], None]
    #: caption(config, study) -> the report caption (reStructuredText); study = the conversion study entry
    caption: Callable[[dict, dict], str]
    #: made(plan, params) -> whether a run of this config makes the figure (params: the rule's params)
    made: Callable[[object, dict], bool] = lambda plan, params: True

    def input_files(self) -> dict[str, str]:
        return {key: f"results/tables/{stem}.parquet" for key, stem in self.inputs.items()}


def _fig1(t, p, outputs, styles):
    fig = p["figures"]
    plots.runtime_curves(t["curves"], t["costs"], fig["runtime_algorithms"], float(fig["runtime_epsilon"]),
                         p["conversion"], outputs, styles)


def _fig2(t, p, outputs, styles):
    plots.privacy_utility(t["best"], t["baseline"], p["privacy_utility"], p["conversion"], outputs,
                          floor=t.get("floor"), styles=styles)


def _fig3(t, p, outputs, styles):
    fig = p["figures"]
    plots.convergence(t["curves"], fig["convergence_algorithms"], fig["convergence_epsilons"], p["conversion"],
                      outputs, styles)


def _fig4(t, p, outputs, styles):
    plots.privacy_utility(t["best"], t["baseline"], p["minibatch"], p["conversion"], outputs,
                          title="Minibatch variants vs DP-SGD", styles=styles)


def _fig5(t, p, outputs, styles):
    plots.conversions(t["best"], p["study"]["algorithm"], p["conversions"], outputs, t.get("baseline"))


def _fig6(t, p, outputs, styles):
    plots.frontier_figure(t["frontier"], t["baseline"], p["conversion"], outputs, floor=t.get("floor"),
                          styles=styles)


def _fig7(t, p, outputs, styles):
    plots.heldout(t["heldout"], p["privacy_utility"], p["conversion"], outputs, styles)


def _caption_fig1(cfg, study):
    return (f"Figure 1: excess loss versus runtime at epsilon = {cfg['figures']['runtime_epsilon']} (delta = n^-2), "
            "mean over seeds (+-1 s.e.) of each algorithm's best-T runs. The runtime at iteration k is that of a "
            "lone run of k updates of the configuration (first update + (k - 1) x per-update cost), timed "
            "round-robin in one process by the timing stage (results/tables/update_costs.csv; update steps only, "
            f"one BLAS thread). {NONPRIVATE_T}")


def _caption_fig2(cfg, study):
    return ("Figure 2: privacy-utility trade-off. Best-T mean excess loss (+-1 s.e. band over seeds) versus "
            f"epsilon, log axes, delta = n^-2, conversion {cfg['conversion']}; the black dashed line is the trivial "
            "output w = 0; the grey dashed line is the Gaussian ridge floor F* (local quadratic model), **not a "
            "lower bound** (the floor table: ridge ERM after one Gaussian gradient release, lam tuned "
            f"non-privately). {NONPRIVATE_T} The note in each panel gives, per algorithm, the largest share (over "
            "epsilon) of its runs (every T) that diverged or ended no better than w = 0, and the share of "
            "iterations where the official explosion reset fired (configurations with ``reset: true`` only).")


def _caption_fig3(cfg, study):
    eps = " and ".join(str(e) for e in cfg["figures"]["convergence_epsilons"])
    return ("Figure 3: DP-GD-Oracle (non-private line-search step) versus the double-noise Newton variants: "
            "excess loss versus iteration (log axis; mean +-1 s.e.) of the best-T runs at a low and a high "
            f"epsilon ({eps}). {NONPRIVATE_T}")


def _caption_fig4(cfg, study):
    return ("Figure 4: minibatch variants of double-noise Newton versus DP-SGD: best-T mean excess loss "
            f"(+-1 s.e.) versus epsilon, delta = n^-2. {NONPRIVATE_T}")


def _caption_fig5(cfg, study):
    return (f"Figure 5: the same algorithm ({study.get('algorithm', '')}) run with each epsilon -> rho "
            "conversion (paper = BS16 Lemma 3.5 closed form, bs16 = exact root of BS16 Lemma 3.6, cks = "
            "Canonne-Kamath-Steinke tight conversion, gdp = exact mu-GDP curve of Gaussian releases with "
            "mu = sqrt(2 rho), official-fsolve = the official code's fsolve, which silently returns its start "
            "value at small epsilon). Best-T mean excess loss (+-1 s.e.) versus the target epsilon; the dashed "
            "line is the trivial output w = 0; best T selected **non-privately**.")


def _caption_fig6(cfg, study):
    return (f"Figure 6: compute-budget frontier, conversion {cfg['conversion']}. Per (dataset, epsilon): the best "
            "mean excess loss a method reaches within a budget (step lines: best so far) versus the budget, "
            "log-log; top row of each dataset in gradient passes over Z (pass-equivalents, each algorithm card's "
            "cost model, units measured by benchmarks/pass_costs.py: an estimate, not a measurement), bottom row in "
            "seconds of a lone run (timing stage; only timed configurations appear: methods the timing stage did "
            "not time have no runtime line). A one-shot method is costed by its recorded Newton steps (a model). "
            "Each line is the best over all declared configurations of the method and all T within the budget: "
            "that selection is **non-private** (argmin of the true loss). Dashed lines: methods with a "
            "**non-private step** (their role on the algorithm card). Reference lines: the trivial output w = 0 "
            "(black dashed) and the Gaussian ridge floor F* (dotted), the local quadratic model's floor, **not a "
            "lower bound**; the non-private optimum (excess 0) is off the log scale.")


def _caption_fig7(cfg, study):
    return ("Figure 7: held-out test metrics. Each dataset was split once, seeded from its name, into a training "
            f"part and a test part of {cfg.get('holdout')} of its rows; the optimizers, the non-private optimum and "
            "the excess loss used the training part only (delta = n^-2 with the training n). Top: test accuracy "
            "(share of test rows with positive margin <z_i, w> > 0; a margin of exactly 0 counts as wrong); "
            "bottom: test log-loss (mean logistic loss on the test part's projected rows; log axis); both of the "
            "final iterate at each algorithm's best T, mean +-1 s.e. over seeds, versus epsilon (log axis), "
            f"conversion {cfg['conversion']}. Best T is selected **non-privately**, on the training excess loss, "
            "not on a test metric. The dashed line is the non-private optimum w* of the training part; the "
            "dotted line is the trivial output w = 0 (log-loss ln 2).")


#: every figure of the workflow, in report order
SPECS: dict[str, Figure] = {
    "fig1_runtime": Figure("Figure 1: excess loss vs runtime",
                           {"best": "best_T", "curves": "best_curves", "costs": "update_costs"}, _fig1, _caption_fig1),
    "fig2_privacy_utility": Figure("Figure 2: privacy-utility",
                                   {"best": "best_T", "baseline": "baseline", "floor": "floor"}, _fig2, _caption_fig2),
    "fig3_convergence": Figure("Figure 3: convergence vs DP-GD-Oracle", {"best": "best_T", "curves": "best_curves"},
                               _fig3, _caption_fig3),
    "fig4_minibatch": Figure("Figure 4: minibatch vs DP-SGD", {"best": "best_T", "baseline": "baseline"}, _fig4,
                             _caption_fig4, made=lambda plan, p: any(a != p["figures"]["minibatch_baseline"]
                                                                     for a in p["minibatch"])),
    "fig5_conversions": Figure("Figure 5: conversions", {"best": "best_T", "baseline": "baseline"}, _fig5,
                               _caption_fig5, made=lambda plan, p: len(p["conversions"]) > 1),
    "fig6_frontier": Figure("Figure 6: compute-budget frontier",
                            {"frontier": "frontier", "baseline": "baseline", "floor": "floor"}, _fig6, _caption_fig6),
    "fig7_heldout": Figure("Figure 7: held-out test metrics", {"heldout": "heldout"}, _fig7, _caption_fig7,
                           made=lambda plan, p: plan.holdout is not None),
}
FIGURES: tuple[str, ...] = tuple(SPECS)


def get_figure(name: str) -> Figure:
    if name not in SPECS:
        raise ValueError(f"no figure {name!r}: the figures are {', '.join(SPECS)}")
    return SPECS[name]


def made_figures(plan, params: dict) -> list[str]:
    """The figures a run of ``plan`` makes (``params``: what the figure rule's params hold)."""
    return [name for name, spec in SPECS.items() if spec.made(plan, params)]


def draw_figure(name: str, inputs: dict, outputs: list, params: dict) -> None:
    """The figure rule's entry point: read the figure's tables (verified) and draw it into ``outputs``."""
    tables = {key: read_table(path) for key, path in inputs.items()}
    get_figure(name).draw(tables, params, outputs, plots.method_styles(params.get("methods", [])))


def configured(plan, names) -> list[str]:
    """The names among ``names`` that ``plan`` runs, in the given order."""
    return [a for a in names if a in plan.algorithms]


def minibatch_names(plan, fig: dict) -> list[str]:
    """Figure 4's configurations (``fig``: the config's ``figures`` section)."""
    return configured(plan, list(fig["minibatch_algorithms"]) + [fig["minibatch_baseline"]])


def privacy_utility_names(plan, fig: dict) -> list[str]:
    """Figure 2's configurations: the config's list or, when it is empty, every configuration but
    Figure 4's and those of methods with a non-private step (their card's role)."""
    if fig["privacy_utility_algorithms"]:
        return configured(plan, fig["privacy_utility_algorithms"])
    mini = set(fig["minibatch_algorithms"]) | {fig["minibatch_baseline"]}
    return [a for a in plan.algorithms if a not in mini and ALGORITHMS[plan.base(a)].role != "non-private step"]


def drawn_names(plan, fig: dict) -> list[str]:
    """Every configuration a figure of the run names (Figures 2, 4, 1 and 3 in that order)."""
    return (privacy_utility_names(plan, fig) + minibatch_names(plan, fig)
            + configured(plan, fig["runtime_algorithms"]) + configured(plan, fig["convergence_algorithms"]))


def style_order(plan, drawn) -> list[str]:
    """The order in which :func:`dpnewton.pipeline.plots.method_styles` hands out (colour, line style)
    pairs, the same for every figure of a run: the run's base algorithms first (Figure 6 draws one
    line per base algorithm), then the configurations the other figures name (``drawn``), then every
    other configuration of ``plan``. The drawn names thus get distinct pairs even when the config
    declares more configurations than there are pairs (20)."""
    return list(dict.fromkeys([plan.base(a) for a in plan.algorithms] + list(drawn) + list(plan.algorithms)))
