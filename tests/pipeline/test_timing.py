"""The timing stage (dpnewton.pipeline.timing): what it times, in which order, and how costs are used.

No test asserts a duration: only the structure of the measurement and the arithmetic on its results.
"""

import numpy as np
import pandas as pd
import pytest

from dpnewton.data.prepare import prepare
from dpnewton.pipeline import config as pipecfg
from dpnewton.pipeline import timing as tm
from dpnewton.problems import load_split_from_prepared

ALGORITHMS = {
    "dp-gd": {"base": "dp-gd", "hyper": {}},
    "dp-gd-s8": {"base": "dp-gd", "hyper": {"step": 8.0}},
    "hess-clip": {"base": "hess-clip", "hyper": {}},
    "hess-clip-gf0.9": {"base": "hess-clip", "hyper": {"grad_frac": 0.9}},
    "qu-add": {"base": "qu-add", "hyper": {}},
    "aop": {"base": "aop", "hyper": {}},
}


def test_configurations_to_time_are_the_anchors_and_their_tuned_variants():
    got = tm.configurations_to_time(ALGORITHMS, ["dp-gd", "hess-clip", "not-configured"])
    assert got == ["dp-gd", "dp-gd-s8", "hess-clip", "hess-clip-gf0.9"]
    # an anchor that is itself a variant brings in its base's other configurations
    assert tm.configurations_to_time(ALGORITHMS, ["dp-gd-s8"]) == ["dp-gd", "dp-gd-s8"]
    assert tm.configurations_to_time(ALGORITHMS, []) == []


@pytest.mark.parametrize("per_update, target, steps", [
    (1e-3, 0.5, 500), (0.02, 0.5, 25), (0.4, 0.5, 2), (10.0, 0.5, 2), (1e-9, 0.5, tm.MAX_STEPS),
    (0.0, 0.5, tm.MAX_STEPS), (float("nan"), 0.5, tm.MAX_STEPS)])
def test_steps_for(per_update, target, steps):
    assert tm.steps_for(per_update, target) == steps


def test_warm_up_measures_the_updates_after_an_expensive_first_one():
    """First update 1 s, then 0.01 s each: runs of 2, 4, 8 updates add too little; 16 add 0.15 s >= 0.5 / 4,
    so 0.01 s per update and 50 updates per timed run (warm/2 would have given 2, the first update's cost)."""
    calls = []

    def run(k):
        calls.append(k)
        return 1.0 + 0.01 * (k - 1)

    assert tm.warm_up_steps(run, 0.5) == 50 and calls == [1, 2, 4, 8, 16]
    assert tm.warm_up_steps(lambda k: 0.4 * k, 0.5) == 2                   # one run of 2 updates is enough
    assert tm.warm_up_steps(lambda k: 1.0, 0.5) == tm.MAX_STEPS             # no cost after the first: the cap


def test_rotation_puts_every_configuration_first_once_per_cycle():
    names = ["a", "b", "c"]
    assert tm.rotated(names, 0) == ["a", "b", "c"]
    assert tm.rotated(names, 1) == ["b", "c", "a"]
    assert tm.rotated(names, 5) == ["c", "a", "b"]
    assert tm.rotated([], 3) == []
    for pos in range(3):
        assert sorted(tm.rotated(names, k)[pos] for k in range(3)) == names


def test_measure_update_costs_structure(toy_problem):
    confs = {k: ALGORITHMS[k] for k in ("dp-gd", "hess-clip", "dp-gd-s8")}
    raw = tm.measure_update_costs(toy_problem, "toy", confs, repeats=4, seconds_per_run=0.002, epsilon=1.0,
                                  conversion="bs16")
    assert list(raw.columns) == tm.RAW_COLUMNS
    assert len(raw) == 4 * 3
    assert (raw["first_update_s"] > 0).all()
    names = list(confs)
    for k in range(4):
        rnd = raw[raw["round"] == k].sort_values("position")
        assert list(rnd["algorithm"]) == tm.rotated(names, k)
    assert (raw["steps"] >= tm.WARMUP_STEPS).all()
    assert raw.groupby("algorithm")["steps"].nunique().eq(1).all()  # one run length per configuration
    assert np.allclose(raw["s_per_update"], (raw["update_s"] - raw["first_update_s"]) / (raw["steps"] - 1))
    assert dict(zip(raw["algorithm"], raw["base_algorithm"]))["dp-gd-s8"] == "dp-gd"
    with pytest.raises(ValueError, match="repeats"):
        tm.measure_update_costs(toy_problem, "toy", confs, repeats=0, seconds_per_run=0.01, epsilon=1.0,
                                conversion="bs16")


def test_summarize_costs_median_range_spread():
    raw = pd.DataFrame({"dataset": "s", "algorithm": ["a"] * 3 + ["b"] * 2, "base_algorithm": ["a"] * 3 + ["b"] * 2,
                        "round": [0, 1, 2, 0, 1], "position": 0, "steps": [10, 10, 10, 4, 4],
                        "update_s": [0.1, 0.3, 0.2, 0.4, 0.8], "first_update_s": [0.5, 0.1, 0.3, 1.0, 2.0],
                        "s_per_update": [0.01, 0.03, 0.02, 0.1, 0.2]})
    c = tm.summarize_costs(raw).set_index("algorithm")
    assert c.loc["a", "first_update_s"] == pytest.approx(0.3) and c.loc["b", "first_update_s"] == pytest.approx(1.5)
    assert list(tm.summarize_costs(raw).columns) == tm.COST_COLUMNS
    assert c.loc["a", "s_per_update"] == pytest.approx(0.02)
    assert c.loc["a", "spread"] == pytest.approx((0.03 - 0.01) / 0.02)
    assert c.loc["b", "s_per_update"] == pytest.approx(0.15) and c.loc["b", "rounds"] == 2
    assert tm.summarize_costs(raw.iloc[:0]).empty


