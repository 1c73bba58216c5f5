"""The workflow's figures: one table, :data:`SPECS`, each entry with its inputs, draw function and caption.

Each name is the stem of its files ``results/figures/<name>.<format>`` (and of ``figures/`` copies) and the
``{fig}`` wildcard of the one figure rule (``workflow/rules/plots.smk``); the rule's script calls
:func:`draw_figure`, its report caption (``workflow/report/figure.rst``) prints :meth:`Figure.caption`, and
``workflow/rules/common.smk`` makes the figures whose :attr:`Figure.made` holds for the config. Adding a
figure is one entry here plus its draw function in :mod:`.plots` (docs/extending.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..algorithms import ALGORITHMS
from . import plots
from .tables import read_table
from .styles import OWN_OBJECTIVE

NONPRIVATE_T = "Best T is selected **non-privately**."
#: the most methods one panel shows; a larger group is split over rows, whole families together
MAX_SERIES = 8
PAPER, MINIBATCH, BEYOND = "the paper's methods", "minibatch methods", "beyond the paper"
#: the card role of a method with a non-private step (dpnewton.algorithms.ROLES)
NONPRIVATE_ROLE = "non-private step"


@dataclass(frozen=True)
class Figure:
    #: report label and job message
    title: str
    #: input name (a key of the tables the draw function gets) -> table stem, ``results/tables/<stem>.parquet``
    inputs: dict[str, str]
    #: draw(tables, params, outputs, styles): tables = input name -> DataFrame (verified reads), params = the
    #: rule's params, outputs = the file paths to write, styles = the run's colour, line style and legend label
    #: per configuration (:func:`dpnewton.pipeline.plots.method_styles`)
    draw: Callable[[dict, dict, list, dict], None]
    #: caption(config, study) -> the report caption (reStructuredText); study = the conversion study entry
    caption: Callable[[dict, dict], str]
    #: made(plan, params) -> whether a run of this config makes the figure (params: the rule's params)
    made: Callable[[object, dict], bool] = lambda plan, params: True

    def input_files(self) -> dict[str, str]:
        return {key: f"results/tables/{stem}.parquet" for key, stem in self.inputs.items()}


def _bases(p: dict) -> dict[str, str]:
    """Configuration -> its registered algorithm, from the rule's ``methods`` (:func:`style_order`)."""
    methods = p.get("methods", [])
    return {m: k["base"] for m, k in methods.items()} if isinstance(methods, dict) else {}


def loss_comparable(names, bases: dict) -> list[str]:
    """The names among ``names`` whose excess loss the loss figures can show: all but the configurations
    of an algorithm whose card has a ``loss_note`` (``bases``: configuration -> algorithm)."""
    return [a for a in names if not getattr(ALGORITHMS.get(bases.get(a, a)), "loss_note", "")]


def best_configurations(best: pd.DataFrame, conversion: str, candidates: dict) -> dict[str, list[str]]:
    """Figure 2's additions, per dataset: among ``candidates`` (configuration -> its method, the registered
    algorithm), each method's configuration with the lowest best-T mean excess loss at the most epsilons (ties:
    the lowest geometric mean over its epsilons), and the configuration with the lowest of all at each epsilon."""
    b = best[(best["conversion"] == conversion) & best["algorithm"].isin(list(candidates))]
    b = b[np.isfinite(b["excess_loss_mean"].to_numpy(dtype=float))]
    b = b.assign(method=b["algorithm"].map(candidates), log_loss=np.log(b["excess_loss_mean"].clip(lower=1e-300)))
    out = {}
    for ds, d in b.groupby("dataset", sort=True):
        shown = d.loc[d.groupby("epsilon")["excess_loss_mean"].idxmin(), "algorithm"].tolist()
        method_best = d.loc[d.groupby(["method", "epsilon"])["excess_loss_mean"].idxmin()]
        wins = method_best["algorithm"].value_counts()
        log_mean = d.groupby("algorithm")["log_loss"].mean()
        for _, m in method_best.groupby("method", sort=True):
            shown.append(min(set(m["algorithm"]), key=lambda a: (-wins[a], log_mean[a], a)))
        out[ds] = list(dict.fromkeys(shown))
    return out


