"""Config values given on the command line (``snakemake --config key=value``).

Snakemake 9 turns ``True``/``False`` into booleans and numbers into numbers, but passes ``false``,
``true``, ``yes``, ... on as strings, and every value inside ``--config 'key={a: b}'`` as a string.
:func:`dpnewton.pipeline.schema.coerce_cli_values` gives them the type the JSON schema asks for
before the schema validates the config; a word that is no boolean stops the parse with a message
that names the key and the spellings that work.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.cli import parse_config

from dpnewton.pipeline.schema import coerce_cli_values
from tests.pipeline.test_config_errors import TINY, _env

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def coerced(*entries: str) -> dict:
    return coerce_cli_values(parse_config(list(entries)), SCHEMA)


@pytest.mark.parametrize("word,value", [("false", False), ("False", False), ("FALSE", False), ("no", False),
                                        ("off", False), ("0", False), ("true", True), ("True", True),
                                        ("yes", True), ("on", True), ("1", True)])
def test_boolean_words(word, value):
    assert coerced(f"publish_figures={word}") == {"publish_figures": value}


def test_nested_values_get_their_schema_type():
    cfg = coerced("claims={enabled: true, ours: [hess-clip]}", "timing={repeats: 3, seconds_per_run: 0.2}",
                  "conversion_study={enabled: false}", "holdout=0.2", "delta=null")
    assert cfg == {"claims": {"enabled": True, "ours": ["hess-clip"]},
                   "timing": {"repeats": 3, "seconds_per_run": 0.2},
                   "conversion_study": {"enabled": False}, "holdout": 0.2, "delta": None}


def test_strings_where_the_schema_wants_strings_are_kept():
    cfg = coerced("conversion=bs16", "data_dir=false", "datasets={synthetic: {options: {n: 100}}}")
    assert cfg["conversion"] == "bs16" and cfg["data_dir"] == "false"
    assert cfg["datasets"]["synthetic"]["options"] == {"n": "100"}  # free-form options: untouched


def test_config_files_are_unchanged():
    for name in ("config.yaml", "test.yaml", "paper.yaml", "claims.yaml"):
        cfg = yaml.safe_load((REPO / "config" / name).read_text())
        assert coerce_cli_values(copy.deepcopy(cfg), SCHEMA) == cfg, name


def test_a_word_that_is_no_boolean_names_the_fix():
    with pytest.raises(ValueError, match=r"publish_figures: 'maybe' is not a boolean; write true or false.*"
                                         r"--config publish_figures=false"):
        coerced("publish_figures=maybe")
    with pytest.raises(ValueError, match=r"claims\.enabled: 'maybe' is not a boolean"):
        coerced("claims={enabled: maybe}")


def _dry_run(tmp_path: Path, *config: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(TINY, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
           "--configfile", str(cfg), "--config", *config]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, env=_env())


@pytest.mark.slow
@pytest.mark.parametrize("word,publishes", [("false", False), ("true", True), ("no", False)])
def test_snakemake_config_boolean(tmp_path, word, publishes):
    res = _dry_run(tmp_path, f"publish_figures={word}")
    assert res.returncode == 0, res.stderr[-3000:]
    # the dry run's job-stats table lists the figure-publishing jobs only when the default target includes them
    assert bool(re.search(r"^publish_figure\s+\d+$", res.stdout, re.MULTILINE)) == publishes


@pytest.mark.slow
def test_snakemake_config_bad_boolean(tmp_path):
    res = _dry_run(tmp_path, "publish_figures=maybe")
    assert res.returncode != 0
    assert "publish_figures: 'maybe' is not a boolean; write true or false" in res.stdout + res.stderr
