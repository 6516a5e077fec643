"""Reading what ``gke-tpu-priority-check`` is given: files, directories and stdin, as untrusted input.

Whatever arrives, the result is either Kubernetes objects of the shape the rules read, or an :class:`InputError`
naming the file (and document) and what is wrong; never a traceback, and never unbounded time or memory:

- a file or stdin larger than ``MAX_BYTES`` is refused before it is parsed;
- text must be UTF-8 (read as bytes, so the locale's encoding does not matter);
- YAML is parsed with the safe loader (libyaml's when available); nesting too deep for it, or beyond
  ``MAX_DEPTH``, is refused, and so is a document that expands to more than ``MAX_NODES`` values through aliases
  (a "billion laughs" bomb is a few lines that PyYAML builds as shared references, but every walk over it would
  visit each reference);
- each object must have what the API server requires before any rule reads it: string ``apiVersion`` and ``kind``,
  a mapping ``metadata`` with string name and namespace, and string-to-string labels and annotations.

Directories are walked as ``kubectl apply -R -f DIR`` walks them: ``.json``, ``.yaml`` and ``.yml`` files (any case).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import yaml

MAX_BYTES = 8 * 1024 * 1024
"""Largest file (or stdin) read: above the API server's request limit (3 MiB) and a platform's rendered manifests
with their CRDs (about 3 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of a document: Kubernetes objects stay well under 30 (a JobSet's container env is about 12)."""
MAX_NODES = 500_000
"""Most values one document may hold once aliases are expanded."""
SUFFIXES = (".json", ".yaml", ".yml")
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML has it: about ten times faster, and it refuses nesting beyond 1000 levels
itself; the pure-Python one recurses, and its RecursionError is refused below."""


class InputError(Exception):
    """A path that cannot be read, or a document that is not a Kubernetes object."""


def files(path: Path) -> list[Path]:
    """The files a path stands for: itself, or every ``.json``/``.yaml``/``.yml`` file below a directory."""
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not found:
            raise InputError(f"{path}: a directory with no .json, .yaml or .yml file: nothing to check")
        return found
    if path.is_file():
        return [path]
    raise InputError(f"{path}: no such file or directory")


def decode(data: bytes, source: str) -> str:
    if len(data) > MAX_BYTES:
        raise InputError(
            f"{source}: larger than {MAX_BYTES // (1024 * 1024)} MiB; split it (the API server takes 3 MiB)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{source}: not UTF-8 text (byte {error.start}); give YAML or JSON manifests") from error


def read_file(file: Path) -> str:
    try:
        if file.stat().st_size > MAX_BYTES:
            return decode(b"\0" * (MAX_BYTES + 1), str(file))
        return decode(file.read_bytes(), str(file))
    except OSError as error:
        raise InputError(f"{file}: cannot be read: {error.strerror or error}") from error


def read_stdin(stdin: TextIO | None) -> str:
    """stdin as bytes (so a strict or non-UTF-8 locale cannot fail the read), or a given text stream (tests)."""
    if stdin is not None:
        text = stdin.read(MAX_BYTES + 1)
        if len(text) > MAX_BYTES:
            raise InputError(f"<stdin>: larger than {MAX_BYTES // (1024 * 1024)} MiB; split it")
        return text
    stream: BinaryIO = sys.stdin.buffer
    return decode(stream.read(MAX_BYTES + 1), "<stdin>")


def _bounded(document: Any, where: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH or holding more than MAX_NODES values (aliases expanded)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    visited = 0
    while stack:
        value, depth = stack.pop()
        visited += 1
        if visited > MAX_NODES:
            raise InputError(
                f"{where}: expands to more than {MAX_NODES:,} values (YAML aliases?); not a Kubernetes manifest"
            )
        if depth > MAX_DEPTH:
            raise InputError(f"{where}: nested more than {MAX_DEPTH} levels deep; not a Kubernetes manifest")
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), f"a {type(value).__name__}"
    )


def object_problem(obj: Any) -> str | None:
    """What makes ``obj`` something the API server would refuse before any policy sees it, or None."""
    if not isinstance(obj, Mapping):
        return f"not a Kubernetes object (a mapping with apiVersion and kind), but {_type_name(obj)}"
    for key in ("apiVersion", "kind"):
        value = obj.get(key)
        if not value:
            return f"not a Kubernetes object (a mapping with apiVersion and kind): no {key}"
        if not isinstance(value, str):
            return f"{key} is {value!r} ({_type_name(value)}); it must be a string"
    metadata = obj.get("metadata")
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        return f"metadata is {_type_name(metadata)}; it must be a mapping"
    for key in ("name", "namespace", "generateName"):
        if key in metadata and not isinstance(metadata[key], str):
            return f"metadata.{key} is {metadata[key]!r} ({_type_name(metadata[key])}); it must be a string"
    for key in ("labels", "annotations"):
        entries = metadata.get(key)
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            return f"metadata.{key} is {_type_name(entries)}; it must be a mapping of strings"
        for name, value in entries.items():
            if not isinstance(name, str) or not isinstance(value, str):
                return (
                    f"metadata.{key}[{name!r}] is {value!r} ({_type_name(value)}); {key} map strings to strings "
                    "(quote the value)"
                )
    owners = metadata.get("ownerReferences")
    if owners is not None and not isinstance(owners, list):
        return f"metadata.ownerReferences is {_type_name(owners)}; it must be a list"
    return None


def _load_all(text: str) -> list[tuple[Any, yaml.Node | None]]:
    """Every document of the stream with its root node (for where it starts), in one pass of the safe loader."""
    loader = SAFE_LOADER(text)
    try:
        out: list[tuple[Any, yaml.Node | None]] = []
        while loader.check_node():
            node = loader.get_node()
            out.append((loader.construct_document(node), node))
        return out
    finally:
        loader.dispose()


def _line(node: yaml.Node | None) -> int:
    return node.start_mark.line + 1 if node is not None else 1


def _item_nodes(node: yaml.Node | None) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
                return list(value.value)
    return []


def documents(text: str, source: str) -> Iterator[tuple[Mapping[str, Any], str, int]]:
    """(object, where, line) for every object of a YAML or JSON stream; a ``*List`` gives its items. ``line`` is
    where the object starts (1-based), for reports that point at it."""
    try:
        loaded = _load_all(text)
    except yaml.YAMLError as error:
        raise InputError(f"{source}: not valid YAML: {error}") from error
    except RecursionError as error:
        raise InputError(f"{source}: nested too deeply to read; not a Kubernetes manifest") from error
    for index, (document, node) in enumerate(loaded):
        where = f"{source}#{index}" if len(loaded) > 1 else source
        if document is None:
            continue
        _bounded(document, where)
        problem = object_problem(document)
        if problem:
            raise InputError(f"{where}: {problem}")
        if str(document["kind"]).endswith("List") and isinstance(document.get("items"), list):
            item_nodes = _item_nodes(node)
            for item_index, item in enumerate(document["items"]):
                problem = object_problem(item)
                if problem:
                    raise InputError(f"{where} items[{item_index}]: {problem}")
                item_node = item_nodes[item_index] if item_index < len(item_nodes) else node
                yield item, where, _line(item_node)
        else:
            yield document, where, _line(node)


def sources(paths: Sequence[str], stdin: TextIO | None = None) -> list[tuple[str, str]]:
    """(text, source name) of each file the paths stand for; ``-`` is stdin."""
    out: list[tuple[str, str]] = []
    for given in paths:
        if given == "-":
            out.append((read_stdin(stdin), "<stdin>"))
        else:
            out += [(read_file(file), str(file)) for file in files(Path(given))]
    return out
