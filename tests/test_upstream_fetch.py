"""`make upstream`: the pinned reference data is fetched, verified by sha256 and installed all-or-nothing; tests
that lack it fail with instructions instead of skipping. The fetcher runs against a local HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import upstream_data
from tools import upstream

LAYOUT_PREFIXES = (
    "crds/kueue/",
    "crds/kueue-v0.15.8/",
    "crds/jobset/",
    "upstream/kueue-v0.19.2/",
    "upstream/jobset-v0.12.0/",
)


class _Mirror:
    """A raw.githubusercontent.com look-alike on 127.0.0.1 serving a directory; counts requests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        mirror = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def do_GET(self) -> None:
                mirror.requests.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def put(self, lock: upstream.Lock, entry: upstream.LockedFile, data: bytes) -> None:
        target = self.root / lock.url(entry, "").lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[_Mirror]:
    served = _Mirror(tmp_path / "served")
    served.thread.start()
    try:
        yield served
    finally:
        served.server.shutdown()
        served.server.server_close()


def small_lock(tmp_path: Path, contents: dict[str, bytes]) -> tuple[Path, upstream.Lock]:
    files = [
        {
            "path": f"upstream/jobset-v0.12.0/{name}",
            "source": "jobset",
            "upstream_path": name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
        }
        for name, data in contents.items()
    ]
    raw = {
        "sources": {"jobset": {"repo": "kubernetes-sigs/jobset", "tag": "v0.12.0", "commit": "f" * 40}},
        "files": files,
    }
    path = tmp_path / "test.lock.json"
    path.write_text(json.dumps(raw))
    return path, upstream.load_lock(path)


CONTENTS = {"charts/jobset/values.yaml": b"image: {}\n", "pkg/webhooks/jobset_webhook.go": b"package webhooks\n"}


def test_matching_files_are_installed_with_progress_and_not_fetched_twice(
    tmp_path: Path, mirror: _Mirror, capsys: pytest.CaptureFixture[str]
) -> None:
    lock_path, lock = small_lock(tmp_path, CONTENTS)
    for entry, data in zip(lock.files, CONTENTS.values(), strict=True):
        mirror.put(lock, entry, data)
    dest = tmp_path / "cache"
    assert upstream.main(["fetch", "--lock", str(lock_path), "--dest", str(dest), "--base-url", mirror.url]) == 0
    out = capsys.readouterr().out
    assert "[1/2] upstream/jobset-v0.12.0/charts/jobset/values.yaml: 10 bytes, sha256 ok" in out
    assert "2 installed, 0 already present" in out
    assert mirror.requests == [
        "/kubernetes-sigs/jobset/v0.12.0/charts/jobset/values.yaml",
        "/kubernetes-sigs/jobset/v0.12.0/pkg/webhooks/jobset_webhook.go",
    ]
    assert (dest / "upstream/jobset-v0.12.0/pkg/webhooks/jobset_webhook.go").read_bytes() == b"package webhooks\n"
    assert upstream.main(["verify", "--lock", str(lock_path), "--dir", str(dest)]) == 0
    # A second run finds everything verified and downloads nothing.
    assert upstream.main(["fetch", "--lock", str(lock_path), "--dest", str(dest), "--base-url", mirror.url]) == 0
    assert len(mirror.requests) == 2 and "all 2 upstream files present and verified" in capsys.readouterr().out


def test_a_digest_mismatch_installs_nothing(
    tmp_path: Path, mirror: _Mirror, capsys: pytest.CaptureFixture[str]
) -> None:
    lock_path, lock = small_lock(tmp_path, CONTENTS)
    good, bad = lock.files
    mirror.put(lock, good, CONTENTS[good.upstream_path])
    mirror.put(lock, bad, b"package evil\n")
    dest = tmp_path / "cache"
    assert upstream.main(["fetch", "--lock", str(lock_path), "--dest", str(dest), "--base-url", mirror.url]) == 1
    captured = capsys.readouterr()
    assert "REFUSED (sha256 mismatch)" in captured.out
    assert "nothing installed" in captured.err and f"the lock pins {bad.sha256}" in captured.err
    # Not even the file that matched: the run is all-or-nothing, and no staging directory is left behind.
    assert [p for p in dest.rglob("*")] == []


