"""The README's results fit on one screen, name tie sets, and state what the repository does (each
statement checked against the code or the committed tables)."""

import re
from pathlib import Path

from dpnewton.estimator import DEFAULT_ALGORITHM

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_results_fit_on_one_screen_with_the_summary_figure_and_one_line_per_claim():
    results = section("Results").splitlines()
    first_link = next(i for i, line in enumerate(results) if "](figures/claims.md)" in line)
    assert first_link <= 60
    head = "\n".join(results[:first_link])
    assert "![" in head and "figures/claims_summary.png" in head and (ROOT / "figures/claims_summary.png").exists()
    assert "| claim (setting a) | verdict | number |" in head
    assert "Tie rule:" in head and "Best private method" not in head


def test_library_section_comes_before_the_reproduction_details_and_is_delimited():
    start, end = README.index("library section: start"), README.index("library section: end")
    assert start < README.index("## Train a private model") < end < README.index("## Reproduction details")


def test_two_setup_commands():
    block = section("Set up").split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert block[0].endswith("snakemake --cores 2") and block[1] == "bash .ci/run"
    # the apt-get step of .ci/run runs as root whatever DPNEWTON_SKIP_SLURM says; the README says so
    ci = (ROOT / ".ci/run").read_text()
    assert "apt-get" in ci.split('DPNEWTON_SKIP_SLURM:-0', 1)[0]
    assert "not the apt-get step" in README and "DPNEWTON_SKIP_SLURM=1 bash .ci/run` as a normal user" in README


def test_default_run_time_stated_once():
    assert len(re.findall(r"\d+(?:\.\d+)?(?:-\d+)? min on 2", README)) == 1
    assert not re.search(r"\d+(\.\d+)? min on 2", (ROOT / "config/README.md").read_text())


def test_statements_that_were_wrong():
    # logs/ and .snakemake/ are written in the checkout (rule log: directives)
    assert "writes nothing else" not in README and "`logs/`" in README
    assert 'log:\n        "logs/' in (ROOT / "workflow/rules/claims.smk").read_text()
    # F*'s mechanism uses w*: a method above F* may miss something
    assert "misses nothing" not in README
    # C5's 3x is this project's threshold
    assert "the paper's wording" not in README and "this project's threshold" in README
    assert "this project's threshold" in (ROOT / "figures/claims.md").read_text()
    # precond-dp-gd: prior art credited
    assert "Mehta, Krichene, Thakurta, Kurakin" in README and "DP-FC" in README


def test_default_rule_doc_names_the_estimators_default():
    doc = (ROOT / "docs/default_rule.md").read_text()
    assert f"The estimator's default is `{DEFAULT_ALGORITHM}`" in doc
    assert "current default, `qu-clip`" not in doc
