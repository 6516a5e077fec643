"""Move the Kueue and/or JobSet pins to a new release: upstream.lock.json, the package defaults, the e2e build pins.

    python -m tools.upstream_bump --kueue 0.20.0 [--jobset 0.13.0] [--dry-run]

For each project bumped it
1. resolves the new tag's commit (GitHub API; `--kueue-commit`/`--jobset-commit` skip the look-up),
2. downloads every file the lock lists for that project at the new tag, and records its new sha256 and size (a file
   the new release no longer has is dropped from the lock and listed),
3. rewrites every pin site in `PIN_SITES` (config defaults, e2e go.mod and toolchain stamps, the tests' layout),
4. lists what it could not do: a pin site whose text was not found, the go.sum files (`go mod tidy` needs the module
   proxy), and every other line of the tree that still names the old release next to the project's name (docs,
   comments, behaviour notes: they need a reader, not a substitution).
Nothing is written when the lock cannot be rebuilt (commit look-up or download failure other than a missing file).
Then: `make upstream`, `make test`, read the release notes, and work through docs/upgrading.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.upstream import DEFAULT_BASE_URL, LOCK_FILE, PROJECT_ROOT, Lock, load_lock

Download = Callable[[str], bytes]
ResolveCommit = Callable[[str, str], str]

PROJECTS = ("kueue", "jobset")


@dataclass(frozen=True)
class PinSite:
    """A literal in a file that names a project's release; `{v}` stands for the version without `v`."""

    path: str
    project: str
    template: str


PIN_SITES: tuple[PinSite, ...] = (
    PinSite("components/config/kueue.py", "kueue", 'Field(default="{v}", description="Kueue release'),
    PinSite("components/config/kueue.py", "kueue", "({v} tested)"),
    PinSite("components/config/kueue.py", "jobset", 'Field(default="{v}", description="JobSet release'),
    PinSite("components/config/kueue.py", "jobset", "({v} tested)"),
    PinSite("e2e/go/kueue/go.mod", "kueue", "\tsigs.k8s.io/kueue v{v} "),
    PinSite("e2e/go/jobset/go.mod", "jobset", "\tsigs.k8s.io/jobset v{v} "),
    PinSite("tools/toolchain.py", "kueue", 'version="v{v}"'),
    PinSite("tools/toolchain.py", "kueue", '{{"GitVersion": "v{v}"}}'),
    PinSite("tools/toolchain.py", "jobset", 'version="v{v}"'),
    PinSite("tools/toolchain.py", "jobset", '{{"GitVersion": "v{v}"}}'),
    PinSite("tests/support/upstream_data.py", "kueue", "upstream/kueue-v{v}"),
    PinSite("tests/support/upstream_data.py", "jobset", "upstream/jobset-v{v}"),
    PinSite("tests/test_upstream_fetch.py", "kueue", "upstream/kueue-v{v}/"),
    PinSite("tests/test_upstream_fetch.py", "jobset", "upstream/jobset-v{v}/"),
    PinSite("tools/upstream.py", "kueue", "kueue-v{v}"),
    PinSite("tools/upstream.py", "jobset", "jobset-v{v}"),
    PinSite("tools/upstream.py", "kueue", "Kueue v{v}"),
    PinSite("tools/upstream.py", "jobset", "JobSet v{v}"),
)
# Rewritten by `go mod tidy`, not by text: listed for the operator.
GO_SUMS = {"kueue": "e2e/go/kueue/go.sum", "jobset": "e2e/go/jobset/go.sum"}
# Never reported as leftovers: machine-written files whose old versions are history or other modules'.
NOT_REVIEWED = ("upstream.lock.json", ".sum", "CHANGELOG.md")


@dataclass
class BumpPlan:
    lock: dict[str, object]
    files: dict[str, str] = field(default_factory=dict)  # path -> new text
    dropped: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    to_do: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)


