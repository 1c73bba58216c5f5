"""The claims report's sections that rank methods beyond the paper's claims (none is a claim of the
paper): the winner by compute budget (frontier table), *Beyond the paper* (every private configuration
against the Gaussian ridge floor F*) and the ranking on equal accounting terms; and the Markdown helpers
the report's sections share. Each ranks by the lowest mean (**non-private** selection of T and
configuration); the tie sets within seed noise are :mod:`.ties`'s, and the winner by compute budget tests its
winners by the same rule (:func:`dpnewton.pipeline.frontier.crossover`).
"""

from __future__ import annotations

import math

import pandas as pd

from ...algorithms import ALGORITHMS
from ...floor import MECHANISM_DRAWS
from ..frontier import MEASURE_LABELS, members, untested
from ..significance import ALPHA, STATED
from .beyond import TARGETS, WHOSE, speed_misses, target_counts
from .cells import by_whose
from .verdict import format_number as _fmt


def md_table(header: list[str], rows) -> list[str]:
    """A Markdown table: the header line, its rule, one line per row (cells already formatted)."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def edge_note(edge) -> str:
    """`` (low)``/`` (high)`` when a best T sits at that edge of its grid, else nothing."""
    return f" ({edge})" if str(edge) in ("low", "high") else ""


def _names(names) -> str:
    return ", ".join(names) if len(names) else "none"


def _budget_rule(tested: bool) -> str:
    """How the budget section reads its winners: by the tie rule when the frontier has standard errors
    (``tested``), by the lowest mean alone otherwise."""
    if not tested:
        return ("The frontier table has no standard errors over seeds: each budget is read by the lowest mean alone, "
                "untested against seed noise (each row says *untested*), and an exact tie goes to the first-order "
                "method. ")
    return (f"At each budget the candidate with the lowest mean is tested against the lowest mean of the other role "
            f"(second order against first order) by the tie rule: it is *significantly best* when p < {ALPHA:g}, "
            "and the two roles *tie* otherwise (an exact tie of means is a tie); a role with no finite loss within "
            "the budget leaves the other best there. A budget whose means lack an s.e. or two seeds is read by "
            "the lowest mean and counted as untested. *crossover*: the first budget above the first where second "
            "order is best or ties at which first order is significantly best (it may be best there alone: the "
            "counts say how often). ")


def budget_section(bw, methods) -> list[str]:
    """Winner by compute budget, from the frontier table (only when the claims rule has it); ``methods``:
    the run's base algorithms. Opens with the tie rule (:data:`~dpnewton.pipeline.significance.STATED`)
    unless no row could be tested (:func:`~dpnewton.pipeline.frontier.untested`)."""
    if bw is None or not len(bw):
        return []
    second = members("second-order", methods)
    own = [m for m in second if not ALGORITHMS[m].paper]
    gloss = f" ({', '.join(own)}: this project's, not the paper's)" if own else ""
    tested = not all(untested(r) for _, r in bw.iterrows())
    L = ["", "## Winner by compute budget (from the frontier table; not a claim of the paper)", "",
         *([STATED, ""] if tested else []),
         f"Conversion {bw['conversion'].iloc[0]}. Per (dataset, epsilon) and cost measure: at each of the frontier's "
         "budgets, each method's smallest best mean excess loss within that budget, over all its declared "
         "configurations and T (results/tables/frontier.csv; **non-private** selection, as best T)"
         + (", with its standard error over seeds" if tested else "") + ". Candidates: "
         f"second order = {', '.join(second)}{gloss}; first order = {', '.join(members('first-order', methods))}. "
         f"{_names(members('non-private step', methods))} have non-private steps and "
         f"{_names(members('one-shot', methods))} are one-shot: not candidates "
         "(Figure 6 and the table cost a one-shot solve by its recorded Newton steps, a model: the table's `note`). "
         + _budget_rule(tested)
         + "Passes are pass-equivalents (benchmarks/pass_costs.py), runtimes lone-run seconds (timing stage; "
         "untimed methods absent).", "",
         "| dataset | eps | measure | winner by compute budget |", "|---|---|---|---|"]
    for r in bw.itertuples():
        L.append(f"| {r.dataset} | {r.epsilon:g} | {MEASURE_LABELS[r.measure]} | {r.reading} |")
    return L


def tight_section(table: pd.DataFrame | None, conv: dict) -> list[str]:
    """Accounting on equal terms (:func:`~.beyond.tight_ranking`): the lowest mean per cell with every method under
    the tight conversion beside the winner under the protocol's, over the same configurations."""
    if table is None or not len(table):
        return []
    changed = int(table["changed"].sum())
    return ["", "## Ranking on equal accounting terms (not a claim of the paper)", "",
            f"The zCDP methods are converted to (epsilon, delta) by `{conv['a']}` in the protocol; objective "
            "perturbation is calibrated by its own tight (epsilon, delta) profile in every setting. Here every "
            f"method that ran under the tight conversion `{conv['c']}` is ranked under it (objective perturbation "
            "unchanged), beside its ranking under the protocol's over the same configurations: the configuration "
            "with the lowest mean per cell at its best T (**non-private** selection), and the lowest of another "
            "method under the tight conversion.", "",
            *md_table(["dataset", "eps", "configurations", f"lowest under {conv['a']}", "excess",
                        f"lowest under {conv['c']}", "excess", f"runner-up under {conv['c']}", "excess",
                        "lowest changed"],
                       [[r.dataset, f"{r.epsilon:g}", str(r.configurations), r.protocol_best,
                         _fmt(r.protocol_excess), r.tight_best, f"{_fmt(r.tight_excess)} ± {_fmt(r.tight_se, 2)}",
                         r.runner_up or "n/a", _fmt(r.runner_up_excess), "yes" if r.changed else "no"]
                        for r in table.itertuples()]),
            "", f"The method with the lowest mean changes in {changed} of {len(table)} cells; the tie set says "
            "whether the change is within seed noise."]


