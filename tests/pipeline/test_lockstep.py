"""Grouped jobs (dpnewton.pipeline.plan.group_jobs): the jobs of one dataset, seed chunk and lockstep
algorithm run as one job whose runs step together in one batch; with ``job_grouping: algorithm`` those of
any other algorithm are one job too, running its trajectories one after another.

* Its rows, curves and ledger equal those of the separate jobs (one per configuration, conversion and epsilon,
  configurations that differ only in ``average`` sharing theirs) for members that differ in step, epsilon,
  conversion, average and cap: bit for bit with the blocked pass (every batch below ``loss.GEMM_MIN_RUNS``,
  forced by the ``blocked_pass`` fixture), to the rounding of the GEMM pass with the real threshold.
* A grouped job of an algorithm that is not lockstep (Hess-clip) equals its separate jobs bit for bit.
* The plan: one job per (dataset, chunk) for dp-gd and precond-dp-gd, members keyed uniquely, a lone job
  keeps its spec; the scheduling cost counts every trajectory's runs; a lockstep rows file is checked per
  (configuration, conversion, epsilon).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpnewton.algorithms import ALGORITHMS
from dpnewton.io import DamagedFileError
from dpnewton.pipeline import jobs, run_ledger
from dpnewton.pipeline.aggregate import check_job_rows
from dpnewton.pipeline.config import expand, load_config
from dpnewton.pipeline.plan import Job, group_jobs, job_description, job_members, share_trajectories, trajectories
from dpnewton.pipeline.scheduling import estimated_cost, run_values
from tests.pipeline.test_t_search import _run, _sorted, prepared  # noqa: F401 (prepared: the fixture)

KEYS = ["algorithm", "conversion", "epsilon", "seed", "iterations"]
EXACT = KEYS + ["eps_label", "average", "rho", "delta", "ledger_rho_total", "n_releases", "grid_round",
                "grid_extended", "probe_rejected_T", "hyper", "resets", "diverged"]
COMPUTED = ["excess_loss", "last_iterate_excess_loss", "train_accuracy"]
#: the rows' and curves' agreement with the separate jobs when the lockstep batch takes the GEMM pass
#: (relative; the GEMM pass agrees with the blocked one to 1e-13 of a run's largest entry, and a run's
#: T updates and its loss carry that rounding)
GEMM_RTOL = 1e-9


def _job(name: str, eps: float, conversion: str, cap: int, hyper: dict, curves: int = 6) -> Job:
    label = f"{eps:g}"
    spec = {"dataset": "synthetic", "dataset_options": {}, "algorithm": name, "base_algorithm": "dp-gd",
            "conversion": conversion, "primary": conversion == "bs16", "eps_label": label, "epsilon": eps,
            "seeds": [0, 1, 2], "iterations": [1, 2, 4], "delta": None, "hyper": hyper, "curves_max_points": curves,
            "extend": {"factor": 2, "max_iterations": cap, "probe_first_seed": True}}
    return Job("synthetic", name, conversion, label, "0-2", spec)


def _separate_jobs() -> list[Job]:
    """dp-gd and its tail average (one trajectory, caps 64 and 16), a larger step, another epsilon (no curves)
    and another conversion, as expand() makes them before lockstep."""
    return share_trajectories([
        _job("dp-gd", 10.0, "bs16", 64, {"step": 4.0}),
        _job("dp-gd-tail", 10.0, "bs16", 16, {"step": 4.0, "average": "tail"}),
        _job("dp-gd-s16", 10.0, "bs16", 32, {"step": 16.0}),
        _job("dp-gd", 1.0, "bs16", 64, {"step": 4.0}, curves=0),
        _job("dp-gd", 10.0, "gdp", 32, {"step": 4.0}),
    ], {}, ALGORITHMS)


def _lockstep_and_separate(prepared, tmp_path):
    separate = _separate_jobs()
    (lockstep,) = group_jobs(separate, ALGORITHMS)
    together = _run(prepared, tmp_path / "lockstep", lockstep.spec)
    alone = [_run(prepared, tmp_path / f"{j.algorithm}-{j.conversion}-{j.eps}", j.spec) for j in separate]
    return lockstep, together, [pd.concat([a[k] for a in alone if len(a[k])], ignore_index=True) for k in range(3)]


def _ledger(frame):
    text = {c: str for c in run_ledger.LEDGER_TEXT if c != "config_hash"}
    return _sorted(frame.drop(columns="config_hash").astype(text), KEYS + ["release"])


@pytest.mark.usefixtures("blocked_pass")
def test_a_lockstep_job_equals_its_separate_jobs_bit_for_bit(prepared, tmp_path):
    lockstep, (rows, curves, ledger), (ref_rows, ref_curves, ref_ledger) = _lockstep_and_separate(prepared, tmp_path)
    assert lockstep.key == ("synthetic", "dp-gd", "bs16", "10", "0-2") and lockstep.spec["curves_max_points"] == 6
    assert len(rows) == len(ref_rows) and set(rows.columns) == set(ref_rows.columns)
    pd.testing.assert_frame_equal(_sorted(rows[EXACT + COMPUTED], KEYS), _sorted(ref_rows[EXACT + COMPUTED], KEYS))
    curve_keys = KEYS + ["iterate"]
    pd.testing.assert_frame_equal(_sorted(curves.drop(columns="elapsed_s"), curve_keys),
                                  _sorted(ref_curves.drop(columns="elapsed_s"), curve_keys))
    pd.testing.assert_frame_equal(_ledger(ledger), _ledger(ref_ledger))
    # each member kept its own T search: three ran to their caps (16, 32, 64), the step-16 one stopped inside
    # its cap of 32, and dp-gd at epsilon 10 stopped where seed 0's probe at T = 64 failed
    cells = rows.groupby(["algorithm", "conversion", "epsilon"])
    assert cells["iterations"].max().to_dict() == {("dp-gd", "bs16", 1.0): 64, ("dp-gd", "bs16", 10.0): 32,
                                                   ("dp-gd", "gdp", 10.0): 32, ("dp-gd-s16", "bs16", 10.0): 16,
                                                   ("dp-gd-tail", "bs16", 10.0): 16}
    assert cells["probe_rejected_T"].max()[("dp-gd", "bs16", 10.0)] == 64
    assert set(curves["epsilon"]) == {10.0}          # the member without curves has none


def test_a_lockstep_job_equals_its_separate_jobs_to_rounding_with_the_gemm_pass(prepared, tmp_path):
    _, (rows, curves, ledger), (ref_rows, ref_curves, ref_ledger) = _lockstep_and_separate(prepared, tmp_path)
    mine, ref = _sorted(rows, KEYS), _sorted(ref_rows, KEYS)
    pd.testing.assert_frame_equal(mine[EXACT], ref[EXACT])       # the same grids, budgets and ledgers
    np.testing.assert_allclose(mine[COMPUTED].to_numpy(float), ref[COMPUTED].to_numpy(float), rtol=GEMM_RTOL)
    curve_keys = KEYS + ["iterate"]
    mine, ref = _sorted(curves, curve_keys), _sorted(ref_curves, curve_keys)
    pd.testing.assert_frame_equal(mine[curve_keys], ref[curve_keys])
    np.testing.assert_allclose(mine["excess_loss"], ref["excess_loss"], rtol=GEMM_RTOL)
    pd.testing.assert_frame_equal(_ledger(ledger), _ledger(ref_ledger))


def test_the_plan_runs_each_lockstep_algorithm_once_per_dataset_and_chunk():
    cfg = {"datasets": {"synthetic": {"options": {"n": 100, "d": 3}}}, "epsilons": [0.1, 1], "seeds": 4,
           "seeds_per_job": 2, "grids": {"g": [1, 2]},
           "algorithms": {"dp-gd": {"grid": "g"}, "dp-gd-s8": {"algorithm": "dp-gd", "grid": "g", "hyper": {"step": 8}},
                          "dp-gd-tail": {"algorithm": "dp-gd", "grid": "g", "hyper": {"average": "tail"}},
                          "precond-dp-gd": {"grid": "g", "epsilons": [1]}, "hess-clip": {"grid": "g"}},
           "conversion_study": {"algorithm": "dp-gd", "conversions": ["gdp"], "epsilons": [1]}}
    plan = expand(load_config(cfg), check_data=False)
    keys = sorted(j.key for j in plan.jobs)
    assert keys == sorted([("synthetic", "dp-gd", "bs16", "0.1", c) for c in ("0-1", "2-3")]
                          + [("synthetic", "hess-clip", "bs16", e, c) for e in ("0.1", "1") for c in ("0-1", "2-3")]
                          + [("synthetic", "precond-dp-gd", "bs16", "1", c) for c in ("0-1", "2-3")])
    job = plan.job_index[("synthetic", "dp-gd", "bs16", "0.1", "0-1")]
    members = job_members(job.spec)
    assert list(members) == ["dp-gd/bs16/eps~0.1", "dp-gd-tail/bs16/eps~0.1", "dp-gd/bs16/eps~1",
                             "dp-gd-tail/bs16/eps~1", "dp-gd-s8/bs16/eps~0.1", "dp-gd-s8/bs16/eps~1", "dp-gd/gdp/eps~1"]
    assert {(m["algorithm"], m["conversion"], m["epsilon"], m["average"]) for m in members.values()} == {
        (a, c, e, "tail" if a == "dp-gd-tail" else "none") for a, c, e in
        [("dp-gd", "bs16", 0.1), ("dp-gd", "bs16", 1.0), ("dp-gd-s8", "bs16", 0.1), ("dp-gd-s8", "bs16", 1.0),
         ("dp-gd-tail", "bs16", 0.1), ("dp-gd-tail", "bs16", 1.0), ("dp-gd", "gdp", 1.0)]}
    assert list(trajectories(job.spec).values()) == [
        ["dp-gd/bs16/eps~0.1", "dp-gd-tail/bs16/eps~0.1"], ["dp-gd/bs16/eps~1", "dp-gd-tail/bs16/eps~1"],
        ["dp-gd-s8/bs16/eps~0.1"], ["dp-gd-s8/bs16/eps~1"], ["dp-gd/gdp/eps~1"]]
    assert job.spec["seeds"] == [0, 1] and "hyper" not in job.spec and "epsilon" not in job.spec
    # the cost counts every trajectory's runs: five trajectories of T = 1 and 2
    assert run_values(job.spec) == [1] * 5 + [2] * 5
    one = {**plan.job_index[("synthetic", "hess-clip", "bs16", "1", "0-1")].spec, "base_algorithm": "dp-gd",
           "algorithm": "dp-gd", "hyper": {}}
    assert estimated_cost(job.spec) == pytest.approx(5 * estimated_cost(one))
    # a lone job keeps its spec: precond-dp-gd at one epsilon
    assert "members" not in plan.job_index[("synthetic", "precond-dp-gd", "bs16", "1", "0-1")].spec


def _hess_job(name: str, eps: float, conversion: str, hyper: dict) -> Job:
    spec = {**_job(name, eps, conversion, 8, hyper).spec, "base_algorithm": "hess-clip", "iterations": [1, 2]}
    return Job("synthetic", name, conversion, spec["eps_label"], "0-2", spec)


def test_a_job_grouped_by_algorithm_equals_its_separate_jobs_bit_for_bit(prepared, tmp_path):
    """Hess-clip (not lockstep): two configurations, one with its tail average on the same trajectory, two
    epsilons and two conversions in one job; each trajectory runs as its own job's batch."""
    separate = share_trajectories([
        _hess_job("hess-clip", 10.0, "bs16", {}), _hess_job("hess-clip-tail", 10.0, "bs16", {"average": "tail"}),
        _hess_job("hess-clip-gf0.5", 10.0, "bs16", {"grad_frac": 0.5}), _hess_job("hess-clip", 1.0, "bs16", {}),
        _hess_job("hess-clip", 10.0, "gdp", {})], {}, ALGORITHMS)
    assert len(group_jobs(separate, ALGORITHMS)) == 4          # not lockstep: not grouped by default
    (job,) = group_jobs(separate, ALGORITHMS, by_algorithm=True)
    assert job.key == ("synthetic", "hess-clip", "bs16", "10", "0-2") and len(trajectories(job.spec)) == 4
    rows, curves, ledger = _run(prepared, tmp_path / "grouped", job.spec)
    alone = [_run(prepared, tmp_path / f"{j.algorithm}-{j.conversion}-{j.eps}", j.spec) for j in separate]
    ref_rows, ref_curves, ref_ledger = [pd.concat([a[k] for a in alone], ignore_index=True) for k in range(3)]
    assert len(rows) == len(ref_rows) > 5 * 3 * 2
    pd.testing.assert_frame_equal(_sorted(rows[EXACT + COMPUTED], KEYS), _sorted(ref_rows[EXACT + COMPUTED], KEYS))
    pd.testing.assert_frame_equal(_sorted(curves.drop(columns="elapsed_s"), KEYS + ["iterate"]),
                                  _sorted(ref_curves.drop(columns="elapsed_s"), KEYS + ["iterate"]))
    pd.testing.assert_frame_equal(_ledger(ledger), _ledger(ref_ledger))


