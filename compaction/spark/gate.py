"""Each commit of ours passes the job's commit gate, set for a job group with :func:`gated` and entered at every
commit site with :func:`commit_window`:

1. writers that do not announce themselves: the commit is timed from the table's history to land between their DML
   commits (compaction.core.dml_history; ``compaction.yield.dml-history``);
2. writers holding a write lease: the ledger's gate waits for them (compaction.core.yielding, the ledger's in
   compaction.ledger.writers). Without a ledger (a one-shot job, a test) only the first applies.

Undoing one of our own commits (a failed post-commit check) is not gated: it must not wait behind a writer."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from compaction.core.dml_history import (
    DML_OPERATIONS,
    RECENT_DML_COMMITS,
    SUMMARY_KEYS,
    SnapshotView,
    decide_dml_window,
    decide_work_start,
    dml_cadence,
    is_validating_dml,
)
from compaction.core.plan import CompactionPlan
from compaction.core.policy import CompactionPolicy
from compaction.core.retry import CATALOG_OUTAGE_WAIT_S, CATALOG_RETRY_INTERVAL_S
from compaction.core.yielding import CommitGate, GateAction
from compaction.spark.validation import classify_java_error

#: How far back the history is read for the DML cadence (snapshots; the walk also stops at enough DML commits).
HISTORY_SNAPSHOTS_MAX = 1000
#: How long a commit of ours takes from the window's decision to landing (Iceberg's commit: manifests written,
#: validation, retries against concurrent commits), before one has been measured on the table ...
LANDING_DEFAULT_S = 3.0
#: ... and how many recent landings (and rewrites' work, see :func:`wait_before_work`) the estimate is taken from.
LANDING_SAMPLES = 8
#: The kinds of rewrite whose work is timed apart (a fragment merge takes a second where a MAJOR takes several):
#: a full MAJOR, and the file rewrite of a selective MINOR / MAJOR.
REWRITE_KINDS = ("major", "minor file rewrite", "major file rewrite")
#: Longer than the lease gate's ledger round trips: it waited for a writer.
LEASE_GATE_ROUND_TRIP_S = 2.0


def rewrite_kind(selective: str | None) -> str:
    """The :data:`REWRITE_KINDS` entry of a full MAJOR (None) or of a selective task's file rewrite (its kind)."""
    return "major" if selective is None else f"{selective} file rewrite"


@dataclass
class _Bound:
    gate: CommitGate | None
    table_ref: str
    policy: CompactionPolicy
    progress: Callable[[str], None] | None


_BOUND: ContextVar[_Bound | None] = ContextVar("icecompact_commit_gate", default=None)
#: The rewrite whose work :func:`wait_before_work` let start in this context, and when: its commit window records
#: how long the work took.
_WORK_STARTED: ContextVar[tuple[str, float] | None] = ContextVar("icecompact_work_started", default=None)


@contextlib.contextmanager
def gated(gate: CommitGate | None, plan: CompactionPlan,
          progress: Callable[[str], None] | None = None) -> Iterator[None]:
    """Commits of ``plan``'s table made in this context (this thread) pass ``gate`` (``None``: no ledger, only the
    table's history is consulted)."""
    token = _BOUND.set(_Bound(gate, plan.table.dotted, plan.policy, progress))
    try:
        yield
    finally:
        _BOUND.reset(token)


