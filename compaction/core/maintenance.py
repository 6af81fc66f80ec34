"""The maintenance planner: what to expire, rewrite and delete for one table, and why. Pure: no I/O.

Fed a ready-made :class:`MaintenanceState` (the table's snapshots with their parents, timestamps and refs, the
current snapshot's manifest sizes, the metadata file's size and log, and what is *in flight*: compaction runs the
ledger holds as running or planned, and write leases) and a ``now``, :func:`plan_maintenance` returns a
:class:`MaintenancePlan`: one :class:`MaintenanceDecision` per action with its reason, plus the exact parameters the
Spark side passes to Iceberg's actions. The plan is JSON round-trippable (``MaintenancePlan.from_json(p.to_json())
== p``) and recorded in the ledger.

Safety rules decided here (enforced again by the executor, see compaction/spark/maintenance.py):

* **Snapshots an in-flight run needs are never expired.** A run needs its plan's base snapshot (Iceberg validates
  a compaction commit from it: ``validateFromSnapshot``; once it is expired the commit fails with "Cannot determine
  history") and the parent its validation compares with, which is a snapshot committed after the run started.
  So every snapshot an in-flight run names, and every snapshot committed since the oldest in-flight start (minus
  the clock skew), is *protected*: the expiry cut-off ``older_than`` is moved back to the oldest protected
  snapshot's timestamp. Iceberg's ``RemoveSnapshots`` retains every branch ancestor at or after ``older_than``
  and every unreferenced snapshot at or after it, so the protected ones survive; the planner simulates
  ``RemoveSnapshots`` exactly (refs, per-ref ``max-ref-age-ms`` / ``max-snapshot-age-ms`` /
  ``min-snapshots-to-keep``) and refuses to expire at all when a ref's own retention would still remove a
  protected snapshot.
* **Orphan files are proven, not guessed.** Candidates must be older than ``delete-orphans.older-than`` *and* than
  the oldest in-flight run or write lease (minus the clock skew): files a writer or a compaction wrote but has not
  committed yet are newer than its start. Scheme/authority mismatches are refused by the executor
  (``prefixMismatchMode(ERROR)``).
* In-flight entries older than ``in-flight-timeout`` are taken as abandoned (their process died): they protect
  nothing, and the plan lists them in ``notes``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from compaction.core.errors import PlanningError
from compaction.core.maintenance_policy import MaintenancePolicy
from compaction.core.model import TableIdentity

__all__ = [
    "MAINTENANCE_PLAN_FORMAT_VERSION",
    "MaintenanceAction",
    "SnapshotInfo",
    "RefInfo",
    "InFlight",
    "MaintenanceState",
    "MaintenanceDecision",
    "MaintenancePlan",
    "plan_maintenance",
    "simulate_expiry",
]

MAINTENANCE_PLAN_FORMAT_VERSION = 1
MAIN_BRANCH = "main"


class MaintenanceAction(str, enum.Enum):
    EXPIRE_SNAPSHOTS = "expire_snapshots"
    REWRITE_MANIFESTS = "rewrite_manifests"
    DELETE_ORPHAN_FILES = "delete_orphan_files"
    #: Metadata files (``*.metadata.json``) older than the whole metadata log, when the table asks for them to be
    #: deleted (``write.metadata.delete-after-commit.enabled``) and the catalog has not (REST servers may not).
    METADATA_FILES = "metadata_files"


#: Execution order: expiry first (it makes the manifests and files of expired snapshots unreferenced, so orphan
#: removal never sees them as live), then the manifest rewrite of the current snapshot, then orphans.
ACTION_ORDER = (MaintenanceAction.EXPIRE_SNAPSHOTS, MaintenanceAction.REWRITE_MANIFESTS,
                MaintenanceAction.DELETE_ORPHAN_FILES, MaintenanceAction.METADATA_FILES)


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int


@dataclass(frozen=True)
class RefInfo:
    """A branch or tag with its own retention (Iceberg ``SnapshotRef``; ``None`` = the table default)."""

    name: str
    snapshot_id: int
    is_branch: bool = True
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None


@dataclass(frozen=True)
class InFlight:
    """Something that may still commit: a compaction run (``kind="run"``) or a writer's lease (``"lease"``)."""

    kind: str
    ident: str
    started_at: _dt.datetime
    snapshot_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class MaintenanceState:
    table: TableIdentity
    location: str
    format_version: int
    properties: Mapping[str, str]
    current_snapshot_id: int | None
    snapshots: tuple[SnapshotInfo, ...]
    refs: tuple[RefInfo, ...]
    #: Sizes of the current snapshot's manifests (data and delete manifests).
    manifest_sizes: tuple[int, ...] = ()
    metadata_location: str | None = None
    metadata_file_bytes: int | None = None
    #: Previous metadata files listed in the metadata log.
    metadata_log_entries: int = 0
    in_flight: tuple[InFlight, ...] = ()


