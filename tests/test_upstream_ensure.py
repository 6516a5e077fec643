"""`make test` on a fresh clone gets the reference data itself, or says in one line what to run."""

from __future__ import annotations

from pathlib import Path

from tests.test_upstream_fetch import CONTENTS, _Mirror, mirror, small_lock
from tools import upstream

__all__ = ["mirror"]  # the fixture, imported so pytest finds it here


def test_missing_data_is_fetched_into_the_cache_once(tmp_path: Path, mirror: _Mirror) -> None:
    _, lock = small_lock(tmp_path, CONTENTS)
    for entry, data in zip(lock.files, CONTENTS.values(), strict=True):
        mirror.put(lock, entry, data)
    root = tmp_path / "cache"

    def fetcher(lk: upstream.Lock, dest: Path) -> upstream.FetchReport:
        return upstream.fetch(lk, dest, base_url=mirror.url, progress=lambda _: None)

    assert upstream.ensure(lock, configured=False, root=root, fetcher=fetcher) == (
        0,
        f"upstream reference data: fetched 2 files into {root} (once)",
    )
    assert upstream.ensure(lock, configured=False, root=root, fetcher=fetcher) == (
        0,
        f"upstream reference data: 2 files verified in {root}",
    )
    assert len(mirror.requests) == 2


def test_offline_ends_in_one_line_naming_the_command(tmp_path: Path, mirror: _Mirror) -> None:
    _, lock = small_lock(tmp_path, CONTENTS)  # the mirror serves nothing: every download is a 404
    root = tmp_path / "cache"

    def fetcher(lk: upstream.Lock, dest: Path) -> upstream.FetchReport:
        return upstream.fetch(lk, dest, base_url=mirror.url, progress=lambda _: None)

    code, line = upstream.ensure(lock, configured=False, root=root, fetcher=fetcher)
    assert code == 1 and "\n" not in line
    assert line.startswith("the tests need the pinned Kueue/JobSet reference data and it could not be downloaded (")
    assert line.endswith("run `make upstream` when online, or set GKE_TPU_UPSTREAM_DIR to an offline copy")


def test_a_configured_directory_is_checked_never_written(tmp_path: Path) -> None:
    _, lock = small_lock(tmp_path, CONTENTS)
    root = tmp_path / "mirror-copy"
    calls: list[Path] = []

    def fetcher(lk: upstream.Lock, dest: Path) -> upstream.FetchReport:
        calls.append(dest)
        return upstream.FetchReport([], [], [])

    code, line = upstream.ensure(lock, configured=True, root=root, fetcher=fetcher)
    assert code == 1 and calls == [] and not root.exists()
    assert line.startswith(f"GKE_TPU_UPSTREAM_DIR={root} is not usable (2 of 2 locked files missing or altered")