def beyond_section(table: pd.DataFrame | None, methods) -> list[str]:
    """Beyond the paper (:mod:`.beyond`): the best private method per cell beside the ridge floor F* and
    F*'s own mechanism on the true loss, then per cell and side (the paper's second-order methods and this
    project's) the best second-order configuration against the best and against averaged DP-GD
    (``methods``: the run's base algorithms)."""
    if table is None or not len(table):
        return []
    t = TARGETS
    k = target_counts(table)
    sides = by_whose(members("second-order", methods))
    whose = {"paper": "the paper's", "project": "this project's"}
    L = ["", "## Beyond the paper (not a claim of the paper)", "",
         "Every declared configuration of every method at its best T (**non-private** selection, as above), "
         "the package's own methods and options included (iterate averaging, "
         f"{_names([m for m in methods if m in ALGORITHMS and not ALGORITHMS[m].paper])}); configurations with a "
         f"non-private step ({_names(members('non-private step', methods))}, the explosion reset) are left "
         "out. F* is the **Gaussian ridge floor (local quadratic model)**: the expected excess loss of ridge-"
         "regularised, Gaussian-perturbed ERM on the quadratic model at w* (results/tables/floor.csv). It "
         "illustrates what that model predicts at the cell's budget; it is neither a target nor a lower bound. "
         "*F*'s mechanism, true loss*: the same mechanism (one Gaussian release of the whole budget, then ridge "
         f"with F*'s lambda) evaluated on the true logistic loss, mean over {MECHANISM_DRAWS} draws: how far the "
         "quadratic model is from the loss at that noise. The trivial loss of w = 0 is listed under *Divergence*.",
         "", *md_table(["dataset", "eps", "lowest mean (T)", "excess", "DP-GD / lowest", "averaged DP-GD (T)", "F*",
                        "F*'s mechanism, true loss", "lowest / F*", "mechanism / F*"], [
             [r.dataset, f"{r.epsilon:g}", _named(r.best, r.best_T, r.best_edge), _fmt(r.best_excess),
              _ratio(r.dp_gd_over_best), _named(r.averaged, r.averaged_T, r.averaged_edge), _fmt(r.ridge_floor),
              _fmt(r.mechanism_excess_loss), _ratio(r.best_over_floor), _ratio(r.mechanism_over_floor)]
             for r in table.itertuples()]),
         "", "*Second order*, the paper's (" + _names(sides["paper"]) + ") and this project's ("
         + _names(sides["project"]) + ") apart: per cell and side the best second-order configuration, with or "
         "without averaging. Ratios against *averaged DP-GD* are at both methods' best T: iterations, lone-run "
         "runtime (timing stage; n/a when a configuration was not timed) and pass-equivalents "
         "(benchmarks/pass_costs.py); `high`: averaged DP-GD's best T is at its cap. Target (a measurement, not a "
         f"verdict): within one s.e. of the best, with >= {t['iterations_ratio']:g}x fewer iterations and "
         f">= {t['runtime_ratio']:g}x less runtime than averaged DP-GD at its best T, in at least "
         f"{t['cells_share']:.0%} of the cells ({k['speed_needed']} of {k['cells']}); the last column says which "
         "condition fails.", ""]
    rows = []
    for r in table.to_dict("records"):
        for side in WHOSE:
            if not sides[side]:
                continue
            misses = speed_misses(r, side)
            rows.append([r["dataset"], f"{r['epsilon']:g}", whose[side],
                         _named(r[f"{side}_second_order"], r[f"{side}_second_order_T"]),
                         _ratio(r[f"{side}_over_best"]), "yes" if r[f"{side}_within_se"] is True else "no",
                         _ratio(r[f"{side}_iterations_ratio"]), _ratio(r[f"{side}_runtime_ratio"]),
                         _ratio(r[f"{side}_passes_ratio"]), "; ".join(misses) if misses else "met"])
    L += md_table(["dataset", "eps", "whose", "best second order (T)", "/ best", "within 1 s.e.", "iterations ratio",
                    "runtime ratio", "passes ratio", "target"], rows)
    L += ["", "Target met: " + "; ".join(
        f"{whose[side]} ({', '.join(sides[side])}) in {k[side]['speed_met']} of {k['cells']} cells, within one s.e. "
        f"of the best in {k[side]['within_se']}" for side in WHOSE if sides[side]) + "."]
    return L


def _ratio(x) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) and math.isfinite(x) else "n/a"


def _named(name, T, edge="") -> str:
    return "n/a" if not isinstance(name, str) else f"{name} ({int(T)}{edge_note(edge)})"