def test_a_missing_file_upstream_installs_nothing(tmp_path: Path, mirror: _Mirror) -> None:
    _, lock = small_lock(tmp_path, CONTENTS)
    mirror.put(lock, lock.files[0], CONTENTS[lock.files[0].upstream_path])
    dest = tmp_path / "cache"
    report = upstream.fetch(lock, dest, base_url=mirror.url, progress=lambda _: None)
    assert not report.ok and "404" in report.refused[0] and report.installed == []
    assert not any(p.is_file() for p in dest.rglob("*"))


def test_an_altered_local_copy_is_replaced(tmp_path: Path, mirror: _Mirror) -> None:
    _, lock = small_lock(tmp_path, CONTENTS)
    for entry, data in zip(lock.files, CONTENTS.values(), strict=True):
        mirror.put(lock, entry, data)
    dest = tmp_path / "cache"
    upstream.fetch(lock, dest, base_url=mirror.url, progress=lambda _: None)
    (dest / lock.files[0].path).write_bytes(b"edited\n")
    edited = hashlib.sha256(b"edited\n").hexdigest()
    assert upstream.verify(lock, dest) == [
        f"{dest / lock.files[0].path} has sha256 {edited}, the lock pins {lock.files[0].sha256}"
    ]
    report = upstream.fetch(lock, dest, base_url=mirror.url, progress=lambda _: None)
    assert report.installed == [lock.files[0].path] and upstream.verify(lock, dest) == []


def test_the_real_lock_fetches_completely_from_a_mirror_of_the_reference_data(tmp_path: Path, mirror: _Mirror) -> None:
    lock = upstream.load_lock()
    for entry in lock.files:
        mirror.put(lock, entry, upstream_data.reference_file(entry.path).read_bytes())
    dest = tmp_path / "cache"
    report = upstream.fetch(lock, dest, base_url=mirror.url, progress=lambda _: None)
    assert report.ok and len(report.installed) == len(lock.files)
    assert upstream.verify(lock, dest) == []


def test_the_lock_is_well_formed_and_keeps_the_shared_layout() -> None:
    lock = upstream.load_lock()
    assert {s.tag for s in lock.sources.values()} == {"v0.19.2", "v0.12.0", "v0.15.8"}
    assert all(re.fullmatch(r"[0-9a-f]{40}", s.commit) for s in lock.sources.values())
    paths = [f.path for f in lock.files]
    assert len(paths) == len(set(paths))
    for entry in lock.files:
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256) and entry.size > 0
        assert entry.path.startswith(LAYOUT_PREFIXES), entry.path
        assert lock.url(entry).startswith(f"https://raw.githubusercontent.com/{lock.sources[entry.source].repo}/")
    # Every upstream/<project>-<tag>/ directory names the tag its files are fetched from.
    for entry in lock.files:
        if entry.path.startswith("upstream/"):
            assert entry.path.split("/")[1].endswith(lock.sources[entry.source].tag), entry.path


def test_missing_data_fails_with_instructions_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(upstream.ENV_VAR, str(tmp_path / "empty"))
    with pytest.raises(upstream_data.UpstreamDataError) as info:
        upstream_data.reference_files(upstream_data.JOBSET_CRDS)
    message = str(info.value)
    assert "is missing" in message and "make upstream" in message and upstream.ENV_VAR in message


def test_altered_data_fails_and_unlocked_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "data"
    crd = upstream_data.reference_file("crds/jobset/jobset.x-k8s.io_jobsets.yaml")
    (root / "crds/jobset").mkdir(parents=True)
    shutil.copy(crd, root / "crds/jobset/jobset.x-k8s.io_jobsets.yaml")
    monkeypatch.setenv(upstream.ENV_VAR, str(root))
    assert upstream_data.reference_files(upstream_data.JOBSET_CRDS) == [
        root / "crds/jobset/jobset.x-k8s.io_jobsets.yaml"
    ]
    with (root / "crds/jobset/jobset.x-k8s.io_jobsets.yaml").open("a") as handle:
        handle.write("# edited\n")
    upstream_data._verified.cache_clear()
    with pytest.raises(upstream_data.UpstreamDataError, match="the lock pins"):
        upstream_data.reference_files(upstream_data.JOBSET_CRDS)
    upstream_data._verified.cache_clear()
    with pytest.raises(KeyError, match=r"not in upstream\.lock\.json"):
        upstream_data.reference_file("crds/jobset/extra.yaml")


def test_relative_override_resolves_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(upstream.ENV_VAR, "../shared")
    assert upstream.data_dir() == (tmp_path.parent / "shared").resolve()
    monkeypatch.delenv(upstream.ENV_VAR)
    assert upstream.data_dir() == upstream.PROJECT_ROOT / ".cache" / "upstream"
