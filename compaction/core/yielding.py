"""When a compaction commit yields to the table's announced writers (docs/operations.md "Writers and compaction").

A merge-on-read DML (Spark DELETE / UPDATE / MERGE) fails when a compaction commits between its start and its own
commit: Iceberg validates that the data files its position deletes name still exist (a MAJOR removed them) and that
no delete file was added since it started in the rows it touched (a MINOR's position deletes / DVs are such files).
A writer that announces itself with a write lease is never failed by us: every compaction commit first records a
*commit intent*, then reads the table's live leases, and commits only when there is none; a writer records its lease
first, then waits until no intent is live. Whichever of the two records first, the other sees it (each reads after
its own write is committed), so our commit never lands while an announced writer's DML is between its start and
its commit.

This module is the pure decision: given the leases read, how long the commit has waited and the policy, commit,
wait, commit anyway or give up. The ledger-backed gate that loops on it lives in ``compaction.ledger.writers``.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass
from typing import ContextManager, Protocol, Sequence

from compaction.core.policy import CompactionPolicy

__all__ = ["CommitGate", "GateAction", "GateDecision", "LeaseView", "POLL_S_DEFAULT", "decide_commit"]

#: How often a waiting commit reads the leases again (a released lease is seen within this).
POLL_S_DEFAULT = 1.0


class GateAction(str, enum.Enum):
    COMMIT = "commit"  # no live lease: commit now
    WAIT = "wait"  # a writer holds a lease: read again in ``retry_in_s``
    COMMIT_ANYWAY = "commit_anyway"  # waited ``yield.max-wait``, ``yield.on-timeout=commit``
    GIVE_UP = "give_up"  # waited ``yield.max-wait``, ``yield.on-timeout=skip``


@dataclass(frozen=True)
class LeaseView:
    """A writer's lease as the gate sees it."""

    holder: str
    expires_at: _dt.datetime


@dataclass(frozen=True)
class GateDecision:
    action: GateAction
    reason: str
    retry_in_s: float = 0.0

    @property
    def commits(self) -> bool:
        return self.action in (GateAction.COMMIT, GateAction.COMMIT_ANYWAY)


def _holders(leases: Sequence[LeaseView]) -> str:
    names = sorted({lease.holder for lease in leases})
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def decide_commit(leases: Sequence[LeaseView], *, waited_s: float, policy: CompactionPolicy, now: _dt.datetime,
                  poll_s: float = POLL_S_DEFAULT) -> GateDecision:
    """``leases``: the table's leases read *after* our commit intent was recorded; ``waited_s``: how long this commit
    has waited so far. A lease expired at ``now`` no longer counts (its writer died or forgot to release it)."""
    live = [lease for lease in leases if lease.expires_at > now]
    if not live:
        return GateDecision(GateAction.COMMIT, "no writer holds a lease" if not waited_s else
                            f"the writers' leases ended after {waited_s:.0f} s")
    holders = _holders(live)
    max_wait = float(policy.yield_max_wait_seconds)
    if waited_s >= max_wait:
        if policy.yield_on_timeout == "commit":
            return GateDecision(GateAction.COMMIT_ANYWAY, f"committed after waiting {waited_s:.0f} s "
                                f"(compaction.yield.max-wait) for the write lease of {holders}")
        return GateDecision(GateAction.GIVE_UP, f"yielded to the write lease of {holders}: waited {waited_s:.0f} s "
                            "(compaction.yield.max-wait), nothing committed; the next run plans it again")
    until_expiry = min((lease.expires_at - now).total_seconds() for lease in live)
    retry_in = max(0.05, min(poll_s, max_wait - waited_s, until_expiry))
    return GateDecision(GateAction.WAIT, f"waiting for the write lease of {holders}", retry_in)


class CommitGate(Protocol):
    """What the Spark job calls around each commit of ours (``compaction.spark.gate``)."""

    def commit_window(self, table_ref: str, policy: CompactionPolicy, what: str) -> ContextManager[GateDecision]:
        """Enter when the commit may go ahead (raises :class:`~compaction.core.errors.YieldedToWritersError` when it
        gave up); the intent stays recorded until the block exits."""
        ...
