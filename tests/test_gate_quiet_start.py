"""Where the commit gate waits for a DML writer that does not announce itself (compaction.spark.gate): a job starts
only when its first commit is expected in the quiet part of the table's DML cycle, so that the DML it would collide
with commits before the job reads the table; the time from that start to the first commit is measured for the next
job. The history is served by a small stand-in for Iceberg's Java ``Table`` (the methods the gate reads: snapshots,
summaries, refresh); reading a real table's history through py4j is tests/test_dml_history_reader.py."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from compaction.core.policy import CompactionPolicy
from compaction.spark import gate

DML = {"added-position-delete-files": "1"}


class _Snapshot:
    def __init__(self, sid: int, at: float, parent: int | None) -> None:
        self.sid, self.at, self.parent = sid, at, parent

    def snapshotId(self) -> int:  # noqa: N802 - the Java API's names
        return self.sid

    def operation(self) -> str:
        return "overwrite"

    def summary(self) -> dict[str, str]:
        return dict(DML)

    def parentId(self) -> int | None:  # noqa: N802
        return self.parent

    def timestampMillis(self) -> int:  # noqa: N802
        return int(self.at * 1000)


class _Table:
    """Iceberg's ``Table`` as far as the gate reads it; ``committed`` appear on the next ``refresh()``."""

    def __init__(self, dml_times: list[float]) -> None:
        self.snapshots: dict[int, Any] = {}
        self.current: int | None = None
        self.pending: list[float] = []
        self.refreshes = 0
        self.lock = threading.Lock()
        for at in dml_times:
            self._add(at)

    def _add(self, at: float) -> None:
        sid = len(self.snapshots) + 1
        self.snapshots[sid] = _Snapshot(sid, at, self.current)
        self.current = sid

    def commit_dml_on_next_refresh(self) -> None:
        with self.lock:
            self.pending.append(time.time())

    def refresh(self) -> None:
        with self.lock:
            self.refreshes += 1
            for _ in self.pending:
                self._add(time.time())  # committed just now, as the gate's next look sees it
            self.pending.clear()

    def currentSnapshot(self) -> Any:  # noqa: N802
        return None if self.current is None else self.snapshots[self.current]

    def snapshot(self, sid: int) -> Any:
        return self.snapshots.get(sid)


def _plan(name: str) -> Any:
    """What ``gate.gated`` reads of a plan: its table and policy."""
    return SimpleNamespace(table=SimpleNamespace(dotted=f"db.{name}"),
                           policy=CompactionPolicy(yield_dml_duration_seconds=5))


def test_a_job_starts_after_the_dml_it_would_collide_with_and_its_first_commit_is_measured() -> None:
    now = time.time()
    # A DML commits every 20 s and runs ~5 s: the last one 12 s ago, the next expected to start ~3 s from now. A job
    # whose first commit comes ~10 s after its start would land while that DML runs: it waits for its commit.
    table = _Table([now - 72, now - 52, now - 32, now - 12])
    lines: list[str] = []
    plan = _plan("quiet_start")
    gate._FIRST_COMMIT_S.pop(plan.table.dotted, None)
    started = threading.Event()

    def job() -> None:
        with gate.gated(None, plan, lines.append):
            gate.await_quiet_start(table, "compaction of db.quiet_start")
            started.set()
            with gate.commit_window("MINOR", table=table):
                pass

    thread = threading.Thread(target=job)
    thread.start()
    deadline = time.monotonic() + 30
    while not lines and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lines and "waiting for its commit" in lines[0], lines
    assert not started.is_set(), "the job started while the DML it would collide with was running"
    table.commit_dml_on_next_refresh()
    thread.join(timeout=30)
    assert started.is_set() and not thread.is_alive()
    assert table.refreshes >= 1  # the job reads the table as the DML left it
    assert "before the next is expected to start" in lines[-1], lines
    assert plan.table.dotted in gate._FIRST_COMMIT_S  # the next job's start is timed by this one's first commit


def test_without_a_dml_cadence_a_job_starts_at_once() -> None:
    table = _Table([time.time() - 5])  # one DML commit: no cadence
    plan = _plan("no_cadence")
    lines: list[str] = []
    with gate.gated(None, plan, lines.append):
        gate.await_quiet_start(table, "compaction of db.no_cadence")
    assert lines == [] and table.refreshes == 0
