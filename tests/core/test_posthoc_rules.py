"""Which of our snapshots the next plan checks post hoc (compaction.core.posthoc): pure rules."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.core.posthoc import SKIP, VALIDATE, OwnSnapshot, PlanRun, decide, to_validate

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)


def snap(sid: int, plan: str = "p1", minutes_ago: int = 10) -> OwnSnapshot:
    return OwnSnapshot(sid, sid - 1, plan, NOW - dt.timedelta(minutes=minutes_ago))


def run(status: str, minutes_ago: int = 30, level: str | None = "count") -> PlanRun:
    return PlanRun(f"r-{status}", status, NOW - dt.timedelta(minutes=minutes_ago), level)


@pytest.mark.parametrize("runs,checked,action,why", [
    ([run("failed")], {}, VALIDATE, "no check recorded; its run ended failed"),
    ([run("partial")], {}, VALIDATE, "no check recorded; its run ended partial"),
    ([run("failed")], {5: "passed"}, SKIP, "already checked (passed)"),
    ([run("failed")], {5: "rolled_back"}, SKIP, "already checked (rolled_back)"),
    ([], {}, SKIP, "plan p1 is not in this ledger"),
    ([run("failed"), run("succeeded")], {}, SKIP, "its run succeeded: every commit it made was checked"),
    ([run("running", minutes_ago=5)], {}, SKIP, "its run is still running (its job may be checking it)"),
    ([run("running", minutes_ago=120)], {}, VALIDATE, "no check recorded; its run ended running"),
    ([run("failed", level="none")], {}, SKIP, "its run was made at validation none"),
    ([run("failed", level=None)], {}, VALIDATE, "no check recorded; its run ended failed"),
])
def test_decide(runs: list[PlanRun], checked: dict[int, str], action: str, why: str) -> None:
    (decision,) = decide([snap(5)], checked, {"p1": runs} if runs else {}, NOW)
    assert (decision.action, decision.reason) == (action, why)


def test_to_validate_is_oldest_first_and_needs_an_aware_now() -> None:
    own = [snap(9, minutes_ago=1), snap(7, minutes_ago=3), snap(8, plan="p2", minutes_ago=2)]
    decisions = decide(own, {}, {"p1": [run("failed")], "p2": [run("succeeded")]}, NOW)
    assert [s.snapshot_id for s in to_validate(decisions)] == [7, 9]
    with pytest.raises(ValueError):
        decide(own, {}, {}, NOW.replace(tzinfo=None))
