"""The workflow's figures, by rule name (the one list; the rules, ``plots.make_figure`` and the
target list in ``workflow/rules/common.smk`` refer to these names).

Each name is the rule that makes it and the stem of its files ``results/figures/<name>.<format>``.
Which of them a run makes depends on the config (``common.smk`` ``figure_names``): the first three
always, ``fig4_minibatch`` when a minibatch variant is configured, ``fig5_conversions`` when more
than one conversion is run, ``fig6_heldout`` with a holdout; ``fig7_frontier`` (the compute-budget
frontier) always.
"""

from __future__ import annotations

#: every figure of the workflow, in report order
FIGURES: tuple[str, ...] = (
    "fig1_runtime",
    "fig2_privacy_utility",
    "fig3_convergence",
    "fig4_minibatch",
    "fig5_conversions",
    "fig6_heldout",
    "fig7_frontier",
)
#: the figures every run makes
ALWAYS: tuple[str, ...] = FIGURES[:3]
