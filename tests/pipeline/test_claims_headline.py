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
    rows = [  # best, best/F*, DP-GD / best, second order within s.e., speed target
        ("a1a", 0.1, "dp-gd-tail", 1.5, 1.2, False, False),
        ("a1a", 1.0, "objpert", 1.1, 2.0, True, True),
        ("a1a", 10.0, "dp-gd-tail", 1.2, 3.0, True, False),
        ("s", 0.01, "dp-gd", 9.0, 1.0, False, False),
    ]
    recs = [{"dataset": d, "epsilon": e, "best": b, "best_over_floor": f, "dp_gd_over_best": g,
             "floor_target_met": f <= 1.25, "second_order_within_se": w, "speed_target_met": sp}
            for d, e, b, f, g, w, sp in rows]
    return pd.DataFrame(recs).reindex(columns=BEYOND_COLUMNS)


def test_best_lines_count_cells_and_targets():
    text = "\n".join(hl.best_lines(beyond_frame(), "bs16", ("dp-gd", "qu-clip", "hess-clip", "objpert")))
    assert "(4 (dataset, epsilon) cells, `bs16`" in text
    assert "dp-gd-tail in 2, dp-gd in 1, objpert in 1." in text
    assert "1.6x the best (median; range 1-3x)" in text
    # epsilon 0.01 is not a floor cell: 2 of the 3 others are within 1.25x
    assert "within 1.25x of F\\* in 2 of 3 cells with epsilon >= 0.1" in text
    assert "median 1.35 (range 1.1-9)" in text
    assert "within one standard error of the best in 2 of 4 cells" in text
    assert "**Second order** (hess-clip, qu-clip):" in text          # the run's methods, in ROLES order
    assert "less runtime than averaged DP-GD in 1 (target: 3)" in text


def test_budget_lines_name_the_crossovers():
    rows = [dict(dataset="a1a", conversion="bs16", epsilon=10.0, measure="passes", budgets=8, second_order_budgets=3,
                 second_order_from=10.0, second_order_to=100.0, second_order_winner="hess-clip",
                 crossover_budget=300.0, first_order_winner="dp-gd", note=""),
            dict(dataset="s", conversion="bs16", epsilon=1.0, measure="passes", budgets=8, second_order_budgets=0,
                 second_order_from=np.nan, second_order_to=np.nan, second_order_winner="", crossover_budget=np.nan,
                 first_order_winner="", note="a first-order method is best at every budget"),
            dict(dataset="s", conversion="bs16", epsilon=1.0, measure="runtime_s", budgets=8, second_order_budgets=8,
                 second_order_from=0.01, second_order_to=10.0, second_order_winner="qu-clip",
                 crossover_budget=np.nan, first_order_winner="", note="")]
    lines = hl.budget_lines(pd.DataFrame(rows, columns=CROSSOVER_COLUMNS), ("precond-dp-gd", "dp-gd", "qu-clip",
                                                                             "hess-clip", "aop"))
    second = "(hess-clip, qu-clip, precond-dp-gd)"
    assert lines == [
        f"* **Winner by compute budget** (gradient passes): a second-order method {second} is best at some budget "
        "in 1 of 2 cells (a1a@10 from 10 passes until dp-gd overtakes at 300).",
        f"* **Winner by compute budget** (runtime): a second-order method {second} is best at some budget in 1 of "
        "1 cells (s@1 from 0.01 s to the largest budget)."]


def test_tracks_lines_winners_and_selection_ratio():
    t = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "epsilon": [1.0] * 4, "method": ["dp-gd", "hess-clip"] * 2,
                      "oracle_tuned": [0.1, 0.2, 0.3, 0.1], "selection": [0.2, 0.3, 0.9, 0.2],
                      "fixed": [0.5, 0.4, np.nan, 0.3]})
    lines = hl.tracks_lines(t)
    assert lines[0] == ("* **Tuning paid for privately** (winner per cell, 2 cells): oracle-tuned (non-private upper "
                        "bound): dp-gd in 1, hess-clip in 1; private selection: dp-gd in 1, hess-clip in 1; "
                        "fixed rule: hess-clip in 2.")
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
