"""benchmarks/verdict_changes.py: two hand-made claims tables whose matched, changed and one-sided rows
are known."""

import subprocess
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
    changed = vc.changed_rows(parts["both"])
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


def test_named_sides_name_the_columns_and_the_one_sided_rows(vc):
    old = table([("C1", "a", "x", "holds"), ("C2", "a", "x", "holds")])
    new = table([("C1", "a", "x", "partly"), ("C3", "a", "x", "holds")])
    parts = vc.compare(old, new, ("own", "capped"))
    assert set(parts) == {"both", "own_only", "capped_only"}
    assert vc.changed_rows(parts["both"], ("own", "capped"))[["verdict_own", "verdict_capped"]].values.tolist() == [
        ["holds", "partly"]]
    assert parts["own_only"]["claim"].tolist() == ["C2"] and parts["capped_only"]["claim"].tolist() == ["C3"]
    with pytest.raises(ValueError, match="the capped claims table"):
        vc.compare(old, new.drop(columns="ours"), ("own", "capped"))


def test_the_published_table_is_read_at_its_commit(vc):
    """In a clean checkout the committed report's table is the working tree's."""
    pd.testing.assert_frame_equal(vc.published_table("HEAD"), pd.read_csv(vc.common.REPO_DIR / vc.PUBLISHED))
    with pytest.raises(subprocess.CalledProcessError):
        vc.common.committed_file("HEAD", "no/such/file.csv")
