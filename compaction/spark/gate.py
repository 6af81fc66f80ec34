"""Each commit of ours passes the job's commit gate (compaction.core.yielding; the ledger's in
compaction.ledger.writers): set for a job group with :func:`gated`, entered at every commit site with
:func:`commit_window`. Without a gate (no ledger: a one-shot job, a test) commits go ahead as before.

Undoing one of our own commits (a failed post-commit check) is not gated: it must not wait behind a writer."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator

from compaction.core.plan import CompactionPlan
from compaction.core.policy import CompactionPolicy
from compaction.core.yielding import CommitGate

_BOUND: ContextVar[tuple[CommitGate, str, CompactionPolicy] | None] = ContextVar("icecompact_commit_gate",
                                                                                 default=None)


@contextlib.contextmanager
def gated(gate: CommitGate | None, plan: CompactionPlan) -> Iterator[None]:
    """Commits of ``plan``'s table made in this context (this thread) pass ``gate``."""
    token = _BOUND.set((gate, plan.table.dotted, plan.policy) if gate is not None else None)
    try:
        yield
    finally:
        _BOUND.reset(token)


@contextlib.contextmanager
def commit_window(what: str) -> Iterator[None]:
    """Around one commit of ours (``what`` names it in the intent and in progress lines). Raises
    :class:`~compaction.core.errors.YieldedToWritersError` when the gate gave up: nothing is committed."""
    bound = _BOUND.get()
    if bound is None:
        yield
        return
    gate, table_ref, policy = bound
    with gate.commit_window(table_ref, policy, what):
        yield
