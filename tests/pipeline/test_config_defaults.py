"""One source of configuration defaults: the schema.

``dpnewton.pipeline.config.load_config`` validates a config and fills the schema's ``default``
values (the workflow's ``common.smk`` calls it); the code indexes the config directly. The filling
must be the one ``snakemake.utils.validate(set_default=True)`` did before, so that the config hash
in ``protocol.json`` and every job spec hash (the checkpoint keys) stay as they were. The schema's
enums are pinned to the package's registries.
"""

from __future__ import annotations

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml

from dpnewton.algorithms import ALGORITHMS
from dpnewton.data import DATASETS
from dpnewton.pipeline import config as pc
from dpnewton.pipeline.figures import FIGURES
from dpnewton.privacy import CONVERSIONS

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
CONFIGS = ["config.yaml", "test.yaml", "paper.yaml", "claims.yaml"]

SMALL = {"datasets": {"synthetic": {"options": {"n": 200, "d": 4, "seed": 0}}}, "epsilons": [1, 10], "seeds": 2,
         "grids": {"g": [2, 4]}, "algorithms": {"hess-clip": {"grid": "g"}, "dp-gd": {"iterations": [8, 16]}},
         "tuning": {"extend_grid": True}}


def test_defaults_are_filled():
    cfg = pc.load_config(copy.deepcopy(SMALL))
    assert cfg["conversion"] == "bs16" and cfg["delta"] is None and cfg["data_dir"] is None
    assert cfg["allow_download"] is False and cfg["missing_algorithms"] == "error"
    assert cfg["tuning"] == {"extend_grid": True, "factor": 2, "max_extensions": 2, "probe_first_seed": True}
    assert cfg["curves"] == {"max_points": 200}
    assert cfg["figures"]["runtime_algorithms"] == ["dp-gd", "hess-clip", "qu-clip"]
    assert cfg["figures"]["formats"] == ["png", "pdf"] and cfg["figures"]["runtime_epsilon"] == 1
    assert cfg["table1"] == {"baseline": "dp-gd", "ours": "hess-clip"}
    assert cfg["timing"] == {"repeats": 5, "seconds_per_run": 0.5, "epsilon": 1}
    assert cfg["claims"]["enabled"] is False and cfg["claims"]["timing_tolerance"] == 0.25
    assert cfg["datasets"]["synthetic"] == {"options": {"n": 200, "d": 4, "seed": 0}, "optional": False}
    assert cfg["algorithms"]["hess-clip"] == {"grid": "g", "hyper": {}}
    assert "holdout" not in cfg                      # no schema default on purpose (absent = off)
    assert cfg["publish_figures"] is False


def test_defaults_are_copies_and_user_values_win():
    a = pc.load_config({**copy.deepcopy(SMALL), "figures": {"runtime_epsilon": 0.5}, "conversion": "gdp"})
    b = pc.load_config(copy.deepcopy(SMALL))
    assert a["figures"]["runtime_epsilon"] == 0.5 and a["conversion"] == "gdp"
    a["figures"]["runtime_algorithms"].append("x")
    assert b["figures"]["runtime_algorithms"] == ["dp-gd", "hess-clip", "qu-clip"]
    assert pc.load_config(copy.deepcopy(b)) == b     # filling is idempotent


def test_the_loader_is_the_validation():
    with pytest.raises(jsonschema.ValidationError, match="'epsilon' was unexpected"):
        pc.load_config({**copy.deepcopy(SMALL), "epsilon": [1]})
    with pytest.raises(ValueError, match="'hess-clipp' is not a registered"):
        pc.load_config({**copy.deepcopy(SMALL), "algorithms": {"hess-clipp": {"grid": "g"}}})
    with pytest.raises(ValueError, match="'nope' is not a key of grids"):
        pc.load_config({**copy.deepcopy(SMALL), "algorithms": {"dp-gd": {"grid": "nope"}}})
    # --config strings get their schema type
    assert pc.load_config({**copy.deepcopy(SMALL), "publish_figures": "yes"})["publish_figures"] is True


