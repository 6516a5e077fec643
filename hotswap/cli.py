"""Command line: ``kubectl hotswap run`` (the controller), ``kubectl hotswap release-all`` (uninstall cleanup),
``kubectl hotswap status`` (what is held and why) and ``kubectl-hotswap mark-checkpoint`` (training code publishing
its last checkpoint)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

from gke_tpu_priority.hotswap.annotations import AnnotationKeys, format_time, parse_time
from gke_tpu_priority.hotswap.checkpoint_target import JOBSET_ENV, NAMESPACE_ENV, CheckpointTargetError, resolve_target
from gke_tpu_priority.hotswap.cli_errors import explain
from gke_tpu_priority.hotswap.config import ConfigError, HotswapConfig, load_config
from gke_tpu_priority.hotswap.logs import setup_logging

# The Kubernetes client, aiohttp and prometheus_client come with the `hotswap` extra, so every module that needs
# them is imported inside the command that uses it: `hotswap --help` works on any install, and a missing extra is
# reported in one sentence by `hotswap.cli_errors`.

log = logging.getLogger("hotswap")

RELEASE_INCOMPLETE = 1  # release-all (or the release on removal) could not release everything

DESCRIPTION = """\
Hotswap reconciler for GKE TPU slices with Kueue and JobSet.

When infrastructure fails under a high-priority JobSet, it frees healthy TPU slices (whole slices, never
part of one) by deactivating lower-priority Kueue Workloads (spec.active=false), so they are requeued,
never lost, and reactivates them once capacity returns or after maxHold. Only the replica holding the
Lease writes, except on removal: with --release-on-removal, a replica whose Deployment is being deleted or
scaled to zero releases every hold on SIGTERM, after its own loop has stopped.
"""

EPILOG = """\
configuration: --config FILE (YAML or JSON) or $HOTSWAP_CONFIG, overridden by HOTSWAP_* variables
(for example HOTSWAP_DRY_RUN=true, HOTSWAP_LEADER_ELECTION__LEASE_NAME=x).

cluster credentials: --kubeconfig FILE; else, inside a pod (and without --context), its service account; else
$KUBECONFIG; else ~/.kube/config. --context picks a context of that kubeconfig.

commands talking to the cluster need the `hotswap` extra: pip install 'gke-tpu-priority[hotswap]'; or install the
operator tool alone, without Pulumi: the gke-tpu-priority-hotswap distribution (pip install ./hotswap in a checkout).

--dry-run: run, release-all and mark-checkpoint send no writes with it; status only reads, so it refuses the flag.