def _role(algorithm: str) -> str:
    return ALGORITHMS[algorithm].role if algorithm in ALGORITHMS else ""


def beyond_paper(base: str, average: str = "none") -> bool:
    """Whether a configuration (its registered algorithm ``base``, its release ``average``) is the project's,
    not the paper's: its card is not one of the paper's methods, or it releases an average of iterates."""
    card = ALGORITHMS.get(base)
    return card is None or not card.paper or average not in ("none", None)


def _key(p: dict, name: str) -> dict:
    methods = p.get("methods", {})
    return methods.get(name, {"base": name, "average": "none"}) if isinstance(methods, dict) else {
        "base": name, "average": "none"}


def _beyond(p: dict, name: str) -> bool:
    key = _key(p, name)
    return beyond_paper(key["base"], key["average"])


def _references(p: dict, names) -> list[str]:
    """The paper's first-order full-batch configurations among ``names``: the reference beside the project's."""
    return [a for a in names if not _beyond(p, a) and _role(_key(p, a)["base"]) == "first-order"
            and a not in set(p.get("minibatch", []))]


def split_panels(names, limit: int = MAX_SERIES) -> list[list[str]]:
    """``names`` in groups of at most ``limit``, the names of one card family kept together where they fit."""
    families: dict[str, list[str]] = {}
    for a in names:
        families.setdefault(getattr(ALGORITHMS.get(a), "family", a), []).append(a)
    groups, current = [], []
    for members in families.values():
        for k in range(0, len(members), limit):
            chunk = members[k:k + limit]
            if len(current) + len(chunk) > limit:
                groups.append(current)
                current = []
            current += chunk
    return [g for g in groups + [current] if g]


def _titled(title: str, names) -> list[tuple[str, list[str]]]:
    parts = split_panels(names)
    return [(title if len(parts) == 1 else f"{title} ({k + 1}/{len(parts)})", g) for k, g in enumerate(parts)]


def _fig1(t, p, outputs, styles):
    fig = p["figures"]
    plots.runtime_curves(t["curves"], t["costs"], loss_comparable(fig["runtime_algorithms"], _bases(p)),
                         float(fig["runtime_epsilon"]), p["conversion"], outputs, styles)


def _privacy_utility(beyond: bool):
    """Figure 2 (the paper's configurations) or 9 (the project's, beside the paper's first-order reference)."""
    def draw(t, p, outputs, styles):
        best = t["best"]
        bases = {**dict(zip(best["algorithm"], best.get("base_algorithm", best["algorithm"]))), **_bases(p)}
        figure_4 = set(p["minibatch"])
        listed = loss_comparable(p["privacy_utility"], bases)
        split = any(_beyond(p, a) for a in listed)   # Figure 9 is made: Figure 2 keeps to the paper's
        candidates = {a: bases[a] for a in loss_comparable(best["algorithm"].unique(), bases)
                      if a not in figure_4 and _role(bases[a]) != NONPRIVATE_ROLE
                      and (not split or _beyond(p, a) == beyond)}
        shown = [a for a in listed if _beyond(p, a) == beyond]
        if beyond:
            shown = _references(p, listed) + shown
        plots.privacy_utility(best, t["baseline"], shown, p["conversion"], outputs, floor=t.get("floor"),
                              styles=styles, extra=best_configurations(best, p["conversion"], candidates),
                              title=f"Privacy-utility trade-off, {BEYOND}" if beyond else "Privacy-utility trade-off")
    return draw


def _fig3(t, p, outputs, styles):
    fig = p["figures"]
    plots.convergence(t["curves"], loss_comparable(fig["convergence_algorithms"], _bases(p)),
                      fig["convergence_epsilons"], p["conversion"], outputs, styles)


def _fig4(t, p, outputs, styles):
    plots.privacy_utility(t["best"], t["baseline"], loss_comparable(p["minibatch"], _bases(p)), p["conversion"],
                          outputs, title="Minibatch variants vs DP-SGD", styles=styles)


