"""benchmarks/common.py: a trajectory that releases several models (last iterate and tail average)
counts its update time once; distinct trajectories all count."""

import json

import pytest

from tests.conftest import load_benchmark


def row(algorithm, hyper, seed, iterations, runtime, epsilon="1", conversion="bs16", dataset="a1a"):
    return {"dataset": dataset, "base_algorithm": algorithm, "hyper": json.dumps(hyper), "conversion": conversion,
            "epsilon": epsilon, "seed": str(seed), "iterations": str(iterations), "runtime_s": str(runtime)}


def test_tail_twin_counts_once_and_other_trajectories_count():
    module = load_benchmark("common")
    rows = [
        row("dp-gd", {"step": 8.0}, 0, 100, 1.5),
        row("dp-gd", {"step": 8.0, "average": "tail"}, 0, 100, 1.5),  # same trajectory, second model
        row("dp-gd", {"step": 8.0, "average": "tail"}, 0, 200, 3.0),  # tail-only extension: its own run
        row("dp-gd", {"step": 8.0}, 1, 100, 1.25),  # another seed
        row("dp-gd", {"step": 2.0}, 0, 100, 0.5),  # another configuration
        row("dp-gd", {"step": 8.0}, 0, 100, 0.75, epsilon="10"),  # another epsilon
        row("dp-gd", {"step": 8.0}, 0, 100, 0.25, conversion="gdp"),  # another conversion
        row("dp-gd", {"step": 8.0}, 0, 100, 2.0, dataset="adult"),  # another dataset
        {**row("dp-gd", {}, 0, 1, 0.0), "runtime_s": ""},  # no timed update: skipped
    ]
    total, runs = module.trajectory_update_time(rows)
    assert runs == 7
    assert total == pytest.approx(1.5 + 3.0 + 1.25 + 0.5 + 0.75 + 0.25 + 2.0)