@dataclass(frozen=True)
class MaintenanceDecision:
    action: MaintenanceAction
    run: bool
    reason: str
    metrics: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"action": self.action.value, "run": self.run, "reason": self.reason,
                "metrics": {k: int(self.metrics[k]) for k in sorted(self.metrics)}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaintenanceDecision:
        try:
            return cls(MaintenanceAction(data["action"]), bool(data["run"]), str(data["reason"]),
                       {str(k): int(v) for k, v in dict(data.get("metrics") or {}).items()})
        except (KeyError, ValueError, TypeError) as e:
            raise PlanningError(f"invalid maintenance decision {data!r}: {e}") from e


@dataclass(frozen=True)
class MaintenancePlan:
    plan_id: str
    table: TableIdentity
    created_at: _dt.datetime
    base_snapshot_id: int | None
    location: str
    policy: MaintenancePolicy
    decisions: tuple[MaintenanceDecision, ...]
    #: ExpireSnapshots parameters: expire what is older than this (epoch ms) beyond the newest ``retain_last``.
    expire_older_than_ms: int | None = None
    retain_last: int = 1
    expected_expired_snapshot_ids: tuple[int, ...] = ()
    protected_snapshot_ids: tuple[int, ...] = ()
    #: DeleteOrphanFiles parameter: only files last modified before this (epoch ms) can be orphans.
    orphan_older_than_ms: int | None = None
    stats: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def decision(self, action: MaintenanceAction) -> MaintenanceDecision:
        for d in self.decisions:
            if d.action is action:
                return d
        raise KeyError(action)

    def runs(self, action: MaintenanceAction) -> bool:
        return any(d.action is action and d.run for d in self.decisions)

    @property
    def actions(self) -> tuple[MaintenanceAction, ...]:
        """The actions to execute, in execution order."""
        return tuple(a for a in ACTION_ORDER if self.runs(a))

    def to_dict(self) -> dict[str, object]:
        return {
            "maintenance_plan_format_version": MAINTENANCE_PLAN_FORMAT_VERSION,
            "plan_id": self.plan_id,
            "table": {"catalog": self.table.catalog, "namespace": list(self.table.namespace), "name": self.table.name},
            "created_at": self.created_at.isoformat(),
            "base_snapshot_id": self.base_snapshot_id,
            "location": self.location,
            "policy": self.policy.to_dict(),
            "decisions": [d.to_dict() for d in self.decisions],
            "expire_older_than_ms": self.expire_older_than_ms,
            "retain_last": self.retain_last,
            "expected_expired_snapshot_ids": list(self.expected_expired_snapshot_ids),
            "protected_snapshot_ids": list(self.protected_snapshot_ids),
            "orphan_older_than_ms": self.orphan_older_than_ms,
            "stats": {k: int(self.stats[k]) for k in sorted(self.stats)},
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaintenancePlan:
        version = data.get("maintenance_plan_format_version")
        if version != MAINTENANCE_PLAN_FORMAT_VERSION:
            raise PlanningError(f"unsupported maintenance plan format version {version!r} "
                                f"(this version reads {MAINTENANCE_PLAN_FORMAT_VERSION})")
        try:
            t = data["table"]
            created = _dt.datetime.fromisoformat(data["created_at"])
            return cls(
                plan_id=str(data["plan_id"]),
                table=TableIdentity(str(t["catalog"]), tuple(str(n) for n in t["namespace"]), str(t["name"])),
                created_at=created,
                base_snapshot_id=_opt_int(data.get("base_snapshot_id")),
                location=str(data["location"]),
                policy=MaintenancePolicy.from_dict(data["policy"]),
                decisions=tuple(MaintenanceDecision.from_dict(d) for d in data["decisions"]),
                expire_older_than_ms=_opt_int(data.get("expire_older_than_ms")),
                retain_last=int(data.get("retain_last", 1)),
                expected_expired_snapshot_ids=tuple(int(i) for i in data.get("expected_expired_snapshot_ids", ())),
                protected_snapshot_ids=tuple(int(i) for i in data.get("protected_snapshot_ids", ())),
                orphan_older_than_ms=_opt_int(data.get("orphan_older_than_ms")),
                stats={str(k): int(v) for k, v in dict(data.get("stats") or {}).items()},
                notes=tuple(str(n) for n in data.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PlanningError(f"invalid maintenance plan: {type(e).__name__}: {e}") from e

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> MaintenancePlan:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PlanningError(f"maintenance plan is not valid JSON: {e}") from e
        if not isinstance(data, Mapping):
            raise PlanningError("maintenance plan JSON must be an object")
        return cls.from_dict(data)

    def with_content_id(self) -> MaintenancePlan:
        body = replace(self, plan_id="").to_json(indent=None)
        return replace(self, plan_id="m-" + hashlib.sha256(body.encode()).hexdigest()[:18])


def _opt_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


# ==============================================================================================================
# Iceberg's RemoveSnapshots, simulated


def _ancestors(snapshot_id: int, by_id: Mapping[int, SnapshotInfo]) -> Iterator[SnapshotInfo]:
    """SnapshotUtil.ancestorsOf: the snapshot and its parents while they exist."""
    seen: set[int] = set()
    current = by_id.get(snapshot_id)
    while current is not None and current.snapshot_id not in seen:
        seen.add(current.snapshot_id)
        yield current
        current = by_id.get(current.parent_id) if current.parent_id is not None else None


def simulate_expiry(snapshots: tuple[SnapshotInfo, ...], refs: tuple[RefInfo, ...], *, now_ms: int,
                    older_than_ms: int, min_snapshots_to_keep: int, max_ref_age_ms: int) -> tuple[set[int], set[str]]:
    """(snapshot ids Iceberg's ``RemoveSnapshots`` would remove, ref names it would drop), given
    ``expireOlderThan(older_than_ms)``, ``retainLast(min_snapshots_to_keep)`` and the table's max ref age.

    A line-by-line port of ``RemoveSnapshots.internalApply`` (Iceberg 1.10): refs older than their max ref age are
    dropped (never ``main``); each retained branch keeps its newest ``min-snapshots-to-keep`` ancestors and every
    ancestor at or after its ``older_than`` (a ref's own ``max-snapshot-age-ms`` wins over the default); snapshots
    on no retained ref are kept while at or after ``older_than``."""
    by_id = {s.snapshot_id: s for s in snapshots}
    retained_refs: list[RefInfo] = []
    dropped: set[str] = set()
    for ref in refs:
        if ref.name == MAIN_BRANCH:
            retained_refs.append(ref)
            continue
        snap = by_id.get(ref.snapshot_id)
        limit = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else max_ref_age_ms
        if snap is not None and now_ms - snap.timestamp_ms <= limit:
            retained_refs.append(ref)
        else:
            dropped.add(ref.name)
    retain: set[int] = {r.snapshot_id for r in retained_refs}
    referenced: set[int] = set()
    for ref in retained_refs:
        if not ref.is_branch:
            referenced.add(ref.snapshot_id)
            continue
        cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else older_than_ms
        keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else min_snapshots_to_keep
        kept: set[int] = set()
        for ancestor in _ancestors(ref.snapshot_id, by_id):
            if len(kept) < keep or ancestor.timestamp_ms >= cutoff:
                kept.add(ancestor.snapshot_id)
            else:
                break
        retain |= kept
        referenced |= {a.snapshot_id for a in _ancestors(ref.snapshot_id, by_id)}
    retain |= {s.snapshot_id for s in snapshots if s.snapshot_id not in referenced and s.timestamp_ms >= older_than_ms}
    return {s.snapshot_id for s in snapshots} - retain, dropped


# ==============================================================================================================
# The planner


def _ms(t: _dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def _age(ms: int) -> str:
    seconds = max(0, ms) / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _expiry_executor(expiring: int, policy: MaintenancePolicy) -> str:
    """Where the executor will run the expiry (compaction/spark/maintenance.py decides the same from the live
    preview): Iceberg's Spark action ships the whole metadata to every task, so large histories go to the driver."""
    if expiring >= policy.expire_driver_min_snapshots:
        return (f"on the driver ({expiring} >= expire-snapshots.driver-min-snapshots="
                f"{policy.expire_driver_min_snapshots})")
    return "with the Spark action"


def plan_maintenance(state: MaintenanceState, policy: MaintenancePolicy, now: _dt.datetime) -> MaintenancePlan:
    """Decide every maintenance action for ``state`` at ``now`` (see the module docstring for the rules)."""
    if now.tzinfo is None:
        raise PlanningError("now must be timezone-aware")
    now_ms = _ms(now)
    by_id = {s.snapshot_id: s for s in state.snapshots}
    notes: list[str] = []
    active: list[InFlight] = []
    for f in state.in_flight:
        if (now - f.started_at).total_seconds() > policy.in_flight_timeout_s:
            notes.append(f"{f.kind} {f.ident} in flight since {f.started_at.isoformat()} is older than "
                         f"compaction.ops.maintenance.in-flight-timeout ({_age(policy.in_flight_timeout_s * 1000)}): "
                         "taken as abandoned, it protects nothing")
        else:
            active.append(f)
    oldest_start_ms = min((_ms(f.started_at) for f in active), default=None)
    horizon_ms = None if oldest_start_ms is None else oldest_start_ms - policy.clock_skew_s * 1000

    # Snapshots in-flight work needs: what each names (plan base, committed ids) and everything since it started.
    protected = {i for f in active for i in f.snapshot_ids if i in by_id}
    if horizon_ms is not None:
        protected |= {s.snapshot_id for s in state.snapshots if s.timestamp_ms >= horizon_ms}

    stats: dict[str, int] = {
        "snapshots": len(state.snapshots),
        "refs": len(state.refs),
        "manifests": len(state.manifest_sizes),
        "small_manifests": sum(1 for m in state.manifest_sizes if m < policy.small_manifest_bytes),
        "manifest_bytes": sum(state.manifest_sizes),
        "metadata_log_entries": state.metadata_log_entries,
        "in_flight": len(active),
    }
    if state.snapshots:
        stats["oldest_snapshot_age_ms"] = now_ms - min(s.timestamp_ms for s in state.snapshots)
    if state.metadata_file_bytes is not None:
        stats["metadata_file_bytes"] = state.metadata_file_bytes

    decisions: list[MaintenanceDecision] = []
    off_all = None if policy.enabled else "maintenance disabled (compaction.ops.maintenance.enabled=false)"
    no_gc = None if policy.gc_enabled else "gc.enabled=false: the table may share files with other tables; Iceberg " \
                                         "refuses to expire snapshots or delete files"

    # -- expire snapshots -------------------------------------------------------------------------------------
    expire_older_than: int | None = None
    expected: tuple[int, ...] = ()
    cutoff = now_ms - policy.max_snapshot_age_ms
    if off_all or no_gc or not policy.expire_enabled:
        decisions.append(MaintenanceDecision(MaintenanceAction.EXPIRE_SNAPSHOTS, False, off_all or no_gc or
                                             "expiry disabled (compaction.ops.maintenance.expire-snapshots.enabled=false)"))
    elif not state.snapshots:
        decisions.append(MaintenanceDecision(MaintenanceAction.EXPIRE_SNAPSHOTS, False, "no snapshots"))
    else:
        older_than = cutoff
        moved = ""
        if protected:
            floor = min(by_id[i].timestamp_ms for i in protected)
            if floor < older_than:
                older_than = floor
                moved = (f"; cut-off moved back {_age(cutoff - floor)} to keep {len(protected)} snapshot(s) "
                         f"{len(active)} in-flight run(s)/lease(s) need")
        expired, dropped_refs = simulate_expiry(state.snapshots, state.refs, now_ms=now_ms, older_than_ms=older_than,
                                                min_snapshots_to_keep=policy.min_snapshots_to_keep,
                                                max_ref_age_ms=policy.max_ref_age_ms)
        at_risk = sorted(expired & protected)
        metrics = {"snapshots": len(state.snapshots), "expire": len(expired), "protected": len(protected),
                   "refs_dropped": len(dropped_refs)}
        retention = (f"history.expire.max-snapshot-age-ms={_age(policy.max_snapshot_age_ms)}, "
                     f"min-snapshots-to-keep={policy.min_snapshots_to_keep}")
        if at_risk:
            decisions.append(MaintenanceDecision(
                MaintenanceAction.EXPIRE_SNAPSHOTS, False,
                f"not expiring: a ref's own retention would remove snapshot(s) {at_risk[:5]} that in-flight work "
                "needs (its plan's base or a parent its validation compares with); retried after it finishes",
                metrics))
        elif not expired:
            decisions.append(MaintenanceDecision(
                MaintenanceAction.EXPIRE_SNAPSHOTS, False,
                f"nothing to expire: {len(state.snapshots)} snapshot(s), oldest {_age(stats['oldest_snapshot_age_ms'])} "
                f"old, all retained ({retention}){moved}", metrics))
        else:
            expire_older_than = older_than
            expected = tuple(sorted(expired))
            refs_note = f"; ref(s) past max-ref-age dropped: {', '.join(sorted(dropped_refs))}" if dropped_refs else ""
            decisions.append(MaintenanceDecision(
                MaintenanceAction.EXPIRE_SNAPSHOTS, True,
                f"{len(expired)} of {len(state.snapshots)} snapshot(s) past retention ({retention}) -> expire "
                f"{_expiry_executor(len(expired), policy)}{moved}{refs_note}", metrics))

    # -- rewrite manifests ------------------------------------------------------------------------------------
    small = stats["small_manifests"]
    threshold = policy.rewrite_manifests_small_count
    m_metrics = {"manifests": stats["manifests"], "small_manifests": small, "manifest_bytes": stats["manifest_bytes"]}
    if off_all or not policy.rewrite_manifests_enabled:
        decisions.append(MaintenanceDecision(MaintenanceAction.REWRITE_MANIFESTS, False, off_all or
                                             "manifest rewrite disabled (compaction.ops.maintenance.rewrite-manifests.enabled=false)",
                                             m_metrics))
    elif small >= threshold:
        decisions.append(MaintenanceDecision(
            MaintenanceAction.REWRITE_MANIFESTS, True,
            f"{small} small manifest(s) (< {_bytes(policy.small_manifest_bytes)}) of {stats['manifests']} >= "
            f"{threshold} -> rewrite manifests", m_metrics))
    else:
        decisions.append(MaintenanceDecision(
            MaintenanceAction.REWRITE_MANIFESTS, False,
            f"{small} small manifest(s) of {stats['manifests']} < {threshold} "
            "(compaction.ops.maintenance.rewrite-manifests.small-manifest-count)", m_metrics))

    # -- delete orphan files ----------------------------------------------------------------------------------
    orphan_older_than: int | None = None
    if off_all or no_gc or not policy.orphans_enabled:
        decisions.append(MaintenanceDecision(MaintenanceAction.DELETE_ORPHAN_FILES, False, off_all or no_gc or
                                             "orphan removal off (compaction.ops.maintenance.delete-orphans.enabled=false)"))
    else:
        orphan_cutoff = now_ms - policy.orphans_older_than_s * 1000
        reason = f"files under {state.location} no metadata references, older than {_age(policy.orphans_older_than_s * 1000)}"
        if horizon_ms is not None and horizon_ms < orphan_cutoff:
            orphan_cutoff = horizon_ms
            reason += (f" and than the oldest of {len(active)} in-flight run(s)/lease(s) (minus clock skew "
                       f"{_age(policy.clock_skew_s * 1000)}): what they wrote is not committed yet")
        orphan_older_than = orphan_cutoff
        decisions.append(MaintenanceDecision(MaintenanceAction.DELETE_ORPHAN_FILES, True,
                                             reason + " -> delete orphan files", {"older_than_ms": orphan_cutoff}))

    # -- metadata files --------------------------------------------------------------------------------------
    size = "unknown size" if state.metadata_file_bytes is None else _bytes(state.metadata_file_bytes)
    log = (f"metadata file {size}, {state.metadata_log_entries} previous version(s) in the log "
           f"(write.metadata.previous-versions-max={policy.metadata_previous_versions_max}); expiry shrinks the file")
    if off_all or no_gc or not policy.metadata_delete_after_commit:
        why = off_all or no_gc or ("older versions are kept on storage when they leave the log "
                                   "(write.metadata.delete-after-commit.enabled=false; orphan removal deletes them)")
        decisions.append(MaintenanceDecision(MaintenanceAction.METADATA_FILES, False, f"{log}; {why}",
                                             {"metadata_log_entries": state.metadata_log_entries}))
    else:
        # Iceberg's own catalogs delete a version when it leaves the log (delete-after-commit); a REST catalog's
        # server writes the metadata files and may not (SeaweedFS keeps every version). Versions older than the
        # whole log are what such a commit would have deleted.
        decisions.append(MaintenanceDecision(
            MaintenanceAction.METADATA_FILES, True,
            f"{log}; write.metadata.delete-after-commit.enabled=true -> delete the versions that left the log "
            "(where the catalog has not)", {"metadata_log_entries": state.metadata_log_entries}))

    plan = MaintenancePlan(
        plan_id="", table=state.table, created_at=now.astimezone(_dt.timezone.utc),
        base_snapshot_id=state.current_snapshot_id, location=state.location, policy=policy,
        decisions=tuple(decisions), expire_older_than_ms=expire_older_than, retain_last=policy.min_snapshots_to_keep,
        expected_expired_snapshot_ids=expected, protected_snapshot_ids=tuple(sorted(protected)),
        orphan_older_than_ms=orphan_older_than, stats=stats, notes=tuple(notes),
    )
    return plan.with_content_id()
