"""A job's T search: one trajectory for every released model, and the first seed's probe.

* Configurations that differ only in ``average`` share one job (:func:`~dpnewton.pipeline.plan.share_trajectories`):
  its rows, curves and ledger equal, bit for bit, those of one job per configuration, each member keeping
  its own grid and cap; jobs of one configuration keep their spec.
* ``probe_first_seed`` (stop when seed 0 at the proposed T is above every seed at the best T): the grid
  a probing job ends with is the one obtained by replaying the rule by
  hand on the rows of the same job run without the probe (every seed at every proposed T), and the
  probe job runs no (seed, T) that the replay does not.
"""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml

from dpnewton.algorithms import ALGORITHMS
from dpnewton.data import prepare
from dpnewton.pipeline import jobs, run_ledger
from dpnewton.pipeline.config import expand, load_config
from dpnewton.pipeline.plan import Job, job_members, share_trajectories, trajectories
from dpnewton.pipeline.selection import best_t, mean_per_t
from tests.workflow.test_determinism import REPO

COMPUTED = ["algorithm", "seed", "iterations", "excess_loss", "last_iterate_excess_loss", "train_accuracy",
            "average", "rho", "ledger_rho_total", "n_releases", "grid_round", "grid_extended", "hyper"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    return prepare("synthetic", cache_dir=d, out=d / "synthetic.npz", n=2000, d=5, seed=3).path


def _spec(name: str, average: str, cap: int, probe: bool = False, seeds=(0, 1, 2), step: float = 4.0) -> dict:
    hyper = {"step": step} if average == "none" else {"step": step, "average": average}
    extend = {"factor": 2, "max_iterations": cap, **({"probe_first_seed": True} if probe else {})}
    return {"dataset": "synthetic", "dataset_options": {}, "algorithm": name, "base_algorithm": "dp-gd",
            "conversion": "bs16", "primary": True,
            "eps_label": "10", "epsilon": 10.0, "seeds": list(seeds), "iterations": [1, 2, 4], "delta": None,
            "hyper": hyper, "curves_max_points": 6, "extend": extend}


def _job(spec: dict) -> Job:
    return Job("synthetic", spec["algorithm"], "bs16", "10", "0-2", spec)


def _run(prepared, out, spec):
    out.mkdir(parents=True, exist_ok=True)
    rows = jobs.run_job(prepared, spec, out / "rows.csv", out / "curves.parquet")
    return rows, pd.read_parquet(out / "curves.parquet"), run_ledger.read_ledger(out / "rows.csv")


def _sorted(frame, keys):
    return frame.sort_values(keys).reset_index(drop=True)


def test_members_of_one_trajectory_share_a_job(prepared, tmp_path):
    last, tail = _spec("dp-gd", "none", 64), _spec("dp-gd-tail", "tail", 16)
    (shared,) = share_trajectories([_job(last), _job(tail)], {}, ALGORITHMS)
    assert shared.algorithm == "dp-gd" and shared.spec["hyper"] == {"step": 4.0}
    assert {n: (m["average"], m["extend"]["max_iterations"]) for n, m in job_members(shared.spec).items()} == {
        "dp-gd": ("none", 64), "dp-gd-tail": ("tail", 16)}
    # another step size is another trajectory; a single configuration keeps its spec
    other = _spec("dp-gd-s8", "none", 64, step=8.0)
    assert [j.spec for j in share_trajectories([_job(other), _job(last)], {}, ALGORITHMS)] == [other, last]

    rows, curves, ledger = _run(prepared, tmp_path / "shared", shared.spec)
    alone = [_run(prepared, tmp_path / s["algorithm"], s) for s in (last, tail)]
    keys = ["algorithm", "seed", "iterations"]
    pd.testing.assert_frame_equal(_sorted(rows[COMPUTED], keys),
                                  _sorted(pd.concat([a[0] for a in alone])[COMPUTED], keys))
    curve_keys = keys + ["iterate"]
    pd.testing.assert_frame_equal(_sorted(curves.drop(columns="elapsed_s"), curve_keys),
                                  _sorted(pd.concat([a[1] for a in alone]).drop(columns="elapsed_s"), curve_keys))
    ledger_keys = keys + ["release"]
    mine = _sorted(ledger.drop(columns="config_hash").astype({"algorithm": str}), ledger_keys)
    ref = _sorted(pd.concat([a[2] for a in alone]).drop(columns="config_hash").astype({"algorithm": str}), ledger_keys)
    text = {c: str for c in run_ledger.LEDGER_TEXT if c != "config_hash"}
    pd.testing.assert_frame_equal(mine.astype(text), ref.astype(text))
    # each member kept its own grid: the tail average stopped at its cap of 16
    grids = rows.groupby("algorithm")["iterations"].max()
    assert grids["dp-gd-tail"] <= 16 < grids["dp-gd"]


def test_the_default_config_shares_dp_gd_and_its_tail_average():
    """DP-GD is lockstep: one job per dataset runs every epsilon; at each epsilon dp-gd and dp-gd-tail share
    one trajectory (plan.trajectories)."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = expand(load_config(copy.deepcopy(cfg)), base_dir=REPO, check_data=False)
    (job,) = [j for j in plan.jobs if j.dataset == "synthetic" and j.spec["base_algorithm"] == "dp-gd"]
    assert job.key == ("synthetic", "dp-gd", "bs16", "0.1", "0-2")
    members = job_members(job.spec)
    shared = [sorted(members[k]["algorithm"] for k in keys) for keys in trajectories(job.spec).values()]
    assert shared == [["dp-gd", "dp-gd-tail"]] * 3
    assert not any(j.algorithm == "dp-gd-tail" for j in plan.jobs)


def _replay(full: pd.DataFrame, grid: list[int], cap: int, first_seed: int) -> tuple[list[int], int]:
    """The probe rule by hand on rows that hold every seed at every T the search may propose."""
    grid = list(grid)
    while True:
        means = mean_per_t(full[full["iterations"].isin(grid)])
        best = best_t(means)
        if best == max(grid) and best * 2 <= cap:
            new = best * 2
        elif best == min(grid) and best > 1:
            new = max(1, best // 2)
        else:
            return grid, 0
        at = full.set_index(["seed", "iterations"])["excess_loss"]
        if at[(first_seed, new)] > full.loc[full["iterations"] == best, "excess_loss"].max():
            return grid, new
        grid.append(new)


@pytest.mark.usefixtures("blocked_pass")    # bit for bit: the full job's wide batch must not take the GEMM pass
@pytest.mark.parametrize("step,cap", [(4.0, 512), (0.5, 256)])
def test_the_probe_stops_where_the_rule_replayed_by_hand_stops(prepared, tmp_path, step, cap):
    ref, _, _ = _run(prepared, tmp_path / "full", {**_spec("dp-gd", "none", cap, step=step),
                                                   "iterations": sorted({1, 2, 4} | {2 ** k for k in range(10)
                                                                                     if 2 ** k <= cap})})
    grid, rejected = _replay(ref, [1, 2, 4], cap, 0)
    assert (rejected > 0) == (step == 4.0)     # one search the probe stops, one it does not
    rows, _, _ = _run(prepared, tmp_path / "probe", _spec("dp-gd", "none", cap, probe=True, step=step))
    assert sorted(rows["iterations"].unique()) == sorted(grid)
    assert set(rows["probe_rejected_T"]) == {rejected}
    full = ref.set_index(["seed", "iterations"])["excess_loss"]
    got = rows.set_index(["seed", "iterations"])["excess_loss"]
    assert got.equals(full.loc[got.index])   # the same runs, bit for bit
