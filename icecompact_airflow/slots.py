"""Job slots: at most N Spark jobs at once, with advisory file locks (``fcntl.flock``), no clock in the logic.

Airflow cannot map a pool's ``pool_slots`` or a concurrency limit from a run's params, so the compact tasks take a
slot before running spark-submit:

* a single-writer (SQLite) catalog has one slot, keyed by its database file: its jobs run one at a time, across
  DAG runs too (SQLite cannot take concurrent commits);
* other catalogs get ``max_parallel_jobs`` slots per DAG run.

Locks live under ``$ICECOMPACT_HOME/locks`` and are released by the kernel when the holder exits (even on kill -9).
They bound jobs on one host (LocalExecutor, ``airflow dags test``); across worker hosts the ``icecompact_spark``
pool is the bound.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from pathlib import Path
from typing import Callable, Iterator


def lock_dir(root: Path, key: str) -> Path:
    """A folder for the slots of ``key`` (any text: a database path, a DAG run id)."""
    path = root / hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def job_slot(directory: Path, slots: int, *, wait: Callable[[], None] | None = None) -> Iterator[int]:
    """Hold one of ``slots`` slots in ``directory`` while the block runs; yields the slot index.

    Tries every slot without blocking; when all are taken, calls ``wait`` (default: sleep 1 s) and tries again.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, not {slots}")
    pause = wait or (lambda: threading.Event().wait(1.0))
    while True:
        for index in range(slots):
            fd = os.open(directory / f"slot-{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield index
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        pause()
