"""The claims run's published bundle (rule publish_claims): copies, and a README from the run's records."""

from __future__ import annotations

import json

import pandas as pd

from dpnewton.pipeline.claims.bundle import TABLES, write_bundle

PROTOCOL = {"config_hash": "abc123def456", "datasets": ["synthetic", "a1a"],
            "dropped_datasets": {"adult": "files missing"},
            "epsilons": ["0.1", "1"], "n_seeds": 4, "delta": "n^-2", "conversion": "bs16", "n_runs": 12, "n_jobs": 3,
            "n_cells": 3, "cells_at_grid_edge": 1, "variants": {"dp-gd": {"algorithm": "dp-gd", "hyper": {}}}}


def test_bundle_copies_and_states_the_run(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "claims.md").write_text("# report\n")
    files = {"claims.csv": "a,b\n1,2\n", "best_T.csv": "x\n1\n", "fig2_privacy_utility.png": "png",
             "fig2_privacy_utility.pdf": "pdf"}
    for name, text in files.items():
        (src / name).write_text(text)
    (src / "protocol.json").write_text(json.dumps(PROTOCOL))
    pd.DataFrame({"git_revision": ["r1", "r1", "r2"],
                  "timestamp_utc": ["2026-01-02T03:04:05Z", "2026-01-03T00:00:00Z", "2026-01-02T05:00:00Z"]}
                 ).to_parquet(src / "runs.parquet")
    bench = src / "run.tsv"
    bench.write_text("s\tcpu_time\n7200\t3600\n")
    out = tmp_path / "figures"
    names = write_bundle(str(src / "claims.md"), [str(src / n) for n in files], str(src / "protocol.json"),
                         str(src / "runs.parquet"), str(out / "claims.md"), str(out / "claims"),
                         {"run_job": [str(bench).replace("run.tsv", "run_job/a1a/dp-gd/bs16/eps~1/s.tsv")]})
    assert (out / "claims.md").read_text() == "# report\n"
    assert names == sorted([*files, "protocol.json", "README.md"])
    for name, text in files.items():
        assert (out / "claims" / name).read_text() == text
    readme = (out / "claims" / "README.md").read_text()
    assert "Config hash abc123def456" in readme and "left out: adult (files missing)" in readme
    assert "r1 (2), r2 (1)" in readme
    assert "between 2026-01-02 03:04 and 2026-01-03 00:00 UTC" in readme
    assert "* `fig2_privacy_utility.*`: Figure 2: privacy-utility." in readme
    for name in ("claims.csv", "best_T.csv", "protocol.json"):
        assert f"* `{name}`: {TABLES[name]}." in readme
    assert "private_selection.csv" not in readme          # only the files the run made
    assert "| paper's methods | 0 (+1 without a file) |" in readme   # the cost table, from the benchmark files
