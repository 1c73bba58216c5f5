"""Tie sets (not winners) and the report's summary republished from the committed tables."""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpnewton.pipeline import significance as W
from dpnewton.pipeline.claims import summary as S
from dpnewton.pipeline.claims import ties as T

ROOT = Path(__file__).resolve().parents[2]


def test_welch_p_matches_the_t_test_on_raw_samples():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 0.3, 4), rng.normal(1.5, 0.6, 4)
    se = lambda x: x.std(ddof=1) / np.sqrt(len(x))  # noqa: E731
    want = stats.ttest_ind(a, b, equal_var=False).pvalue
    assert W.welch_p(a.mean(), se(a), 4, b.mean(), se(b), 4) == pytest.approx(want, rel=1e-10)
    assert W.welch_p(1.0, 0.1, 4, 1.0, 0.2, 4) == 1.0 and W.welch_p(1.0, 0.0, 4, 2.0, 0.0, 4) == 0.0


def test_tie_sets_use_the_neutral_modules_test_on_raw_samples():
    """mark_ties's p-values are Welch's t-test on the raw seeds behind each (mean, s.e., n) row, and the
    rule and its level are stated once (dpnewton.pipeline.significance)."""
    rng = np.random.default_rng(1)
    samples = [rng.normal(mu, sd, 5) for mu, sd in ((1.0, 0.2), (1.1, 0.3), (2.0, 0.1))]
    m = T.mark_ties(cell([x.mean() for x in samples], [x.std(ddof=1) / np.sqrt(5) for x in samples]).assign(n_seeds=5))
    want = [stats.ttest_ind(samples[0], x, equal_var=False).pvalue for x in samples[1:]]
    assert m["p_value"].iloc[0] == 1.0 and m["p_value"].iloc[1:].tolist() == pytest.approx(want, rel=1e-10)
    assert m["tied"].tolist() == [True, True, False] and want[0] >= W.ALPHA > want[1]
    assert T.welch_p is W.welch_p and T.ALPHA is W.ALPHA and S.STATED is W.STATED


def cell(means, ses, names=None):
    names = names or [f"m{i}" for i in range(len(means))]
    return pd.DataFrame({"dataset": "d", "epsilon": 1.0, "algorithm": names, "conversion": "bs16",
                         "excess_loss_mean": means, "excess_loss_se": ses, "n_seeds": 4})


def test_mark_ties_keeps_the_best_and_what_noise_cannot_separate():
    # t = 0.1 / sqrt(0.05^2 + 0.05^2) = 1.41: not significant at 4 seeds; t = 1 / 0.07 = 14: significant
    m = T.mark_ties(cell([1.0, 1.1, 2.0, np.nan], [0.05, 0.05, 0.05, 0.1]))
    assert m["tied"].tolist() == [True, True, False, False]
    assert m["ratio"].iloc[:3].tolist() == pytest.approx([1.0, 1.1, 2.0])


def test_families_split_averaged_configurations_and_leave_out_non_private_steps():
    b = cell([1.0, 1.05, 3.0, 0.1], [0.1, 0.1, 0.01, 0.01], ["dp-gd", "dp-gd-tail", "hess-clip", "dp-gd-oracle"])
    b = b.assign(base_algorithm=["dp-gd", "dp-gd", "hess-clip", "dp-gd-oracle"],
                 hyper=["{}", '{"average": "tail"}', "{}", "{}"])
    c = T.config_ties(b, "bs16")
    assert "dp-gd-oracle" not in set(c["algorithm"])         # a non-private step is never the reference
    assert T.tie_sets(c) == {("d", 1.0): ["dp-gd", "dp-gd (avg)"]}
    f = T.family_ties(c).set_index("family")
    assert bool(f.loc["hess-clip", "tied"]) is False and f.loc["hess-clip", "ratio"] == pytest.approx(3.0)


def test_claim_table_has_one_line_per_claim_with_its_verdict():
    v = pd.DataFrame({"claim": ["C1 best x", "C1 best x", "C2 fast"], "setting": "a",
                      "dataset": ["d", "e", "all"], "verdict": ["reproduced", "not reproduced", "partly"],
                      "reason": ["", "", "median 3.16x over 20 cells"]})
    best = pd.concat([cell([1.0, 1.02], [0.1, 0.1], ["dp-gd", "hess-clip"]),
                      cell([1.0, 3.0], [0.01, 0.01], ["dp-gd", "qu-clip"]).assign(dataset="e")])
    rows = S.claim_rows(v, best, "bs16")
    assert rows[0][:2] == ("C1 best x", "partly")
    assert "not significantly above DP-GD in 1 of 2 cells (4 seeds" in rows[0][2]
    assert rows[1] == ("C2 fast", "partly", "median ratio 3.16x")


