"""Build the local control plane's programs from their upstream Go modules, pinned, cached outside the tree.

Each tool is a Go module of this repository under `e2e/go/<name>/` whose `go.mod`/`go.sum` pin one upstream release. The
binaries land in a cache directory keyed by everything that decides their bytes (go.mod, go.sum, packages, link
flags, Go version, a `main.go` of this repository), so a second run with the same pins reuses them and a changed
pin rebuilds only that tool. Besides the control plane and the Pulumi engine it builds `gen-sdk`, the TypeScript
example's SDK generator (tools/node_program.py).

    python -m tools.toolchain build [TOOL ...]   build what is missing, print where each binary is
    python -m tools.toolchain path TOOL          print the directory holding TOOL's binaries (after build)
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent.parent / "e2e" / "go"  # the Go modules pinning each upstream program


def _stamp(packages: Sequence[str], fields: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"-X {pkg}.{key}={value}" for pkg in packages for key, value in fields.items())


def _provider_embeds(build_dir: Path) -> None:
    """What upstream's `go generate` (cmd/pulumi-resource-kubernetes/generate.go) writes: the schema with the
    provider's version in it, and the Terraform mapping, both compact."""
    source = module_source(
        "pulumi-kubernetes", "github.com/pulumi/pulumi-kubernetes/provider/v4"
    ) / "cmd" / "pulumi-resource-kubernetes"  # fmt: skip
    schema = json.loads((source / "schema.json").read_text())
    schema["version"] = PULUMI_KUBERNETES_VERSION.lstrip("v")
    (build_dir / "schema-embed.json").write_text(json.dumps(schema, separators=(",", ":")))
    mapping = json.loads((source / "terraform-mapping.json").read_text())
    (build_dir / "terraform-mapping-embed.json").write_text(json.dumps(mapping, separators=(",", ":")))


# The provider module (provider/v4) has no semver tags of its own; the proxy serves it only as the pseudo-version
# of the v4.25.0 release commit (f47bc2d6f199), which e2e/go/pulumi-kubernetes/go.mod pins.
PULUMI_KUBERNETES_VERSION = "v4.25.0"
PULUMI_KUBERNETES_MODULE_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"


def _kube_stamp(version: str) -> tuple[str, ...]:
    # Unstamped, the servers report v0.0.0-master and clients that gate on the server version (pulumi-kubernetes
    # refuses anything below v1.13) fail; the variable names are hack/lib/version.sh's.
    major, minor = version.lstrip("v").split(".")[:2]
    fields = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    return _stamp(("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"), fields)


@dataclass(frozen=True)
class GoTool:
    """One upstream program (or several from one release) built from a Go module of this repository."""

    name: str
    version: str
    binaries: dict[str, str]  # output file name -> Go package path
    ldflags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # Writes files the main package needs but upstream does not ship into a build copy of the module directory.
    prepare: Callable[[Path], None] | None = None

    @property
    def module_dir(self) -> Path:
        return GO_DIR / self.name

    def cache_key(self, go_version: str) -> str:
        digest = hashlib.sha256()
        for part in (
            (self.module_dir / "go.mod").read_bytes(),
            (self.module_dir / "go.sum").read_bytes(),
            json.dumps([self.binaries, self.ldflags, self.env, go_version], sort_keys=True).encode(),
            *self._own_source(),
        ):
            digest.update(hashlib.sha256(part).digest())
        return digest.hexdigest()[:16]

    def _own_source(self) -> list[bytes]:
        """This repository's code in the build (a main package, the prepare step), which decides the bytes too."""
        main_go = self.module_dir / "main.go"
        if self.prepare is not None:
            return [main_go.read_bytes(), self.prepare.__qualname__.encode()]
        return [main_go.read_bytes()] if main_go.is_file() else []


