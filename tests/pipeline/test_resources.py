"""Rule resources: Snakemake benchmark files -> per-rule wall time, CPU time and max RSS."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpnewton.pipeline.resources import COLUMNS, summarize, write_resources

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(path, s, rss, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{s}\t0:00:00\t{rss}\t400.0\t60.0\t80.0\t0.00\t0.00\t0.00\t{cpu}\n")
    return str(path)


def test_per_rule_statistics(tmp_path):
    walls = [1.0, 2.0, 3.0, 10.0]
    runs = [bench(tmp_path / f"run_job/{i}.tsv", w, 100 + i, w / 2) for i, w in enumerate(walls)]
    prep = [bench(tmp_path / "prepare_data/a.tsv", 0.5, 140.0, 0.4), str(tmp_path / "prepare_data/missing.tsv")]
    table = summarize({"prepare_data": prep, "run_job": runs}).set_index("rule")
    assert list(table.reset_index().columns) == COLUMNS
    r = table.loc["run_job"]
    assert r["n_jobs"] == 4 and r["n_missing"] == 0
    assert r["wall_s_q50"] == pytest.approx(np.quantile(walls, 0.5))
    assert r["wall_s_q90"] == pytest.approx(np.quantile(walls, 0.9))
    assert r["wall_s_max"] == 10.0 and r["wall_s_sum"] == 16.0
    assert r["cpu_s_sum"] == 8.0 and r["max_rss_mb_max"] == 103.0
    p = table.loc["prepare_data"]
    assert p["n_jobs"] == 1 and p["n_missing"] == 1 and p["max_rss_mb_max"] == 140.0


def test_rule_without_files_and_unavailable_measures(tmp_path):
    f = tmp_path / "x.tsv"
    f.write_text(HEADER + "2.0\t0:00:02\t-\t-\t-\t-\t-\t-\t-\t-\n")
    table = summarize({"none": [str(tmp_path / "absent.tsv")], "partial": [str(f)]}).set_index("rule")
    assert table.loc["none", "n_jobs"] == 0 and math.isnan(table.loc["none", "wall_s_max"])
    assert table.loc["partial", "wall_s_max"] == 2.0 and math.isnan(table.loc["partial", "max_rss_mb_max"])


def test_write_resources(tmp_path):
    files = {"run_job": [bench(tmp_path / "b/1.tsv", 1.5, 120.0, 1.0)]}
    write_resources(files, tmp_path / "r.parquet", tmp_path / "r.csv")
    a, b = pd.read_parquet(tmp_path / "r.parquet"), pd.read_csv(tmp_path / "r.csv")
    assert list(a.columns) == list(b.columns) == COLUMNS and a["rule"].tolist() == ["run_job"]