@pytest.mark.parametrize("name", CONFIGS)
def test_filling_matches_snakemake_validate(name):
    """The loader fills exactly what snakemake.utils.validate(set_default=True) filled before."""
    from snakemake.utils import validate

    raw = yaml.safe_load((REPO / "config" / name).read_text())
    theirs = copy.deepcopy(raw)
    pc.coerce_cli_values(theirs, SCHEMA)
    validate(theirs, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    ours = pc.load_config(copy.deepcopy(raw))
    assert ours == theirs
    assert pc.config_hash(ours) == pc.config_hash(theirs)


def test_hashes_unchanged():
    """Known answers (coerce_cli_values + snakemake.utils.validate(config, schema) as common.smk does,
    then expand(check_data=False), protocol_summary and config_hash of each job spec; the extension
    rules carry ``probe_first_seed``; DP-GD's two epsilons are one grouped (lockstep) job). A change here means
    published runs lose their checkpoints and their protocol.json hash."""
    cfg = pc.load_config(copy.deepcopy(SMALL))
    plan = pc.expand(cfg, check_data=False)
    assert pc.protocol_summary(plan)["config_hash"] == "c2feaf2780c9"
    assert {"/".join(j.key): pc.config_hash(j.spec) for j in plan.jobs} == {
        "synthetic/hess-clip/bs16/1/0-1": "c05c678785e6", "synthetic/hess-clip/bs16/10/0-1": "65368fa27425",
        "synthetic/dp-gd/bs16/1/0-1": "0e84851c8b59"}
    # expand() on a config that was not loaded: same jobs, protocol hash of the config as passed
    raw_plan = pc.expand(copy.deepcopy(SMALL), check_data=False)
    assert pc.protocol_summary(raw_plan)["config_hash"] == "716161e7a6d5"
    assert [pc.config_hash(j.spec) for j in raw_plan.jobs] == [pc.config_hash(j.spec) for j in plan.jobs]


def _conversion_enums(node, out):
    if isinstance(node, dict):
        if "enum" in node and "bs16" in node["enum"]:
            out.append(node["enum"])
        for v in node.values():
            _conversion_enums(v, out)
    elif isinstance(node, list):
        for v in node:
            _conversion_enums(v, out)
    return out


def test_schema_enums_are_the_registries():
    # dataset names are checked against the registry (a new dataset needs no schema edit)
    assert "propertyNames" not in SCHEMA["properties"]["datasets"]
    with pytest.raises(ValueError, match="is not a registered dataset"):
        pc.load_config({**copy.deepcopy(SMALL), "datasets": {"no-such-set": {}}})
    for name in DATASETS:
        assert name in (REPO / "config" / "README.md").read_text()
    enums = _conversion_enums(SCHEMA, [])
    assert len(enums) >= 1 and all(e == list(CONVERSIONS) for e in enums)
    assert pc.ALL_CONVERSIONS == list(CONVERSIONS)
    # algorithm names have no schema enum (tuning variants are free names): the loader checks the
    # registered algorithm of every entry against dpnewton.algorithms.ALGORITHMS
    algos = SCHEMA["properties"]["algorithms"]
    assert "propertyNames" not in algos and "enum" not in algos["additionalProperties"]["properties"]["algorithm"]
    for name in ALGORITHMS:
        pc.load_config({**copy.deepcopy(SMALL), "algorithms": {name: {"iterations": [1]}}})


def test_figure_registry():
    assert len(set(FIGURES)) == len(FIGURES)
    # one wildcard rule makes every figure of the registry (tests/test_layout.py checks each figure
    # against its wildcard, caption and tables)
    plots = (REPO / "workflow" / "rules" / "plots.smk").read_text()
    assert "rule figure:" in plots and not any(f"rule {name}:" in plots for name in FIGURES)


@pytest.mark.parametrize("extra, where", [
    ({"conversion_study": {"conversions": ["gdp"], "datasets": ["synthetc"]}}, r"conversion_study\[0\]"),
    ({"conversion_study": [{"conversions": ["gdp"]}, {"conversions": ["cks"], "datasets": ["a1a"]}]},
     r"conversion_study\[1\]"),
    ({"tracks": {"datasets": ["synthetic", "adlt"]}}, "tracks"),
])
def test_a_dataset_reference_that_is_not_in_datasets_is_an_error(extra, where):
    with pytest.raises(ValueError, match=where + r"\.datasets names \['\w+'\], which are not in datasets"):
        pc.load_config({**copy.deepcopy(SMALL), **extra})


def test_dataset_references_to_listed_datasets_load():
    cfg = pc.load_config({**copy.deepcopy(SMALL),
                          "conversion_study": {"conversions": ["gdp"], "datasets": ["synthetic"]},
                          "tracks": {"datasets": ["synthetic"]}})
    assert cfg["tracks"]["datasets"] == ["synthetic"]


def test_selection_score_defaults_are_the_librarys():
    """The schema's tracks.selection defaults are dpnewton.tuning's (private_select's own defaults)."""
    from dpnewton import tuning
    selection = SCHEMA["properties"]["tracks"]["properties"]["selection"]["properties"]
    assert selection["score_frac"]["default"] == tuning.DEFAULT_SCORE_FRAC
    assert selection["score_clip"]["default"] == tuning.DEFAULT_SCORE_CLIP
