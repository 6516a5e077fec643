"""What a program run registered: resources with inputs, options and dependencies, in a stable order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

SECRET_SIG = "4dabf18193072939515e22adb298388d"


@dataclass
class RegisteredResource:
    urn: str
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    custom: bool
    provider: str | None
    dependencies: list[str]
    options: dict[str, Any]


@dataclass
class ProgramRun:
    stack: str
    project: str
    resources: list[RegisteredResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)


def dependency_order(resources: list[RegisteredResource]) -> list[RegisteredResource]:
    """Deterministic topological order: a resource after everything it (or its parent) depends on, else by URN."""
    resources = sorted(resources, key=lambda r: r.urn)
    index = {r.urn: i for i, r in enumerate(resources)}
    children: dict[str, list[str]] = {}
    for r in resources:
        if r.parent:
            children.setdefault(r.parent, []).append(r.urn)

    def expand(urn: str) -> Iterable[str]:
        # Depending on a component means depending on all of its children.
        yield urn
        for child in children.get(urn, []):
            yield from expand(child)

    placed: set[str] = set()
    ordered: list[RegisteredResource] = []
    visiting: set[str] = set()

    def visit(r: RegisteredResource) -> None:
        if r.urn in placed or r.urn in visiting:
            return
        visiting.add(r.urn)
        deps = {d for dep in r.dependencies for d in expand(dep)}
        if r.parent:
            deps.add(r.parent)
        for dep in sorted(deps):
            if dep in index:
                visit(resources[index[dep]])
        visiting.discard(r.urn)
        placed.add(r.urn)
        ordered.append(r)

    for r in resources:
        visit(r)
    return ordered
