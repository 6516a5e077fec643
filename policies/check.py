"""Front end 2: ``gke-tpu-priority-check PATH...`` checks Kubernetes YAML against the rule set, for team CI.

Give it the platform's objects (``build/<stack>/manifests.yaml`` from ``make preview``, or a copy) with
``--platform`` and the team's workloads as PATHs: rules that need the whole picture (declared queues, tiers and
entitlements) read every object given, and with ``--platform`` that picture comes only from the platform's files
(a team's file that declares a tier or a LocalQueue is refused). Without ``--platform`` every PATH counts alike,
which is how the platform team checks its own manifests. ``--config`` may tune or lower rules the cluster does not
enforce, never those it does. Malformed input of any kind exits 2 with the file and what is wrong (policies.inputs).
A fleet preview's objects carry the cluster they go to (annotation ``preview.gke-tpu-priority.io/cluster``): those
rules then read each cluster's objects apart, with the objects that name no cluster (the team's) in every cluster.
Exit status: 0 clean (advisory violations alone exit 0), 1 violations of a mandatory rule, 2 usage error,
unreadable or invalid input. ``--config`` takes the same JSON as ``pulumi preview --policy-pack-config``
(``{"all": "advisory", "<rule>": "disabled" | {...}}``). Reports: ``-o text`` (default), ``json``, ``yaml``, and for
CI ``github`` (workflow annotations on the offending file and line) and ``sarif`` (SARIF 2.1.0, policies.ci_formats).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TextIO, TypeVar

import yaml

from .ci_formats import Location, render_github, render_sarif, sarif_log
from .inputs import InputError, documents, sources
from .rules import ADMISSION_RULES, OBJECT_RULES, PICTURE_RULES
from .rules.base import KubeObject, Rule, manifest_object
from .selector import SelectorError, parse_selector

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_INVALID = 0, 1, 2
T = TypeVar("T")
# Namespaced kinds the rules read the namespace of; like kubectl, objects without one get --namespace.
NAMESPACED_KINDS = frozenset(
    {"JobSet", "Job", "Pod", "LocalQueue", "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "CronJob"}
)
LEVELS = ("mandatory", "advisory", "disabled")
PLATFORM_SETTINGS = frozenset({"externalPriorityTiers", "externalLocalQueues"})
"""Rule settings that declare tiers or LocalQueues: with --platform, only the platform's files do."""


