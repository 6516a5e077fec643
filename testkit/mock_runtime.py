"""Run the real `__main__.py` under Pulumi's mock runtime and capture every registered resource."""

from __future__ import annotations

import asyncio
import base64
import json
import runpy
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks
from pulumi.runtime.mocks import MockMonitor

from testkit.resources import ProgramRun, RegisteredResource, dependency_order

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_NAME = "gke-tpu-priority"
MOCK_SA_TOKEN = "mock-service-account-token"
MOCK_SUBNET_CIDR = "10.128.0.0/20"
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMOCK\n-----END CERTIFICATE-----\n").decode()


def _fake_outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Values the cloud would compute, shaped as engine (camelCase) outputs."""
    out = dict(inputs)
    project = inputs.get("project", "mock-project")
    if typ == "gcp:container/cluster:Cluster":
        cname = inputs.get("name", name)
        out.update(
            endpoint="203.0.113.10",
            masterAuth={**inputs.get("masterAuth", {}), "clusterCaCertificate": FAKE_CA},
            id=f"projects/{project}/locations/{inputs.get('location')}/clusters/{cname}",
            selfLink=f"https://container.googleapis.com/v1/projects/{project}/clusters/{cname}",
        )
        cpe = inputs.get("controlPlaneEndpointsConfig")
        if cpe:
            dns = {
                **cpe.get("dnsEndpointConfig", {}),
                "endpoint": f"gke-mock-{cname}.{inputs.get('location')}.gke.goog",
            }
            out["controlPlaneEndpointsConfig"] = {**cpe, "dnsEndpointConfig": dns}
    elif typ == "gcp:serviceaccount/account:Account":
        out["email"] = f"{inputs.get('accountId')}@{project}.iam.gserviceaccount.com"
    elif typ.startswith("gcp:compute/"):
        kind = typ.rsplit(":", 1)[-1].lower() + "s"
        out["selfLink"] = f"https://www.googleapis.com/compute/v1/projects/{project}/{kind}/{inputs.get('name', name)}"
    elif typ == "gcp:artifactregistry/repository:Repository":
        out["name"] = inputs.get("repositoryId", name)
    elif typ == "docker-build:index:Image":
        # What a push reports: the first tag pinned by the pushed manifest's digest.
        out["ref"] = f"{inputs['tags'][0]}@sha256:{'0' * 64}"
        out["digest"] = f"sha256:{'0' * 64}"
    return out


class RecordingMocks(Mocks):
    """Answers registrations with plausible cloud outputs and keeps every resource's inputs."""

    def __init__(self) -> None:
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        inputs = dict(args.inputs)
        self.inputs[(args.typ, args.name)] = inputs
        outputs = _fake_outputs(args.typ, args.name, inputs)
        if args.resource_id and args.typ == "kubernetes:core/v1:Secret":
            # A Secret read back (the fleet's worker token): what the token controller has written by then.
            outputs.setdefault("data", {"token": base64.b64encode(MOCK_SA_TOKEN.encode()).decode()})
        resource_id = (outputs.pop("id", None) or f"{args.name}-id") if args.custom else None
        return resource_id, outputs

    def call(self, args: MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": "mock-project", "accessToken": "mock-token"}, []
        if args.token == "gcp:compute/getSubnetwork:getSubnetwork":
            # An existing subnet (network.mode: existing), as the Compute API reports it.
            return {"name": args.args.get("name"), "ipCidrRange": MOCK_SUBNET_CIDR}, []
        if args.token == "gcp:container/getCluster:getCluster":
            # What the GKE API reports for an existing cluster (a lookup, not a resource).
            name, location = args.args.get("name"), args.args.get("location")
            return {
                "name": name,
                "location": location,
                "project": args.args.get("project"),
                "endpoint": "198.51.100.20",
                "masterAuths": [{"clusterCaCertificate": FAKE_CA}],
                "id": f"projects/{args.args.get('project')}/locations/{location}/clusters/{name}",
            }, []
        return {}, []


class RecordingMonitor(MockMonitor):
    """A mock monitor that also keeps what mocks are not told: parent, dependencies and resource options."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks
        self.order: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            with self._lock:
                self.order.append(
                    {
                        "urn": response.urn,
                        "type": request.type,
                        "name": request.name,
                        "parent": request.parent or None,
                        "custom": bool(request.custom),
                        "provider": request.provider or None,
                        "dependencies": sorted(request.dependencies),
                        "protect": bool(request.protect),
                        "ignore_changes": list(request.ignoreChanges),
                        "replace_on_changes": list(request.replaceOnChanges),
                        "delete_before_replace": bool(request.deleteBeforeReplace),
                    }
                )
        return response


def load_stack_config(stack: str, root: Path = PROJECT_ROOT) -> dict[str, Any]:
    path = root / "stacks" / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(
            p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (root / "stacks").glob("Pulumi.*.yaml")
        )
        raise FileNotFoundError(f"no stack file {path}; known stacks: {', '.join(known) or 'none'}")
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise StackFileError(_yaml_problem(str(shown), exc)) from None
    config = data.get("config", {}) if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise StackFileError(f"{shown}: `config` must be a mapping of settings (`config:` then indented `key: value`)")
    return config


class StackFileError(ValueError):
    """A stack file that is not YAML Pulumi can read; the message starts `file:line:column:` as compilers do."""


def _yaml_problem(shown: str, exc: yaml.YAMLError) -> str:
    """`stacks/Pulumi.x.yaml:35:19: <what the parser found>`: editors jump to it, and no traceback hides it."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark is not None else shown
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    hint = "; check this line's indentation against the lines above" if "block" in f"{problem} {context}" else ""
    return f"{where}: {problem}" + (f" ({context})" if context else "") + hint


def _config_map(config: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def run_program(
    stack: str,
    config: dict[str, Any] | None = None,
    root: Path = PROJECT_ROOT,
    *,
    project: str = PROJECT_NAME,
    body: Callable[[], None] | None = None,
) -> ProgramRun:
    """Execute `__main__.py` (or `body`, a program given as a function) for a stack under mocks, as Pulumi project
    `project`. Raises whatever the program raises (e.g. RunError)."""
    run = ProgramRun(stack=stack, project=project)
    stack_config = load_stack_config(stack, root) if config is None else config
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.reset_options(project=project, stack=stack)
        mocks = RecordingMocks()
        monitor = RecordingMonitor(mocks)
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
        pulumi.runtime.set_all_config(_config_map(stack_config))
        sys.path.insert(0, str(root))
        captured: dict[str, Any] = {}

        def program() -> pulumi.Output[Any]:
            if body is None:
                runpy.run_path(str(root / "__main__.py"), run_name="__main__")
            else:
                body()
            outputs = pulumi.runtime.get_root_resource().outputs  # type: ignore[union-attr]
            return pulumi.Output.from_input(dict(outputs)).apply(captured.update)

        pulumi.runtime.test(program)()  # type: ignore[no-untyped-call]
        run.outputs = captured
        # Registration order depends on thread timing; sort so every preview of a stack is byte-identical.
        for reg in monitor.order:
            options = {k: reg[k] for k in ("protect", "ignore_changes", "replace_on_changes", "delete_before_replace")}
            run.resources.append(
                RegisteredResource(
                    urn=reg["urn"],
                    type=reg["type"],
                    name=reg["name"],
                    parent=reg["parent"],
                    inputs=mocks.inputs.get((reg["type"], reg["name"]), {}),
                    custom=reg["custom"],
                    provider=reg["provider"],
                    dependencies=reg["dependencies"],
                    options=options,
                )
            )
    finally:
        if sys.path and sys.path[0] == str(root):
            sys.path.pop(0)
        pulumi.runtime.set_all_config({})
        loop.close()
        asyncio.set_event_loop(None)
    run.resources = dependency_order(run.resources)
    return run