def test_lone_runtime_is_first_update_plus_the_rest():
    costs = {("s", "dp-gd"): (0.006, 0.004), ("s", "hess-clip"): (0.02, 0.02)}
    frame = pd.DataFrame({"dataset": ["s", "s", "s", "t", "s", "s"],
                          "algorithm": ["dp-gd", "hess-clip", "hess-clip", "dp-gd", "dp-gd", "dp-gd"],
                          "best_T": pd.array([1200, 16, None, 5, 1, 0], dtype="Int64")})
    got = tm.runtime_column(frame, costs)
    assert got[:2] == pytest.approx([0.006 + 1199 * 0.004, 0.32])
    assert np.isnan(got[2]) and np.isnan(got[3])  # no best T; not timed on t
    assert got[4:] == pytest.approx([0.006, 0.0])  # one update: the first; none: nothing
    assert tm.runtime_column(frame.rename(columns={"best_T": "iterate"}), costs, "iterate")[0] == pytest.approx(4.802)
    table = pd.DataFrame({"dataset": ["s"], "algorithm": ["dp-gd"], "first_update_s": [0.006], "s_per_update": [0.004]})
    assert tm.cost_lookup(table) == {("s", "dp-gd"): (0.006, 0.004)}


def test_run_timing_writes_raw_rows_that_load_back(tmp_path):
    prepared = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "synthetic.npz", n=500, d=4, seed=1).path
    spec = {"dataset": "synthetic", "configurations": {"dp-gd": ALGORITHMS["dp-gd"]}, "repeats": 2,
            "seconds_per_run": 0.002, "epsilon": 1.0, "conversion": "bs16", "delta": None}
    out = tmp_path / "timing" / "toy.csv"
    raw = tm.run_timing(prepared, spec, out)
    assert out.exists() and not list(out.parent.glob(".*.tmp"))
    costs = tm.load_costs([out])
    assert list(costs["algorithm"]) == ["dp-gd"] and costs.loc[0, "rounds"] == 2
    assert costs.loc[0, "s_per_update"] == pytest.approx(raw["s_per_update"].median())
    assert costs.loc[0, "first_update_s"] == pytest.approx(raw["first_update_s"].median())


def test_timing_spec_carries_holdout_and_precision_only_when_not_the_default():
    """Absent or float64 (and no holdout): the spec the workflow passed before these keys existed, so the
    rule's params, hence its outputs, stay; float32: the same spec plus ``precision``, as the run jobs'."""
    cfg = pipecfg.load_config({"datasets": {"synthetic": {"options": {"n": 200, "d": 4, "seed": 0}}},
                               "epsilons": [1], "seeds": 2, "algorithms": {"dp-gd": {"iterations": [8]}}})
    confs = {"dp-gd": ALGORITHMS["dp-gd"]}
    before = {"dataset": "synthetic", "configurations": confs, "repeats": cfg["timing"]["repeats"],
              "seconds_per_run": cfg["timing"]["seconds_per_run"], "epsilon": cfg["timing"]["epsilon"],
              "conversion": cfg["conversion"], "delta": cfg["delta"]}
    assert "precision" not in cfg and tm.timing_spec(cfg, "synthetic", confs) == before
    assert tm.timing_spec({**cfg, "precision": "float64"}, "synthetic", confs) == before
    assert tm.timing_spec({**cfg, "precision": "float32"}, "synthetic", confs, holdout=0.2) == {
        **before, "holdout": 0.2, "precision": "float32"}


def test_run_timing_times_the_problem_in_the_spec_precision(tmp_path, monkeypatch):
    """float64 (no key): the problem of load_split_from_prepared, bit for bit. float32: Z in float32, the
    float64 optimum, and every margin within the float32 rounding bound of the float64 one:
    (gamma_d + 4u) ||w||_1 for rows in the unit ball (Z and w rounded once, a d-term float32 sum), so the
    loss, 1-Lipschitz in each margin, too."""
    prepared = prepare("synthetic", cache_dir=tmp_path, out=tmp_path / "synthetic.npz", n=500, d=4, seed=1).path
    reference, _ = load_split_from_prepared(prepared)
    seen, real = [], tm.measure_update_costs

    def spy(problem, *args, **kwargs):
        seen.append(problem)
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(tm, "measure_update_costs", spy)
    spec = {"dataset": "synthetic", "configurations": {"dp-gd": ALGORITHMS["dp-gd"]}, "repeats": 1,
            "seconds_per_run": 0.002, "epsilon": 1.0, "conversion": "bs16", "delta": None}
    for prec in ("float64", "float32"):
        s = spec if prec == "float64" else {**spec, "precision": prec}
        assert len(tm.run_timing(prepared, s, tmp_path / f"{prec}.csv")) == 1
    p64, p32 = seen
    assert p64.precision == "float64" and p64.Z.dtype == np.float64 and p64.Z.tobytes() == reference.Z.tobytes()
    assert p32.precision == "float32" and p32.Z.dtype == np.float32
    assert (p32.n, p32.d, p32.loss_opt) == (reference.n, reference.d, reference.loss_opt)
    u = 2.0 ** -24
    for w in (np.linspace(-1.0, 1.0, reference.d), np.full(reference.d, 3.0)):
        bound = (reference.d * u / (1 - reference.d * u) + 4 * u) * np.abs(w).sum()
        diff = np.abs(p32.margins(w) - reference.margins(w)).max()
        assert 0 < diff <= bound
        assert abs(float(p32.loss(w)) - float(reference.loss(w))) <= bound
