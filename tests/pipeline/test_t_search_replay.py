"""benchmarks/t_search_replay.py: the seed-0 probe rule of the T search replayed on recorded rows, on
hand-made two-seed jobs whose answers are worked out below (factor 2, declared grid {10, 20})."""

import pandas as pd
import pytest

from tests.conftest import load_benchmark


@pytest.fixture(scope="module")
def replay():
    return load_benchmark("t_search_replay")


def job(losses: dict[int, tuple[float, float]], rounds: dict[int, int]) -> pd.DataFrame:
    """Rows of seeds 0 and 1: {T: (loss of seed 0, loss of seed 1)}, T's grid round; runtime_s = T / 10."""
    return pd.DataFrame([{"seed": s, "iterations": T, "excess_loss": pair[s], "runtime_s": T / 10,
                          "grid_round": rounds.get(T, 0)} for T, pair in losses.items() for s in (0, 1)])


def test_probe_passes_then_stops_the_search_before_the_full_best(replay):
    # round 0: means 10: 0.55, 20: 0.35 -> best 20 (largest) -> 40
    # round 1, T=40: seed 0 0.3 < its 0.4 at T=20: passes; means 40: 0.25 best -> 80
    # round 2, T=80: seed 0 0.35 is not < its 0.3 at T=40: the probe rule stops with best T 40 (mean 0.25);
    # the full rule saw mean 0.2 at 80 (best) -> ran 160 (mean 0.3) and kept 80
    rows = job({10: (0.5, 0.6), 20: (0.4, 0.3), 40: (0.3, 0.2), 80: (0.35, 0.05), 160: (0.4, 0.2)},
               {40: 1, 80: 2, 160: 3})
    r = replay.replay_job(rows, factor=2, declared=[10, 20], rule="seed")
    assert (r["rounds"], r["stop_round"], r["stop"]) == (3, 2, "earlier round")
    assert (r["best_T_full"], r["best_T_probe"], r["same_best_T"]) == (80, 40, False)
    assert r["mean_ratio"] == pytest.approx(0.25 / 0.2)
    # not run: seed 1 at 80, both seeds at 160; the probe (seed 0 at 80) ran and is wasted
    assert r["runs_saved"] == 3 and r["runtime_saved_s"] == pytest.approx(8 + 16 + 16)
    assert r["runtime_wasted_probe_s"] == pytest.approx(8) and r["probe_runtime_passed_s"] == pytest.approx(4)
    assert (r["runs"], r["runs_extension"]) == (10, 6)
    assert (r["runtime_s"], r["runtime_extension_s"]) == pytest.approx((62, 56))
    assert r["grid_probe"] == "10 20 40"


def test_downward_probe_stops_the_last_round_or_passes(replay):
    # round 0: means 10: 0.25, 20: 0.45 -> best 10 (smallest, > 1) -> 5
    # seed 0 at 5 is 0.25, not < its 0.2 at 10: stop; the full rule's mean at 5 is 0.15 (best) -> ran 2 (mean 0.3)
    stopped = job({10: (0.2, 0.3), 20: (0.5, 0.4), 5: (0.25, 0.05), 2: (0.3, 0.3)}, {5: 1, 2: 2})
    r = replay.replay_job(stopped, factor=2, declared=[10, 20], rule="seed")
    assert (r["stop_round"], r["best_T_full"], r["best_T_probe"]) == (1, 5, 10)
    assert r["mean_ratio"] == pytest.approx(0.25 / 0.15) and r["runs_saved"] == 3
    assert r["runtime_saved_s"] == pytest.approx(0.5 + 0.2 + 0.2)
    # seed 0 at 5 is 0.1 < 0.2: passes; mean 0.3 at 5 leaves 10 interior, the search ends as recorded
    passed = job({10: (0.2, 0.3), 20: (0.5, 0.4), 5: (0.1, 0.5)}, {5: 1})
    r = replay.replay_job(passed, factor=2, declared=[10, 20], rule="seed")
    assert (r["stop_round"], r["stop"], r["best_T_probe"], r["runs_saved"]) == (0, "none", 10, 0)
    # a failed probe in the last round saves the other seed's run and keeps the best T
    last = job({10: (0.2, 0.3), 20: (0.5, 0.4), 5: (0.3, 0.5)}, {5: 1})
    r = replay.replay_job(last, factor=2, declared=[10, 20], rule="seed")
    assert (r["stop"], r["same_best_T"], r["mean_ratio"], r["runs_saved"]) == ("last round", True, 1.0, 1)


def test_probe_tests_differ(replay):
    # seed 0 at 5 is 0.22: not below its 0.2 at the best T 10, below the mean 0.25 and the largest 0.3 there
    rows = job({10: (0.2, 0.3), 20: (0.5, 0.4), 5: (0.22, 0.4)}, {5: 1})
    stops = {rule: replay.replay_job(rows, 2, [10, 20], rule)["stop_round"] for rule in replay.RULES}
    assert stops == {"seed": 1, "mean": 0, "max": 0}


def test_a_round_the_rule_would_not_run_fails_the_replay(replay):
    # best T 20 is interior after round 0 (means 0.5, 0.3, 0.4): no round 1 may follow
    rows = job({10: (0.5, 0.5), 20: (0.3, 0.3), 40: (0.4, 0.4), 80: (0.1, 0.1)}, {80: 1})
    with pytest.raises(AssertionError, match="the rule proposes"):
        replay.replay_job(rows, factor=2)
    with pytest.raises(AssertionError, match="declared grid"):
        replay.replay_job(job({10: (0.5, 0.5), 20: (0.3, 0.3)}, {}), factor=2, declared=[10, 30])
