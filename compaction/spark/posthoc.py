"""The post-hoc check of our own snapshots whose job never checked them (compaction.core.posthoc says which).

Each snapshot is checked exactly as its job would have (docs/validation.md, layer c): the live rows of every
partition it touched, at the snapshot and at its parent, are equal (count, or count + checksum). A snapshot that
fails is undone while that is safe: when it and every snapshot after it on main are ours, of the same plan, they are
rolled back newest first, each only while it is current (one compare-and-swap each, never over a concurrent
writer's commit); otherwise the result is ``needs_attention``, for a human.
"""

from __future__ import annotations

from typing import Any, Callable

from compaction.core.errors import CompactionError
from compaction.core.identifiers import quoted
from compaction.core.model import TableIdentity
from compaction.spark import jvm as J
from compaction.spark.major import PLAN_PROPERTY
from compaction.spark.partition_files import snapshots_between, touched_partitions
from compaction.spark.validation import ValidationLevel, classify_java_error, snapshot_fingerprints


def _plan_of(table: Any, snapshot_id: int) -> str | None:
    snapshot = table.snapshot(int(snapshot_id))
    summary = None if snapshot is None else snapshot.summary()
    value = None if summary is None else summary.get(PLAN_PROPERTY)
    return None if value is None else str(value)


def check_snapshot(spark: Any, table: Any, table_ref: str, catalog_name: str, snapshot_id: int,
                   level: ValidationLevel) -> dict[str, Any]:
    """Check one snapshot; returns ``{snapshot_id, parent_id, plan_id, level, result, detail}`` with result
    ``passed``, ``failed`` (only when undoing was not attempted), ``rolled_back``, ``needs_attention`` or
    ``skipped`` (no longer in the table, or no parent to compare with)."""
    from compaction.core.results import ROLLED_BACK
    from compaction.spark.group_reads import rows_predicate
    from compaction.spark.task import undo

    out: dict[str, Any] = {"snapshot_id": int(snapshot_id), "parent_id": None, "plan_id": None,
                           "level": level.value, "result": "skipped", "detail": ""}
    table.refresh()
    snapshot = table.snapshot(int(snapshot_id))
    if snapshot is None:
        out["detail"] = "no longer in the table (expired)"
        return out
    out["plan_id"] = _plan_of(table, snapshot_id)
    parent = snapshot.parentId()
    if parent is None or table.snapshot(int(parent)) is None:
        out["detail"] = "its parent is no longer in the table: nothing to compare with"
        return out
    out["parent_id"] = int(parent)
    keys = touched_partitions(spark, table, int(snapshot_id))
    if not keys:
        out["result"], out["detail"] = "passed", "it changed no file"
        return out
    predicate = rows_predicate(spark, table, catalog_name, set(keys))
    before, after = snapshot_fingerprints(spark, table_ref, [(int(parent), predicate), (int(snapshot_id), predicate)],
                                          level)
    rows = f"{len(keys)} partition(s): {before.to_dict() if before else None} -> {after.to_dict() if after else None}"
    if before == after:
        out["result"], out["detail"] = "passed", f"rows equal to its parent's in {rows}"
        return out
    out["result"], out["detail"] = "failed", f"rows differ from its parent's in {rows}"
    current = table.currentSnapshot()
    chain = snapshots_between(table, int(parent), int(current.snapshotId())) if current is not None else []
    if not chain or chain[0] != int(snapshot_id) or any(_plan_of(table, sid) != out["plan_id"] for sid in chain):
        out["result"] = "needs_attention"
        out["detail"] += "; not undone: a later snapshot on main is not of its plan"
        return out
    if undo(spark, table, chain) != ROLLED_BACK:  # newest first, each only while current (as a job undoes)
        out["result"] = "needs_attention"
        out["detail"] += "; undoing stopped: a snapshot of its plan was no longer current"
        return out
    out["result"] = "rolled_back"
    out["detail"] += f"; rolled back ({len(chain)} snapshot(s) of its plan, newest first)"
    return out


def check_snapshots(spark: Any, identity: TableIdentity, snapshot_ids: list[int], level: ValidationLevel,
                    progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Check each snapshot, oldest first. A snapshot whose check raised is reported ``needs_attention`` with the
    error (the others are still checked)."""
    J.activate(spark)
    table_ref, catalog_name = quoted(identity), identity.catalog
    table = J.load_table(spark, ".".join((identity.catalog, *identity.namespace, identity.name)))
    results = []
    for sid in snapshot_ids:
        try:
            result = check_snapshot(spark, table, table_ref, catalog_name, sid, level)
        except Exception as e:  # noqa: BLE001 - reported per snapshot; nothing is changed by a failing read
            err = e if isinstance(e, CompactionError) else classify_java_error(e, f"post-hoc check of {sid}")
            result = {"snapshot_id": int(sid), "parent_id": None, "plan_id": None, "level": level.value,
                      "result": "needs_attention", "detail": f"the check failed: {err}"}
        if progress is not None:
            progress(f"icecompact: post-hoc check of snapshot {sid}: {result['result']} ({result['detail']})")
        results.append(result)
    return results
