"""Stopping the simulator's parent stops its workers, whatever signal stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# A parent that starts two workers on tasks that would run for a minute, prints their pids, and waits.
PARENT = """
import os, sys, time
from sim.workers import worker_pool

def pid_then_sleep(_):
    time.sleep(60)

def pid(_):
    return os.getpid()

pool = worker_pool(2)
pids = set()
while len(pids) < 2:
    pids |= set(pool.map(pid, range(8)))
futures = [pool.submit(pid_then_sleep, i) for i in range(2)]
print(" ".join(map(str, sorted(pids))), flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for this purpose (it was reparented and awaits reaping).
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_workers_exit_when_the_parent_is_stopped(sig: signal.Signals) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(alive(p) for p in workers)
        parent.send_signal(sig)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 20
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in workers if alive(p)], "workers outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_bench_and_fleet_run_their_workers_in_that_pool() -> None:
    import inspect

    from sim import bench, fleet_bench

    for module in (bench, fleet_bench):
        source = inspect.getsource(module)
        assert "worker_pool(" in source and "ProcessPoolExecutor(" not in source, module.__name__
