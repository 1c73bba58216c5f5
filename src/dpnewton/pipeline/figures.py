"""The workflow's figures (the one list; the figure rule ``{fig}`` of ``workflow/rules/plots.smk``,
``plots.make_figure``, the report caption ``workflow/report/figure.rst`` and the target list in
``workflow/rules/common.smk`` refer to these names).

Each name is the stem of its files ``results/figures/<name>.<format>`` (and of ``figures/`` copies);
:data:`SPECS` says which tables a figure reads and its title (the report label and the job's
message). Which of them a run makes depends on the config (``common.smk`` ``figure_names``): the
first three always, ``fig4_minibatch`` when a minibatch variant is configured, ``fig5_conversions``
when more than one conversion is run, ``fig6_frontier`` (the compute-budget frontier) always,
``fig7_heldout`` with a holdout.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..algorithms import ALGORITHMS


@dataclass(frozen=True)
class Figure:
    #: report label and job message
    title: str
    #: input name (as ``plots.make_figure`` reads it) -> table stem, ``results/tables/<stem>.parquet``
    inputs: dict[str, str]

    def input_files(self) -> dict[str, str]:
        return {key: f"results/tables/{stem}.parquet" for key, stem in self.inputs.items()}


#: every figure of the workflow, in report order
SPECS: dict[str, Figure] = {
    "fig1_runtime": Figure("Figure 1: excess loss vs runtime",
                           {"best": "best_T", "curves": "best_curves", "costs": "update_costs"}),
    "fig2_privacy_utility": Figure("Figure 2: privacy-utility",
                                   {"best": "best_T", "baseline": "baseline", "floor": "floor"}),
    "fig3_convergence": Figure("Figure 3: convergence vs DP-GD-Oracle", {"best": "best_T", "curves": "best_curves"}),
    "fig4_minibatch": Figure("Figure 4: minibatch vs DP-SGD", {"best": "best_T", "baseline": "baseline"}),
    "fig5_conversions": Figure("Figure 5: conversions", {"best": "best_T", "baseline": "baseline"}),
    "fig6_frontier": Figure("Figure 6: compute-budget frontier",
                            {"frontier": "frontier", "baseline": "baseline", "floor": "floor"}),
    "fig7_heldout": Figure("Figure 7: held-out test metrics", {"heldout": "heldout"}),
}
FIGURES: tuple[str, ...] = tuple(SPECS)
#: the figures every run makes
ALWAYS: tuple[str, ...] = FIGURES[:3]


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