exit codes: 0 success (status: the whole answer) or clean shutdown; 1 the cluster refused or could not be
reached, the answer is partial (status: some objects could not be read; the output says which, in every -o
format), or release-all (or run's release on removal) could not release everything; 2 usage error, invalid
configuration, missing dependency or no usable credentials; 3 leadership lost (the Deployment restarts the pod).
"""

OUTPUTS = ("text", "wide", "json", "yaml")
PARTIAL = 1
"""Exit code of a partial answer: what was read is printed, with what was not."""
USAGE = 2


class _Parser(argparse.ArgumentParser):
    """Reports an unknown flag with the usage of the subcommand it was given to, not the top-level one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subcommands: dict[str, argparse.ArgumentParser] = {}

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            where = self.subcommands.get(getattr(parsed, "command", ""), self)
            where.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


class _RefuseDryRun(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error("--dry-run does not apply: status only reads (it is for run, release-all and mark-checkpoint)")


def package_version() -> str:
    """The installed distribution's version (the reconciler image has the package but not its metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    for distribution in ("gke-tpu-priority-hotswap", "gke-tpu-priority"):
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return "unknown (not installed from a distribution)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kubectl hotswap",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kubectl-hotswap {package_version()}")
    common = _Parser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="reconciler configuration file (YAML or JSON)")
    common.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig to use instead of the in-cluster account")
    common.add_argument("--context", help="kubeconfig context (default: the current context)")
    common.add_argument("--log-level", default=os.environ.get("HOTSWAP_LOG_LEVEL", "INFO"), help="default: INFO")
    writes = _Parser(add_help=False)
    writes.add_argument(
        "--dry-run",
        action="store_true",
        default=None,
        help="plan and log every decision, but send no writes (no patches, no events)",
    )

    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        parents=[common, writes],
        help="run the reconciler (watches, leader election, reconcile loop, /healthz /readyz /metrics)",
        description="Run the reconciler until SIGTERM.",
    )
    run.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME"),
        help="leader-election identity (default: $POD_NAME, else hostname plus a random suffix)",
    )
    run.add_argument("--bind-address", default="0.0.0.0", help="address for the ops endpoints (default 0.0.0.0)")
    run.add_argument(
        "--release-on-removal",
        metavar="NAMESPACE/DEPLOYMENT",
        default=os.environ.get("HOTSWAP_RELEASE_ON_REMOVAL"),
        help="this replica's Deployment: on SIGTERM, if it is gone, being deleted or scaled to zero, reactivate "
        "every held Workload before exiting (as release-all does); a restart keeps the holds",
    )
    release = commands.add_parser(
        "release-all",
        parents=[common, writes],
        help="reactivate every Workload held by the reconciler (run on uninstall)",
        description="Reactivate every Workload carrying the held-by annotation, one update each, in every "
        "namespace, and remove open-operation annotations. Run it from your machine after the reconciler's pods "
        "are gone (hotswap.enabled: false, then pulumi up), never inside them: a running leader would hold work "
        "again. Idempotent. Runbook: docs/operations.md, 'Uninstall'.",
    )
    status = commands.add_parser(
        "status",
        parents=[common],
        help="show what the reconciler holds, for whom, since when and why, and its open operations",
        description="Read-only: lists every Workload the reconciler holds (its JobSet, the JobSet it is held for, "
        "since when, how often, the operation and why, from the HotswapVictimHeld Event), every open operation "
        "and the quarantined slices. Needs list on workloads.kueue.x-k8s.io and events.events.k8s.io (and nodes, "
        "for the quarantined slices). When part of it cannot be read, what was read is printed with a warning "
        "(stderr for tables; `partial: true` and `warnings` in json and yaml) and the exit code is 1.",
    )
    status.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="text",
        help="text (default: tables), wide (tables with start times, attempts and fenced counts), json or yaml",
    )
    scope = status.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="only the Workloads of this namespace (default: every namespace)")
    scope.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace (the default: the reconciler acts cluster-wide)",
    )
    status.add_argument(
        "-l", "--selector", metavar="SELECTOR", help="only Workloads matching this label selector, e.g. team=a"
    )
    status.add_argument("--dry-run", nargs=0, action=_RefuseDryRun, help=argparse.SUPPRESS)
    mark = commands.add_parser(
        "mark-checkpoint",
        parents=[common, writes],
        help="publish that this JobSet has just checkpointed (run from the training pod after each checkpoint)",
        description="Set the JobSet's last-checkpoint annotation, so the reconciler prefers evicting work that "
        "has just checkpointed. Needs `patch` on jobsets.jobset.x-k8s.io in the namespace. Exits 0 even when "
        "the API refuses (a missed checkpoint mark must not fail training); 2 when the target is unknown. "
        "With --dry-run it prints the annotation it would set and sends nothing.",
    )
    mark.add_argument("--jobset", help=f"JobSet name (default: ${JOBSET_ENV})")
    mark.add_argument(
        "-n", "--namespace", help=f"namespace (default: ${NAMESPACE_ENV}, else the pod's service account's)"
    )
    mark.add_argument("--at", type=_moment, help="checkpoint time, RFC 3339 (default: now), e.g. 2026-12-03T10:15:00Z")
    parser.subcommands.update({"run": run, "release-all": release, "status": status, "mark-checkpoint": mark})
    return parser


def _moment(text: str) -> datetime:
    moment = parse_time(text)
    if moment is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time, e.g. 2026-12-03T10:15:00Z")
    return moment


def _load(args: argparse.Namespace) -> HotswapConfig:
    config = load_config(args.config)
    if getattr(args, "dry_run", None):
        config = config.model_copy(update={"dry_run": True})
    return config


async def _run(args: argparse.Namespace, config: HotswapConfig) -> int:
    from gke_tpu_priority.hotswap.controller import Controller, ExitCode
    from gke_tpu_priority.hotswap.kube.client import new_api_client
    from gke_tpu_priority.hotswap.kube.removal import release_if_removed
    from gke_tpu_priority.hotswap.metrics import Metrics
    from gke_tpu_priority.hotswap.server import OpsServer, make_app

    identity = args.identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    api = await new_api_client(args.kubeconfig, args.context)
    # The Lease gets a client (connection pool) of its own, as controller-runtime's leader election does.
    lease_api = await new_api_client(args.kubeconfig, args.context)
    metrics = Metrics()
    controller = Controller(config, api, identity=identity, metrics=metrics, lease_api=lease_api)
    server = OpsServer(
        make_app(metrics, alive=controller.alive, ready=controller.caches_ready),
        args.bind_address,
        (config.metrics_port, config.health_port),
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, controller.stop)
    await server.start()
    log.info(
        "starting",
        extra={"identity": identity, "dry_run": controller.dry_run, "ports": server.bound, "mode": config.mode},
    )
    try:
        code = int(await controller.run())
        if code == ExitCode.OK and args.release_on_removal:
            # The loop has stopped writing; only now can a release not be undone by this replica.
            namespace, _, deployment = str(args.release_on_removal).rpartition("/")
            report = await release_if_removed(
                api,
                AnnotationKeys(config.annotation_domain),
                namespace or config.leader_election.lease_namespace,
                deployment,
                dry_run=controller.dry_run,
            )
            if report is not None and not report.ok:
                code = RELEASE_INCOMPLETE
    finally:
        await server.stop()
        await api.close()
        await lease_api.close()
    log.info("stopped", extra={"exit_code": int(code)})
    return int(code)


async def _release_all(args: argparse.Namespace, config: HotswapConfig) -> int:
    from gke_tpu_priority.hotswap.kube.client import new_api_client
    from gke_tpu_priority.hotswap.kube.release_all import release_all

    api = await new_api_client(args.kubeconfig, args.context)
    try:
        # Every namespace, not only the configured ones: a hold made before `namespaces` shrank must be undone too.
        report = await release_all(api, AnnotationKeys(config.annotation_domain), (), dry_run=config.dry_run)
    finally:
        await api.close()
    log.info(
        "release-all finished",
        extra={
            "released": report.released,
            "cleared_ops": report.cleared_ops,
            "untainted": report.untainted,
            "failed": report.failed,
        },
    )
    verb = "would release" if config.dry_run else "released"
    print(
        f"{verb} {len(report.released)} held Workload(s), cleared {len(report.cleared_ops)} open operation(s), "
        f"{'would remove' if config.dry_run else 'removed'} the quarantine taint from {len(report.untainted)} node(s)"
        + (f"; FAILED {len(report.failed)}: {', '.join(report.failed)} (run it again)" if report.failed else "")
    )
    return 0 if report.ok else RELEASE_INCOMPLETE


async def _status(args: argparse.Namespace, config: HotswapConfig) -> int:
    from gke_tpu_priority.hotswap.kube.client import new_api_client
    from gke_tpu_priority.hotswap.kube.status import read_status_objects
    from gke_tpu_priority.hotswap.status import (
        held_rows,
        op_rows,
        quarantine_rows,
        render,
        render_json,
        render_yaml,
        status_document,
    )

    api = await new_api_client(args.kubeconfig, args.context)
    try:
        read = await read_status_objects(api, args.namespace, args.selector)
    finally:
        await api.close()
    keys = AnnotationKeys(config.annotation_domain)
    held, ops = held_rows(read.workloads, read.events, keys), op_rows(read.workloads, keys)
    quarantined = quarantine_rows(read.nodes, keys)
    if args.output in ("json", "yaml"):
        document = status_document(held, ops, quarantined, read.warnings)
        print(render_json(document) if args.output == "json" else render_yaml(document))
    else:
        print(render(held, ops, datetime.now(UTC), quarantined, wide=args.output == "wide"))
    for warning in read.warnings:
        print(f"warning: partial answer: {warning}", file=sys.stderr)
    return PARTIAL if read.warnings else 0


async def _mark_checkpoint(args: argparse.Namespace, config: HotswapConfig) -> int:
    try:
        namespace, jobset = resolve_target(args.jobset, args.namespace)
    except CheckpointTargetError as exc:
        print(str(exc), file=sys.stderr)
        return USAGE
    keys = AnnotationKeys(config.annotation_domain)
    if config.dry_run:
        at = format_time(args.at or datetime.now(UTC))
        print(f"would set {keys.last_checkpoint}={at} on JobSet {namespace}/{jobset} (dry run: nothing sent)")
        return 0
    from gke_tpu_priority.hotswap.kube.checkpoint import mark_checkpoint
    from gke_tpu_priority.hotswap.kube.client import new_api_client

    api = await new_api_client(args.kubeconfig, args.context)
    try:
        await mark_checkpoint(api, keys, namespace, jobset, args.at)
    finally:
        await api.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    try:
        config = _load(args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return USAGE
    command = COMMANDS[args.command]
    try:
        return asyncio.run(command(args, config))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        failure = explain(exc, args.command)
        log.debug("command failed", exc_info=True)
        print(f"kubectl hotswap {args.command}: {failure.message}", file=sys.stderr)
        return failure.exit_code


COMMANDS: dict[str, Callable[[argparse.Namespace, HotswapConfig], Coroutine[Any, Any, int]]] = {
    "run": _run,
    "release-all": _release_all,
    "mark-checkpoint": _mark_checkpoint,
    "status": _status,
}
