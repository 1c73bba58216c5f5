"""The claims report's cost of the run: known sums from hand-made Snakemake benchmark files, and the run's
length and core utilisation from their modification times (set with os.utime)."""

from __future__ import annotations

import os

import pytest

from dpnewton.pipeline.claims.cost import REFERENCE_CORES, RunLength, cost_section, run_cost, run_length

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


def _timed(root, rel, wall, cpu, end):
    """A benchmark file of a job that ended at ``end`` (its mtime)."""
    path = _bench(root, rel, wall, cpu)
    os.utime(path, (end, end))
    return path


def test_run_length_and_utilisation_from_the_files_times(tmp_path):
    """Two cores, t = 0..1000 s: dp-gd runs 0-600, hess-clip-v1 0-400, dp-gd-tail 400-1000 (one core idle
    from 600 to 1000); the aop job has no file."""
    t0 = 1_700_000_000.0
    run = "results/benchmarks/run_job/a1a/{}/bs16/eps~1/seeds~0-3.tsv"
    paths = [_timed(tmp_path, run.format("dp-gd"), 600.0, 540.0, t0 + 600),
             _timed(tmp_path, run.format("hess-clip-v1"), 400.0, 400.0, t0 + 400),
             _timed(tmp_path, run.format("dp-gd-tail"), 600.0, 300.0, t0 + 1000)]
    table = run_cost({"run_job": paths + [str(tmp_path / run.format("aop"))]}, VARIANTS)
    length = table.attrs["run"]
    assert isinstance(length, RunLength) and length.measurable
    assert (length.jobs, length.cores) == (3, REFERENCE_CORES)
    assert length.wall_s == pytest.approx(1000.0)
    assert length.job_wall_s == pytest.approx(1600.0) and length.cpu_s == pytest.approx(1240.0)
    assert length.job_utilisation == pytest.approx(1600.0 / (1000.0 * REFERENCE_CORES))
    assert length.cpu_utilisation == pytest.approx(1240.0 / (1000.0 * REFERENCE_CORES))
    lines = cost_section(table)
    line = next(x for x in lines if x.startswith("Run length"))
    assert line.startswith("Run length 0.28 h ") and "2 cores: 62% by CPU time, 80% by job wall time" in line
    assert lines[-2].startswith("| all | 3 |")     # the table stays the section's end
    assert run_cost({"run_job": paths}, VARIANTS, cores=4).attrs["run"].job_utilisation == pytest.approx(0.4)


def test_run_length_of_known_jobs():
    length = run_length([(100.0, 100.0, 50.0), (250.0, 150.0, 150.0), (300.0, 50.0, 0.0)], cores=2)
    assert length.wall_s == pytest.approx(300.0)             # first start 0, last end 300
    assert length.job_utilisation == pytest.approx(300.0 / 600.0)
    assert length.cpu_utilisation == pytest.approx(200.0 / 600.0)
    one = run_length([(500.0, 20.0, 10.0)], cores=1)
    assert one.wall_s == pytest.approx(20.0) and one.job_utilisation == pytest.approx(1.0)


def test_copied_files_are_not_measurable(tmp_path):
    """A copy gives every file about the same mtime: the times put every job at once."""
    run = "results/benchmarks/run_job/a1a/{}/bs16/eps~1/seeds~0-3.tsv"
    same = [_timed(tmp_path, run.format(a), w, w, 1_700_000_000.0)
            for a, w in [("dp-gd", 600.0), ("dp-gd-tail", 400.0), ("objpert", 300.0)]]
    length = run_cost({"run_job": same}, VARIANTS).attrs["run"]
    assert not length.measurable and length.wall_s is None and length.job_utilisation is None
    assert "same modification time" in length.reason
    line = next(x for x in cost_section(run_cost({"run_job": same}, VARIANTS)) if x.startswith("Run length"))
    assert line.startswith("Run length and core utilisation: not measurable (")
    # a copy within a few seconds: distinct times, but three long jobs at once on two cores
    spread = run_length([(1000.0, 600.0, 600.0), (1001.0, 400.0, 400.0), (1002.0, 500.0, 500.0)], cores=2)
    assert not spread.measurable and "more than 2 jobs at once" in spread.reason
    assert not run_length([]).measurable


def test_section_without_a_run_length(benchmarks):
    table = run_cost(benchmarks, VARIANTS)
    table.attrs.clear()         # a table made elsewhere: no line
    assert not any(x.startswith("Run length") for x in cost_section(table))
    given = run_length([(100.0, 100.0, 100.0)], cores=1)
    assert given.line() in cost_section(table, given)
