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
