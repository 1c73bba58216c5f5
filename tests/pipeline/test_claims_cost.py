"""The claims report's cost of the run: known sums from hand-made Snakemake benchmark files."""

from __future__ import annotations

import pytest

from dpnewton.pipeline.claims.cost import REFERENCE_CORES, cost_section, run_cost

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
VARIANTS = {"dp-gd": {"algorithm": "dp-gd", "hyper": {}},
            "dp-gd-tail": {"algorithm": "dp-gd", "hyper": {"average": "tail"}},
            "objpert": {"algorithm": "objpert", "hyper": {}},
            "hess-clip-v1": {"algorithm": "hess-clip", "hyper": {"constants": "v1"}}}


def _bench(root, rel, wall, cpu="-"):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall}\t0:00:01\t100\t200\t90\t95\t0\t0\t50\t{cpu}\n")
    return str(path)


@pytest.fixture
def benchmarks(tmp_path):
    run = "results/benchmarks/run_job/a1a/{}/bs16/eps~1/seeds~0-3.tsv"
    track = "results/benchmarks/run_track/{}/a1a/dp-gd/eps~1.tsv"
    return {
        "run_job": [_bench(tmp_path, run.format("dp-gd"), 100.0, 90.0),
                    _bench(tmp_path, run.format("hess-clip-v1"), 20.0, 19.0),
                    _bench(tmp_path, run.format("dp-gd-tail"), 30.0, 29.0),
                    _bench(tmp_path, run.format("objpert"), 5.0, 4.0),
                    str(tmp_path / run.format("aop"))],            # no file: not run yet
        "run_track": [_bench(tmp_path, track.format("private-selection"), 360.0, 350.0),
                      _bench(tmp_path, track.format("fixed-rule"), 36.0)],   # CPU time not measured ('-')
        "time_updates": [_bench(tmp_path, "results/benchmarks/time_updates/a1a.tsv", 50.0, 49.0)],
    }


def test_parts_and_sums(benchmarks):
    table = run_cost(benchmarks, VARIANTS).set_index("part")
    assert table.loc["paper's methods", ["jobs", "missing"]].tolist() == [2, 1]   # dp-gd, hess-clip-v1; aop missing
    assert table.loc["paper's methods", "wall_s"] == pytest.approx(120.0)
    assert table.loc["paper's methods", "cpu_s"] == pytest.approx(109.0)
    assert table.loc["beyond the paper", "wall_s"] == pytest.approx(35.0)        # averaged dp-gd + objpert
    assert table.loc["private-selection track", "wall_s"] == pytest.approx(360.0)
    assert table.loc["fixed-rule track", ["wall_s", "cpu_s"]].tolist() == [36.0, 0.0]
    assert table.loc["timing stage", "jobs"] == 1
    assert table["wall_s"].sum() == pytest.approx(601.0)


def test_section_states_hours_on_the_reference_cores(benchmarks):
    lines = cost_section(run_cost(benchmarks, VARIANTS))
    assert lines[:2] == ["", "## Cost of this run"]
    track = next(line for line in lines if line.startswith("| private-selection track"))
    assert track == f"| private-selection track | 1 | 0.10 | 0.10 | {0.1 / REFERENCE_CORES:.2f} | 60% |"
    assert any(line.startswith("| paper's methods | 2 (+1 without a file) |") for line in lines)
    assert lines[-2].startswith("| all | 7 | 0.17 |")
    assert cost_section(None) == []