def _fig5(t, p, outputs, styles):
    plots.conversions(t["best"], p["study"]["algorithm"], p["conversions"], outputs, t.get("baseline"))


def frontier_groups(methods, minibatch) -> list[tuple[str, list[str]]]:
    """Figures 6 and 8's row groups of methods (registered algorithms): the paper's full-batch ones, the
    minibatch ones (Figure 4's, ``minibatch``), and the project's beside the paper's first-order full-batch
    ones; each split to at most :data:`MAX_SERIES` a panel."""
    mini = set(minibatch)
    methods = [m for m in ALGORITHMS if m in set(methods)] + [m for m in methods if m not in ALGORITHMS]
    paper = [m for m in methods if not beyond_paper(m) and m not in mini]
    project = [m for m in methods if beyond_paper(m)]
    reference = [m for m in paper if _role(m) == "first-order"] if project else []
    return (_titled(PAPER + (", full batch" if mini else ""), paper)
            + _titled(MINIBATCH, [m for m in methods if m in mini]) + _titled(BEYOND, reference + project))


def _frontier(measure: str):
    def draw(t, p, outputs, styles):
        table = t["frontier"]
        table = table[table["method"].isin(loss_comparable(table["method"].unique(), {}))]
        minibatch = {_key(p, a)["base"] for a in p.get("minibatch", [])}
        plots.frontier_figure(table, t["baseline"], p["conversion"], outputs, measure, floor=t.get("floor"),
                              styles=styles, groups=frontier_groups(table["method"].unique(), minibatch))
    return draw


def _fig7(t, p, outputs, styles):
    names = p["privacy_utility"]
    paper = [a for a in names if not _beyond(p, a)]
    project = [a for a in names if _beyond(p, a)]
    groups = _titled(PAPER, paper) + _titled(BEYOND, (_references(p, names) if project else []) + project)
    plots.heldout(t["heldout"], names, p["conversion"], outputs, styles, groups=groups)


def _not_shown(cfg: dict, names=None) -> str:
    """The caption's sentence on the configurations of ``names`` (default: every one of the config) that a
    loss figure leaves out: those of an algorithm whose card has a ``loss_note``."""
    algorithms = cfg.get("algorithms") or {}
    names = algorithms if names is None else names
    bases = sorted({(algorithms.get(a) or {}).get("algorithm", a) for a in names})
    return "".join(f" Not shown: {ALGORITHMS[b].label} ({ALGORITHMS[b].loss_note})." for b in bases
                   if b in ALGORITHMS and ALGORITHMS[b].loss_note)


def _caption_fig1(cfg, study):
    return (f"Figure 1: excess loss versus runtime at epsilon = {cfg['figures']['runtime_epsilon']} (delta = n^-2), "
            "mean over seeds (+-1 s.e.) of each algorithm's best-T runs (best T listed below the legend). The "
            "runtime at iteration k is that of a lone run of k updates of the configuration (first update + "
            "(k - 1) x per-update cost), timed round-robin in one process by the timing stage "
            f"(results/tables/update_costs.csv; update steps only, one BLAS thread). {NONPRIVATE_T}"
            + _not_shown(cfg, cfg["figures"]["runtime_algorithms"]))


#: what Figures 2 and 9 say about their diverged cells and instability notes
DIVERGED_TEXT = (f"A cell whose mean excess loss exceeds {plots.DIVERGED:g} x the trivial output's is a hollow marker "
                 "at the panel's top edge (diverged), off the y-range, and named below the legend. The note below "
                 "the legend gives, per dataset, configuration and epsilon, the share of its runs (every T) that "
                 "diverged or ended no better than w = 0, and where the official explosion reset fired "
                 "(configurations with ``reset: true`` only).")


