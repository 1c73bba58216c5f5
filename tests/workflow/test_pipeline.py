"""End-to-end test of the Snakemake pipeline on config/test.yaml (tiny grids), in a tmp dir.

Select with ``pytest -m slow tests/workflow/test_pipeline.py`` (or ``-k pipeline``); takes about 1-2 minutes
on 2 cores. Uses a1a from ../shared/datasets when present (optional dataset), synthetic always.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpnewton.io import DIGEST_COLUMN, ROWS_COLUMN, check_csv, read_csv
from dpnewton.pipeline.claims.bundle import TABLES

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TEST_CONFIG = REPO / "config" / "test.yaml"
SHARED_A1A = REPO.parent / "shared" / "datasets" / "a1a" / "a1a.t"


def snakemake(workdir, *args, config=TEST_CONFIG, timeout=900):
    cmd = [sys.executable, "-m", "snakemake", *args, "--directory", str(workdir), "--configfile", str(config)]
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    wd = tmp_path_factory.mktemp("pipeline")
    res = snakemake(wd, "--cores", "2")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return wd


def test_tables_schema_and_provenance(run_dir):
    runs = pd.read_parquet(run_dir / "results/tables/runs.parquet")
    mirror = pd.read_csv(run_dir / "results/tables/runs.csv")
    assert len(runs) == len(mirror) > 0
    for col in ["dataset", "algorithm", "epsilon", "delta", "conversion", "rho", "iterations", "seed",
                "excess_loss", "train_accuracy", "runtime_s", "ledger_rho_total", "config_hash", "package_version",
                "git_revision", "n", "loss_opt"]:
        assert col in runs.columns, col
    z = runs[runs["privacy_check"] == "zcdp-ledger"]
    assert len(z) and np.allclose(z["ledger_rho_total"], z["rho"], rtol=1e-9, atol=0)
    assert set(z["algorithm"]) >= {"hess-clip", "dp-gd", "dp-gd-oracle", "damped-newton"}
    assert runs["ledger_ok"].all()
    assert np.allclose(runs["delta"], runs["n"].astype(float) ** -2)
    assert set(runs["conversion"]) == {"paper", "bs16", "cks", "gdp", "official-fsolve"}
    assert (runs["config_hash"].str.len() == 12).all() and runs["package_version"].notna().all()
    # every (dataset, algorithm, conversion, eps, seed, T) exactly once
    key = ["dataset", "algorithm", "conversion", "epsilon", "seed", "iterations"]
    assert not runs.duplicated(key).any()
    expected = {"synthetic"} | ({"a1a"} if SHARED_A1A.exists() else set())
    assert set(runs["dataset"]) == expected
    assert runs["algorithm"].nunique() >= 7
    assert runs["train_accuracy"].between(0, 1).all()
    # no holdout in config/test.yaml: no held-out columns, no held-out table
    assert not {"test_accuracy", "test_log_loss", "n_test"} & set(runs.columns)
    assert not (run_dir / "results/tables/heldout.csv").exists()


def test_best_t_is_argmin_of_mean(run_dir):
    summary = pd.read_parquet(run_dir / "results/tables/summary.parquet")
    best = pd.read_parquet(run_dir / "results/tables/best_T.parquet")
    pd.read_csv(run_dir / "results/tables/best_T.csv")
    grp = ["dataset", "algorithm", "conversion", "epsilon"]
    assert len(best) == len(summary.groupby(grp))
    for _, r in best.iterrows():
        cell = summary[(summary[grp] == r[grp].values).all(axis=1)].sort_values("iterations")
        means = cell["excess_loss_mean"].to_numpy()
        assert r["best_T"] == cell["iterations"].iloc[int(np.nanargmin(np.where(np.isfinite(means), means, np.inf)))]
        assert r["excess_loss_mean"] == pytest.approx(float(np.nanmin(means)))
        high = r["best_T"] == cell["iterations"].max()
        low = r["best_T"] == cell["iterations"].min() and r["best_T"] > 1  # T = 1 is the floor, not an edge
        # a T above the best that seed 0's probe rejected makes the best T interior (edge "probed")
        assert bool(r["at_edge"]) == ((high or low) and len(cell) > 1 and r["edge"] != "probed")
        assert r["edge"] != "probed" or (high or low)
    assert best["selection"].str.contains("non-private").all()
    edges = (run_dir / "results/tables/best_T_edges.md").read_text()
    assert "grid edge" in edges


def test_table1_and_baseline(run_dir):
    best = pd.read_parquet(run_dir / "results/tables/best_T.parquet")
    t1 = pd.read_parquet(run_dir / "results/tables/table1.parquet")
    pd.read_csv(run_dir / "results/tables/table1.csv")
    assert "Table 1" in (run_dir / "results/tables/table1.md").read_text()
    b = best[best["conversion"] == "bs16"].set_index(["algorithm", "dataset", "epsilon"])
    assert len(t1) == best["dataset"].nunique()
    # runtimes are lone runs': first update + (best T - 1) x per-update cost (medians over the rounds)
    costs = pd.read_parquet(run_dir / "results/tables/update_costs.parquet")
    raw = pd.concat([pd.read_csv(p) for p in sorted((run_dir / "results/timing").glob("*.csv"))])
    assert set(costs["dataset"]) == set(best["dataset"]) == set(raw["dataset"])
    # Table 1, runtime figure and claims configurations (with the second-order methods of "Beyond the
    # paper" present in the config), and the tuned variants of their bases
    assert set(costs["algorithm"]) == {"dp-gd", "dp-gd-s16", "hess-clip", "hess-clip-reset", "qu-clip",
                                       "hess-add", "qu-add", "cubic-newton", "minibatch-qu-clip", "minibatch-qu-add"}
    assert (costs["rounds"] == 2).all() and (costs["s_per_update"] > 0).all()
    assert len(raw) == 2 * len(costs)
    cost = costs.set_index(["algorithm", "dataset"])
    for (alg, ds), c in cost.iterrows():
        mine = raw[(raw["algorithm"] == alg) & (raw["dataset"] == ds)]
        assert c["s_per_update"] == pytest.approx(mine["s_per_update"].median())
        assert c["first_update_s"] == pytest.approx(mine["first_update_s"].median())

    def runtime(alg, ds, eps):
        return (cost.loc[(alg, ds), "first_update_s"]
                + (b.loc[(alg, ds, eps), "best_T"] - 1) * cost.loc[(alg, ds), "s_per_update"])

    for _, row in t1.iterrows():
        ds = row["dataset"]
        for eps in (0.1, 1.0):
            expect = runtime("dp-gd", ds, eps) / runtime("hess-clip", ds, eps)
            assert row[f"eps={eps:g}"] == pytest.approx(expect)
        ours = [runtime("hess-clip", ds, e) for e in (0.1, 1.0)]
        assert row["min runtime hess-clip (s)"] == pytest.approx(min(ours))
        assert row["max runtime hess-clip (s)"] == pytest.approx(max(ours))
    base = pd.read_parquet(run_dir / "results/tables/baseline.parquet")
    for _, r in base.iterrows():
        opt = json.loads((run_dir / f"results/data/{r['dataset']}.optimum.json").read_text())
        assert r["trivial_excess_loss"] == pytest.approx(math.log(2) - opt["loss_opt"])
    protocol = json.loads((run_dir / "results/tables/protocol.json").read_text())
    assert protocol["delta"] == "n^-2" and protocol["ledger_mismatches"] == 0


def test_job_files_logs_and_figures(run_dir):
    rows = sorted((run_dir / "results/runs").rglob("*.csv"))
    assert rows
    first = rows[0].read_text().splitlines()
    assert first[0].startswith("dataset,algorithm,epsilon")
    log = (run_dir / "logs/runs/synthetic/hess-clip/bs16/eps~1/seeds~0-1.log").read_text()
    assert "progress 2/2 seeds done" in log and "excess_loss=" in log
    curves = pd.read_parquet(run_dir / "results/runs/synthetic/hess-clip/bs16/eps~1/seeds~0-1.curves.parquet")
    # declared grid {1, 2, 4}; the grid extension (x2 once, config/test.yaml) may add T=8
    assert {1, 2, 4} <= set(curves["iterations"]) <= {1, 2, 4, 8}
    assert curves["iterate"].max() == max(curves["iterations"])
    timing_log = (run_dir / "logs/timing/synthetic.log").read_text()
    assert "round 2/2 done" in timing_log and "cost synthetic/dp-gd:" in timing_log
    for fig in ["fig1_runtime", "fig2_privacy_utility", "fig3_convergence", "fig4_minibatch", "fig5_conversions"]:
        for ext in ("png", "pdf"):
            for folder in ("results/figures", "figures"):
                p = run_dir / folder / f"{fig}.{ext}"
                assert p.exists() and p.stat().st_size > 1000, p


def test_claims_report(run_dir):
    md = (run_dir / "results/claims/claims.md").read_text()
    assert md == (run_dir / "figures/claims.md").read_text()
    # rule publish_claims (Snakemake marks a directory output with a hidden .snakemake_timestamp)
    bundle = {f.name for f in (run_dir / "figures/claims").iterdir() if not f.name.startswith(".")}
    tables = {n for n in bundle if not n.startswith("fig") and n != "README.md"}
    assert tables <= set(TABLES) and {"claims.csv", "best_T.csv", "frontier.csv", "protocol.json"} <= tables
    assert {f"{f.stem}{f.suffix}" for f in (run_dir / "results/figures").iterdir()} <= bundle
    readme = (run_dir / "figures/claims/README.md").read_text()
    assert all(f"`{n}`" in readme for n in tables) and "## Cost of this run" in readme
    assert "non-private" in md.lower() and "Covertype" in md
    for text in (md, readme):   # every heading starts its own block
        lines = text.splitlines()
        assert [line for i, line in enumerate(lines) if i and line.startswith("#") and lines[i - 1]] == []
    cost = md.split("## Cost of this run", 1)[1].split("\n## ", 1)[0]     # from the jobs' benchmark files
    assert "| paper's methods |" in cost and "| timing stage |" in cost and "| all |" in cost
    for name in ("claims.csv", "divergence.csv", "robustness.csv"):   # written with their rows and digest
        path = run_dir / "results/claims" / name
        assert check_csv(path) > 0 and path.read_text().splitlines()[0].endswith(f"{ROWS_COLUMN},{DIGEST_COLUMN}")
    verdicts = read_csv(run_dir / "results/claims/claims.csv")
    assert set(verdicts["verdict"]) <= {"reproduced", "partly", "not reproduced", "not evaluable"}
    assert {"a", "a-tuned", "b", "c"} <= set(verdicts["setting"])
    assert verdicts["claim"].str.startswith("C1").any() and verdicts["claim"].str.startswith("C2").any()
    assert set(verdicts["verdict_past_cap"]) <= {"reproduced", "partly", "not reproduced", "not evaluable"}
    best = pd.read_parquet(run_dir / "results/tables/best_T.parquet")
    assert not verdicts["cap_sensitive"].any() or best["edge"].eq("high").any()
    div = pd.read_csv(run_dir / "results/claims/divergence.csv")
    reset = div[div["algorithm"] == "hess-clip-reset"]
    assert len(reset) and (reset["epsilon"] == 0.1).all()
    rob = pd.read_csv(run_dir / "results/claims/robustness.csv")
    assert len(rob) and (rob["select_seeds"].astype(str) == "0").all()
    runs = pd.read_parquet(run_dir / "results/tables/runs.parquet")
    assert {"base_algorithm", "grid_round", "grid_extended"} <= set(runs.columns)
    s16 = runs[runs["algorithm"] == "dp-gd-s16"]
    assert len(s16) and (s16["base_algorithm"] == "dp-gd").all() and s16["hyper"].str.contains("16").all()
    # extension adds T = 2 x (declared maximum, the cap here) only when that maximum was the best mean,
    # and T = minimum // 2, // 4, ... (down to 1) only when the minimum (> 1) was
    ext = runs[runs["grid_round"] > 0]
    for (ds, alg, conv, eps), g in ext.groupby(["dataset", "algorithm", "conversion", "epsilon"]):
        cell = runs[(runs["dataset"] == ds) & (runs["algorithm"] == alg) & (runs["conversion"] == conv)
                    & (runs["epsilon"] == eps) & (runs["grid_round"] == 0)]
        means = cell.groupby("iterations")["excess_loss"].mean()
        top, bottom = means.index.max(), means.index.min()
        if means.idxmin() == top:
            assert set(g["iterations"]) == {2 * top}
        else:
            assert means.idxmin() == bottom > 1
            down = sorted(set(g["iterations"]), reverse=True)
            assert down == [max(1, bottom // 2**k) for k in range(1, len(down) + 1)]
    best = pd.read_parquet(run_dir / "results/tables/best_T.parquet")
    assert {"grid_extended", "unstable_fraction", "reset_iteration_fraction"} <= set(best.columns)


def test_second_run_does_nothing(run_dir):
    res = snakemake(run_dir, "-n")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Nothing to be done" in res.stdout + res.stderr


def test_report_builds(run_dir):
    res = snakemake(run_dir, "--report", "report.html")
    assert res.returncode == 0, res.stderr[-3000:]
    html = (run_dir / "report.html").read_text(errors="replace")
    assert "non-private" in html and len(html) > 10000 and "Claims" in html


def test_lint_is_clean(tmp_path):
    res = snakemake(tmp_path, "--lint")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def test_bad_config_key_fails_naming_it(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(TEST_CONFIG.read_text() + "\nbogus_key: 1\n")
    res = snakemake(tmp_path, "-n", config=bad)
    assert res.returncode != 0 and "bogus_key" in res.stdout + res.stderr
    bad.write_text(TEST_CONFIG.read_text().replace("conversion: bs16", "conversion: nonsense"))
    res = snakemake(tmp_path, "-n", config=bad)
    assert res.returncode != 0 and "nonsense" in res.stdout + res.stderr
