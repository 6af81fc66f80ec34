"""Child processes of tests and benchmarks (started with ``start_new_session=True``, so each leads its group)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any, Self


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the throwaway servers bind to it right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM the process group of ``proc``, then SIGKILL it if it is still running after ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class ServerProcess:
    """Lifecycle of a throwaway server the rig started (``process``, a session of its own) in its own folder
    (``root``, holding ``server.log``): its log's tail, and a stop that ends its process group and removes the
    folder. A context manager stops it."""

    root: Path
    process: subprocess.Popen[bytes] | None

    def log_tail(self, chars: int = 4000) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-chars:] if path.is_file() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_process_group(self.process, timeout=20)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def stop_ledger_executors(ledger: Any, timeout: float = 60, *, just_started: bool = False) -> None:
    """Stop every executor ``ledger`` knows on this host and never leave a process behind: SIGTERM them
    (``icecompact executor stop``), wait up to ``timeout`` s for them to deregister, then SIGKILL the process group
    of any left. ``just_started``: first wait (up to ``timeout`` s) until each has recorded its pid, which a
    detached supervisor does once it is up."""
    import time

    from compaction.ops.executor import recorded_process_alive, stop_executors

    deadline = time.monotonic() + timeout
    while just_started and any(r.pid is None for r in ledger.executors()) and time.monotonic() < deadline:
        time.sleep(0.2)
    stop_executors(ledger, progress=lambda _m: None)
    deadline = time.monotonic() + timeout
    while ledger.executors() and time.monotonic() < deadline:
        time.sleep(0.5)
    for record in ledger.executors():
        if record.pid and recorded_process_alive(record):
            try:
                os.killpg(record.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class SparkSubmitKiller:
    """A progress callback that SIGKILLs the process group of every spark-submit whose command line mentions
    ``table_hint`` as soon as a job prints ``marker`` (a fault-injection pause: ``ICECOMPACT_FAULT_INJECT``);
    ``killed`` lists the driver pids it killed."""

    def __init__(self, table_hint: str, marker: str = "fault injection: sleeping") -> None:
        self.table_hint, self.marker = table_hint, marker
        self.killed: list[int] = []

    def __call__(self, line: str) -> None:
        import os
        import signal

        import psutil

        if self.marker not in line:
            return
        for proc in psutil.process_iter(["cmdline"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if "org.apache.spark.deploy.SparkSubmit" in cmd and self.table_hint in cmd:
                self.killed.append(proc.pid)
                os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
