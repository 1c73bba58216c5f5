"""The claims report's "In short" section: known answers on hand-made tables, and the README copy."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpnewton.pipeline.claims import headline as hl
from dpnewton.pipeline.claims.beyond import COLUMNS as BEYOND_COLUMNS
from dpnewton.pipeline.frontier import CROSSOVER_COLUMNS


def test_verdict_counts_per_setting():
    v = pd.DataFrame({"setting": ["a", "a", "a", "b", "c"],
                      "verdict": ["reproduced", "not reproduced", "not reproduced", "partly", "not evaluable"]})
    line = hl.verdict_line(v)
    assert line.endswith("a (3): 1 reproduced, 2 not reproduced; b (1): 1 partly; c (1): 1 not evaluable.")


def beyond_frame():
    rows = [  # best, best/F*, mechanism/F*, DP-GD / best, (within s.e., speed target) of the paper's, this project's
        ("a1a", 0.1, "dp-gd-tail", 1.5, 3.0, 1.2, (False, False), (True, True)),
        ("a1a", 1.0, "objpert", 1.1, 2.5, 2.0, (True, True), (True, False)),
        ("a1a", 10.0, "dp-gd-tail", 1.2, 20.0, 3.0, (True, False), (False, False)),
        ("s", 0.01, "dp-gd", 9.0, np.nan, 1.0, (False, False), (None, None)),
    ]
    recs = []
    for d, e, b, f, m, g, paper, project in rows:
        rec = {"dataset": d, "epsilon": e, "best": b, "best_over_floor": f, "mechanism_over_floor": m,
               "dp_gd_over_best": g}
        for side, (w, sp) in (("paper", paper), ("project", project)):
            if w is not None:
                rec.update({f"{side}_second_order": "x", f"{side}_within_se": w, f"{side}_speed_target_met": sp})
        recs.append(rec)
    return pd.DataFrame(recs).reindex(columns=BEYOND_COLUMNS)


def test_best_lines_count_cells_and_each_sides_second_order():
    text = "\n".join(hl.best_lines(beyond_frame(), "bs16", ("dp-gd", "qu-clip", "precond-dp-gd", "hess-clip",
                                                            "objpert")))
    assert "(4 (dataset, epsilon) cells, `bs16`" in text
    assert "dp-gd-tail in 2, dp-gd in 1, objpert in 1." in text
    assert "1.6x the best (median; range 1-3x)" in text
    # F* as an illustration: no target, no count of cells "within" it
    floor = text.split("**Gaussian ridge floor")[1].split("\n")[0]
    assert "neither a target nor a lower bound" in floor and "(target" not in floor and "within" not in floor
    assert "the lowest mean / F\\* has median 1.35 (range 1.1-9) over 4 cells" in text
    assert "evaluated on the true logistic loss, has median 3 (range 2.5-20) x F\\*." in text
    # the paper's second-order methods and this project's, counted apart, each named from the cards
    assert ("* **Second order** (4 cells; target for each side: 3): the paper's (hess-clip, qu-clip) within one "
            "standard error of the best in 2, also with >= 5x fewer iterations and >= 3x less runtime than averaged "
            "DP-GD in 1; this project's (precond-dp-gd) within one standard error of the best in 2, also with >= 5x "
            "fewer iterations and >= 3x less runtime than averaged DP-GD in 1.") in text
    # without this project's methods in the run, only the paper's part
    text = "\n".join(hl.best_lines(beyond_frame(), "bs16", ("dp-gd", "hess-clip")))
    assert "this project's" not in text and "the paper's (hess-clip) within" in text
    # without the mechanism column, the floor line stops at F*
    text = "\n".join(hl.best_lines(beyond_frame().drop(columns="mechanism_over_floor"), "bs16", ("dp-gd",)))
    assert "over 4 cells." in text and "mechanism" not in text


def crossover_row(dataset, epsilon, measure, won=(), first=0, tied=0, **kw) -> dict:
    """A crossover row of 8 budgets, every one tested unless ``kw`` says otherwise: ``won`` second-order
    budgets (``second_order_winners`` from ``kw``), ``tied`` ties, ``first`` first-order wins."""
    nan = np.nan
    row = dict(dataset=dataset, conversion="bs16", epsilon=epsilon, measure=measure, budgets=8,
               second_order_budgets=len(won), tied_budgets=tied, first_order_budgets=first,
               tested_budgets=len(won) + tied + first, untested_budgets=0, second_order_from=nan, second_order_to=nan,
               second_order_winner=won[0] if won else "", tied_from=nan, tied_to=nan, crossover_budget=nan,
               first_order_winner="", note="", second_order_winners=tuple(dict.fromkeys(won)))
    return {**row, **kw}


def test_budget_lines_count_the_papers_and_this_projects_methods_apart():
    rows = [crossover_row("a1a", 10.0, "passes", ("precond-dp-gd", "hess-clip", "hess-clip"), 3, 2,
                          second_order_from=10.0, second_order_to=100.0, tied_from=200.0, tied_to=250.0,
                          crossover_budget=300.0, first_order_winner="dp-gd"),
            crossover_row("s", 1.0, "passes", first=8),
            # ties, no second-order win: counted as a tie, not as a win
            crossover_row("s", 10.0, "passes", first=5, tied=3, tied_from=1.0, tied_to=3.0, crossover_budget=10.0,
                          first_order_winner="dp-gd"),
            crossover_row("s", 1.0, "runtime_s", ("qu-clip",) * 8, second_order_from=0.01, second_order_to=10.0)]
    frame = pd.DataFrame(rows, columns=CROSSOVER_COLUMNS + ["second_order_winners"])
    lines = hl.budget_lines(frame, ("precond-dp-gd", "dp-gd", "qu-clip", "hess-clip", "aop"))
    paper = "a paper second-order method (hess-clip, qu-clip)"
    assert lines == [
        f"* **Winner by compute budget** (gradient passes): {paper} is significantly best at some budget in 1 of 3 "
        "cells, precond-dp-gd (this project's) in 1, the roles tie at some budget in 2 (a1a@10: precond-dp-gd, "
        "hess-clip significantly best from 10 passes, tied from 200 passes, crossover at 300 passes (dp-gd); s@10: "
        "tied from 1 passes, crossover at 10 passes (dp-gd)).",
        f"* **Winner by compute budget** (runtime): {paper} is significantly best at some budget in 1 of 1 cells, "
        "precond-dp-gd (this project's) in 0, the roles tie at some budget in 0 (s@1: qu-clip significantly best "
        "from 0.01 s, no crossover within the grid)."]
    # a crossover table without the winners column: the winner at the first budget stands for the cell
    old = pd.DataFrame(rows, columns=CROSSOVER_COLUMNS)
    assert hl.budget_lines(old, ("precond-dp-gd", "hess-clip"))[0].startswith(
        "* **Winner by compute budget** (gradient passes): a paper second-order method (hess-clip) is significantly "
        "best at some budget in 0 of 3 cells, precond-dp-gd (this project's) in 1, the roles tie at some budget in 2 "
        "(a1a@10: precond-dp-gd significantly best from 10 passes")
    # a frontier table without standard errors: every budget untested, read by the lowest mean and labelled
    plain = frame.assign(tested_budgets=0, untested_budgets=8, tied_budgets=0)
    lines = hl.budget_lines(plain, ("dp-gd", "hess-clip"))
    assert lines[0].startswith("* **Winner by compute budget** (gradient passes, untested (no s.e. over seeds in "
                               "the frontier table)): a paper second-order method (hess-clip) is lowest at some "
                               "budget in 1 of 3 cells (a1a@10: precond-dp-gd, hess-clip lowest from 10 passes, "
                               "crossover at 300 passes (dp-gd)).")


def test_tracks_lines_tie_sets_and_selection_ratio():
    t = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "epsilon": [1.0] * 4, "method": ["dp-gd", "hess-clip"] * 2,
                      "oracle_tuned": [0.1, 0.2, 0.3, 0.1], "selection": [0.2, 0.3, 0.9, 0.2],
                      "fixed": [0.5, 0.4, np.nan, 0.3]})
    # per-track means and s.e. over 10 seeds: on a, oracle-tuned 0.1 +- 0.001 vs 0.2 +- 0.001 (p << 0.05, dp-gd
    # alone); private selection 0.2 +- 0.05 vs 0.3 +- 0.05 (p = 0.17: both tie); on b hess-clip alone everywhere
    long = pd.DataFrame(
        [("a", 1.0, "oracle-tuned", "dp-gd", 0.1, 0.001), ("a", 1.0, "oracle-tuned", "hess-clip", 0.2, 0.001),
         ("a", 1.0, "private-selection", "dp-gd", 0.2, 0.05), ("a", 1.0, "private-selection", "hess-clip", 0.3, 0.05),
         ("b", 1.0, "oracle-tuned", "dp-gd", 0.3, 0.001), ("b", 1.0, "oracle-tuned", "hess-clip", 0.1, 0.001),
         ("b", 1.0, "private-selection", "dp-gd", 0.9, 0.001),
         ("b", 1.0, "private-selection", "hess-clip", 0.2, 0.001)],
        columns=["dataset", "epsilon", "track", "algorithm", "excess_loss_mean", "excess_loss_se"]).assign(n_seeds=10)
    lines = hl.tracks_lines(t, long)
    assert lines[0] == ("* **Tuning paid for privately** (tie sets per track and cell, Welch p >= 0.05; 2 cells): "
                        "oracle-tuned (non-private upper bound): dp-gd in 1, hess-clip in 1; private selection: "
                        "hess-clip in 2, dp-gd in 1.")
    assert hl.tracks_lines(t)[0] == ("* **Tuning paid for privately** (tie sets per track and cell, Welch p >= 0.05; "
                                     "2 cells): no tie sets (no per-track s.e.).")
    assert lines[1] == ("  Private selection's loss / the oracle-tuned loss, median over cells: dp-gd 2.5x, "
                        "hess-clip 1.75x.")
    assert len(lines) == 2      # without w = 0's loss, no comparison with it
    # w = 0 at 0.25 on a, 0.5 on b: dp-gd's selected model on b (0.9) and hess-clip's on a (0.3) do not beat it
    lines = hl.tracks_lines(t.assign(trivial=[0.25, 0.25, 0.5, 0.5]))
    assert lines[2] == ("  The privately selected model is no better than w = 0 in 2 of 4 (method, cell) pairs "
                        "(hess-clip on a@1, dp-gd on b@1).")
    lines = hl.tracks_lines(t.assign(trivial=1.0))
    assert lines[2] == "  The privately selected model is no better than w = 0 in 0 of 4 (method, cell) pairs."


def test_cost_line():
    cost = pd.DataFrame({"part": ["x", "y"], "jobs": [3, 1], "missing": [0, 0], "wall_s": [3600.0, 7200.0],
                         "cpu_s": [1800.0, 7200.0]})
    assert hl.cost_line(cost) == "* **Cost of the run**: 4 jobs, 3 job-hours (2.5 CPU-hours), 1.5 hours on 2 cores."


def test_headline_leaves_out_absent_parts():
    v = pd.DataFrame({"setting": ["a"], "verdict": ["partly"]})
    assert hl.headline(v, {}, "bs16") == [hl.HEADING, "", hl.verdict_line(v), ""]


def test_section_and_readme_sync(tmp_path):
    report = tmp_path / "claims.md"
    report.write_text("# Claims\n\nintro\n\n## In short\n\n* one\n* two\n\n## Settings\n\nmore\n")
    assert hl.section(report.read_text()) == "* one\n* two"
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{hl.START}\nold\n{hl.END}\n\nrest\n")
    assert hl.sync_readme(readme, report)
    assert readme.read_text() == f"# x\n\n{hl.START}\n* one\n* two\n{hl.END}\n\nrest\n"
    assert not hl.sync_readme(readme, report)
    with pytest.raises(ValueError, match="no '## In short' section"):
        hl.section("# Claims\n\n## Settings\n")
    with pytest.raises(ValueError, match="no block between"):
        hl.readme_copy("# x\n")


def test_readme_carries_the_published_in_short():
    """The README's numbers are the published run's: its block equals figures/claims.md's section."""
    root = Path(__file__).resolve().parents[2]
    report = (root / "figures" / "claims.md").read_text()
    assert hl.readme_copy((root / "README.md").read_text()) == hl.section(report)