def _caption_fig2(cfg, study):
    chosen = ("the configurations of figures.privacy_utility_algorithms" if cfg["figures"]["privacy_utility_algorithms"]
              else "every configuration but Figure 4's and those of methods with a non-private step")
    return ("Figure 2: privacy-utility trade-off of the paper's methods (the project's are Figure 9). Best-T mean "
            "excess loss (+-1 s.e. band over seeds) versus "
            f"epsilon, log axes, delta = n^-2, conversion {cfg['conversion']}. Shown in each dataset's panel: "
            f"the paper's among {chosen}; and, of every method (registered algorithm) of the paper without a "
            "non-private step and not in Figure 4, the configuration with the lowest best-T mean excess loss at "
            "the most epsilons (ties: the "
            "lowest geometric mean), and the configuration with the lowest of all at each epsilon, so each "
            "epsilon's best private configuration is always shown. A colour is a method, its shades the "
            "method's tuning variants; dash-dot lines release an average of iterates, dashed lines have a "
            "**non-private step**. The black dashed line is the trivial output w = 0; the grey dotted line is "
            "the Gaussian ridge floor F* (local quadratic model), **not a lower bound** (the floor table: ridge "
            f"ERM after one Gaussian gradient release, lam tuned non-privately). {NONPRIVATE_T} {DIVERGED_TEXT}"
            + _not_shown(cfg))


def _caption_fig9(cfg, study):
    return ("Figure 9: privacy-utility trade-off of the methods beyond the paper (cards not among the paper's "
            "methods, and releases of an average of iterates), beside the paper's first-order full-batch "
            "configurations as the reference, and each such method's best configuration per dataset as in "
            "Figure 2. Best-T mean excess loss (+-1 s.e. band over seeds) versus epsilon, log axes, delta = "
            f"n^-2, conversion {cfg['conversion']}. Reference lines as in Figure 2. {NONPRIVATE_T} "
            f"{DIVERGED_TEXT}" + _not_shown(cfg))


def _caption_fig3(cfg, study):
    eps = " and ".join(str(e) for e in cfg["figures"]["convergence_epsilons"])
    return ("Figure 3: DP-GD-Oracle (non-private line-search step) versus the double-noise Newton variants: "
            "excess loss versus iteration (log axis; mean +-1 s.e.) of the best-T runs at a low and a high "
            f"epsilon ({eps}); each panel's best T is listed below the legend. {NONPRIVATE_T}"
            + _not_shown(cfg, cfg["figures"]["convergence_algorithms"]))


def _caption_fig4(cfg, study):
    names = list(cfg["figures"]["minibatch_algorithms"]) + [cfg["figures"]["minibatch_baseline"]]
    return ("Figure 4: minibatch variants of double-noise Newton versus DP-SGD: best-T mean excess loss "
            f"(+-1 s.e.) versus epsilon, delta = n^-2; the black dashed line is the trivial output w = 0. The note "
            "below the legend gives, per dataset and configuration, the largest share (over epsilon) of its runs "
            f"(every T) that diverged or ended no better than w = 0. {NONPRIVATE_T}" + _not_shown(cfg, names))


def _caption_fig5(cfg, study):
    return (f"Figure 5: the same algorithm ({study.get('algorithm', '')}) run with each epsilon -> rho "
            "conversion (paper = BS16 Lemma 3.5 closed form, bs16 = exact root of BS16 Lemma 3.6, cks = "
            "Canonne-Kamath-Steinke tight conversion, gdp = exact mu-GDP curve of Gaussian releases with "
            "mu = sqrt(2 rho), official-fsolve = the official code's fsolve, which silently returns its start "
            "value at small epsilon). Best-T mean excess loss (+-1 s.e.) versus the target epsilon; the dashed "
            "line is the trivial output w = 0; best T selected **non-privately**.")


#: what Figures 6 and 8 share in their captions
FRONTIER_TEXT = ("Per (dataset, epsilon): the best mean excess loss a method reaches within a budget (step lines: "
                 "best so far) versus the budget, log-log; one column per epsilon. Each line "
                 "is the best over all declared configurations of the method and all T within the budget: that "
                 "selection is **non-private** (argmin of the true loss). Each dataset has a row per group of "
                 f"at most {MAX_SERIES} methods: the paper's full-batch methods, the minibatch methods (Figure 4's) "
                 "and the methods beyond the paper beside the paper's first-order full-batch ones. A frontier above "
                 f"{plots.DIVERGED:g} x the trivial output's excess loss is cut (a hollow marker at the top edge, "
                 "named below the legend). A colour is a method; dashed lines: "
                 "methods with a **non-private step** (their role on the algorithm card). Reference lines: the "
                 "trivial output w = 0 (black dashed) and the Gaussian ridge floor F* (grey dotted), the local "
                 "quadratic model's floor, **not a lower bound**; the non-private optimum (excess 0) is off the "
                 "log scale.")


