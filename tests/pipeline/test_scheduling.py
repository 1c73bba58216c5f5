"""Longest-first order of the optimizer jobs (dpnewton.pipeline.scheduling): the cost estimate orders
known cases, counts by hand, and Snakemake gives rule run_job's jobs its priorities (dry run of the
smallest config, .test/config/config.yaml)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from dpnewton.algorithms.costs import EIGH_PER_D2_OVER_N, GRAM_PER_D
from dpnewton.pipeline import scheduling
from dpnewton.pipeline.scheduling import (DEFAULT_SHAPE, JOB_START_S, MAX_JOB_PRIORITY, SECONDS_PER_PASS_ND,
                                          dataset_shape, estimated_cost, extension_chain, longest_seconds, priority,
                                          run_values)
from tests.workflow.test_determinism import REPO, env
from tests.workflow.test_parse_without_package import TEST_CONFIG

FIRST_ORDER = [10, 30, 100, 300]
NEWTON = [1, 2, 4, 8, 16]
ADULT = 45220 * 105     # n x d of the registry's shapes
A1A = 30956 * 124


def spec(algorithm="dp-gd", dataset="adult", grid=FIRST_ORDER, cap=None, seeds=4, options=None, max_passes=None):
    """A job spec as dpnewton.pipeline.plan.expand makes it ."""
    ext = None if cap is None else {"factor": 2, "max_iterations": cap}
    if ext and max_passes is not None:
        ext["max_passes"] = max_passes
    return {"dataset": dataset, "dataset_options": options or {}, "algorithm": algorithm,
            "base_algorithm": algorithm, "hyper": {}, "seeds": list(range(seeds)), "iterations": list(grid),
            "extend": ext, "delta": None, "conversion": "bs16", "primary": True, "epsilon": 1.0, "eps_label": "1",
            "curves_max_points": 0}


def test_a_higher_cap_costs_more():
    assert estimated_cost(spec(cap=307200)) > estimated_cost(spec(cap=9600)) > estimated_cost(spec())
    assert priority(spec(cap=307200)) > priority(spec(cap=9600)) > priority(spec())


def test_a_larger_dataset_costs_more():
    assert estimated_cost(spec(dataset="adult")) > estimated_cost(spec(dataset="a1a"))
    assert priority(spec(dataset="adult")) > priority(spec(dataset="a1a"))


def test_newton_against_dp_gd_by_hand():
    """DP-GD: one pass per update, 10 + 30 + 100 + 300 passes; Hess-clip: 1 + G + E passes per update
    (dpnewton.algorithms.double_noise), 31 updates over its grid."""
    n, d = 45220, 105
    per_newton = 1 + GRAM_PER_D * d + EIGH_PER_D2_OVER_N * d * d / n
    assert estimated_cost(spec()) == pytest.approx(440 * n * d * 4)
    assert estimated_cost(spec("hess-clip", grid=NEWTON)) == pytest.approx(31 * per_newton * n * d * 4)
    # about 15 passes per Newton update on adult: its grid costs more than DP-GD's (474 > 440 passes) ...
    assert priority(spec("hess-clip", grid=NEWTON)) > priority(spec())
    # ... and much less than DP-GD's when DP-GD's grid may be extended to 9600
    assert estimated_cost(spec(cap=9600)) == pytest.approx((440 + 9600) * n * d * 4)
    assert priority(spec("hess-clip", grid=NEWTON)) < priority(spec(cap=9600))


def test_seeds_scale_the_cost():
    assert estimated_cost(spec(seeds=2)) == pytest.approx(estimated_cost(spec(seeds=4)) / 2)


def test_extension_counts_the_cap_once_and_only_above_the_grid():
    assert run_values(spec(cap=9600)) == FIRST_ORDER + [9600]
    assert run_values(spec(cap=300)) == FIRST_ORDER            # the cap is the grid's maximum: nothing to add
    assert run_values(spec(grid=[1], cap=None)) == [1]
    # the dataset's pass cap lowers the extension's T as the job does (dpnewton.pipeline.t_search.pass_capped)
    capped = spec(dataset="fashion-mnist", cap=307200, max_passes=76800)
    assert run_values(capped) == FIRST_ORDER + [76800]
    per = 1 + GRAM_PER_D * 784 + EIGH_PER_D2_OVER_N * 784 * 784 / 12000     # about 215 passes per update
    by_passes = int((76800 - per) // per) + 1                                 # 357 (config/claims.yaml)
    newton = spec("hess-clip", dataset="fashion-mnist", grid=NEWTON, cap=4096, max_passes=76800)
    assert run_values(newton) == NEWTON + [by_passes]
    assert run_values(dict(newton, extend=dict(newton["extend"], max_iterations=256))) == NEWTON + [256]


def test_the_longest_case_counts_the_whole_extension_chain():
    """An extension that runs to its cap runs top x 2, top x 4, ... (dpnewton.pipeline.t_search.next_extension):
    the longest case counts every one of them, the expected cost the cap once."""
    assert extension_chain(300, 2, 9600) == [600, 1200, 2400, 4800, 9600]
    assert extension_chain(300, 2, 9599) == [600, 1200, 2400, 4800]      # the cap itself is not a doubling
    assert extension_chain(300, 2, 300) == [] and extension_chain(16, 1, 4096) == []
    assert run_values(spec(cap=9600), longest=True) == FIRST_ORDER + [600, 1200, 2400, 4800, 9600]
    assert run_values(spec(grid=[1], cap=9600), longest=True) == [1]    # a grid of one T is never extended
    newton = spec("hess-clip", dataset="fashion-mnist", grid=NEWTON, cap=4096, max_passes=76800)
    assert run_values(newton, longest=True) == NEWTON + [32, 64, 128, 256]      # 512 > the pass cap's 357
    # by hand: DP-GD, one pass per update, 4 seeds, on adult
    want = JOB_START_S + SECONDS_PER_PASS_ND * (440 + 600 + 1200 + 2400 + 4800 + 9600) * ADULT * 4
    assert longest_seconds(spec(cap=9600)) == pytest.approx(want)
    assert longest_seconds(spec(cap=None)) == pytest.approx(JOB_START_S + SECONDS_PER_PASS_ND * 440 * ADULT * 4)


def test_the_longest_case_bounds_the_claims_runs_longest_job():
    """The claims run's DP-GD job on adult at epsilon 10 (config/claims.yaml, six trajectories of four seeds,
    extended to T = 76,800) took 48.4 min of wall time on this project's 2-core machine; its estimated seconds
    said 3.3 min, its longest case must say more than it took."""
    job = dict(spec(cap=76800, max_passes=76800), epsilon=10.0, eps_label="10")
    six = 6 * (longest_seconds(job) - JOB_START_S) + JOB_START_S
    assert six > 48.4 * 60 > 10 * scheduling.estimated_seconds(job) * 6


def test_members_share_their_runs():
    """A job that releases several configurations' models runs each T once: the union of the grids."""
    one = spec(cap=9600)
    shared = {k: v for k, v in one.items() if k not in ("iterations", "extend")}
    shared["members"] = {"dp-gd": {"average": "none", "hyper": {}, "iterations": FIRST_ORDER, "extend": one["extend"]},
                         "dp-gd-tail": {"average": "tail", "hyper": {"average": "tail"},
                                        "iterations": FIRST_ORDER + [1000],
                                        "extend": {"factor": 2, "max_iterations": 9600}}}
    assert run_values(shared) == FIRST_ORDER + [1000, 9600]
    assert estimated_cost(shared) == pytest.approx(estimated_cost(one) + 999 * ADULT * 4 + ADULT * 4)


