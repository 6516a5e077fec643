"""What a Helm chart's templates read from ``.Values``, so tests can prove every value the stack passes is used.

Helm ignores values a chart never reads, so a misspelt or invented value (``image.registry`` on a chart that has
none) fails silently at deploy time. This module scans a chart's templates (helpers included) for ``.Values``
references and classifies each as a *leaf* read (``{{ .Values.a.b }}``) or a *subtree* read, where the whole
mapping below it reaches the output (``toYaml .Values.a``, ``{{- with .Values.a }} ... toYaml .``, ``range``).
A value the stack passes is *read* when its path is read as a leaf, or lies below a subtree read.

It also renders the handful of ``image:`` lines (``"{{ .Values.x }}:{{ .Values.y | default .Chart.AppVersion }}"``)
so tests can check which registry an image resolves to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_ACTION = re.compile(r"\{\{-?(.*?)-?\}\}", re.S)
_VALUES_REF = re.compile(r"(?<![\w.])\$?(?:root)?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_SUBTREE_FUNCS = re.compile(r"\b(toYaml|toJson|toPrettyJson|range)\b")
_WITH_BODY_WHOLE = re.compile(r"\{\{-?\s*(toYaml|toJson)\s+\.\s|\{\{-?\s*\.\s*\|\s*(toYaml|toJson)")
_END = re.compile(r"\{\{-?\s*end\b")
_BLOCK_START = re.compile(r"\{\{-?\s*(if|with|range|define|block)\b")

Path_ = tuple[str, ...]


@dataclass
class ChartReads:
    """Every ``.Values`` path a chart's templates read, and which of them are read as whole subtrees."""

    name: str
    app_version: str
    defaults: Mapping[str, Any]
    leaf: set[Path_] = field(default_factory=set)
    subtree: set[Path_] = field(default_factory=set)

    def is_read(self, path: Path_) -> bool:
        return path in self.leaf or path in self.subtree or any(path[:i] in self.subtree for i in range(1, len(path)))

    @property
    def all_reads(self) -> set[Path_]:
        return self.leaf | self.subtree


def _with_body(text: str, start: int) -> str:
    """The body of the ``with`` block whose action ends at ``start``, up to its matching ``end``."""
    depth, position = 1, start
    while depth:
        block = _BLOCK_START.search(text, position)
        end = _END.search(text, position)
        if end is None:
            return text[start:]
        if block is not None and block.start() < end.start():
            depth, position = depth + 1, block.end()
        else:
            depth, position = depth - 1, end.end()
    return text[start:position]


def scan_templates(chart_dir: Path, template_files: Iterable[Path]) -> ChartReads:
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text(encoding="utf-8"))
    defaults = yaml.safe_load((chart_dir / "values.yaml").read_text(encoding="utf-8")) or {}
    reads = ChartReads(str(chart["name"]), str(chart.get("appVersion", "")), defaults)
    for path in template_files:
        text = path.read_text(encoding="utf-8")
        for action in _ACTION.finditer(text):
            body = action.group(1).strip()
            refs = [tuple(m.group(1).lstrip(".").split(".")) for m in _VALUES_REF.finditer(body)]
            if not refs:
                continue
            whole = bool(_SUBTREE_FUNCS.search(body))
            if body.startswith("with ") and _WITH_BODY_WHOLE.search(_with_body(text, action.end())):
                whole = True
            for ref in refs:
                (reads.subtree if whole else reads.leaf).add(ref)
    return reads


def _walk(values: Mapping[str, Any], prefix: Path_ = ()) -> Iterable[tuple[Path_, Any]]:
    for key, value in values.items():
        path = (*prefix, str(key))
        yield path, value
        if isinstance(value, Mapping):
            yield from _walk(value, path)


def unread_values(values: Mapping[str, Any], reads: ChartReads) -> list[str]:
    """Dotted paths of values the stack passes that no template reads (the outermost unread path of each subtree)."""
    unread: list[str] = []
    for path, value in _walk(values):
        if any(".".join(path).startswith(u + ".") for u in unread):
            continue
        if reads.is_read(path):
            continue
        below = any(r[: len(path)] == path and len(r) > len(path) for r in reads.all_reads)
        if isinstance(value, Mapping) and below:
            continue  # some keys below are read; they are checked one by one
        unread.append(".".join(path))
    return unread


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list):
        return "list"
    return "null"


def type_mismatches(values: Mapping[str, Any], reads: ChartReads) -> list[str]:
    """Values whose type differs from the chart default at a path the templates read (a bump that changes
    meaning). Inside a subtree read (``toYaml``) the chart passes values through, so only its root is compared."""
    out: list[str] = []
    for path, value in _walk(values):
        if path not in reads.all_reads:
            continue
        default: Any = reads.defaults
        for key in path:
            default = default.get(key) if isinstance(default, Mapping) else None
        if default is None:
            continue
        if _kind(value) != _kind(default):
            out.append(
                f"{'.'.join(path)}: the stack passes a {_kind(value)}, the chart's default is a {_kind(default)}"
            )
    return out


def merged(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of user values over chart defaults (maps merge, everything else replaces)."""
    out = dict(defaults)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


_IMAGE_LINE = re.compile(r"^\s*image:\s*(.+?)\s*$", re.M)
_IMAGE_ACTION = re.compile(r"\{\{\s*\.Values((?:\.\w+)+)\s*(?:\|\s*default\s+\.Chart\.AppVersion\s*)?\}\}")


def rendered_images(template: Path, values: Mapping[str, Any], reads: ChartReads) -> list[str]:
    """The ``image:`` lines of one template rendered with ``values`` over the chart's defaults."""
    effective = merged(reads.defaults, values)
    images = []
    for line in _IMAGE_LINE.finditer(template.read_text(encoding="utf-8")):
        raw = line.group(1).strip('"')

        def substitute(match: re.Match[str]) -> str:
            node: Any = effective
            for key in match.group(1).lstrip(".").split("."):
                node = node.get(key) if isinstance(node, Mapping) else None
            if node in (None, "") and "default .Chart.AppVersion" in match.group(0):
                return reads.app_version
            if node is None:
                raise ValueError(f"{template.name}: {match.group(0)} has no value")
            return str(node)

        rendered = _IMAGE_ACTION.sub(substitute, raw)
        if "{{" in rendered:
            raise ValueError(f"{template.name}: cannot render image line {raw!r}; extend rendered_images")
        images.append(rendered)
    return images


def image_registry(image: str) -> str:
    """The registry an image reference pulls from (Docker Hub when the first part is not a host)."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"
