"""Every invariant, rule and failure-case code the planner's comments and tests cite (I9, B.7, C12, ...) is
defined in docs/planner.md, so a reader can look each one up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "docs" / "planner.md"
CODE = re.compile(r"(?<![\w.])(I\d{1,2}|[A-F]\d{1,2}|B\.\d(?:\.\d)?)(?!\w)")
MATRIX_TEST = re.compile(r"def test_((?:[A-F]\d{1,2}_)+)")


def cited(text: str) -> set[str]:
    codes = set(CODE.findall(text))
    for ids in MATRIX_TEST.findall(text):
        codes.update(code for code in ids.split("_") if code)
    return codes


def test_the_citation_pattern_finds_codes_in_prose_and_test_names() -> None:
    text = "held (I9, C12); B.7(a) and B.6.3\ndef test_B3_B4_equal() -> None:\nE501 noqa_A1 x.I3"
    assert cited(text) == {"I9", "C12", "B.7", "B.6.3", "B3", "B4"}


def test_every_cited_code_is_in_the_catalogue() -> None:
    defined = cited(CATALOGUE.read_text())
    sources = [*(ROOT / "hotswap" / "planner").glob("*.py"), *(ROOT / "tests" / "planner").glob("*.py")]
    missing = {
        f"{code} ({path.name})"
        for path in sources
        if path.name != Path(__file__).name
        for code in cited(path.read_text()) - defined
    }
    assert sorted(missing) == []