@pytest.mark.skipif(not (ROOT / "figures/claims/best_T.csv").exists(), reason="the published bundle is committed")
def test_published_summary_names_tie_sets_and_the_readme_copies_it(tmp_path):
    """The committed report's summary and the README's copies are what the committed tables give."""
    report, readme = tmp_path / "claims.md", tmp_path / "README.md"
    report.write_text((ROOT / "figures/claims.md").read_text())
    readme.write_text((ROOT / "README.md").read_text())
    S.republish(ROOT / "figures/claims", report, readme, ROOT / "config/claims.yaml")
    assert report.read_text() == (ROOT / "figures/claims.md").read_text()
    assert readme.read_text() == (ROOT / "README.md").read_text()
    short = report.read_text().split("## In short")[1].split("\n## ")[0]
    assert "Tie rule: " in short and "One family alone: objpert on synthetic@10." in short
    # a1a at epsilon 10: averaged DP-GD, objpert and averaged hess-add are within noise of each other
    c = T.config_ties(pd.read_csv(ROOT / "figures/claims/best_T.csv"), "bs16")
    assert {"dp-gd (avg)", "objpert", "hess-add (avg)"} <= set(T.tie_sets(c)[("a1a", 10.0)])
    # the committed summary figure is the one the publish step draws from the committed tables
    drawn, committed = plt.imread(tmp_path / S.FIGURE), plt.imread(ROOT / "figures" / S.FIGURE)
    assert drawn.shape == committed.shape and np.abs(drawn - committed).max() < 1e-6


def test_tie_section_names_the_lowest_and_the_families_within_noise():
    b = cell([1.0, 1.05, 3.0], [0.1, 0.1, 0.01], ["dp-gd", "dp-gd-tail", "hess-clip"]).assign(
        base_algorithm=["dp-gd", "dp-gd", "hess-clip"], hyper=["{}", '{"average": "tail"}', "{}"], best_T=[8, 16, 4])
    L = S.tie_section(b, "bs16")
    assert L[0] == S.TIES_HEADING
    assert "| d | 1 | 1 ± 0.1 (dp-gd, 8) | dp-gd (1), dp-gd (avg) (1) |" in L
    # the section sits after the In-short block and once, however often the report is rewritten
    md = "# R\n\nintro\n\n## In short\n\nold\n\n## Settings\n\nx\n"
    once = S.rewrite_report(md, ["## In short", "", "new", ""], ["| t |"], L)
    assert S.rewrite_report(once, ["## In short", "", "new", ""], ["| t |"], L) == once
    positions = [once.index(h) for h in ("## Contents", "## In short", S.TIES_HEADING, "## Settings")]
    assert positions == sorted(positions)


def test_rank_note_is_left_out_where_a_section_states_the_tie_rule():
    """The note "the lowest mean, with no test against seed noise" goes under every ranked section but one
    that opens by stating the tie rule (the winner by compute budget with standard errors)."""
    body = "\n".join(["## Winner by compute budget (x)", "", W.STATED, "", "| a |", "",
                      "## Beyond the paper (y)", "", "text", "",
                      "## Ranking on equal accounting terms (z)", "", S.RANK_NOTE, "", "text", ""])
    out = S._note_rankings(body)
    assert out.count(S.RANK_NOTE) == 2 and f"(x)\n\n{W.STATED}" in out and f"(y)\n\n{S.RANK_NOTE}\n\ntext" in out
    untested = body.replace(W.STATED, "The frontier table has no standard errors over seeds.")
    assert f"(x)\n\n{S.RANK_NOTE}\n\nThe frontier" in S._note_rankings(untested)


def test_tracks_tie_table_lists_what_noise_cannot_separate_from_the_lowest():
    from dpnewton.pipeline.claims import tuning_tracks as TT

    def row(track, alg, mean, se):
        return {"dataset": "d", "epsilon": 1.0, "track": track, "algorithm": alg, "excess_loss_mean": mean,
                "excess_loss_se": se, "n_seeds": 8}

    long = pd.DataFrame([row("oracle-tuned", "a", 0.10, 0.001), row("oracle-tuned", "b", 0.20, 0.001),
                         row("private-selection", "a", 0.30, 0.05), row("private-selection", "b", 0.25, 0.05),
                         row("fixed-rule", "a", float("nan"), 0.0)])
    lines = TT.track_tie_lines(long)
    assert lines[0].startswith(TT.TRACK_TIES_HEADING) and "Welch p >= 0.05" in lines[0]
    # oracle: 0.1 vs 0.2 at s.e. 0.001 is significant; selection: 0.25 vs 0.3 at s.e. 0.05 is a tie
    assert lines[-1] == "| d | 1 | a (0.1) | b (0.25), a | n/a |"
    # the published report's table is the one the committed tables give
    body = "x\n\n" + "\n".join(lines[:4]) + "\n| stale |\n\nafter"
    assert TT.with_track_ties(body, long) == "x\n\n" + "\n".join(lines) + "\n\nafter"
    assert "Tie set per cell and track" in (ROOT / "figures/claims.md").read_text()
