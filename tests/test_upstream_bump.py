"""`python -m tools.upstream_bump`: moving the Kueue/JobSet pins to a new release rewrites the lock (new tag, commit,
paths, digests), every pin site, and lists what it could not do. Offline: a fake download and a
fake commit look-up stand in for GitHub."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import urllib.error
from email.message import Message
from pathlib import Path

import pytest

from testkit.mock_runtime import PROJECT_ROOT
from tools import upstream, upstream_bump

NEW_KUEUE = "0.20.1"
NEW_COMMIT = "1" * 40
OLD_KUEUE = upstream.load_lock().sources["kueue"].tag.removeprefix("v")
OLD_JOBSET = upstream.load_lock().sources["jobset"].tag.removeprefix("v")


def fake_download(gone: frozenset[str] = frozenset()) -> upstream_bump.Download:
    def download(url: str) -> bytes:
        if any(url.endswith(g) for g in gone):
            raise urllib.error.HTTPError(url, 404, "Not Found", Message(), io.BytesIO())
        return f"content of {url}".encode()

    return download


def no_lookup(repo: str, tag: str) -> str:
    raise AssertionError(f"unexpected commit look-up for {repo}@{tag}")


def test_every_pin_site_is_found_in_the_tree() -> None:
    plan = upstream_bump.plan_bump(
        {"kueue": NEW_KUEUE, "jobset": "0.13.0"},
        commits={"kueue": NEW_COMMIT, "jobset": "2" * 40},
        download=fake_download(),
        resolve_commit=no_lookup,
        tracked=[],
    )
    assert plan.not_found == []  # a pin site renamed in the code fails here, not at the next release
    assert set(plan.files) == {s.path for s in upstream_bump.PIN_SITES}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the files a bump touches, plus a doc that mentions the release in prose."""
    for name in {s.path for s in upstream_bump.PIN_SITES} | {"upstream.lock.json", "e2e/go/kwok/go.mod"}:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_ROOT / name, target)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text(
        f"Kueue v{OLD_KUEUE} requeues a deactivated Workload at the head.\nunrelated procfs v{OLD_KUEUE}\n"
    )
    return tmp_path


def tracked(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_kueue_bump_rewrites_the_lock_and_every_pin_and_lists_the_rest(checkout: Path) -> None:
    before = json.loads((checkout / "upstream.lock.json").read_text())
    gone = "pkg/webhooks/clusterqueue_webhook.go"
    plan = upstream_bump.plan_bump(
        {"kueue": NEW_KUEUE},
        root=checkout,
        download=fake_download(frozenset({gone})),
        resolve_commit=lambda repo, tag: NEW_COMMIT if (repo, tag) == ("kubernetes-sigs/kueue", "v0.20.1") else "",
        tracked=tracked(checkout),
    )
    upstream_bump.apply(plan, checkout)

    lock = upstream.load_lock(checkout / "upstream.lock.json")
    assert lock.sources["kueue"].tag == "v0.20.1" and lock.sources["kueue"].commit == NEW_COMMIT
    assert lock.sources["jobset"] == upstream.load_lock().sources["jobset"]  # not asked: untouched
    assert lock.sources["kueue-v0.15.8"].tag == "v0.15.8"  # the older release the floor tests read stays
    kueue_files = [f for f in lock.files if f.source == "kueue"]
    old_kueue = [f for f in before["files"] if f["source"] == "kueue"]
    assert len(kueue_files) == len(old_kueue) - sum(f["upstream_path"].endswith(gone) for f in old_kueue)
    for entry in kueue_files:
        assert f"kueue-v{OLD_KUEUE}" not in entry.path
        url = lock.url(entry)
        assert entry.sha256 == hashlib.sha256(f"content of {url}".encode()).hexdigest()
        assert url.startswith("https://raw.githubusercontent.com/kubernetes-sigs/kueue/v0.20.1/")
    assert any(f.path.startswith("upstream/kueue-v0.20.1/") for f in kueue_files)
    assert [f for f in lock.files if f.source == "jobset"] == [
        f for f in upstream.load_lock().files if f.source == "jobset"
    ]
    assert any(gone in d for d in plan.dropped)

    kueue_py = (checkout / "components/config/kueue.py").read_text()
    assert 'Field(default="0.20.1", description="Kueue release' in kueue_py and "(0.20.1 tested)" in kueue_py
    assert f'Field(default="{OLD_JOBSET}", description="JobSet release' in kueue_py
    assert "\tsigs.k8s.io/kueue v0.20.1 " in (checkout / "e2e/go/kueue/go.mod").read_text()
    toolchain = (checkout / "tools/toolchain.py").read_text()
    assert 'version="v0.20.1"' in toolchain and '{"GitVersion": "v0.20.1"}' in toolchain
    assert 'KUEUE = "upstream/kueue-v0.20.1"' in (checkout / "tests/support/upstream_data.py").read_text()
    assert f"kueue-v{OLD_KUEUE}" not in (checkout / "tools/upstream.py").read_text()
    kwok = (checkout / "e2e/go/kwok/go.mod").read_text()
    assert f"procfs v{OLD_KUEUE}" in kwok  # another module that happens to share the number is left alone

    assert plan.not_found == []
    assert plan.to_do == ["e2e/go/kueue/go.sum: run `go mod tidy` in e2e/go/kueue (needs the Go module proxy)"]
    assert plan.review == [f"docs/notes.md:1: Kueue v{OLD_KUEUE} requeues a deactivated Workload at the head."]
    text = upstream_bump.report(plan)
    assert "lines that still name the old release (read each):" in text and "docs/notes.md:1:" in text


def test_a_pin_site_that_moved_is_listed_not_guessed(checkout: Path) -> None:
    go_mod = checkout / "e2e/go/kueue/go.mod"
    go_mod.write_text(go_mod.read_text().replace("\tsigs.k8s.io/kueue v", "\tsigs.k8s.io/kueue  v"))
    plan = upstream_bump.plan_bump(
        {"kueue": NEW_KUEUE},
        commits={"kueue": NEW_COMMIT},
        root=checkout,
        download=fake_download(),
        resolve_commit=no_lookup,
        tracked=[],
    )
    assert plan.not_found == [
        f"e2e/go/kueue/go.mod: `sigs.k8s.io/kueue v{OLD_KUEUE}` not found; update its kueue pin by hand"
    ]
    assert "e2e/go/kueue/go.mod" not in plan.files


def test_a_failed_download_writes_nothing(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock_before = (checkout / "upstream.lock.json").read_text()

    def offline(url: str) -> bytes:
        raise urllib.error.URLError("no route to host")

    with pytest.raises(OSError):
        upstream_bump.plan_bump(
            {"jobset": "0.13.0"}, root=checkout, download=offline, resolve_commit=lambda r, t: "3" * 40
        )
    assert (checkout / "upstream.lock.json").read_text() == lock_before


def test_the_command_line_dry_run_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    lock_before = upstream.LOCK_FILE.read_text()
    code = upstream_bump.main(
        ["--jobset", "0.13.0", "--jobset-commit", "4" * 40, "--dry-run"], download=fake_download(), resolve=no_lookup
    )
    assert code == 0
    assert upstream.LOCK_FILE.read_text() == lock_before
    out = capsys.readouterr().out
    assert out.startswith("(dry run) rewrote: ") and "e2e/go/jobset/go.sum: run `go mod tidy`" in out


def test_the_command_line_needs_a_release() -> None:
    with pytest.raises(SystemExit) as caught:
        upstream_bump.main([], download=fake_download(), resolve=no_lookup)
    assert caught.value.code == 2
