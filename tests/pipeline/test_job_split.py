"""Job sizes for the cores (dpnewton.pipeline.job_split, config key ``job_split``).

* Packing and splitting on hand-built costs: LPT's parts, the fewest within the bound, by epsilon first, then
  by trajectory; names and order follow config order; a part of one cell is that cell's job.
* The bound: ``auto`` = max(SHARE x C / S, the longest cell's longest case), no split without S, ``wide``,
  a number of seconds; a spawned job gets the main process's slots from the environment or stops.
* The plans of config/config.yaml and config/claims.yaml: at 2 to 256 slots every job's longest case within
  the bound, every member in exactly one job, more jobs on more slots.
* Rows: the parts of a split lockstep job give the rows, curves and ledger of the wide job bit for bit (batches
  below ``loss.GEMM_MIN_RUNS``; wider ones with the blocked pass).
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd
import pytest
import yaml

from dpnewton.algorithms import ALGORITHMS
from dpnewton.pipeline import job_split
from dpnewton.pipeline.config import expand, load_config
from dpnewton.pipeline.job_split import SHARE, SLOTS_VARIABLE, max_job_seconds, pack, resolve_slots, split_group
from dpnewton.pipeline.plan import Job, job_members, merged_job, share_trajectories
from dpnewton.pipeline.scheduling import estimated_cost, estimated_seconds, longest_seconds
from tests.pipeline.test_lockstep import EXACT, KEYS, _job, _ledger, _separate_jobs
from tests.pipeline.test_t_search import _run, _sorted, prepared  # noqa: F401 (prepared: the fixture)
from tests.workflow.test_determinism import REPO


def _cell(config: str, eps: str, conversion: str = "bs16") -> Job:
    return Job("d", config, conversion, eps, "0-3", {})


def test_pack_finds_the_fewest_lpt_parts_within_the_bound():
    units = [[w] for w in (5, 4, 3, 3, 3)]
    weight = sum
    # 2 parts (18 / 9): LPT gives [5, 3 | 4, 3, 3] = 8, 10 > 9; 3 parts: [5 | 4, 3 | 3, 3] = 5, 7, 6
    assert pack(units, weight, 9) == [[5], [4, 3], [3, 3]]
    assert pack(units, weight, 18) == [[5, 4, 3, 3, 3]]
    # a unit above the bound is a part of its own; nothing is lost or repeated
    assert pack([[20], [1], [2]], weight, 3) == [[20], [1, 2]]
    assert pack([[1], [1]], weight, 0) == [[1], [1]]


def test_a_group_is_split_by_epsilon_then_by_trajectory():
    cells = [_cell("a", "0.1"), _cell("b", "0.1"), _cell("a", "1"), _cell("b", "1"), _cell("a", "10"),
             _cell("b", "10"), _cell("c", "10"), _cell("a", "10", "gdp")]
    cost = dict(zip([c.key for c in cells], (1, 1, 1, 2, 4, 4, 3, 2)))          # 18 in all
    assert split_group(cells, cost, 18) == [cells]                              # within the bound: whole
    # bound 9: epsilon 10 (13) alone is over it -> its trajectories in two parts, [a, c] = 7 and [b, a/gdp] = 6;
    # 0.1 (2) and 1 (3) fit in one part, named by its first cell
    parts = split_group(cells, cost, 9)
    assert [[c.algorithm + "/" + c.conversion + "/" + c.eps for c in p] for p in parts] == [
        ["a/bs16/0.1", "b/bs16/0.1", "a/bs16/1", "b/bs16/1"], ["a/bs16/10", "c/bs16/10"], ["b/bs16/10", "a/gdp/10"]]
    # bound 3: every epsilon of 0.1 and 1 alone, and epsilon 10 down to single trajectories
    assert [len(p) for p in split_group(cells, cost, 3)] == [2, 2, 1, 1, 1, 1]


def test_the_bound():
    assert max_job_seconds("wide", [1e4], 1e3, 64) == math.inf
    assert max_job_seconds("auto", [1e4], 1e3, None) == math.inf            # no slots known: no split
    assert max_job_seconds(600, [1e4], 1e3, 64) == 600
    groups = [4e3, 2e3, 2e3]
    assert max_job_seconds("auto", groups, 100, 16) == pytest.approx(SHARE * 8e3 / 16)
    # never below the longest cell: a shorter job would not shorten the run
    assert max_job_seconds("auto", groups, 1e3, 64) == 1e3
    with pytest.raises(ValueError, match="job_split"):
        max_job_seconds("fast", groups, 100, 16)


def test_a_spawned_job_builds_the_main_process_plan():
    environ = {}
    assert resolve_slots("auto", True, 64, environ) == 64 and environ == {SLOTS_VARIABLE: "64"}
    assert resolve_slots("auto", False, 4, environ) == 64                     # its own --cores do not count
    assert resolve_slots("wide", False, 4, {}) is None
    with pytest.raises(ValueError, match=f"{SLOTS_VARIABLE} is not set.*wide or to a number"):
        resolve_slots("auto", False, 4, {})


def _load(name: str) -> dict:
    return load_config(yaml.safe_load((REPO / "config" / name).read_text()))


def _members(jobs_) -> Counter:
    """(dataset, chunk, configuration, conversion, epsilon) of every member of the jobs, counted."""
    return Counter((j.dataset, j.chunk, m["algorithm"], m["conversion"], m["eps_label"])
                   for j in jobs_ for m in job_members(j.spec).values())


@pytest.mark.parametrize("name", ["config.yaml", "claims.yaml"])
def test_the_plans_of_the_shipped_configs(name):
    """On S slots no job's longest case (every extension to its cap) exceeds max(SHARE x C / S, the longest
    cell's), C the summed estimated seconds; more slots, more jobs; every member in exactly one job."""
    cfg = _load(name)
    wide = expand(cfg, base_dir=REPO, check_data=False)
    total = sum(estimated_seconds(j.spec) for j in wide.jobs)
    cells = expand({**cfg, "job_split": 1e-9}, base_dir=REPO, check_data=False).jobs     # every group split to cells
    assert all("grouped" not in c.spec for c in cells) and _members(cells) == _members(wide.jobs)
    longest_cell = max(longest_seconds(c.spec) for c in cells)
    counts = {}
    for slots in (2, 16, 64, 256):
        plan = expand(cfg, base_dir=REPO, check_data=False, slots=slots)
        bound = max(SHARE * total / slots, longest_cell)
        assert max(longest_seconds(j.spec) for j in plan.jobs) <= bound * (1 + 1e-12)
        assert _members(plan.jobs) == _members(wide.jobs) and max(_members(plan.jobs).values()) == 1
        assert len({j.key for j in plan.jobs}) == len(plan.jobs)
        counts[slots] = len(plan.jobs)
    assert len(wide.jobs) <= counts[2] <= counts[16] <= counts[64] <= counts[256] <= len(cells)
    assert counts[256] > len(wide.jobs)


