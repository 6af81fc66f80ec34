"""Stopping an executor signals its recorded supervisor only while that pid is still the supervisor
(compaction.ops.executor.recorded_process_alive): a pid is reused once its process has ended, and signalling a
reused one would stop an unrelated process."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil

from compaction.ops.executor import recorded_process_alive

def record(pid: int, started_at: dt.datetime) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, started_at=started_at)


def test_only_the_recorded_supervisor_counts_as_alive() -> None:
    # Taken here, not at import: under xdist a module is imported long before its tests run.
    now = dt.datetime.now(dt.timezone.utc)
    # A stand-in supervisor: a process whose command line names the executor, as `icecompact executor run` does.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "executor", "run"])
    try:
        # Until the child has exec'd, its command line is still this process's.
        deadline = time.monotonic() + 30
        while "executor" not in " ".join(psutil.Process(proc.pid).cmdline()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert recorded_process_alive(record(proc.pid, now))
        # The same pid recorded an hour before this process started: the pid was reused.
        assert not recorded_process_alive(record(proc.pid, now - dt.timedelta(hours=1)))
    finally:
        proc.kill()
        proc.wait()
    assert not recorded_process_alive(record(proc.pid, now))  # gone
    # A live process that is not an executor (this test's own) is never taken for one.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 30
        while "sleep(60)" not in " ".join(psutil.Process(other.pid).cmdline()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not recorded_process_alive(record(other.pid, now))
    finally:
        other.kill()
        other.wait()
