"""benchmarks/cap_study.py: the rows a lower pass cap keeps, on hand-made rows whose limits are worked out
from the cards' pass models (DP-GD: 1 pass per update; the Oracle: 5.5 at n = 1000, d = 10)."""

import pandas as pd
import pytest

from tests.conftest import load_benchmark


@pytest.fixture(scope="module")
def cs():
    return load_benchmark("cap_study")


def rows(base, Ts, probe=0):
    return pd.DataFrame([{"base_algorithm": base, "n": 1000, "d": 10, "hyper": "{}", "iterations": T,
                          "probe_rejected_T": probe} for T in Ts])


def test_largest_t_follows_the_pass_model(cs):
    assert cs.largest_t(19200, "dp-gd", 1000, 10, "{}") == 19200           # 1 + (T - 1) x 1 <= 19200
    assert cs.largest_t(1000, "dp-gd-oracle", 1000, 10, "{}") == 181       # 5.5 + 180 x 5.5 = 995.5 <= 1000
    assert cs.largest_t(5.0, "dp-gd-oracle", 1000, 10, "{}") == 1          # at least one update
    assert cs.largest_t(10, "aop", 1000, 10, "{}") == float("inf")         # one-shot: no pass count


def test_capped_runs_keep_the_rows_within_the_cap_and_drop_probes_beyond_it(cs):
    runs = pd.concat([rows("dp-gd", [300, 9600, 19200, 38400], probe=76800), rows("dp-gd-oracle", [160, 320]),
                      rows("aop", [1])], ignore_index=True)
    kept = cs.capped_runs(runs, 19200)
    assert kept[kept["base_algorithm"] == "dp-gd"]["iterations"].tolist() == [300, 9600, 19200]
    assert kept[kept["base_algorithm"] == "dp-gd"]["probe_rejected_T"].tolist() == [0, 0, 0]
    assert kept[kept["base_algorithm"] == "dp-gd-oracle"]["iterations"].tolist() == [160, 320]
    assert kept[kept["base_algorithm"] == "aop"]["iterations"].tolist() == [1]
    kept = cs.capped_runs(runs, 1000)        # the Oracle's limit is T = 181, DP-GD's 1000
    assert kept["iterations"].tolist() == [300, 160, 1]
    whole = cs.capped_runs(runs, 76800)
    assert len(whole) == len(runs) and whole["probe_rejected_T"].tolist()[:4] == [76800] * 4
