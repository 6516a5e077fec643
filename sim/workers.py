"""Worker processes that stop when the simulator stops.

A `ProcessPoolExecutor` worker blocks on its task queue, and it holds a copy of that pipe, so it never sees the
parent go: a bench or sweep stopped with SIGTERM or SIGKILL left its workers computing (and holding the 2 cores)
until their task ended, then waiting forever. Each worker here watches its parent and exits as soon as the parent
is gone, whatever signal stopped it.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PARENT_CHECK_INTERVAL_S = 0.5


def exit_with_parent(parent: int, interval: float = PARENT_CHECK_INTERVAL_S) -> None:
    """Worker initializer: a daemon thread that ends the process once ``parent`` is no longer its parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)  # no cleanup: the results have nowhere to go

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers exit when this process does."""
    return ProcessPoolExecutor(max_workers=workers, initializer=exit_with_parent, initargs=(os.getpid(),))
