"""Pinned upstream reference data (Kueue/JobSet CRDs, Helm chart sources, webhook sources): locate, verify, fetch.

The tests check what the package emits against the real Kueue v0.19.2 and JobSet v0.12.0 sources. Those files
are not vendored: ``upstream.lock.json`` lists each one (upstream repository, tag, path, sha256, size) and
``python -m tools.upstream fetch`` (``make upstream``) downloads exactly those files into
``.cache/upstream/`` with the layout ``crds/kueue/...``, ``crds/jobset/...``, ``upstream/kueue-v0.19.2/...``,
``upstream/jobset-v0.12.0/...``. ``$GKE_TPU_UPSTREAM_DIR`` points at another directory of that layout instead
(an offline mirror). A file is installed only when its digest matches the lock; a failed run installs nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
LOCK_FILE = PROJECT_ROOT / "upstream.lock.json"
ENV_VAR = "GKE_TPU_UPSTREAM_DIR"
DEFAULT_DIR = PROJECT_ROOT / ".cache" / "upstream"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Source:
    """One upstream repository at a pinned tag."""

    repo: str
    tag: str
    commit: str


@dataclass(frozen=True)
class LockedFile:
    """One reference file: where it lives locally, where it comes from, and what it must hash to."""

    path: str
    source: str
    upstream_path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Lock:
    sources: dict[str, Source]
    files: tuple[LockedFile, ...]

    def url(self, entry: LockedFile, base_url: str = DEFAULT_BASE_URL) -> str:
        source = self.sources[entry.source]
        return f"{base_url.rstrip('/')}/{source.repo}/{source.tag}/{entry.upstream_path}"

    def entry(self, path: str) -> LockedFile:
        for candidate in self.files:
            if candidate.path == path:
                return candidate
        raise KeyError(f"{path} is not in {LOCK_FILE.name}; tests may only read locked upstream files")

    def under(self, directory: str) -> list[LockedFile]:
        prefix = directory.rstrip("/") + "/"
        return [f for f in self.files if f.path.startswith(prefix)]


def load_lock(path: Path = LOCK_FILE) -> Lock:
    raw = json.loads(path.read_text(encoding="utf-8"))
    sources = {name: Source(**spec) for name, spec in raw["sources"].items()}
    files = tuple(LockedFile(**spec) for spec in raw["files"])
    for entry in files:
        if entry.source not in sources or Path(entry.path).is_absolute() or ".." in Path(entry.path).parts:
            raise ValueError(f"{path}: bad entry {entry.path!r}")
    return Lock(sources, files)


def data_dir() -> Path:
    """Where the reference data is read from: ``$GKE_TPU_UPSTREAM_DIR`` if set, else ``.cache/upstream``."""
    configured = os.environ.get(ENV_VAR)
    return Path(configured).expanduser().resolve() if configured else DEFAULT_DIR


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def how_to_get() -> str:
    return (
        f"run `make upstream` (downloads the files pinned in {LOCK_FILE.name} into .cache/upstream/ and checks "
        f"their sha256), or set {ENV_VAR} to a directory with the same layout (crds/kueue, crds/jobset, "
        "upstream/kueue-v0.19.2, upstream/jobset-v0.12.0)"
    )


def problem_with(entry: LockedFile, root: Path) -> str | None:
    """Why the local copy of ``entry`` under ``root`` cannot be used, or None if it matches the lock."""
    path = root / entry.path
    if not path.is_file():
        return f"{path} is missing"
    actual = sha256_of(path)
    if actual != entry.sha256:
        return f"{path} has sha256 {actual}, the lock pins {entry.sha256}"
    return None


@dataclass
class FetchReport:
    installed: list[str]
    already_present: list[str]
    refused: list[str]

    @property
    def ok(self) -> bool:
        return not self.refused


def _download(url: str, target: Path, timeout: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout) as response, target.open("wb") as out:
        shutil.copyfileobj(response, out, _CHUNK)


def fetch(
    lock: Lock,
    dest: Path,
    *,
    base_url: str = DEFAULT_BASE_URL,
    timeout: float = 30.0,
    progress: Callable[[str], None] = print,
) -> FetchReport:
    """Download every locked file missing or wrong under ``dest``; install them only if all match their digest.

    Files are staged in a temporary directory inside ``dest`` and moved into place only after every download
    verified, so a failed run (network error, digest mismatch) stops at the first failure and leaves ``dest``
    exactly as it was.
    """
    report = FetchReport([], [], [])
    todo = [e for e in lock.files if problem_with(e, dest) is not None]
    report.already_present = [e.path for e in lock.files if e not in todo]
    if not todo:
        progress(f"all {len(lock.files)} upstream files present and verified in {dest}")
        return report
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest))
    try:
        for number, entry in enumerate(todo, 1):
            url = lock.url(entry, base_url)
            staged = staging / entry.path
            staged.parent.mkdir(parents=True, exist_ok=True)
            try:
                _download(url, staged, timeout)
            except OSError as exc:
                report.refused.append(f"{entry.path}: download of {url} failed: {exc}")
                progress(f"[{number}/{len(todo)}] {entry.path}: FAILED ({exc})")
                break  # nothing will be installed now, so stop instead of timing out on every file
            actual = sha256_of(staged)
            if actual != entry.sha256:
                report.refused.append(f"{entry.path}: {url} has sha256 {actual}, the lock pins {entry.sha256}")
                progress(f"[{number}/{len(todo)}] {entry.path}: REFUSED (sha256 mismatch)")
                break
            progress(f"[{number}/{len(todo)}] {entry.path}: {staged.stat().st_size} bytes, sha256 ok")
        if report.refused:
            return report
        for entry in todo:
            target = dest / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / entry.path, target)
            report.installed.append(entry.path)
        return report
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def verify(lock: Lock, root: Path) -> list[str]:
    """Every problem with the reference data under ``root`` (empty when all locked files match)."""
    return [p for e in lock.files if (p := problem_with(e, root)) is not None]


def ensure(
    lock: Lock,
    *,
    configured: bool,
    root: Path,
    fetcher: Callable[[Lock, Path], FetchReport] | None = None,
) -> tuple[int, str]:
    """What `make test` does first: (exit code, one line). Verified data is used as is; data missing from the
    default cache is fetched; a configured `$GKE_TPU_UPSTREAM_DIR` is never written to, only checked, and data that
    cannot be had ends the run in one line that says what to run, instead of a hundred failing tests."""
    problems = verify(lock, root)
    if not problems:
        return 0, f"upstream reference data: {len(lock.files)} files verified in {root}"
    if configured:
        return 1, (
            f"{ENV_VAR}={root} is not usable ({len(problems)} of {len(lock.files)} locked files missing or "
            f"altered, first: {problems[0]}); unset it to let `make test` fetch the data, or fix that directory"
        )
    report = (fetcher or (lambda lk, dest: fetch(lk, dest, progress=lambda _: None)))(lock, root)
    if not report.ok:
        return 1, (
            f"the tests need the pinned Kueue/JobSet reference data and it could not be downloaded "
            f"({report.refused[0]}); run `make upstream` when online, or set {ENV_VAR} to an offline copy"
        )
    return 0, f"upstream reference data: fetched {len(report.installed)} files into {root} (once)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.upstream", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("fetch", help="download the locked files into the cache (or --dest)")
    get.add_argument(
        "--dest", type=Path, default=None, help=f"target directory (default: ${ENV_VAR} or .cache/upstream)"
    )
    get.add_argument("--base-url", default=DEFAULT_BASE_URL, help="mirror with raw.githubusercontent.com's layout")
    check = sub.add_parser("verify", help="check a directory against the lock without downloading")
    check.add_argument("--dir", type=Path, default=None)
    ready = sub.add_parser(
        "ensure", help="what `make test` runs first: verify the data, fetch it into the cache when missing"
    )
    for command in (get, check, ready):
        command.add_argument("--lock", type=Path, default=LOCK_FILE, help="lock file (default: upstream.lock.json)")
    ns = parser.parse_args(argv)
    lock = load_lock(ns.lock)
    if ns.command == "ensure":
        code, line = ensure(lock, configured=bool(os.environ.get(ENV_VAR)), root=data_dir())
        print(line, file=sys.stderr if code else sys.stdout)
        return code
    if ns.command == "verify":
        root = ns.dir or data_dir()
        problems = verify(lock, root)
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{len(lock.files) - len(problems)}/{len(lock.files)} locked files verified in {root}")
        return 1 if problems else 0
    dest = ns.dest or data_dir()
    report = fetch(lock, dest, base_url=ns.base_url)
    if not report.ok:
        print(f"error: nothing installed in {dest}; {len(report.refused)} file(s) refused:", file=sys.stderr)
        for line in report.refused:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"{len(report.installed)} installed, {len(report.already_present)} already present, in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
