"""Child processes of tests and benchmarks (started with ``start_new_session=True``, so each leads its group)."""

from __future__ import annotations

import os
import signal
import subprocess


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
