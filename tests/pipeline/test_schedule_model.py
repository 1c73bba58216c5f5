"""The model of Snakemake's scheduler (dpnewton.pipeline.schedule_model) on schedules worked out by hand:
LPT on identical cores, a chain, a job longer than the others together over the cores, priorities against
dependencies, a job that needs every core, ties, and bad input."""

from __future__ import annotations

import pytest

from dpnewton.pipeline.schedule_model import Task, longest_chain, simulate


def _independent(seconds, priority=None):
    return [Task(f"j{i}", s, priority=s if priority is None else priority) for i, s in enumerate(seconds)]


def test_lpt_on_identical_cores_graham_worst_case():
    """Graham's tight case for 3 cores: longest first gives [5, 3, 3 | 5, 3 | 4, 4] = 11, the optimum 9."""
    run = simulate(_independent([5, 5, 4, 4, 3, 3, 3]), cores=3)
    assert run.makespan == 11 and run.lower_bound == 9
    assert run.utilisation == pytest.approx(27 / 33)
    assert run.start == {"j0": 0, "j1": 0, "j2": 0, "j3": 4, "j4": 5, "j5": 5, "j6": 8}


def test_a_chain_runs_one_job_at_a_time():
    tasks = [Task("c", 4, after=("b",)), Task("a", 2), Task("b", 3, after=("a",))]
    run = simulate(tasks, cores=8)
    assert run.makespan == 9 and run.start == {"a": 0, "b": 2, "c": 5}
    assert run.chain == ("a", "b", "c") and run.chain_seconds == 9 and run.lower_bound == 9
    assert run.utilisation == pytest.approx(9 / 72)
    assert longest_chain(tasks) == (9, ("a", "b", "c"))


def test_a_job_longer_than_the_rest_over_the_cores_sets_the_length():
    run = simulate(_independent([10, 1, 1, 1, 1]), cores=4)
    assert run.makespan == 10 and run.longest_job == ("j0", 10) and run.lower_bound == 10
    # on one core the sum
    assert simulate(_independent([10, 1, 1, 1, 1]), cores=1).makespan == 14


def test_priority_decides_which_ready_job_starts():
    """Two cores. A job (2 s) is needed by a long one (5 s, priority 9); two fillers of 4 s have priority 1.
    With A at priority 0 the fillers start first and B ends at 4 + 2 + 5 = 11; with A above them, A and one
    filler start, B starts at 2 and the other filler when the first ends: 8."""
    def tasks(a_priority):
        return [Task("A", 2, priority=a_priority), Task("B", 5, priority=9, after=("A",)),
                Task("C", 4, priority=1), Task("D", 4, priority=1)]
    low = simulate(tasks(0), cores=2)
    assert low.makespan == 11 and low.start == {"C": 0, "D": 0, "A": 4, "B": 6}
    high = simulate(tasks(10), cores=2)
    assert high.makespan == 8 and high.start == {"A": 0, "C": 0, "B": 2, "D": 4}


def test_a_job_of_every_core_waits_while_smaller_ones_fill_in():
    """4 cores: T asks for 4 threads (8, capped at the cores), so the lower-priority Y starts beside X
    and T starts when both have ended."""
    tasks = [Task("X", 1, priority=5), Task("T", 2, priority=3, threads=8), Task("Y", 3, priority=1)]
    run = simulate(tasks, cores=4)
    assert run.start == {"X": 0, "Y": 0, "T": 3} and run.makespan == 5
    assert run.utilisation == pytest.approx((1 + 4 * 2 + 3) / (4 * 5))


def test_ties_go_to_the_larger_input_then_to_the_order_given():
    tasks = [Task("a", 1), Task("b", 1, size=10), Task("c", 1)]
    assert simulate(tasks, cores=1).start == {"b": 0, "a": 1, "c": 2}


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="'b' needs \\['x'\\]"):
        simulate([Task("a", 1), Task("b", 1, after=("x",))], cores=2)
    with pytest.raises(ValueError, match="cycle"):
        simulate([Task("a", 1, after=("b",)), Task("b", 1, after=("a",))], cores=2)
    with pytest.raises(ValueError, match="one name"):
        simulate([Task("a", 1), Task("a", 2)], cores=2)
    with pytest.raises(ValueError, match="at least 1"):
        simulate([Task("a", 1)], cores=0)
