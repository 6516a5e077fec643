"""The check's report in the formats CI systems read: GitHub Actions workflow commands and SARIF 2.1.0.

- ``-o github``: one ``::error`` (mandatory rule) or ``::warning`` (advisory) line per violation, with the file and
  line of the object, so the pull request shows it on the line; then the text summary.
- ``-o sarif``: a SARIF 2.1.0 log (one run, every rule as a reporting descriptor, one result per violation), for
  GitHub code scanning (``github/codeql-action/upload-sarif``) and other SARIF readers.

Pure functions from reports to text; where each object starts is given by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .rules.base import KubeObject

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL = "gke-tpu-priority-check"


@dataclass(frozen=True, slots=True)
class Location:
    """Where an object starts: a file (None for stdin) and its 1-based line."""

    file: str | None
    line: int


class Reported(Protocol):
    @property
    def rule(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def subject(self) -> KubeObject | None: ...


class Described(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def level(self) -> str: ...


Locate = Callable[[KubeObject | None], Location | None]


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _what(report: Reported) -> str:
    return report.message if report.subject is None else f"{report.subject.ref}: {report.message}"


def render_github(reports: Sequence[Reported], locate: Locate, summary: str) -> str:
    """GitHub Actions annotations (``::error file=F,line=N,title=RULE::message``), then ``summary``."""
    lines: list[str] = []
    for report in reports:
        command = "warning" if report.level == "advisory" else "error"
        where = locate(report.subject)
        properties = [f"file={_escape_property(where.file)}", f"line={where.line}"] if where and where.file else []
        properties.append(f"title={_escape_property(report.rule)}")
        lines.append(f"::{command} {','.join(properties)}::{_escape_data(_what(report))}")
    return "\n".join([*lines, summary])


def sarif_log(reports: Sequence[Reported], rules: Sequence[Described], locate: Locate, version: str) -> dict[str, Any]:
    """A SARIF 2.1.0 log: mandatory rules report as ``error``, advisory ones as ``warning``."""
    index = {rule.name: i for i, rule in enumerate(rules)}
    descriptors = [
        {
            "id": rule.name,
            "shortDescription": {"text": rule.description},
            "defaultConfiguration": {"level": _sarif_level(rule.level)},
        }
        for rule in rules
    ]
    results: list[dict[str, Any]] = []
    for report in reports:
        result: dict[str, Any] = {
            "ruleId": report.rule,
            "level": _sarif_level(report.level),
            "message": {"text": _what(report)},
        }
        if report.rule in index:
            result["ruleIndex"] = index[report.rule]
        where = locate(report.subject)
        if where and where.file:
            result["locations"] = [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": where.file.replace("\\", "/")},
                        "region": {"startLine": where.line},
                    }
                }
            ]
        results.append(result)
    driver = {"name": TOOL, "version": version, "rules": descriptors}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}


def _sarif_level(level: str) -> str:
    return "warning" if level == "advisory" else "error"


def render_sarif(log: Mapping[str, Any]) -> str:
    return json.dumps(log, indent=2)