def _caption_fig6(cfg, study):
    return (f"Figure 6: compute-budget frontier by gradient passes, conversion {cfg['conversion']}. The budget is "
            "in gradient passes over Z (pass-equivalents, each algorithm card's cost model, units measured by "
            "benchmarks/pass_costs.py: an estimate, not a measurement); a one-shot method is costed by its "
            f"recorded Newton steps (a model). Figure 8 is the same frontier by runtime. {FRONTIER_TEXT}"
            + _not_shown(cfg))


def _caption_fig8(cfg, study):
    return (f"Figure 8: compute-budget frontier by runtime, conversion {cfg['conversion']}. The budget is in "
            "seconds of a lone run (timing stage); only timed configurations appear: methods the timing stage did "
            "not time have no line, and a one-shot method is costed as its recorded Newton steps + 1 timed "
            f"updates of its card's timed_as algorithm (a model). Figure 6 is the same frontier by gradient passes. "
            f"{FRONTIER_TEXT}" + _not_shown(cfg))


def _caption_fig7(cfg, study):
    return ("Figure 7: held-out test metrics. Each dataset was split once, seeded from its name, into a training "
            f"part and a test part of {cfg.get('holdout')} of its rows; the optimizers, the non-private optimum and "
            "the excess loss used the training part only (delta = n^-2 with the training n). Top: test accuracy "
            "(share of test rows with positive margin <z_i, w> > 0; a margin of exactly 0 counts as wrong); "
            "bottom: test log-loss (mean logistic loss on the test part's projected rows; log axis); both of the "
            "final iterate at each algorithm's best T, mean +-1 s.e. over seeds, versus epsilon (log axis), "
            f"conversion {cfg['conversion']}. Best T is selected **non-privately**, on the training excess loss, "
            "not on a test metric. The dashed line is the non-private optimum w* of the training part; the "
            "dotted line is the trivial output w = 0 (log-loss ln 2). Shown: the configurations Figures 2 and 9 "
            "list (not their per-dataset additions), also those whose excess loss the loss figures leave out: test "
            "metrics compare every method alike; a pair of rows for the paper's methods and one for those beyond "
            "the paper (with the paper's first-order full-batch configurations as the reference)."
            + _own_objective(cfg))


def _own_objective(cfg: dict) -> str:
    """The caption's sentence on the shown configurations whose card has a ``loss_note`` (legend mark
    :data:`~.styles.OWN_OBJECTIVE`)."""
    bases = sorted({(a or {}).get("algorithm", k) for k, a in (cfg.get("algorithms") or {}).items()})
    return "".join(f" {ALGORITHMS[b].label} ({OWN_OBJECTIVE}): {ALGORITHMS[b].loss_note}." for b in bases
                   if b in ALGORITHMS and ALGORITHMS[b].loss_note)


