"""The key table of ``config/README.md`` is generated from the config schema and the registries
(``dpnewton.pipeline.config_reference``) and kept in sync with them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from dpnewton.algorithms import ALGORITHMS, BUILT_IN
from dpnewton.data import DATASETS
from dpnewton.pipeline import config_reference
from dpnewton.pipeline.schema import fill_defaults, load_schema
from dpnewton.privacy import CONVERSIONS

REPO = Path(__file__).resolve().parents[2]
README = REPO / "config" / "README.md"
SCHEMA = load_schema()


def readme_rows() -> dict[str, list[str]]:
    """key -> [type, default, meaning] of the README's generated section."""
    text = README.read_text()
    section = text[text.index(config_reference.BEGIN):text.index(config_reference.END)]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and cells[0].startswith("`"):
            out[cells[0].strip("`")] = cells[1:]
    return out


def schema_keys(node: dict, prefix: str = "") -> list[str]:
    """Every property path of ``node``: nested objects, ``$ref``s, oneOf branches, list items and
    map entries (``<name>``) followed."""
    if "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    keys = []
    for name, sub in node.get("properties", {}).items():
        keys.append(prefix + name)
        keys += schema_keys(sub, prefix + name + ".")
    entry = node.get("additionalProperties")
    if isinstance(entry, dict) and "properties" in entry:
        keys += schema_keys(entry, prefix + "<name>.")
    for branch in node.get("oneOf", []) + ([node["items"]] if "items" in node else []):
        keys += schema_keys(branch, prefix)
    return keys


def test_readme_section_is_the_generated_table():
    text = README.read_text()
    assert text == config_reference.with_table(text), (
        "config/README.md's keys table is stale: run python -m dpnewton.pipeline.config_reference --write")


def test_every_schema_property_is_a_row_with_a_meaning():
    rows = readme_rows()
    keys = schema_keys(SCHEMA)
    assert {"tuning.factor", "claims.enabled", "datasets.<name>.optional", "algorithms.<name>.hyper",
            "conversion_study.algorithm", "tracks.fixed.methods.<name>.iterations"} <= set(keys)
    assert sorted(set(keys)) == sorted(rows)
    assert [key for key, (_, _, meaning) in rows.items() if not meaning] == []


@pytest.mark.parametrize("key, registry", [("algorithms", BUILT_IN), ("datasets", DATASETS),
                                           ("conversion", CONVERSIONS)])
def test_registered_names_are_listed(key, registry):
    meaning = readme_rows()[key][2]
    assert [name for name in registry if f"`{name}`" not in meaning] == []


def test_the_table_lists_built_in_cards_only(monkeypatch):
    """A card registered after the built-in ones (a plugin's) changes neither the table nor the README; the
    table says how to list the plugins, and that list has it."""
    import dataclasses

    monkeypatch.setitem(ALGORITHMS, "plugin-copy", dataclasses.replace(ALGORITHMS["dp-gd"], name="plugin-copy"))
    assert "plugin-copy" not in config_reference.table()
    test_readme_section_is_the_generated_table()
    assert "--algorithms" in readme_rows()["algorithms"][2]
    listed = dict(line.split("\t")[::3] for line in config_reference.algorithm_list().splitlines())
    assert listed["plugin-copy"] == "plugin" and listed["dp-gd"] == "built-in"
    assert set(listed) == set(ALGORITHMS)


def test_default_column():
    rows = readme_rows()

    def default(key):
        return yaml.safe_load(rows[key][1].strip("`"))

    for key in ["conversion", "tuning.factor", "figures.formats", "figures.convergence_epsilons",
                "tracks.selection.distribution", "datasets.<name>.options", "claims.timing_tolerance"]:
        node = SCHEMA
        for part in key.split("."):
            node = node["additionalProperties"] if part == "<name>" else node["properties"][part]
        assert default(key) == node["default"], key
    assert default("tuning.factor") == 2 and default("conversion") == "bs16"
    assert default("conversion_study.algorithm") == "hess-clip"     # the code's STUDY_DEFAULTS
    assert rows["holdout"][1] == "off" and rows["tracks"][1] == "off" and rows["seeds"][1] == "required"


def test_absent_texts_are_strings_and_do_not_fill():
    """``x-absent`` is documentation only: a string (not a YAML word like off read as false), and
    never filled into a config."""
    texts = []

    def collect(node):
        if isinstance(node, dict):
            texts.extend(v for k, v in node.items() if k == "x-absent")
            for v in node.values():
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)

    collect(SCHEMA)
    assert texts and all(isinstance(t, str) and t for t in texts)
    cfg = fill_defaults({"datasets": {"synthetic": {}}, "epsilons": [1], "seeds": 1,
                         "algorithms": {"dp-gd": {"iterations": [1]}}})
    assert "holdout" not in cfg and "tracks" not in cfg and "algorithm" not in cfg["algorithms"]["dp-gd"]
