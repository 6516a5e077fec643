"""Build and push the hotswap reconciler image reproducibly: pinned base image, hash-pinned dependencies, version tag.

Three inputs decide every byte of the image, and each is a file in the repository:
- `hotswap/base-image.lock`: the base image by digest (`python:3.11-slim-bookworm@sha256:…`). Recorded by
  `pin-base`, which asks a registry through Docker; this repository never writes a digest nobody resolved, so a
  checkout whose pin has no digest refuses to build until someone runs `pin-base` on a machine with Docker.
- `hotswap/requirements.lock`: the `[hotswap]` extra resolved to exact versions with sha256 hashes (`lock`,
  pip-compile from pip-tools); the image installs it with `pip --require-hashes`.
- `project.version` in `pyproject.toml`: the image tag, the same number as the package and the CHANGELOG.

    python -m tools.reconciler_image pin-base                    # needs Docker; records the digest
    python -m tools.reconciler_image lock                        # needs pip-tools and the package index
    python -m tools.reconciler_image build --repository us-east5-docker.pkg.dev/my-project/hotswap --push
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BASE_LOCK = PROJECT_ROOT / "hotswap" / "base-image.lock"
REQUIREMENTS_LOCK = PROJECT_ROOT / "hotswap" / "requirements.lock"
DOCKERFILE = PROJECT_ROOT / "hotswap" / "Dockerfile"
IMAGE_NAME = "hotswap-reconciler"
PLATFORM = "linux/amd64"
PINNED = re.compile(r"^(?P<name>[a-z0-9][-a-z0-9._/:]*[a-z0-9])@sha256:(?P<digest>[0-9a-f]{64})$")

Runner = Callable[[Sequence[str]], str]


class ImageError(RuntimeError):
    """A build input that is missing or not pinned; the message says which file and what to run."""


def run(argv: Sequence[str]) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout


def package_version(root: Path = PROJECT_ROOT) -> str:
    version: str = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    return version


def read_base(path: Path = BASE_LOCK) -> str:
    """The one non-comment line of the pin file: an image reference, pinned or not."""
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) != 1:
        raise ImageError(f"{path.name}: expected one image reference, found {len(lines)} lines")
    return lines[0]


def pinned_base(path: Path = BASE_LOCK) -> str:
    """The base image by digest, or ImageError saying how to record it."""
    ref = read_base(path)
    if PINNED.match(ref) is None:
        raise ImageError(
            f"hotswap/{path.name} names {ref!r} without a digest, so the build would not be reproducible; on a "
            "machine with Docker run `python -m tools.reconciler_image pin-base` (it records "
            f"`{ref.split('@')[0]}@sha256:<digest>` as the registry reports it) and commit the file"
        )
    return ref


def resolve_digest(image: str, runner: Runner = run) -> str:
    """The digest the registry serves for `image` (a multi-platform index when there is one)."""
    out = runner(["docker", "buildx", "imagetools", "inspect", image, "--format", "{{json .Manifest}}"])
    digest = str(json.loads(out).get("digest", ""))
    if re.fullmatch(r"sha256:[0-9a-f]{64}", digest) is None:
        raise ImageError(f"`docker buildx imagetools inspect {image}` reported no sha256 digest: {out.strip()[:200]}")
    return digest


def pin_base(image: str | None = None, runner: Runner = run, path: Path = BASE_LOCK) -> str:
    name = (image or read_base(path)).split("@")[0]
    ref = f"{name}@{resolve_digest(name, runner)}"
    header = [ln for ln in path.read_text().splitlines() if ln.lstrip().startswith("#")] if path.exists() else []
    path.write_text("\n".join([*header, ref]) + "\n")
    return ref


def hotswap_requirements(root: Path = PROJECT_ROOT) -> list[str]:
    extras: dict[str, list[str]] = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return extras["hotswap"]


def locked_requirements(path: Path = REQUIREMENTS_LOCK) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip-compile `--generate-hashes` file."""
    out: dict[str, tuple[str, list[str]]] = {}
    text = re.sub(r"\\\n", " ", path.read_text())
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.match(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)==(\S+)(.*)$", line)
        if match is None:
            raise ImageError(f"{path.name}: {line[:60]!r} is not `name==version --hash=sha256:…`")
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", match.group(3))
        out[canonical(match.group(1))] = (match.group(2), hashes)
    return out


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_requirements(runner: Runner = run, root: Path = PROJECT_ROOT) -> Path:
    """Resolve the `[hotswap]` extra with hashes (pip-compile, on the image's Python 3.11) into the lock file."""
    source = root / "build" / "hotswap-requirements.in"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("\n".join(hotswap_requirements(root)) + "\n")
    target = root / REQUIREMENTS_LOCK.relative_to(PROJECT_ROOT)
    runner(
        [
            "pip-compile",
            "--quiet",
            "--generate-hashes",
            "--allow-unsafe",
            "--strip-extras",
            "--no-header",
            "--no-emit-find-links",
            "--output-file",
            str(target),
            str(source),
        ]
    )
    body = target.read_text().replace(f"-r {source}", "pyproject.toml [hotswap]")
    target.write_text(
        "# The [hotswap] extra of pyproject.toml resolved with hashes for the image (CPython 3.11, linux/amd64).\n"
        "# Regenerate after changing the extra: python -m tools.reconciler_image lock\n" + body
    )
    return target


def build_command(repository: str, *, push: bool, root: Path = PROJECT_ROOT) -> list[str]:
    """The one `docker buildx build` that makes the image; refuses before Docker runs when an input is not pinned."""
    base = pinned_base(root / BASE_LOCK.relative_to(PROJECT_ROOT))
    tag = f"{repository.rstrip('/')}/{IMAGE_NAME}:{package_version(root)}"
    return [
        "docker",
        "buildx",
        "build",
        "--platform",
        PLATFORM,
        "--file",
        str(root / DOCKERFILE.relative_to(PROJECT_ROOT)),
        "--build-arg",
        f"PYTHON_IMAGE={base}",
        "--tag",
        tag,
        # The SBOM and provenance travel with the pushed image as attestations; a local --load cannot carry them.
        *(["--sbom=true", "--provenance=true", "--push"] if push else ["--load"]),
        str(root),
    ]


def stream(argv: Sequence[str]) -> str:
    subprocess.run(list(argv), check=True)  # the build's own progress goes to the terminal
    return ""


def main(argv: Sequence[str] | None = None, runner: Runner = run, builder: Runner = stream) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.reconciler_image",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    pin = sub.add_parser("pin-base", help="record the base image's digest in hotswap/base-image.lock (needs Docker)")
    pin.add_argument("--image", default=None, help="base image to pin (default: the one the file names)")
    sub.add_parser("lock", help="resolve the [hotswap] extra with hashes into hotswap/requirements.lock")
    build = sub.add_parser("build", help="build (and push) <repository>/hotswap-reconciler:<project.version>")
    build.add_argument("--repository", required=True, help="e.g. us-east5-docker.pkg.dev/my-project/hotswap")
    build.add_argument("--push", action="store_true", help="push, with SBOM and provenance attestations")
    build.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    ns = parser.parse_args(argv)
    try:
        if ns.command == "pin-base":
            print(f"hotswap/{BASE_LOCK.name}: {pin_base(ns.image, runner)}")
        elif ns.command == "lock":
            print(f"wrote {lock_requirements(runner).relative_to(PROJECT_ROOT)}")
        else:
            command = build_command(ns.repository, push=ns.push)
            print(" ".join(command))
            if not ns.dry_run:
                builder(command)
    except ImageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (OSError, subprocess.CalledProcessError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
