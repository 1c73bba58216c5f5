"""Validate once, default once: experiment.check_run is the one data-free check of a run's arguments, and the
default conversion and delta rule each have one definition."""

from __future__ import annotations

import inspect

import pytest

from dpnewton.experiment import check_run, resolve_budget
from dpnewton.privacy import DEFAULT_CONVERSION, conversions, epsilon_to_rho, rho_to_epsilon
from dpnewton.privacy.neighbouring import (BENCHMARK_RELATION, LIBRARY_DELTA, LIBRARY_RELATION, paper_delta,
                                           resolve_delta)


@pytest.mark.parametrize("kwargs, needle", [
    ({"algorithm": "no-such"}, "algorithm='no-such' is unknown"),
    ({"epsilon": 0.0}, "epsilon=0.0"),
    ({"delta": 1.5}, "delta=1.5"),
    ({"iterations": 0}, "iterations=0"),
    ({"iterations": []}, "iterations must not be empty"),
    ({"conversion": "nope"}, "conversion='nope' is unknown"),
    ({"neighbouring": "swap"}, "neighbouring='swap' is unknown"),
    ({"algorithm": "hess-clip", "neighbouring": LIBRARY_RELATION}, "calibrated only for neighbouring"),
    ({"hyper": {"step": -1.0}}, "step=-1.0"),
    ({"hyper": {"no_such_key": 1}}, "unknown hyper-parameter"),
    ({"epsilon": 1e-12, "delta": 1e-5}, "epsilon"),          # below what bs16 can represent: an error, no hang
])
def test_each_bad_argument_is_named(kwargs, needle):
    args = {"algorithm": "dp-gd", "epsilon": 1.0, "delta": None, "iterations": 10, "conversion": "bs16",
            "neighbouring": BENCHMARK_RELATION, "hyper": None, **kwargs}
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        check_run(**args)


def test_a_good_run_returns_its_card():
    assert check_run("objpert", 1.0, None, 1, neighbouring=LIBRARY_RELATION).name == "objpert"
    assert check_run("dp-gd", 1.0, None, [1, 5], hyper={"average": "tail"}).batched


def test_one_default_conversion_and_one_delta_rule():
    for fn in (epsilon_to_rho, rho_to_epsilon):
        assert inspect.signature(fn).parameters["conversion"].default == DEFAULT_CONVERSION == "bs16"
    assert not hasattr(conversions, "default_delta")
    assert resolve_delta(None, BENCHMARK_RELATION, 100) == paper_delta(100) == 1e-4
    assert resolve_delta(None, LIBRARY_RELATION, 100) == LIBRARY_DELTA
    assert resolve_delta(0.001, LIBRARY_RELATION, 100) == 0.001
    delta, rho = resolve_budget(1.0, None, 100, "bs16", BENCHMARK_RELATION)
    assert delta == 1e-4 and rho == epsilon_to_rho(1.0, 1e-4, "bs16")
    with pytest.raises(ValueError, match="at least 1/n"):
        resolve_budget(1.0, 0.5, 10, "bs16", BENCHMARK_RELATION)
