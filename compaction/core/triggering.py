"""Pure rules of compaction triggered by table health: when a watcher looks at a table again, and when a
table's health fires a compaction. Fed what the watcher read (metadata pointer, the auto decisions, the ledger's
runs in flight) and a ``now``; no I/O.

* A table is evaluated when its metadata pointer moved (a commit) or, while it still needs work, when the rate
  limit allows a new event: a run that failed or was skipped is retried without waiting for the next commit.
* It fires when its ``auto`` plan has partitions to compact, no compaction run of it is waiting to start (being
  planned, or queued in the ledger: that run will pick up whatever it can), and ``min_interval_s`` passed since it
  last fired (a per-table rate limit: a table under a fast writer is not compacted after every commit). A run that
  is *running* does not hold the next one back: the next is planned and queued while it works, and the queue starts
  it as soon as the running one ends (one item of a table runs at a time), so that the executor does not stand idle
  for the watcher's poll, the event, Airflow starting a task and the plan between two runs of a busy table. It is
  re-evaluated partition by partition when it starts, as every plan older than the table's current snapshot.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

POLL_SECONDS_DEFAULT = 2.0
MIN_INTERVAL_SECONDS_DEFAULT = 15.0


@dataclass(frozen=True)
class WatchedTable:
    """What the watcher remembers of one table between polls."""

    metadata_location: str | None
    needs_work: bool = False
    last_fired_at: _dt.datetime | None = None


def _rate_limited(last_fired_at: _dt.datetime | None, now: _dt.datetime, min_interval_s: float) -> bool:
    return last_fired_at is not None and (now - last_fired_at).total_seconds() < min_interval_s


def should_evaluate(previous: WatchedTable | None, metadata_location: str | None, now: _dt.datetime,
                    min_interval_s: float = MIN_INTERVAL_SECONDS_DEFAULT) -> bool:
    if previous is None or previous.metadata_location != metadata_location:
        return True
    return previous.needs_work and not _rate_limited(previous.last_fired_at, now, min_interval_s)


def fire_decision(partitions_to_compact: int, *, run_waiting: bool, last_fired_at: _dt.datetime | None,
                  now: _dt.datetime, min_interval_s: float = MIN_INTERVAL_SECONDS_DEFAULT) -> tuple[bool, str]:
    """(fire?, why) for a table whose auto plan has ``partitions_to_compact`` partitions with work; ``run_waiting``:
    a run of the table is being planned or queued (not one that is running)."""
    if partitions_to_compact <= 0:
        return False, "healthy: every partition's decision is NONE"
    if run_waiting:
        return False, "a compaction run of the table is waiting to start"
    if _rate_limited(last_fired_at, now, min_interval_s):
        assert last_fired_at is not None
        wait = min_interval_s - (now - last_fired_at).total_seconds()
        return False, f"rate limit: fired {min_interval_s - wait:.0f} s ago (at most every {min_interval_s:g} s)"
    return True, f"{partitions_to_compact} partition(s) to compact"
