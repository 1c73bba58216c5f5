"""A fresh clone without ../shared: ``--config allow_download=true`` and ``--config data_dir=null`` reach the
download instead of stopping on the default data_dir, which does not exist there."""

from __future__ import annotations

from pathlib import Path

import yaml
from snakemake.cli import parse_config

from dpnewton.pipeline import config as pipecfg
from dpnewton.pipeline.schema import coerce_cli_values

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def test_null_on_the_command_line_is_no_folder():
    for word in ("null", "None", "~", ""):
        assert coerce_cli_values(parse_config([f"data_dir={word}"]), SCHEMA)["data_dir"] is None
    assert coerce_cli_values(parse_config(["data_dir=../data"]), SCHEMA)["data_dir"] == "../data"


def test_missing_data_dir_is_skipped_only_when_downloads_are_allowed(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    assert pipecfg.resolve_data_dir("../shared/datasets", clone, allow_download=True) is None
    assert pipecfg.resolve_data_dir("../shared/datasets", clone) == (tmp_path / "shared/datasets")
    (tmp_path / "shared/datasets").mkdir(parents=True)
    assert pipecfg.resolve_data_dir("../shared/datasets", clone, allow_download=True) == tmp_path / "shared/datasets"
    assert pipecfg.resolve_data_dir(None, clone, allow_download=True) is None


def test_fresh_clone_plan_keeps_the_real_datasets_with_downloads(tmp_path):
    """The default config in a clone without ../shared: with downloads a1a stays in the plan (and its
    data_dir is none, so prepare downloads it); without, it is dropped, naming the missing folder."""
    for allow, kept in ((True, True), (False, False)):
        cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        cfg.update(coerce_cli_values(parse_config([f"allow_download={str(allow).lower()}"]), SCHEMA))
        pipecfg.load_config(cfg, SCHEMA)
        plan = pipecfg.expand(cfg, base_dir=tmp_path / "clone")
        assert ("a1a" in plan.datasets) is kept, plan.dropped
        if kept:
            assert pipecfg.resolve_data_dir(cfg["data_dir"], tmp_path / "clone", cfg["allow_download"]) is None
        else:
            assert "does not exist" in plan.dropped["a1a"]
