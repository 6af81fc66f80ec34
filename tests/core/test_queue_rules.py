from __future__ import annotations

import datetime as dt

import pytest

from compaction.core.queue import (
    ExpiredLease,
    RestartLimits,
    WorkStatus,
    executor_alive,
    lease_expired,
    on_expired_lease,
    restart_reason,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def test_expired_lease_requeues_only_work_without_progress_and_with_attempts_left() -> None:
    assert on_expired_lease(1, 2, has_progress=False) is ExpiredLease.REQUEUE
    assert on_expired_lease(2, 2, has_progress=False) is ExpiredLease.FAIL
    assert on_expired_lease(1, 2, has_progress=True) is ExpiredLease.FAIL  # never re-run committed work
    assert lease_expired(T0, T0) and lease_expired(T0, T0 + dt.timedelta(seconds=1))
    assert not lease_expired(T0 + dt.timedelta(seconds=1), T0) and not lease_expired(None, T0)


def test_restart_reason() -> None:
    limits = RestartLimits(max_groups=3, heap_limit_fraction=0.5)
    assert restart_reason(limits, 2, 100, 1000) is None
    assert "3 group(s)" in (restart_reason(limits, 3, 100, 1000) or "")
    assert "JVM heap" in (restart_reason(limits, 0, 2**30, 2**31 - 1) or "")
    assert restart_reason(RestartLimits(max_groups=0, heap_limit_fraction=None), 10**6, 10, 10) is None
    with pytest.raises(ValueError):
        RestartLimits(heap_limit_fraction=1.5)
    with pytest.raises(ValueError):
        RestartLimits(max_groups=-1)


def test_executor_alive_and_terminal_states() -> None:
    assert executor_alive(T0, T0 + dt.timedelta(seconds=10), 30)
    assert not executor_alive(T0, T0 + dt.timedelta(seconds=30), 30)
    assert not executor_alive(None, T0)
    assert {s for s in WorkStatus if s.is_terminal} == {WorkStatus.DONE, WorkStatus.FAILED, WorkStatus.CANCELLED}
