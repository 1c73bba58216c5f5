"""Static checks of profiles/slurm/config.yaml (fast; no SLURM needed).

The end-to-end test on a real single-node SLURM is tests/cluster/run_slurm_test.sh.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
HAS_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None

# Options the SLURM executor plugin adds to the snakemake CLI (plugin 2.8.0).
# Used when the plugin is not installed, so that `snakemake --help` lacks them.
PLUGIN_OPTIONS = {
    "slurm-array-jobs",
    "slurm-array-limit",
    "slurm-disable-memory-fudge",
    "slurm-logdir",
    "slurm-keep-successful-logs",
    "slurm-delete-logfiles-older-than",
    "slurm-init-seconds-before-status-checks",
    "slurm-requeue",
    "slurm-no-requeue",
    "slurm-exclude-failed-nodes",
    "slurm-no-account",
    "slurm-partition-config",
    "slurm-efficiency-report",
    "slurm-efficiency-report-path",
    "slurm-efficiency-threshold",
    "slurm-jobname-prefix",
    "slurm-status-command",
    "slurm-status-attempts",
    "slurm-qos",
    "slurm-reservation",
    "slurm-pass-command-as-script",
}


def _profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


@lru_cache(maxsize=1)
def _snakemake_options() -> frozenset[str]:
    exe = shutil.which("snakemake") or str(Path(sys.executable).with_name("snakemake"))
    out = subprocess.run(
        [exe, "--help"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return frozenset(re.findall(r"--([a-z][a-z0-9-]+)", out))


def _rule_names() -> set[str]:
    names: set[str] = set()
    for smk in [REPO / "Snakefile", REPO / "workflow" / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]:
        if smk.exists():
            names.update(re.findall(r"^\s*rule (\w+):", smk.read_text(), flags=re.M))  # also rules under an if
    return names


def test_profile_parses_as_a_mapping():
    prof = _profile()
    assert isinstance(prof, dict) and prof
    assert prof["executor"] == "slurm"
    assert prof["scheduler"] == "greedy"
    assert int(prof["jobs"]) > 0
    assert int(prof["latency-wait"]) > 0
    assert 0 < int(prof["slurm-init-seconds-before-status-checks"]) <= 120


def test_every_key_is_a_snakemake_option():
    known = set(_snakemake_options()) | PLUGIN_OPTIONS
    unknown = sorted(k for k in _profile() if k not in known)
    assert not unknown, f"not snakemake command-line options: {unknown}"


def test_plugin_option_list_matches_installed_plugin():
    if not HAS_PLUGIN:
        pytest.skip("snakemake-executor-plugin-slurm not installed")
    installed = {o for o in _snakemake_options() if o.startswith("slurm-")}
    assert PLUGIN_OPTIONS <= installed


def test_resources_are_well_formed():
    prof = _profile()
    default = prof["default-resources"]
    assert int(default["runtime"]) > 0  # minutes
    assert int(default["mem_mb"]) > 0
    for rule, res in prof.get("set-resources", {}).items():
        assert isinstance(res, dict) and res, rule
        for key in ("runtime", "mem_mb"):
            if key in res:
                assert int(res[key]) > 0, (rule, key)
    groups = prof.get("groups", {})
    components = prof.get("group-components", {})
    assert set(groups.values()) <= set(components), "each group needs a group-components entry"
    assert all(int(n) >= 1 for n in components.values())


def test_no_real_account_or_partition_is_hard_coded():
    prof = _profile()
    resources = [prof.get("default-resources", {}), *prof.get("set-resources", {}).values()]
    for res in resources:
        assert "slurm_account" not in res, "leave slurm_account to the user (docs/cluster.md)"
        assert "slurm_partition" not in res, "leave slurm_partition to the user (docs/cluster.md)"
    for key in ("slurm-qos", "slurm-reservation", "slurm-partition-config"):
        assert key not in prof


def test_every_entry_is_commented():
    """Each key and each nested entry has a comment on its line or just above it."""
    lines = PROFILE.read_text().splitlines()
    missing = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if re.match(r"^\s*[\w.-]+\s*:", line) is None:
            continue
        commented = "#" in line.split(":", 1)[1]
        above = lines[i - 1].strip() if i > 0 else ""
        if not (commented or above.startswith("#")):
            missing.append(f"line {i + 1}: {stripped}")
    assert not missing, "uncommented profile entries:\n" + "\n".join(missing)


def test_rules_named_in_profile_exist_in_workflow():
    rules = _rule_names()
    if not rules:
        pytest.skip("workflow rules not present")
    prof = _profile()
    named = set(prof.get("set-resources", {})) | set(prof.get("groups", {}))
    assert named <= rules, f"profile names unknown rules: {sorted(named - rules)}"


@pytest.mark.skipif(not HAS_PLUGIN, reason="snakemake-executor-plugin-slurm not installed")
def test_dry_run_with_profile_groups_optimizer_jobs(tmp_path):
    """`snakemake --profile profiles/slurm -n` accepts the profile (no SLURM contacted)."""
    if not (REPO / "config" / "test.yaml").exists() or not _rule_names():
        pytest.skip("pipeline or config/test.yaml not present")
    exe = shutil.which("snakemake") or str(Path(sys.executable).with_name("snakemake"))
    res = subprocess.run(
        [exe, "--profile", str(PROFILE.parent), "--configfile", "config/test.yaml",
         "--dry-run", "--quiet", "rules", "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