def _rows(prepared, tmp_path, jobs_):
    out = [_run(prepared, tmp_path / "-".join(j.key), j.spec) for j in jobs_]
    return [pd.concat([o[k] for o in out if len(o[k])], ignore_index=True) for k in range(3)]


def _assert_same(got, want):
    (rows, curves, ledger), (ref_rows, ref_curves, ref_ledger) = got, want
    computed = ["excess_loss", "last_iterate_excess_loss", "train_accuracy"]
    pd.testing.assert_frame_equal(_sorted(rows[EXACT + computed], KEYS), _sorted(ref_rows[EXACT + computed], KEYS))
    curve_keys = KEYS + ["iterate"]
    pd.testing.assert_frame_equal(_sorted(curves.drop(columns="elapsed_s"), curve_keys),
                                  _sorted(ref_curves.drop(columns="elapsed_s"), curve_keys))
    pd.testing.assert_frame_equal(_ledger(ledger), _ledger(ref_ledger))


def test_split_jobs_give_the_wide_jobs_rows_bit_for_bit(prepared, tmp_path):
    """Two seeds, three trajectories: every batch, wide or split, is below GEMM_MIN_RUNS (6 runs)."""
    cells = share_trajectories([
        _job("dp-gd", 10.0, "bs16", 16, {"step": 4.0}),
        _job("dp-gd-tail", 10.0, "bs16", 16, {"step": 4.0, "average": "tail"}),
        _job("dp-gd-s16", 10.0, "bs16", 16, {"step": 16.0}),
        _job("dp-gd", 1.0, "bs16", 16, {"step": 4.0}, curves=0),
    ], {}, ALGORITHMS)
    cells = [Job(c.dataset, c.algorithm, c.conversion, c.eps, "0-1", {**c.spec, "seeds": [0, 1]}) for c in cells]
    costs = {c.key: estimated_cost(c.spec) for c in cells}
    parts = split_group(cells, costs, max(costs.values()))
    assert [len(p) for p in parts] == [1, 1, 1]                     # down to one trajectory per job
    wide = _rows(prepared, tmp_path / "wide", [merged_job(cells)])
    _assert_same(_rows(prepared, tmp_path / "split", [merged_job(p) for p in parts]), wide)


@pytest.mark.usefixtures("blocked_pass")
def test_parts_of_several_trajectories_give_the_wide_jobs_rows(prepared, tmp_path):
    """Four trajectories x three seeds (12 runs; the blocked pass, where a run's bits are its own: with the GEMM
    pass they agree to rounding, tests/pipeline/test_lockstep.py) split into two epsilon parts of 9 and 3 runs."""
    cells = _separate_jobs()
    costs = {c.key: estimated_cost(c.spec) for c in cells}
    eps10 = sum(v for k, v in costs.items() if k[3] == "10")
    parts = split_group(cells, costs, eps10)
    assert [{c.eps for c in p} for p in parts] == [{"10"}, {"1"}] and len(parts[0]) == 3
    assert job_split.split_groups([cells], "wide", 64) == [cells]
    wide = _rows(prepared, tmp_path / "wide", [merged_job(cells)])
    _assert_same(_rows(prepared, tmp_path / "split", [merged_job(p) for p in parts]), wide)