PLATFORM_KINDS = frozenset(
    {
        "PriorityClass",
        "WorkloadPriorityClass",
        "LocalQueue",
        "ClusterQueue",
        "ResourceFlavor",
        "Cohort",
        "Topology",
        "AdmissionCheck",
        "ProvisioningRequestConfig",
        "MultiKueueConfig",
        "MultiKueueCluster",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
"""Kinds that make the picture the rules check against (tiers, queues, entitlements, the policy itself): with
``--platform``, only the platform's files may declare them."""


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


Located = list[tuple[KubeObject, Location]]


def locate_objects(paths: Sequence[str], namespace: str = "default", stdin: TextIO | None = None) -> Located:
    """Every object of the given files, directories (``*.json``/``*.yaml``/``*.yml``, recursively) and ``-``, with
    the file and line it starts at."""
    objects: Located = []
    for text, source in sources(paths, stdin):
        file = None if source == "<stdin>" else source
        for document, where, line in documents(text, source):
            manifest = dict(document)
            if manifest["kind"] in NAMESPACED_KINDS and not (manifest.get("metadata") or {}).get("namespace"):
                manifest["metadata"] = {**(manifest.get("metadata") or {}), "namespace": namespace}
            objects.append((manifest_object(manifest, where), Location(file, line)))
    return objects


def load_objects(paths: Sequence[str], namespace: str = "default", stdin: TextIO | None = None) -> list[KubeObject]:
    """Every object of the given files, directories (``*.json``/``*.yaml``/``*.yml``, recursively) and ``-``."""
    return [obj for obj, _ in locate_objects(paths, namespace, stdin)]


def refuse_platform_objects(objects: Sequence[KubeObject]) -> None:
    """A team's objects may not declare what only the platform declares."""
    declared = [o for o in objects if o.kind in PLATFORM_KINDS]
    if declared:
        shown = "; ".join(f"{o.ref} ({o.source})" for o in declared[:5]) + ("; ..." if len(declared) > 5 else "")
        raise InputError(
            f"the team's files declare {shown}: tiers, queues and the other platform objects come only from the "
            "platform's files (--platform); remove them"
        )


def team_objects(paths: Sequence[str], namespace: str = "default", stdin: TextIO | None = None) -> list[KubeObject]:
    """A team's objects: like :func:`load_objects`, but none may declare what only the platform declares."""
    objects = load_objects(paths, namespace, stdin)
    refuse_platform_objects(objects)
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
        if level == "disabled":
            continue
        for obj in objects:
            found = _checked(lambda: list(rule.findings(obj, properties)), f"{obj.ref} ({obj.source})")  # noqa: B023
            reports += [Report(rule.name, level, message, obj) for message in found]
    for picture in PICTURE_RULES:
        level, properties = _settings(picture, config)
        if level != "disabled":
            findings = _checked(lambda: list(picture.findings(objects, properties)), f"rule {picture.name}")  # noqa: B023
            reports += [Report(picture.name, level, f.message, f.subject) for f in findings]
    return reports


def render_text(reports: Sequence[Report], checked: int) -> str:
    lines: list[str] = []
    for report in reports:
        subject = report.subject
        where = "(all objects)" if subject is None else f"{subject.ref} ({subject.source})"
        advisory = " [advisory]" if report.level == "advisory" else ""
        lines += [f"{where}: {report.rule}{advisory}", f"    {report.message}"]
    return "\n".join([*lines, summary(reports, checked)])


def summary(reports: Sequence[Report], checked: int) -> str:
    blocking = sum(1 for r in reports if r.level != "advisory")
    offenders = len({id(r.subject) for r in reports})
    if not reports:
        return f"No violations; {checked} object(s) checked."
    return f"{len(reports)} violation(s) ({blocking} blocking) on {offenders} object(s); {checked} object(s) checked."


def _level_problem(value: Any) -> str | None:
    return None if isinstance(value, str) and value in LEVELS else f"level {value!r} is not one of {', '.join(LEVELS)}"


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _property_problem(value: Any, spec: Mapping[str, Any]) -> str | None:
    """Whether ``value`` has the type the rule's config schema gives (arrays: their items' type too)."""
    expected = _JSON_TYPES.get(str(spec.get("type")), (object,))
    if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
        return f"is {value!r}, expected {spec.get('type')}"
    if isinstance(value, list) and "items" in spec:
        for index, item in enumerate(value):
            problem = _property_problem(item, spec["items"])
            if problem:
                return f"[{index}] {problem}"
    return None


def read_config(path: str | None, platform: bool = False) -> dict[str, Any]:
    """The ``--config`` JSON, validated: known rules, levels and property types. It may not lower a rule the
    cluster's admission policy enforces (the cluster would refuse anyway, so a pass would be a false promise), and
    with ``--platform`` it may not add tiers or LocalQueues (``external*``): only the platform's files decide."""
    if path is None:
        return {}
    try:
        text = Path(path).read_bytes().decode("utf-8")
        config = json.loads(text)
    except (OSError, ValueError, RecursionError) as error:
        raise InputError(f"{path}: cannot read the policy config: {error}") from error
    if not isinstance(config, dict):
        raise InputError(f"{path}: the policy config must be a JSON object, not {type(config).__name__}")
    rules = {r.name: r for r in (*OBJECT_RULES, *PICTURE_RULES)}
    problems: list[str] = []
    for key, value in config.items():
        if key == "all":
            problem = _level_problem(value)
            problems += [f"all: {problem}"] if problem else []
            continue
        if key not in rules:
            problems.append(f"unknown rule {key!r}; rules: {', '.join(sorted(rules))}")
            continue
        if isinstance(value, str):
            problem = _level_problem(value)
            problems += [f"{key}: {problem}"] if problem else []
            continue
        if not isinstance(value, dict):
            problems.append(f"{key}: {value!r} is neither a level ({', '.join(LEVELS)}) nor an object of settings")
            continue
        for name, setting in value.items():
            if name == "enforcementLevel":
                problem = _level_problem(setting)
            elif name not in rules[key].config:
                known = ", ".join(["enforcementLevel", *rules[key].config]) or "enforcementLevel"
                problem = f"unknown setting (settings: {known})"
            else:
                problem = _property_problem(setting, rules[key].config[name])
            if problem:
                problems.append(f"{key}.{name}: {problem}")
            elif platform and name in PLATFORM_SETTINGS:
                problems.append(
                    f"{key}.{name}: declares tiers or LocalQueues, which with --platform come only from the "
                    "platform's files; remove it"
                )
    if not problems:
        for rule in ADMISSION_RULES:
            level, _ = _settings(rule, config)
            if level != "mandatory":
                problems.append(
                    f"{rule.name}: lowered to {level}, but the cluster's admission policy enforces it whatever this "
                    "file says; only the platform's configuration decides that, so remove the setting"
                )
    if problems:
        raise InputError(f"{path}: " + "; ".join(problems))
    return config


def _checked(run: Callable[[], list[T]], what: str) -> list[T]:
    """What a rule finds, or an InputError naming ``what`` when a field of an unexpected type trips the rule: the
    input is then not an object the API server would take, and the report says so instead of a traceback."""
    try:
        return run()
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as error:
        raise InputError(
            f"{what}: a field has a type the API server would not accept ({type(error).__name__}: {error}); fix it"
        ) from error


OUTPUTS = ("text", "json", "yaml", "github", "sarif")


def package_version() -> str:
    try:
        return version("gke-tpu-priority")
    except PackageNotFoundError:
        return "unknown (not installed from a distribution)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gke-tpu-priority-check",
        description=(
            "Check Kubernetes YAML against the gke-tpu-priority conventions (the rules of the policy pack and of "
            "the in-cluster admission policy). Give the platform's objects (build/<stack>/manifests.yaml) with "
            "your workloads. Exit 0 clean (advisory violations alone too), 1 violations of a mandatory rule, "
            "2 usage error or invalid input."
        ),
        epilog="It reads files, not a cluster: kubectl's cluster flags (--kubeconfig, --context, -A) do not "
        "apply. In GitHub Actions, -o github puts each violation on its file and line; -o sarif feeds code scanning.",
    )
    parser.add_argument("--version", action="version", version=f"gke-tpu-priority-check {package_version()}")
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="YAML/JSON file, directory of *.json/*.yaml/*.yml, or - (stdin)"
    )
    parser.add_argument(
        "-f", "--filename", action="append", default=[], metavar="PATH", help="a PATH, as kubectl -f; repeatable"
    )
    parser.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="PATH",
        help="the platform's objects (build/<stack>/manifests.yaml); repeatable. With it, tiers, LocalQueues and "
        "entitlements come only from these files, and PATHs may not declare them",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default=None,
        help="report format: text (default), json, yaml, github (Actions annotations) or sarif (SARIF 2.1.0)",
    )
    parser.add_argument("--format", choices=("text", "json"), help=argparse.SUPPRESS)  # the former name of -o
    parser.add_argument(
        "-n",
        "--namespace",
        default="default",
        help="namespace of workloads that set none, as kubectl -n (default: default)",
    )
    parser.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="check only the PATHs' objects matching this label selector, as kubectl apply -l (e.g. team=a); "
        "the --platform objects are always read",
    )
    parser.add_argument("--config", help="policy config JSON, as for pulumi --policy-pack-config")
    return parser


