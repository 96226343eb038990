"""The README is read in five minutes: the two commands near the top, the whole file short, the answer generated."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_two_commands_come_first_and_the_readme_stays_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 210, f"README.md has {len(lines)} lines: move detail to docs/ or the results pages"
    first = "\n".join(lines[:40])
    assert "```bash\nmake repro" in first and "\nmake test" in first, "the two commands belong in the first 40 lines"
    assert (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text().strip().endswith("make test")


def test_the_answer_is_generated_not_typed():
    text = README.read_text(encoding="utf-8")
    for profile in ("replicates", "study"):
        block = text.split(f"<!-- claim:{profile}:start -->")[1].split(f"<!-- claim:{profile}:end -->")[0]
        assert f"checked on the `{profile}` profile" in block and f"results/{profile}/README.md" in block
        assert block.count("\n| ") <= 2 + 5, "the README shows the headline rows; the full table is on the page"