def test_job_grouping_algorithm_gives_one_job_per_dataset_algorithm_and_chunk():
    cfg = {"datasets": {"synthetic": {"options": {"n": 100, "d": 3}}}, "epsilons": [0.1, 1], "seeds": 2,
           "grids": {"g": [1, 2]}, "job_grouping": "algorithm",
           "algorithms": {"dp-gd": {"grid": "g"}, "hess-clip": {"grid": "g"},
                          "hess-clip-gf0.5": {"algorithm": "hess-clip", "grid": "g", "hyper": {"grad_frac": 0.5}},
                          "aop": {"iterations": [1], "epsilons": [1]}},
           "conversion_study": {"algorithm": "hess-clip", "conversions": ["gdp"]}}
    plan = expand(load_config(cfg), check_data=False)
    assert sorted(j.key for j in plan.jobs) == [("synthetic", a, "bs16", e, "0-1")
                                                for a, e in (("aop", "1"), ("dp-gd", "0.1"), ("hess-clip", "0.1"))]
    assert list(job_members(plan.job_index[("synthetic", "hess-clip", "bs16", "0.1", "0-1")].spec)) == [
        f"{a}/{c}/eps~{e}" for a, c, e in (("hess-clip", "bs16", "0.1"), ("hess-clip", "bs16", "1"),
                                           ("hess-clip-gf0.5", "bs16", "0.1"), ("hess-clip-gf0.5", "bs16", "1"),
                                           ("hess-clip", "gdp", "0.1"), ("hess-clip", "gdp", "1"))]
    # a group of one job keeps its spec (and hash); the messages name what each job runs
    lone = plan.job_index[("synthetic", "aop", "bs16", "1", "0-1")].spec
    assert "members" not in lone and job_description(lone) == "aop on synthetic, eps=1 (bs16)"
    assert job_description(plan.job_index[("synthetic", "hess-clip", "bs16", "0.1", "0-1")].spec) == (
        "hess-clip, hess-clip-gf0.5 on synthetic, eps=0.1, 1 (bs16, gdp)")


