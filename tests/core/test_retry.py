"""The retry policy as a table: every failure kind, with and without unchecked commits of ours on the table, leads to
the action Iceberg's rules about that exception allow (compaction.core.retry)."""

from __future__ import annotations

import pytest

from compaction.core.results import CONFLICT, FAILED, UNSUPPORTED
from compaction.core.retry import (
    CATALOG_OUTAGE_WAIT_S,
    CATALOG_POLL,
    CATALOG_RETRY_INTERVAL_S,
    CONFLICT_BACKOFF,
    RETRY_TABLE,
    FailureKind,
    RetryAction,
    RetryLimit,
    retry_rule,
)

#: Actions that start another attempt or commit again (a retry).
RETRYING = {RetryAction.REPLAN_AND_RETRY, RetryAction.RETRY_SAME}


def test_the_table_covers_every_kind_with_and_without_commits() -> None:
    assert set(RETRY_TABLE) == {(kind, committed) for kind in FailureKind for committed in (False, True)}


@pytest.mark.parametrize("kind", [FailureKind.COMMIT_CONFLICT, FailureKind.COMMIT_FAILED])
def test_a_conflict_that_committed_nothing_is_planned_again_with_backoff_until_the_retries_are_spent(
        kind: FailureKind) -> None:
    # ValidationException aborts the operation, CommitFailedException is a CleanableFailure: nothing landed, but the
    # files planned from may have changed, so the retry plans from the current snapshot.
    rule = retry_rule(kind, committed=False)
    assert rule.action is RetryAction.REPLAN_AND_RETRY
    assert rule.limit is RetryLimit.MAX_RETRIES and rule.uses_a_retry
    assert rule.backoff is CONFLICT_BACKOFF
    assert rule.then is RetryAction.GIVE_UP and rule.status == CONFLICT


def test_conflict_backoff_doubles_up_to_its_cap() -> None:
    assert [CONFLICT_BACKOFF.delay_s(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_an_unknown_commit_state_is_never_retried_nor_cleaned_up_but_checked_against_the_table() -> None:
    # Iceberg, CommitStateUnknownException: "Please check to see whether or not your commit was successful before
    # retrying this commit. Retrying an already successful operation will result in duplicate records ...";
    # "At this time no files will be deleted". Nothing of ours known on the table: stop; what landed is decided by
    # reading the table later (the post-hoc check).
    alone = retry_rule(FailureKind.COMMIT_STATE_UNKNOWN, committed=False)
    assert alone.action is RetryAction.STOP_CHECK_POST_HOC and alone.status == FAILED
    assert alone.action not in RETRYING and alone.limit is RetryLimit.NONE and alone.backoff is None
    # After commits of ours: only the compare-and-swap rollback, which reads the current snapshot first and undoes
    # nothing when another commit (the unknown one, if it landed) is on top (needs_attention); it deletes no file.
    after = retry_rule(FailureKind.COMMIT_STATE_UNKNOWN, committed=True)
    assert after.action is RetryAction.ROLL_BACK and after.action not in RETRYING


def test_a_catalog_outage_is_waited_out_without_using_a_retry_then_fails() -> None:
    rule = retry_rule(FailureKind.CATALOG_UNAVAILABLE, committed=False)
    assert rule.action is RetryAction.RETRY_SAME and not rule.uses_a_retry
    assert rule.limit is RetryLimit.CATALOG_OUTAGE and rule.backoff is CATALOG_POLL
    assert rule.then is RetryAction.GIVE_UP and rule.status == FAILED
    assert CATALOG_POLL.delay_s(1) == CATALOG_POLL.delay_s(9) == CATALOG_RETRY_INTERVAL_S < CATALOG_OUTAGE_WAIT_S


def test_an_outage_after_our_commit_waits_to_check_it_then_rolls_back() -> None:
    # The check only reads: it can wait for the catalog; undoing cannot happen before it answers either.
    rule = retry_rule(FailureKind.CATALOG_UNAVAILABLE, committed=True)
    assert rule.action is RetryAction.VALIDATE_WHEN_AVAILABLE
    assert rule.limit is RetryLimit.CATALOG_OUTAGE and rule.backoff is CATALOG_POLL
    assert rule.then is RetryAction.ROLL_BACK


@pytest.mark.parametrize("kind", [k for k in FailureKind if k is not FailureKind.CATALOG_UNAVAILABLE])
def test_any_other_failure_after_our_commit_rolls_it_back_and_never_retries(kind: FailureKind) -> None:
    # A commit that is on main and unchecked is never kept silently, and nothing is committed on top of it.
    assert retry_rule(kind, committed=True).action is RetryAction.ROLL_BACK


def test_a_failed_check_rolls_back() -> None:
    assert retry_rule(FailureKind.VALIDATION_MISMATCH, committed=False).action is RetryAction.ROLL_BACK
    assert retry_rule(FailureKind.VALIDATION_MISMATCH, committed=True).action is RetryAction.ROLL_BACK


def test_unsupported_tables_are_skipped_and_other_failures_give_up() -> None:
    unsupported = retry_rule(FailureKind.UNSUPPORTED_TABLE, committed=False)
    assert unsupported.action is RetryAction.SKIP_UNSUPPORTED and unsupported.status == UNSUPPORTED
    for kind in (FailureKind.STORAGE_UNAVAILABLE, FailureKind.OTHER):
        rule = retry_rule(kind, committed=False)
        assert rule.action is RetryAction.GIVE_UP and rule.status == FAILED and rule.limit is RetryLimit.NONE


def test_only_the_retrying_actions_have_a_limit_and_a_backoff() -> None:
    for rule in RETRY_TABLE.values():
        waits = rule.action in RETRYING or rule.action is RetryAction.VALIDATE_WHEN_AVAILABLE
        assert (rule.limit is not RetryLimit.NONE) == waits and (rule.backoff is not None) == waits
        assert (rule.then is not None) == waits
        assert not (rule.action in RETRYING and rule.then is RetryAction.ROLL_BACK)  # nothing of ours to undo
