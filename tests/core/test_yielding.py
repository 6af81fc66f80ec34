"""The commit gate's decision (compaction.core.yielding): commit when no writer holds a live lease, wait while one
does, and after ``compaction.yield.max-wait`` give up or commit anyway as the policy says."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.core.policy import CompactionPolicy
from compaction.core.yielding import GateAction, LeaseView, decide_commit

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.timezone.utc)
POLICY = CompactionPolicy(yield_max_wait_seconds=60)


def lease(holder: str, seconds_left: float) -> LeaseView:
    return LeaseView(holder, NOW + dt.timedelta(seconds=seconds_left))


def test_commits_when_no_writer_holds_a_live_lease() -> None:
    assert decide_commit([], waited_s=0, policy=POLICY, now=NOW).action is GateAction.COMMIT
    expired = [lease("etl", 0), lease("etl", -30)]
    decision = decide_commit(expired, waited_s=12, policy=POLICY, now=NOW)
    assert decision.action is GateAction.COMMIT and decision.commits and "12 s" in decision.reason


def test_waits_while_a_lease_is_live_never_past_its_expiry_or_the_bound() -> None:
    decision = decide_commit([lease("merge-job", 300), lease("delete-job", 0.4)], waited_s=0, policy=POLICY, now=NOW)
    assert decision.action is GateAction.WAIT and not decision.commits
    assert "delete-job" in decision.reason and "merge-job" in decision.reason
    assert decision.retry_in_s == 0.4  # the earliest live expiry comes before the next poll
    assert decide_commit([lease("w", 300)], waited_s=59.7, policy=POLICY, now=NOW).retry_in_s == pytest.approx(0.3)
    assert decide_commit([lease("w", 300)], waited_s=0, policy=POLICY, now=NOW, poll_s=2).retry_in_s == 2


@pytest.mark.parametrize("on_timeout, action", [("skip", GateAction.GIVE_UP), ("commit", GateAction.COMMIT_ANYWAY)])
def test_after_the_bound_the_policy_decides(on_timeout: str, action: GateAction) -> None:
    policy = CompactionPolicy.resolve({"compaction.yield.max-wait": "1m", "compaction.yield.on-timeout": on_timeout})
    decision = decide_commit([lease("w", 300)], waited_s=60, policy=policy, now=NOW)
    assert decision.action is action and "w" in decision.reason and "60 s" in decision.reason
    assert decision.commits is (action is GateAction.COMMIT_ANYWAY)


def test_a_zero_bound_never_waits() -> None:
    policy = CompactionPolicy(yield_max_wait_seconds=0)
    assert decide_commit([lease("w", 300)], waited_s=0, policy=policy, now=NOW).action is GateAction.GIVE_UP


def test_a_bad_on_timeout_value_is_a_config_error() -> None:
    from compaction.core.errors import ConfigError

    with pytest.raises(ConfigError, match="yield.on-timeout"):
        CompactionPolicy.resolve({"compaction.yield.on-timeout": "maybe"})
