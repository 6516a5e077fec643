"""Front end 2: ``python -m policies.check PATH...`` checks Kubernetes YAML against the rule set, for team CI.

Give it the platform's objects (``build/<stack>/manifests.yaml`` from ``make preview``, or a copy) together with
the team's workloads: rules that need the whole picture (declared queues and tiers) read every object given.
A fleet preview's objects carry the cluster they go to (annotation ``preview.gke-tpu-priority.io/cluster``): those
rules then read each cluster's objects apart, with the objects that name no cluster (the team's) in every cluster.
Exit status: 0 clean, 1 violations, 2 unreadable or invalid input. ``--config`` takes the same JSON as
``pulumi preview --policy-pack-config`` (``{"all": "advisory", "<rule>": "disabled" | {...}}``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from .rules import OBJECT_RULES, PICTURE_RULES
from .rules.base import KubeObject, Rule, manifest_object

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_INVALID = 0, 1, 2
YAML_SUFFIXES = (".yaml", ".yml")
# Namespaced kinds the rules read the namespace of; like kubectl, objects without one get --namespace.
NAMESPACED_KINDS = frozenset({"JobSet", "Job", "Pod", "LocalQueue"})
LEVELS = ("mandatory", "advisory", "disabled")


class InputError(Exception):
    """A path that cannot be read, or a document that is not a Kubernetes object."""


@dataclass(frozen=True)
class Report:
    """One violation: which rule, on which object (None for the whole picture), what to change."""

    rule: str
    level: str
    message: str
    subject: KubeObject | None

    def as_json(self) -> dict[str, Any]:
        subject = self.subject
        return {
            "rule": self.rule,
            "level": self.level,
            "object": None
            if subject is None
            else {"kind": subject.kind, "namespace": subject.namespace, "name": subject.name, "source": subject.source},
            "message": self.message,
        }


def _documents(text: str, source: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise InputError(f"{source}: not valid YAML: {error}") from error
    for index, document in enumerate(documents):
        where = f"{source}#{index}" if len(documents) > 1 else source
        if document is None:
            continue
        if not isinstance(document, Mapping) or not document.get("apiVersion") or not document.get("kind"):
            raise InputError(f"{where}: not a Kubernetes object (a mapping with apiVersion and kind)")
        if str(document["kind"]).endswith("List") and isinstance(document.get("items"), list):
            for item_index, item in enumerate(document.get("items") or []):
                if not isinstance(item, Mapping) or not item.get("apiVersion") or not item.get("kind"):
                    raise InputError(f"{where} items[{item_index}]: not a Kubernetes object")
                yield item, where
        else:
            yield document, where


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in YAML_SUFFIXES)
    if path.is_file():
        return [path]
    raise InputError(f"{path}: no such file or directory")


def load_objects(paths: Sequence[str], namespace: str = "default", stdin: TextIO | None = None) -> list[KubeObject]:
    """Every object of the given files, directories (``*.yaml``/``*.yml``, recursively) and ``-`` (stdin)."""
    objects: list[KubeObject] = []
    for given in paths:
        if given == "-":
            sources = [((stdin or sys.stdin).read(), "<stdin>")]
        else:
            sources = []
            for file in _files(Path(given)):
                try:
                    sources.append((file.read_text(encoding="utf-8"), str(file)))
                except (OSError, UnicodeDecodeError) as error:
                    raise InputError(f"{file}: cannot be read: {error}") from error
        for text, source in sources:
            for document, where in _documents(text, source):
                manifest = dict(document)
                if manifest["kind"] in NAMESPACED_KINDS and not (manifest.get("metadata") or {}).get("namespace"):
                    manifest["metadata"] = {**(manifest.get("metadata") or {}), "namespace": namespace}
                objects.append(manifest_object(manifest, where))
    return objects


def _settings(rule: Rule, config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Level and properties of a rule from a --policy-pack-config style mapping (as the pack reads it)."""
    level = str(config.get("all", rule.level))
    entry = config.get(rule.name)
    if isinstance(entry, str):
        return entry, {}
    properties = dict(entry or {})
    return str(properties.pop("enforcementLevel", level)), properties


def check_objects(objects: Sequence[KubeObject], config: Mapping[str, Any] | None = None) -> list[Report]:
    """Every violation of the rule set among ``objects``, object rules first, in input order."""
    config = config or {}
    reports: list[Report] = []
    for rule in OBJECT_RULES:
        level, properties = _settings(rule, config)
        if level != "disabled":
            reports += [Report(rule.name, level, m, obj) for obj in objects for m in rule.findings(obj, properties)]
    for picture in PICTURE_RULES:
        level, properties = _settings(picture, config)
        if level != "disabled":
            reports += [
                Report(picture.name, level, f.message, f.subject) for f in picture.findings(objects, properties)
            ]
    return reports


def render_text(reports: Sequence[Report], checked: int) -> str:
    lines: list[str] = []
    for report in reports:
        subject = report.subject
        where = "(all objects)" if subject is None else f"{subject.ref} ({subject.source})"
        advisory = " [advisory]" if report.level == "advisory" else ""
        lines += [f"{where}: {report.rule}{advisory}", f"    {report.message}"]
    blocking = sum(1 for r in reports if r.level != "advisory")
    offenders = len({id(r.subject) for r in reports})
    summary = (
        f"{len(reports)} violation(s) ({blocking} blocking) on {offenders} object(s); {checked} object(s) checked."
        if reports
        else f"No violations; {checked} object(s) checked."
    )
    return "\n".join([*lines, summary])


def _read_config(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: cannot read the policy config: {error}") from error
    if not isinstance(config, dict):
        raise InputError(f"{path}: the policy config must be a JSON object")
    known = {"all"} | {r.name for r in (*OBJECT_RULES, *PICTURE_RULES)}
    for key, value in config.items():
        level = value if isinstance(value, str) else (value or {}).get("enforcementLevel", "mandatory")
        if key not in known:
            raise InputError(f"{path}: unknown rule {key!r}; rules: {', '.join(sorted(known - {'all'}))}")
        if level not in LEVELS:
            raise InputError(f"{path}: {key}: level {level!r} is not one of {', '.join(LEVELS)}")
    return config


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m policies.check",
        description=(
            "Check Kubernetes YAML against the gke-tpu-priority conventions (the rules of the policy pack and of "
            "the in-cluster admission policy). Give the platform's objects (build/<stack>/manifests.yaml) with "
            "your workloads. Exit 0 clean, 1 violations, 2 invalid input."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="YAML file, directory of *.yaml/*.yml, or - (stdin)")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="report format (default text)")
    parser.add_argument(
        "--namespace", default="default", help="namespace of workloads that set none, as kubectl -n (default: default)"
    )
    parser.add_argument("--config", help="policy config JSON, as for pulumi --policy-pack-config")
    args = parser.parse_args(argv)
    out = stdout or sys.stdout
    try:
        config = _read_config(args.config)
        objects = load_objects(args.paths, args.namespace, stdin)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    reports = check_objects(objects, config)
    if args.format == "json":
        json.dump({"checked": len(objects), "violations": [r.as_json() for r in reports]}, out, indent=2)
        out.write("\n")
    else:
        out.write(render_text(reports, len(objects)) + "\n")
    return EXIT_VIOLATIONS if any(r.level != "advisory" for r in reports) else EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
