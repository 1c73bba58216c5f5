"""The committed benchmark results are consistent with their hand-written discussions.

``benchmarks/common.write_section`` appends ``results/<name>_discussion.md`` to ``results/<name>.md``
and rebuilds ``benchmarks/README.md``. Editing a discussion without rebuilding leaves a section whose
prose contradicts its own tables (this happened once: batching.md kept an older reading).
"""

from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
DISCUSSIONS = sorted(RESULTS.glob("*_discussion.md"))


def test_there_are_discussions():
    assert len(DISCUSSIONS) >= 5


@pytest.mark.parametrize("discussion", DISCUSSIONS, ids=lambda p: p.stem)
def test_section_and_readme_carry_the_current_discussion(discussion):
    name = discussion.name.removesuffix("_discussion.md")
    text = discussion.read_text().strip()
    section = RESULTS / f"{name}.md"
    assert section.exists(), f"{discussion.name} has no section {section.name}"
    assert section.read_text().rstrip().endswith(text), (
        f"{section.name} does not end with {discussion.name}: rebuild it (run the script, or "
        f"re-append the discussion and call benchmarks/common.write_readme())")
    assert text in (RESULTS.parent / "README.md").read_text(), f"benchmarks/README.md lacks {discussion.name}"