@dataclass
class _History:
    """The snapshots read so far, per table: a snapshot never changes, so each is read through py4j once."""

    views: dict[int, tuple[SnapshotView, int | None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    landings: list[float] = field(default_factory=list)  # seconds from a window's decision to the commit, recent
    works: dict[str, list[float]] = field(default_factory=dict)  # seconds rewrites took before their commit, recent

    def landing_s(self) -> float:
        """How long the next commit is expected to take to land: the longest of the recent ones."""
        with self.lock:
            return max(self.landings) if self.landings else LANDING_DEFAULT_S

    def landed(self, seconds: float) -> None:
        with self.lock:
            self.landings = [*self.landings, seconds][-LANDING_SAMPLES:]

    def work_s(self, kind: str) -> float | None:
        """How long the next rewrite of ``kind`` is expected to take before its commit: the median of the recent
        ones (None before the first). Not the longest, as for landings: the commit window still times the commit
        itself, so a rewrite slower than expected costs what it cost without this estimate, while one expected too
        slow waits for a DML it would have finished before."""
        with self.lock:
            recent = self.works.get(kind)
            return statistics.median(recent) if recent else None

    def worked(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.works[kind] = [*self.works.get(kind, ()), seconds][-LANDING_SAMPLES:]

    def recent(self, table: Any, *, refresh: bool) -> list[SnapshotView]:
        if refresh:
            table.refresh()
        snapshot = table.currentSnapshot()
        sid = None if snapshot is None else int(snapshot.snapshotId())
        out: list[SnapshotView] = []
        dml = 0
        with self.lock:
            while sid is not None and len(out) < HISTORY_SNAPSHOTS_MAX and dml <= RECENT_DML_COMMITS:
                cached = self.views.get(sid)
                if cached is None:
                    snap = table.snapshot(sid)
                    if snap is None:  # expired
                        break
                    operation = str(snap.operation() or "")
                    values: dict[str, str] = {}
                    if operation in DML_OPERATIONS:  # the summary of other snapshots is never read
                        summary = snap.summary()
                        values = {k: str(v) for k in SUMMARY_KEYS if (v := summary.get(k)) is not None}
                    parent = snap.parentId()
                    cached = (SnapshotView(sid, int(snap.timestampMillis()) / 1000.0, operation, values),
                              None if parent is None else int(parent))
                    self.views[sid] = cached
                view, sid = cached
                out.append(view)
                dml += is_validating_dml(view)
            if len(self.views) > 2 * HISTORY_SNAPSHOTS_MAX:  # a resident executor runs for weeks
                walked = {v.snapshot_id for v in out}
                self.views = {k: v for k, v in self.views.items() if k in walked}
        return out


_HISTORIES: dict[str, _History] = {}


def _history_of(table_ref: str) -> _History:
    return _HISTORIES.setdefault(table_ref, _History())


def warm_history(table: Any) -> None:
    """Start reading ``table``'s recent history in a background thread, for the commit window of a commit about to
    be prepared (a rewrite, a conversion): each snapshot is read through py4j once, so the window then reads only
    what was committed meanwhile instead of walking the history right before the commit. Best effort."""
    bound = _BOUND.get()
    if bound is None or not bound.policy.yield_dml_history:
        return
    history = _history_of(bound.table_ref)

    def read() -> None:
        try:
            history.recent(table, refresh=False)
        except Exception:  # noqa: BLE001 - the window reads it again and handles the error
            pass

    threading.Thread(target=read, name="icecompact-history", daemon=True).start()


def _wait_for_dml_window(bound: _Bound, table: Any, what: str, history: _History,
                         work_s: float | None = None) -> bool:
    """Hold a commit until the history says no DML of another writer is likely in flight when it lands (in about
    as long as the table's recent commits of ours took). ``work_s``: hold the work before the commit instead, which
    is expected to take that long (:func:`wait_before_work`). Returns whether it waited (read the table again)."""
    commit_in_s = history.landing_s()
    started = time.monotonic()
    announced = False
    unreadable_since: float | None = None
    polls = 0
    while True:
        try:
            # The first look is at the table as the job last read it (no catalog round trip right before the
            # commit); a commit that waits reads the catalog again, to see the DML commit it waits for.
            snapshots = history.recent(table, refresh=polls > 0)
            polls += 1
            unreadable_since = None
        except Exception as e:  # noqa: BLE001
            # The catalog is down: the commit right after would fail with an unknown outcome, so wait for it as for
            # any catalog outage; past that, the timing is advisory and the commit meets the catalog itself.
            now = time.monotonic()
            if unreadable_since is None:
                unreadable_since = now
                if bound.progress is not None:
                    error = classify_java_error(e, "reading the history")
                    bound.progress(f"icecompact: {what}: the table's history could not be read, waiting for the "
                                   f"catalog (at most {CATALOG_OUTAGE_WAIT_S:.0f} s): {error}")
            if now - unreadable_since >= CATALOG_OUTAGE_WAIT_S:
                return True
            time.sleep(CATALOG_RETRY_INTERVAL_S)
            continue
        cadence, now, waited = dml_cadence(snapshots), time.time(), time.monotonic() - started
        decision = (decide_dml_window(cadence, now=now, commit_in_s=commit_in_s, waited_s=waited, policy=bound.policy)
                    if work_s is None else
                    decide_work_start(cadence, now=now, work_s=work_s, commit_in_s=commit_in_s, waited_s=waited,
                                      policy=bound.policy))
        if decision.commits:
            if (announced or decision.action is GateAction.COMMIT_ANYWAY) and bound.progress is not None:
                bound.progress(f"icecompact: {what}: {decision.reason}")
            return polls > 1
        if not announced and bound.progress is not None:
            bound.progress(f"icecompact: {what}: {decision.reason}")
            announced = True
        time.sleep(decision.retry_in_s)


def wait_before_work(kind: str, *, table: Any) -> bool:
    """Before the work of a rewrite of ``kind`` (:data:`REWRITE_KINDS`) reads its base (``table``: the Java table).
    Once the table's rewrites of that kind have a typical duration, the work starts only where it and its commit fit
    before the next DML of another writer is expected to start, or else after that DML's commit
    (compaction.core.dml_history.decide_work_start): a DML committing during the work deletes rows of files the
    rewrite replaces, Iceberg then refuses the rewrite's commit, and the work is thrown away. The duration is what
    the decision is about: from here to the rewrite's commit window (``commit_window(..., work_of=kind)``), the
    scans and planning before the action included. Returns whether it waited (``table`` is then refreshed: the
    caller reads its base again)."""
    bound = _BOUND.get()
    if bound is None or not bound.policy.yield_dml_history:
        return False
    history = _history_of(bound.table_ref)
    expected = history.work_s(kind)
    waited = (expected is not None
              and _wait_for_dml_window(bound, table, f"{kind} (before writing)", history, work_s=expected))
    _WORK_STARTED.set((kind, time.monotonic()))
    return waited


@contextlib.contextmanager
def commit_window(what: str, *, table: Any = None, work_of: str | None = None) -> Iterator[None]:
    """Around one commit of ours (``what`` names it in the intent and in progress lines) on ``table`` (the Java
    table: its history times the commit). ``work_of``: the commit of a rewrite of that kind, whose work since
    :func:`wait_before_work` is what the next such rewrite is expected to take. Raises
    :class:`~compaction.core.errors.YieldedToWritersError` when the lease gate gave up: nothing is committed."""
    bound = _BOUND.get()
    if bound is None:
        yield
        return
    timed = table is not None and bound.policy.yield_dml_history
    history = _history_of(bound.table_ref)
    started = _WORK_STARTED.get()
    if work_of is not None and started is not None and started[0] == work_of:
        history.worked(work_of, time.monotonic() - started[1])
        _WORK_STARTED.set(None)
    if timed:
        _wait_for_dml_window(bound, table, what, history)
    decided = time.monotonic()
    with contextlib.ExitStack() as stack:
        if bound.gate is not None:
            stack.enter_context(bound.gate.commit_window(bound.table_ref, bound.policy, what))
        # Time spent waiting for a writer's lease is no part of how long a commit takes to land.
        leases_waited = time.monotonic() - decided > LEASE_GATE_ROUND_TRIP_S
        yield
    if timed and not leases_waited:
        history.landed(time.monotonic() - decided)