def github_commit(repo: str, tag: str) -> str:
    request = urllib.request.Request(
        f"https://api.github.com/repos/{repo}/commits/{tag}", headers={"Accept": "application/vnd.github.sha"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        sha = str(response.read().decode().strip())
    if re.fullmatch(r"[0-9a-f]{40}", sha) is None:
        raise OSError(f"GitHub did not return a commit for {repo}@{tag}: {sha[:80]!r}")
    return sha


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        data: bytes = response.read()
    return data


def _version(tag: str) -> str:
    return tag.removeprefix("v")


def plan_bump(
    new_versions: dict[str, str],
    *,
    commits: dict[str, str] | None = None,
    root: Path = PROJECT_ROOT,
    download: Download = http_get,
    resolve_commit: ResolveCommit = github_commit,
    base_url: str = DEFAULT_BASE_URL,
    tracked: Sequence[str] | None = None,
) -> BumpPlan:
    """Everything the bump changes, computed without writing. Raises OSError when the lock cannot be rebuilt."""
    lock_path = root / LOCK_FILE.relative_to(PROJECT_ROOT)
    raw = json.loads(lock_path.read_text())
    lock: Lock = load_lock(lock_path)
    old = {p: _version(lock.sources[p].tag) for p in new_versions}
    plan = BumpPlan(lock=raw)
    sources = dict(raw["sources"])
    for project, version in new_versions.items():
        spec = dict(sources[project])
        tag = f"v{_version(version)}"
        commit = (commits or {}).get(project) or resolve_commit(str(spec["repo"]), tag)
        sources[project] = {**spec, "tag": tag, "commit": commit}
    files: list[dict[str, object]] = []
    for entry in raw["files"]:
        project = str(entry["source"])
        if project not in new_versions:
            files.append(entry)
            continue
        spec = sources[project]
        url = f"{base_url.rstrip('/')}/{spec['repo']}/{spec['tag']}/{entry['upstream_path']}"
        try:
            data = download(url)
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise
            plan.dropped.append(f"{entry['upstream_path']} ({project} {spec['tag']} has no such file)")
            continue
        local = str(entry["path"]).replace(
            f"{project}-v{old[project]}", f"{project}-v{_version(new_versions[project])}"
        )
        files.append({**entry, "path": local, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    plan.lock = {**raw, "sources": sources, "files": files}

    texts: dict[str, str] = {}
    for site in PIN_SITES:
        if site.project not in new_versions:
            continue
        before = site.template.format(v=old[site.project])
        after = site.template.format(v=_version(new_versions[site.project]))
        path = root / site.path
        if not path.is_file():
            plan.not_found.append(f"{site.path}: file missing (expected `{before.strip()}`)")
            continue
        text = texts.get(site.path, path.read_text())
        if before not in text:
            plan.not_found.append(f"{site.path}: `{before.strip()}` not found; update its {site.project} pin by hand")
            continue
        texts[site.path] = text.replace(before, after)
    plan.files = {p: t for p, t in texts.items() if t != (root / p).read_text()}
    for project in new_versions:
        plan.to_do.append(
            f"{GO_SUMS[project]}: run `go mod tidy` in {Path(GO_SUMS[project]).parent} (needs the Go module proxy)"
        )
    plan.review = leftovers(old, root, plan.files, tracked)
    return plan


def leftovers(old: dict[str, str], root: Path, rewritten: dict[str, str], tracked: Sequence[str] | None) -> list[str]:
    """Lines that still name an old release next to its project's name: for a reader, not a substitution."""
    names = tracked if tracked is not None else git_files(root)
    out: list[str] = []
    for name in names:
        if name.endswith(NOT_REVIEWED):
            continue
        path = root / name
        try:
            text = rewritten.get(name) or path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for project, version in old.items():
                if re.search(rf"(?<![\d.]){re.escape(version)}(?![\d])", line) and project in line.lower():
                    out.append(f"{name}:{number}: {line.strip()[:110]}")
                    break
    return out


def git_files(root: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True).stdout
    return [line for line in listed.splitlines() if line]


def apply(plan: BumpPlan, root: Path = PROJECT_ROOT) -> None:
    for name, text in plan.files.items():
        (root / name).write_text(text)
    (root / LOCK_FILE.relative_to(PROJECT_ROOT)).write_text(json.dumps(plan.lock, indent=1) + "\n")


def report(plan: BumpPlan) -> str:
    lines = [f"rewrote: {', '.join(sorted(plan.files))}, upstream.lock.json"]
    for title, items in (
        ("dropped from the lock (tests that read them need a new source)", plan.dropped),
        ("pin sites not updated", plan.not_found),
        ("still to do", plan.to_do),
        ("lines that still name the old release (read each)", plan.review),
    ):
        if items:
            lines += [f"{title}:", *(f"  {item}" for item in items)]
    return "\n".join(lines)


def main(
    argv: Sequence[str] | None = None, download: Download = http_get, resolve: ResolveCommit = github_commit
) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.upstream_bump", description=__doc__.split("\n\n")[0])
    for project in PROJECTS:
        parser.add_argument(f"--{project}", metavar="VERSION", help=f"new {project} release, e.g. 0.20.0")
        parser.add_argument(f"--{project}-commit", metavar="SHA", help="the tag's commit (skips the GitHub look-up)")
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL, help="mirror with raw.githubusercontent.com's layout")
    parser.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    ns = parser.parse_args(argv)
    versions = {p: getattr(ns, p) for p in PROJECTS if getattr(ns, p)}
    if not versions:
        parser.error("name at least one of --kueue VERSION, --jobset VERSION")
    commits = {p: getattr(ns, f"{p}_commit") for p in PROJECTS if getattr(ns, f"{p}_commit")}
    try:
        plan = plan_bump(versions, commits=commits, download=download, resolve_commit=resolve, base_url=ns.base_url)
    except OSError as err:
        print(f"error: nothing written; {err}", file=sys.stderr)
        return 1
    if not ns.dry_run:
        apply(plan)
    print(("(dry run) " if ns.dry_run else "") + report(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