def _labels(obj: KubeObject) -> Mapping[str, str]:
    labels = (obj.manifest.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _report_document(reports: Sequence[Report], checked: int) -> dict[str, Any]:
    return {"checked": checked, "violations": [r.as_json() for r in reports]}


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    paths = [*args.paths, *args.filename]
    if not paths:
        parser.error("give the files to check: PATH... or -f PATH (- reads stdin)")
    if args.format and args.output:
        parser.error("--format is the former name of -o/--output: give only -o")
    if args.format:
        print("note: --format is deprecated; use -o/--output", file=sys.stderr)
    output = args.output or args.format or "text"
    try:
        selected = parse_selector(args.selector) if args.selector is not None else None
    except SelectorError as error:
        parser.error(f"-l/--selector: {error}")
    out = stdout or sys.stdout
    try:
        config = read_config(args.config, platform=bool(args.platform))
        platform = locate_objects(args.platform, args.namespace) if args.platform else []
        located = locate_objects(paths, args.namespace, stdin)
        if selected is not None:
            located = [(obj, where) for obj, where in located if selected(_labels(obj))]
            if not located:
                raise InputError(f"{', '.join(paths)}: no object matches the selector {args.selector!r}")
        given = [obj for obj, _ in located]
        if args.platform:
            refuse_platform_objects(given)
        if not given:
            raise InputError(f"{', '.join(paths)}: no Kubernetes object to check (empty input)")
        located = platform + located
        objects = [obj for obj, _ in located]
        if not args.platform and {o.kind in PLATFORM_KINDS for o in given} == {True, False}:
            print(
                "note: without --platform every file may declare tiers, LocalQueues and entitlements; in team CI "
                "give the platform's manifests with --platform so that only they decide",
                file=sys.stderr,
            )
        reports = check_objects(objects, config)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID
    where = {id(obj): location for obj, location in located}

    def locate(subject: KubeObject | None) -> Location | None:
        return None if subject is None else where.get(id(subject))

    if output == "json":
        out.write(json.dumps(_report_document(reports, len(objects)), indent=2) + "\n")
    elif output == "yaml":
        out.write(yaml.safe_dump(_report_document(reports, len(objects)), sort_keys=False))
    elif output == "github":
        out.write(render_github(reports, locate, summary(reports, len(objects))) + "\n")
    elif output == "sarif":
        rules = [*OBJECT_RULES, *PICTURE_RULES]
        out.write(render_sarif(sarif_log(reports, rules, locate, package_version())) + "\n")
    else:
        out.write(render_text(reports, len(objects)) + "\n")
    return EXIT_VIOLATIONS if any(r.level != "advisory" for r in reports) else EXIT_CLEAN


if __name__ == "__main__":
    sys.exit(main())