#: every figure of the workflow, in report order
SPECS: dict[str, Figure] = {
    "fig1_runtime": Figure("Figure 1: excess loss vs runtime",
                           {"best": "best_T", "curves": "best_curves", "costs": "update_costs"}, _fig1, _caption_fig1),
    "fig2_privacy_utility": Figure("Figure 2: privacy-utility",
                                   {"best": "best_T", "baseline": "baseline", "floor": "floor"},
                                   _privacy_utility(beyond=False), _caption_fig2),
    "fig3_convergence": Figure("Figure 3: convergence vs DP-GD-Oracle", {"best": "best_T", "curves": "best_curves"},
                               _fig3, _caption_fig3),
    "fig4_minibatch": Figure("Figure 4: minibatch vs DP-SGD", {"best": "best_T", "baseline": "baseline"}, _fig4,
                             _caption_fig4, made=lambda plan, p: any(a != p["figures"]["minibatch_baseline"]
                                                                     for a in p["minibatch"])),
    "fig5_conversions": Figure("Figure 5: conversions", {"best": "best_T", "baseline": "baseline"}, _fig5,
                               _caption_fig5, made=lambda plan, p: len(p["conversions"]) > 1),
    "fig6_frontier": Figure("Figure 6: compute-budget frontier by gradient passes",
                            {"frontier": "frontier", "baseline": "baseline", "floor": "floor"}, _frontier("passes"),
                            _caption_fig6),
    "fig7_heldout": Figure("Figure 7: held-out test metrics", {"heldout": "heldout"}, _fig7, _caption_fig7,
                           made=lambda plan, p: plan.holdout is not None),
    "fig8_frontier_runtime": Figure("Figure 8: compute-budget frontier by runtime",
                                    {"frontier": "frontier", "baseline": "baseline", "floor": "floor"},
                                    _frontier("runtime_s"), _caption_fig8),
    "fig9_beyond_paper": Figure("Figure 9: privacy-utility beyond the paper",
                                {"best": "best_T", "baseline": "baseline", "floor": "floor"},
                                _privacy_utility(beyond=True), _caption_fig9,
                                made=lambda plan, p: bool(beyond_paper_names(plan, p["figures"]))),
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
    """The configurations Figures 2 and 7 always show: the config's list or, when it is empty, every
    configuration but Figure 4's and those of methods with a non-private step (their card's role). Figure 2
    adds each dataset's :func:`best_configurations`."""
    if fig["privacy_utility_algorithms"]:
        return configured(plan, fig["privacy_utility_algorithms"])
    mini = set(fig["minibatch_algorithms"]) | {fig["minibatch_baseline"]}
    return [a for a in plan.algorithms if a not in mini and ALGORITHMS[plan.base(a)].role != NONPRIVATE_ROLE]


def beyond_paper_names(plan, fig: dict) -> list[str]:
    """The configurations Figure 9 lists: those of Figures 2 and 7 that are the project's (:func:`beyond_paper`)
    and whose excess loss the loss figures show."""
    names = loss_comparable(privacy_utility_names(plan, fig), {a: plan.base(a) for a in plan.algorithms})
    return [a for a in names
            if beyond_paper(plan.base(a), str(plan.algorithms[a]["hyper"].get("average", "none")))]


def figure_names(plan, fig: dict) -> list[str]:
    """The figures a run of ``plan`` makes (``fig``: the config's ``figures`` section), as the workflow's
    figure rule gets its params."""
    return made_figures(plan, {"figures": fig, "minibatch": minibatch_names(plan, fig),
                               "conversions": plan.conversions()})


def drawn_names(plan, fig: dict) -> list[str]:
    """Every configuration a figure of the run names (Figures 2, 4, 1 and 3 in that order)."""
    return (privacy_utility_names(plan, fig) + minibatch_names(plan, fig)
            + configured(plan, fig["runtime_algorithms"]) + configured(plan, fig["convergence_algorithms"]))


def style_order(plan, drawn) -> dict[str, dict]:
    """Every base algorithm (Figures 6 and 8 draw one line per algorithm) and every configuration of ``plan``
    as :func:`dpnewton.pipeline.plots.method_styles` takes them: name -> {"base": its registered algorithm,
    "average": its release, "variant": its hyper-parameters but ``average``}, the same for every figure of a
    run. Shades go to an algorithm's variants in this order: the algorithm itself (its card's defaults)
    first, then the variants of the names the figures list (``drawn``), then the others."""
    def key(a):
        if a not in plan.algorithms:
            return {"base": a, "average": "none", "variant": json.dumps({})}
        hyper = plan.algorithms[a]["hyper"]
        return {"base": plan.base(a), "average": str(hyper.get("average", "none")),
                "variant": json.dumps({k: v for k, v in hyper.items() if k != "average"}, sort_keys=True, default=str)}

    bases = [plan.base(a) for a in plan.algorithms]
    return {a: key(a) for a in dict.fromkeys(bases + list(drawn) + list(plan.algorithms))}