TOOLS: dict[str, GoTool] = {
    tool.name: tool
    for tool in (
        GoTool(
            name="etcd",
            version="v3.6.16",
            binaries={"etcd": "go.etcd.io/etcd/server/v3"},
        ),
        GoTool(
            name="kube",
            version="v1.35.4",
            binaries={
                "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
                "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
                "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
                "kubectl": "k8s.io/kubernetes/cmd/kubectl",
            },
            ldflags=_kube_stamp("v1.35.4"),
        ),
        GoTool(
            name="kwok",
            version="v0.8.0",
            binaries={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
        ),
        GoTool(
            name="helm",
            version="v4.3.2",
            binaries={"helm": "helm.sh/helm/v4/cmd/helm"},
            ldflags=_stamp(("helm.sh/helm/v4/internal/version",), {"version": "v4.3.2", "gitTreeState": "clean"}),
        ),
        GoTool(
            name="jobset",
            version="v0.12.0",
            binaries={"jobset-manager": "sigs.k8s.io/jobset"},
            ldflags=_stamp(("sigs.k8s.io/jobset/pkg/version",), {"GitVersion": "v0.12.0"}),
        ),
        GoTool(
            name="kueue",
            version="v0.19.2",
            binaries={"kueue-manager": "sigs.k8s.io/kueue/cmd/kueue"},
            ldflags=_stamp(("sigs.k8s.io/kueue/pkg/version",), {"GitVersion": "v0.19.2"}),
        ),
        GoTool(
            name="pulumi",
            version="v3.276.0",
            binaries={"pulumi": "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"},
            # The Automation API refuses a CLI older than the SDK's minimum, and an unstamped one reports v0.0.0.
            ldflags=_stamp(("github.com/pulumi/pulumi/sdk/v3/go/common/version",), {"Version": "v3.276.0"}),
        ),
        GoTool(
            name="pulumi-kubernetes",
            version=PULUMI_KUBERNETES_VERSION,
            binaries={"pulumi-resource-kubernetes": "."},
            ldflags=_stamp(
                ("github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version",),
                {"Version": PULUMI_KUBERNETES_VERSION.lstrip("v")},
            ),
            prepare=_provider_embeds,
        ),
        # The Node.js SDK generator of `pulumi package add` (pkg/codegen/nodejs), without the Node.js language host
        # the proxy refuses: the TypeScript example's SDK (e2e/test_examples_node.py, examples/typescript).
        GoTool(
            name="gen-sdk",
            version="v3.276.0",
            binaries={"gen-sdk": "."},
        ),
    )
}


def cache_root() -> Path:
    """Where built binaries live: $GKE_TPU_E2E_CACHE, else the user's cache directory (never the repo)."""
    explicit = os.environ.get("GKE_TPU_E2E_CACHE")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gke-tpu-priority" / "e2e"


@functools.cache
def go_version() -> str:
    try:
        out = subprocess.run(["go", "env", "GOVERSION"], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise SystemExit(
            "e2e: Go is not installed; the local control plane is built from source and needs Go >= 1.26"
        ) from None
    return out.strip()


@dataclass
class BuildResult:
    tool: str
    version: str
    directory: Path
    cached: bool
    seconds: float
    peak_rss_mib: float | None

    def as_json(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "version": self.version,
            "cached": self.cached,
            "seconds": round(self.seconds, 1),
            "peakRssMiB": None if self.peak_rss_mib is None else round(self.peak_rss_mib),
        }


def tool_dir(tool: GoTool, goversion: str) -> Path:
    return cache_root() / "bin" / f"{tool.name}-{tool.version}-{tool.cache_key(goversion)}"


# Runs one `go build` and records the peak resident memory of any process it ran (the compiler or linker), which
# is what decides whether a machine can build the tool at all.
_MEASURE = (
    "import os, resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[1:])\n"
    "open(os.environ['E2E_RSS_FILE'], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def build(tool: GoTool, goversion: str, log: Path | None = None) -> BuildResult:
    """Build `tool` into the cache unless an identical build is there. Atomic: an interrupted build leaves nothing."""
    target = tool_dir(tool, goversion)
    if all((target / name).is_file() for name in tool.binaries):
        return BuildResult(tool.name, tool.version, target, True, 0.0, None)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{tool.name}-", dir=target.parent))
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false", **tool.env}
    rss_file = staging / ".peak-rss-kib"
    env["E2E_RSS_FILE"] = str(rss_file)
    start = time.monotonic()
    peak_kib = 0
    try:
        workdir = tool.module_dir
        if tool.prepare is not None:
            workdir = staging / ".src"
            shutil.copytree(tool.module_dir, workdir)
            tool.prepare(workdir)
        for name, package in tool.binaries.items():
            cmd = ["go", "build", "-trimpath", "-pgo=off", "-ldflags", " ".join(("-s", "-w", *tool.ldflags))]
            cmd += ["-o", str(staging / name), package]
            print(f"e2e: building {tool.name} {tool.version}: {name}", file=sys.stderr, flush=True)
            with open(log or os.devnull, "a") as sink:
                done = subprocess.run(
                    [sys.executable, "-c", _MEASURE, *cmd],
                    cwd=workdir, env=env, stdout=sink, stderr=subprocess.PIPE, text=True,
                )  # fmt: skip
                sink.write(done.stderr)
            if done.returncode != 0:
                raise SystemExit(f"e2e: building {name} of {tool.name} {tool.version} failed:\n{done.stderr[-4000:]}")
            peak_kib = max(peak_kib, int(rss_file.read_text() or 0))
            rss_file.unlink()
        if target.exists():
            shutil.rmtree(target)
        shutil.rmtree(staging / ".src", ignore_errors=True)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    seconds = time.monotonic() - start
    peak = peak_kib / 1024
    return BuildResult(tool.name, tool.version, target, False, seconds, peak)


def binary(name: str) -> Path:
    """Path of a built binary by file name (e.g. "kube-apiserver"); exits with a sentence if it was not built."""
    goversion = go_version()
    for tool in TOOLS.values():
        if name in tool.binaries:
            path = tool_dir(tool, goversion) / name
            if not path.is_file():
                raise SystemExit(f"e2e: {name} is not built yet; run `python -m tools.toolchain build {tool.name}`")
            return path
    raise SystemExit(f"e2e: no tool builds a binary named {name!r}")


def module_source(tool: str, module: str) -> Path:
    """Directory of `module` as the tool's go.sum pins it, from the Go module cache (downloaded if missing).

    Files that upstream ships beside its code (kwok's stage definitions, the charts) are read from there at run
    time instead of being copied into this repository."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", module],
        cwd=TOOLS[tool].module_dir,
        capture_output=True,
        text=True,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or "Dir" not in info:
        raise SystemExit(f"e2e: cannot get {module} for {tool}: {info.get('Error') or done.stderr.strip()}")
    return Path(info["Dir"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.toolchain", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the tools that are not cached yet")
    b.add_argument("tools", nargs="*", metavar="TOOL", help=f"any of {', '.join(TOOLS)} (default: all)")
    b.add_argument("--record", type=Path, help="write the build times as JSON here")
    p = sub.add_parser("path", help="print the directory of a built tool")
    p.add_argument("tool", choices=list(TOOLS))
    args = parser.parse_args(argv)
    unknown = [name for name in getattr(args, "tools", []) if name not in TOOLS]
    if unknown:
        parser.error(f"unknown tool {unknown[0]!r}; the tools are {', '.join(TOOLS)}")
    goversion = go_version()
    if args.command == "path":
        print(tool_dir(TOOLS[args.tool], goversion))
        return 0
    results = []
    for name in args.tools or list(TOOLS):
        result = build(TOOLS[name], goversion)
        state = "cached" if result.cached else f"built in {result.seconds:.0f} s"
        print(f"{name} {result.version}: {state} -> {result.directory}", flush=True)
        results.append(result.as_json())
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps({"go": goversion, "builds": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
