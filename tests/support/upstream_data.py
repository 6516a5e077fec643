"""The pinned upstream reference data for tests: every read goes through the lock and is digest-checked.

Missing or altered data is an error (never a skip) whose message says how to get it: ``make upstream``, or
``$GKE_TPU_UPSTREAM_DIR`` pointing at a directory of the same layout.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tools import upstream

KUEUE = "upstream/kueue-v0.19.2"
JOBSET = "upstream/jobset-v0.12.0"
KUEUE_CHART = f"{KUEUE}/charts/kueue"
JOBSET_CHART = f"{JOBSET}/charts/jobset"
KUEUE_CRDS = "crds/kueue"
KUEUE_V015_CRDS = "crds/kueue-v0.15.8"
JOBSET_CRDS = "crds/jobset"


class UpstreamDataError(RuntimeError):
    """The reference data the tests need is missing or does not match upstream.lock.json."""


@functools.cache
def lock() -> upstream.Lock:
    return upstream.load_lock()


@functools.cache
def _verified(path: str, root: Path) -> Path:
    problem = upstream.problem_with(lock().entry(path), root)
    if problem is not None:
        raise UpstreamDataError(f"upstream reference data unusable: {problem}. To fix: {upstream.how_to_get()}.")
    return root / path


def reference_file(path: str) -> Path:
    """The verified local copy of one locked file (``path`` relative to the data root, e.g. ``crds/jobset/...``)."""
    return _verified(path, upstream.data_dir())


def reference_files(directory: str) -> list[Path]:
    """Every locked file under ``directory``, verified; only these (never other files there) are read."""
    entries = lock().under(directory)
    if not entries:
        raise UpstreamDataError(f"no file under {directory!r} is in {upstream.LOCK_FILE.name}")
    return [reference_file(e.path) for e in entries]


def reference_text(path: str) -> str:
    return reference_file(path).read_text(encoding="utf-8")