def test_a_lockstep_rows_file_is_checked_per_configuration_conversion_and_epsilon():
    """Members of one configuration at two epsilons have different grids; a seed that lost a run is found."""
    rows = pd.DataFrame({"algorithm": "dp-gd", "conversion": "bs16", "epsilon": [1.0] * 4 + [10.0] * 6,
                         "seed": [0, 0, 1, 1, 0, 0, 0, 1, 1, 1], "iterations": [1, 2, 1, 2, 1, 2, 4, 1, 2, 4]})
    check_job_rows(rows, "rows.csv")
    with pytest.raises(DamagedFileError, match="dp-gd bs16 epsilon 10"):
        check_job_rows(rows.drop(index=9), "rows.csv")


class Interrupted(Exception):
    pass


@pytest.mark.usefixtures("blocked_pass")
def test_an_interrupted_lockstep_job_recomputes_only_its_unfinished_units(prepared, tmp_path, monkeypatch):
    """A (grid round, seed) unit holds every trajectory's runs of that seed in that round; killed in its third
    batch and run again, the job computes only the units it had not written and ends with the rows, curves
    and ledger of an uninterrupted run (update times aside)."""
    (job,) = group_jobs(_separate_jobs(), ALGORITHMS)
    calls = []
    real = jobs._run_units

    def units(problem, spec, seeds, grid_round, wanted, *args, fail_at=None):
        calls.append((tuple(seeds), grid_round, {s: sorted(by) for s, by in wanted.items()}))
        if len(calls) == fail_at:
            raise Interrupted
        return real(problem, spec, seeds, grid_round, wanted, *args)

    monkeypatch.setattr(jobs, "_run_units", units)
    ref = _run(prepared, tmp_path / "ref", job.spec)
    first = list(calls)
    assert first[0] == ((0, 1, 2), 0, {s: sorted(trajectories(job.spec)) for s in (0, 1, 2)})
    calls.clear()
    monkeypatch.setattr(jobs, "_run_units", lambda *a: units(*a, fail_at=3))
    with pytest.raises(Interrupted):
        _run(prepared, tmp_path / "job", job.spec)
    partial = jobs.checkpoint_dir(tmp_path / "job" / "rows.csv")
    written = sorted(p.name for p in partial.glob("*.pkl"))
    assert written == ["round0_seed0.pkl", "round0_seed1.pkl", "round0_seed2.pkl", "round1_seed0.pkl"]
    calls.clear()
    monkeypatch.setattr(jobs, "_run_units", units)
    got = _run(prepared, tmp_path / "job", job.spec)
    assert calls == first[2:]                  # round 0 and the round-1 probe were resumed, not recomputed
    timed = ["runtime_s", "timestamp_utc", "elapsed_s"]
    for mine, want in zip(got, ref):
        pd.testing.assert_frame_equal(mine.drop(columns=timed, errors="ignore"),
                                      want.drop(columns=timed, errors="ignore"))
    assert not partial.exists()