def test_one_shot_runs_count_one_pass():
    assert estimated_cost(spec("aop", grid=[1])) == pytest.approx(ADULT * 4)
    assert estimated_cost(spec("unregistered", grid=[1, 2])) == pytest.approx(2 * ADULT * 4)


def test_dataset_shape():
    assert dataset_shape(spec(dataset="adult")) == (45220, 105)
    assert dataset_shape(spec(dataset="a1a")) == (30956, 124)
    assert dataset_shape(spec(dataset="synthetic", options={"n": 400, "d": 5, "seed": 0})) == (400, 5)
    assert dataset_shape(spec(dataset="synthetic")) == (10000, 100)            # the registry's default options
    assert dataset_shape(spec(dataset="custom", options={"file": "x.csv"})) == DEFAULT_SHAPE
    assert dataset_shape(spec(dataset="not-registered")) == DEFAULT_SHAPE
    assert estimated_cost(spec(dataset="adult")) / estimated_cost(spec(dataset="a1a")) == pytest.approx(ADULT / A1A)


def test_priority_is_a_bounded_int(monkeypatch):
    p = priority(spec())
    assert isinstance(p, int) and 1 <= p <= MAX_JOB_PRIORITY
    for cost, expected in [(0.0, 1), (float("nan"), 1), (0.5, 1), (1e3, 300), (1e300, MAX_JOB_PRIORITY)]:
        monkeypatch.setattr(scheduling, "estimated_cost", lambda s, cost=cost: cost)
        assert priority(spec()) == expected


# Captures the jobs Snakemake logs in a dry run (its job_info records carry the job's priority; the
# printed text does not show it for a rule with a `message:`, as run_job has), then runs its CLI.
PROBE = """
import json, logging, sys
from snakemake.logging import logger
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake.cli import main
seen = []
class Capture(logging.Filter):
    def filter(self, record):
        if getattr(record, "event", None) == LogEvent.JOB_INFO:
            seen.append({"rule": record.rule_name, "wildcards": dict(record.wildcards), "priority": record.priority})
        return True
logger.addFilter(Capture())
try:
    main(sys.argv[2:])
    code = 0
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w") as fh:
    json.dump(seen, fh)
sys.exit(code)
"""


@pytest.mark.slow
def test_dry_run_gives_run_jobs_their_priorities(tmp_path):
    out = tmp_path / "jobs.json"
    cmd = [sys.executable, "-c", PROBE, str(out), "-n", "--cores", "1", "--directory", str(tmp_path / "run"),
           "--configfile", str(TEST_CONFIG)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    jobs = json.loads(out.read_text())
    runs = {j["wildcards"]["algorithm"]: j["priority"] for j in jobs if j["rule"] == "run_job"}
    assert set(runs) == {"hess-clip", "qu-clip", "dp-gd", "dp-gd-oracle"}
    # synthetic n = 400, d = 5, two seeds, no extension: DP-GD-Oracle 5.5 passes per update x (2 + 4),
    # DP-GD 1 + 3 + 1 + 7 = 12 passes, the double-noise methods about 1.8 x (1 + 2)
    assert runs["dp-gd-oracle"] > runs["dp-gd"] > runs["hess-clip"] == runs["qu-clip"] >= 1
    assert runs["dp-gd"] == round(100 * math.log10(12 * 400 * 5 * 2))
    # the data and the optimum come before every optimizer job; the other rules keep Snakemake's default 0
    first = {"prepare_data", "optimum", "optimum_holdout"}
    assert {j["priority"] for j in jobs if j["rule"] in first} == {scheduling.MAX_JOB_PRIORITY + 1}
    assert {j["priority"] for j in jobs if j["rule"] not in first | {"run_job"}} == {0}
