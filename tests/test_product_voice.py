"""The product speaks of itself, for its users: no ticket numbers, work sessions, acceptance-criteria words, commit
hashes as provenance, first person, or documents the repository does not contain, in any tracked text file.

History lives in version control: a reader of the docs, a comment or a message has no tracker or research notes
to open, and a first person names nobody they know. The samples in the tests below are the detector's inputs.
"""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from collections.abc import Iterator

import pytest

from testkit.mock_runtime import PROJECT_ROOT

TEXT_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml", ".ts", ".cfg", ".txt")
TEXT_NAMES = ("Makefile", "Dockerfile", ".ci/run")
# Data, pins and generated inventories: hashes there are content, not provenance.
DATA = ("tests/data/", "upstream.lock.json", "requirements.lock", "go.sum", "go.mod", "package-lock.json")

HEX = r"(?<![\w./@:-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w/@-]|\.\w)"
PATTERNS: dict[str, re.Pattern[str]] = {
    "an issue or ticket number": re.compile(r"(?<![\w/])(?:issues?|tickets?)\s*#?\d+", re.I),
    "a work session": re.compile(
        r"\b(?:this|that|previous|next|last|earlier|later|same|work|agent)\s+session\b|\bsession of \d", re.I
    ),
    "acceptance-criteria words": re.compile(r"\bdone[ -]when\b|\bacceptance criteri", re.I),
    "a commit hash as provenance": re.compile(HEX),
    "the first person": re.compile(
        r"\b[Ww]e(?:'re|'ve|'ll)?\b|\b[Oo]ur(?:s|selves)?\b|\bus\b(?!-)|(?<![-\w" "])I\b(?![/." "-])"
    ),
    "a document the repository lacks": re.compile(
        r"\bresearch\s+(?:[A-Z]\.\d|§|a\.\d)|hotswap-research|(?:newcomer|architecture)-review"
    ),
}
# Lines where a pattern's words mean something else, each with why.
ALLOWED: tuple[tuple[str, str], ...] = (
    ("LICENSE", ""),  # the license's own text
    ("components/kueue/manager_config.py", "c1f6bfd2.kueue.x-k8s.io"),  # Kueue's leader-election lease name
    ("tools/toolchain.py", "release commit ("),  # the upstream commit a Go module pin resolves to
    ("tests/test_config.py", '"us east"'),  # a mistyped region
)


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout
    return [
        path
        for path in out.splitlines()
        if (path.endswith(TEXT_SUFFIXES) or path.endswith(TEXT_NAMES))
        and not any(d in path for d in DATA)
        and path != "tests/test_product_voice.py"
    ]


def _prose(path: str, text: str) -> Iterator[tuple[int, str]]:
    """The lines a reader reads: all of a text file; of Python, its comments and strings (names are code)."""
    if not path.endswith(".py"):
        yield from enumerate(text.splitlines(), 1)
        return
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING) or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def _test_names(text: str) -> list[tuple[int, str]]:
    return [
        (number, m.group(1))
        for number, line in enumerate(text.splitlines(), 1)
        if (m := re.match(r"\s*(?:async )?def (test_\w+)", line)) is not None
    ]


def _findings() -> Iterator[str]:
    for path in _tracked():
        file = PROJECT_ROOT / path
        if not file.exists():
            continue
        text = file.read_text(errors="replace")
        if path.endswith(".py"):
            for number, name in _test_names(text):
                if re.search(r"(?:issue|ticket|session)_?\d|done_when|acceptance", name):
                    yield f"{path}:{number}: a test named for the process ({name!r})"
        for number, line in _prose(path, text):
            if any(path == where and what in line for where, what in ALLOWED):
                continue
            for what, pattern in PATTERNS.items():
                if (found := pattern.search(line)) is not None:
                    yield f"{path}:{number}: {what} ({found.group(0)!r}): {line.strip()[:100]}"


def test_no_process_talk_in_the_product() -> None:
    findings = list(_findings())
    assert not findings, "say the thing itself (history lives in git):\n" + "\n".join(findings)


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("Fixed for issue 38, item 2.", "an issue or ticket number"),
        ("Measured this session on a quiet machine.", "a work session"),
        ("the headline's test, issue 37's Done-when", "acceptance-criteria words"),
        ("One full `make bench` of 5a31c27 replaces the figures.", "a commit hash as provenance"),
        ("We keep the taint until the slice is back.", "the first person"),
        ("Preemption authority (research B.2).", "a document the repository lacks"),
    ],
)
def test_each_pattern_catches_what_it_names(line: str, what: str) -> None:
    assert PATTERNS[what].search(line), (what, line)


@pytest.mark.parametrize(
    "line",
    [
        "a GCP region, e.g. `us-east5`",
        "python:3.11-slim-bookworm@sha256:0123456789abcdef0123456789abcdef",
        '@pytest.fixture(scope="session")',
        "the reconciler's I/O layer",
        'WEEKDAYS = ("MO", "TU", "WE")',
        'select = ["E", "I", "B"]',
        "python -I -c script",
        "see kubernetes-sigs/kueue#12701 upstream",
    ],
)
def test_ordinary_words_pass(line: str) -> None:
    assert not any(p.search(line) for p in PATTERNS.values()), line


def test_every_rule_code_cited_is_defined_in_the_planner_catalogue() -> None:
    """Rule codes (B.2, B.6.3, ...) are defined in docs/planner.md; a citation of one it lacks points nowhere."""
    defined = set(re.findall(r"\*\*(B\.\d+(?:\.\d+)*) —", (PROJECT_ROOT / "docs/planner.md").read_text()))
    assert defined, "docs/planner.md defines no rule codes"
    cited = {
        (path, code)
        for path in _tracked()
        for code in re.findall(r"\bB\.\d+(?:\.\d+)*\b", (PROJECT_ROOT / path).read_text(errors="replace"))
    }
    assert sorted((path, code) for path, code in cited if code not in defined) == []
