"""Config values that a job reads are refused when the config loads (dpnewton.pipeline.config_checks).

The workflow-level cases (a real Snakemake run per bad config, and the exact messages) are in
tests/pipeline/test_config_errors.py (slow); these run in process: each value the schema accepts, the
load refuses naming its key, and every shipped config still loads.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from dpnewton.pipeline.config import load_config

REPO = Path(__file__).resolve().parents[2]
BASE = {"datasets": {"synthetic": {"options": {"n": 200, "d": 4, "seed": 0}}}, "epsilons": [1], "seeds": 2,
        "algorithms": {"dp-gd": {"iterations": [2, 3]}, "hess-clip": {"iterations": [2]}}}


def _load(**changes):
    cfg = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = cfg
        *parents, last = path.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return load_config(cfg)


def test_a_misspelled_hyper_parameter_is_refused_at_load_naming_it():
    with pytest.raises(ValueError) as err:
        _load(algorithms__dp_gd_s={"algorithm": "dp-gd", "iterations": [2], "hyper": {"setp": 8.0}})
    assert str(err.value).startswith('config key algorithms.dp_gd_s.hyper: {"setp": 8.0} is not a configuration '
                                     "of dp-gd (unknown hyper-parameter(s) ['setp']; allowed: ['average', 'reset', "
                                     "'step'])")


@pytest.mark.parametrize("changes, key", [
    ({"algorithms__hess-clip__hyper": {"grad_frac": 1.5}}, "algorithms.hess-clip.hyper"),
    ({"algorithms__hess-clip__hyper": {"grad_frac": "half"}}, "algorithms.hess-clip.hyper"),
    ({"datasets__synthetic__options": {"n": 200, "dims": 4}}, "datasets.synthetic.options"),
    ({"datasets__synthetic__options": {"n": 0}}, "datasets.synthetic.options"),
    ({"epsilons": [1e308]}, "epsilons"),
    ({"conversion_study": {"algorithm": "hess-clip", "conversions": ["gdp"], "epsilons": [1e308]}},
     "conversion_study"),
    ({"timing": {"epsilon": 1e308}}, "timing.epsilon"),
    ({"delta": 0.01}, "delta"),
    ({"holdout": 0.998}, "holdout"),
    ({"seeds": [2**63]}, "seeds"),
    ({"algorithms__aop": {"iterations": [1, 10]}}, "algorithms.aop"),
    ({"claims": {"enabled": True, "baseline": "dp_gd"}}, "claims.baseline"),
    ({"tracks": {"selection": {"distribution": {"name": "poisson"},
                               "methods": {"gd": {"variants": ["dp-gd"], "iterations": [2]}}}}},
     "tracks.selection.distribution"),
])
def test_values_a_job_would_fail_on_are_refused_at_load(changes, key):
    with pytest.raises(ValueError, match=rf"^config key {key.replace('.', chr(92) + '.')}: "):
        _load(**changes)


def test_the_boundaries_are_accepted():
    """Refusing is no false alarm: the largest delta below 1/n, T = 1 for aop and a law with its parameter load."""
    _load(delta=0.0049, algorithms__aop={"iterations": [1]},
          tracks={"selection": {"distribution": {"name": "poisson", "mu": 3},
                                "methods": {"gd": {"variants": ["dp-gd"], "iterations": [2]}}}})


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")) + [REPO / ".test/config/config.yaml"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_config_loads(path):
    load_config(yaml.safe_load(path.read_text()))
