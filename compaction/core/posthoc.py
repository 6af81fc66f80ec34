"""Which of our own snapshots on a table's main branch were never validated, decided from a ready-made view of the
table's history and of the ledger (no I/O here).

A compaction job checks every commit it makes (docs/validation.md, layer c) before it reports the partition. A job
killed in the moment between a commit and that commit's check leaves the snapshot on main, unvalidated, with no
record naming it; the snapshot still carries our plan id in its summary (``icecompact.plan-id``). The next plan of
the table looks for such snapshots and validates them first (compaction.ops.posthoc), undoing one that fails while it is
still the table's current snapshot.

A snapshot of ours needs that check unless:

* the ledger already holds a check of it (by its job, or an earlier post-hoc check, whatever the result);
* its plan is not in this ledger (another deployment's ledger owns it; we cannot tell what its job checked);
* a run of its plan succeeded: a run succeeds only when every partition it committed passed its checks, and a
  commit whose check never ran leaves its partition unreported, so the run would not have succeeded;
* a run of its plan is still running and younger than ``running_grace_s``: its job may be checking it right now;
* its plan's run was made at validation ``none``: its owner chose no check.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Mapping, Sequence

#: The snapshot-summary property every commit of ours carries: the id of the plan it belongs to.
PLAN_PROPERTY = "icecompact.plan-id"
#: The ``runs.status`` values of a run that may still be working.
LIVE_RUN_STATUSES = frozenset({"planned", "running"})
#: How long a run counts as possibly still checking its commits (a job's checks take seconds to minutes; a run
#: older than this that is still "running" lost its process).
RUNNING_GRACE_S_DEFAULT = 3600.0
#: How many ancestors of the current snapshot are looked at (newest first).
LOOKBACK_SNAPSHOTS_DEFAULT = 500

VALIDATE = "validate"
SKIP = "skip"


@dataclass(frozen=True)
class OwnSnapshot:
    """A snapshot on main whose summary carries our plan id."""

    snapshot_id: int
    parent_id: int | None
    plan_id: str
    committed_at: _dt.datetime


@dataclass(frozen=True)
class PlanRun:
    """A run of a plan, as the ledger has it."""

    run_id: str
    status: str
    started_at: _dt.datetime
    validation_level: str | None = None


@dataclass(frozen=True)
class PostHocDecision:
    snapshot: OwnSnapshot
    action: str  # VALIDATE or SKIP
    reason: str


def decide(own: Sequence[OwnSnapshot], checked: Mapping[int, str], runs: Mapping[str, Sequence[PlanRun]],
           now: _dt.datetime, *, running_grace_s: float = RUNNING_GRACE_S_DEFAULT) -> list[PostHocDecision]:
    """One decision per snapshot of ``own`` (in its order). ``checked``: snapshot id -> result of a check the
    ledger holds; ``runs``: plan id -> its runs."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    out: list[PostHocDecision] = []
    for snap in own:
        plan_runs = runs.get(snap.plan_id, ())
        if snap.snapshot_id in checked:
            out.append(PostHocDecision(snap, SKIP, f"already checked ({checked[snap.snapshot_id]})"))
        elif not plan_runs:
            out.append(PostHocDecision(snap, SKIP, f"plan {snap.plan_id} is not in this ledger"))
        elif any(r.status == "succeeded" for r in plan_runs):
            out.append(PostHocDecision(snap, SKIP, "its run succeeded: every commit it made was checked"))
        elif any(r.status in LIVE_RUN_STATUSES and (now - r.started_at).total_seconds() < running_grace_s
                 for r in plan_runs):
            out.append(PostHocDecision(snap, SKIP, "its run is still running (its job may be checking it)"))
        elif all((r.validation_level or "").lower() == "none" for r in plan_runs):
            out.append(PostHocDecision(snap, SKIP, "its run was made at validation none"))
        else:
            statuses = ", ".join(sorted({r.status for r in plan_runs}))
            out.append(PostHocDecision(snap, VALIDATE, f"no check recorded; its run ended {statuses}"))
    return out


def to_validate(decisions: Sequence[PostHocDecision]) -> list[OwnSnapshot]:
    """The snapshots to check, oldest first (a later snapshot's parent may be an earlier one of them)."""
    chosen = [d.snapshot for d in decisions if d.action == VALIDATE]
    return sorted(chosen, key=lambda s: (s.committed_at, s.snapshot_id))
