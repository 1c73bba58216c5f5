"""benchmarks/verdict_changes.py: two hand-made claims tables whose matched, changed and one-sided rows
are known."""

from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import load_benchmark


@pytest.fixture(scope="module")
def vc():
    return load_benchmark("verdict_changes")


def table(rows):
    return pd.DataFrame([{"claim": c, "setting": s, "conversion": "bs16", "dataset": d, "verdict": v,
                          "ours": f"{c}/{d}: {v}"} for c, s, d, v in rows])


def test_matched_changed_and_one_sided_rows(vc):
    old = table([("C1", "a", "x", "holds"), ("C1", "a", "y", "partly"), ("C6", "a", "x", "holds")])
    new = table([("C1", "a", "x", "holds"), ("C1", "a", "y", "not reproduced"), ("C6 (best loss)", "a", "x", "holds"),
                 ("C1", "c", "x", "holds")])
    parts = vc.compare(old, new)
    assert len(parts["both"]) == 2
    changed = parts["both"][parts["both"]["verdict_published"] != parts["both"]["verdict_new"]]
    assert changed[["dataset", "verdict_published", "verdict_new"]].values.tolist() == [["y", "partly",
                                                                                         "not reproduced"]]
    assert parts["published_only"]["claim"].tolist() == ["C6"]
    assert sorted(parts["new_only"]["claim"]) == ["C1", "C6 (best loss)"]
    text = vc.section(parts, "abc1234", Path("/run"))
    assert "**1 of 2 matched rows keep their verdict; 1 changed.**" in text
    assert "Rows only in the published report: 1; only in the new run: 2." in text
    assert "| C1 | a | bs16 | y | partly | not reproduced | C1/y: partly | C1/y: not reproduced |" in text


def test_a_repeated_key_or_a_foreign_table_is_refused(vc):
    good = table([("C1", "a", "x", "holds")])
    with pytest.raises(ValueError, match="repeats 1"):
        vc.compare(pd.concat([good, good]), good)
    with pytest.raises(ValueError, match=r"no column\(s\) \['verdict'"):
        vc.compare(good, good.drop(columns="verdict"))
