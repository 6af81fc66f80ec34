"""Post-hoc checks at the start of a plan: our snapshots on main that no check ever covered (a job killed
between its commit and the commit's check) are checked, and undone if they fail while still current, before the
table is planned again. Which snapshots: compaction.core.posthoc (pure). The check itself is a Spark job
(``python -m compaction.spark check``, compaction.spark.posthoc) submitted like a compaction job. Every check, the
job's own and the post-hoc ones, is recorded in the ledger's ``snapshot_checks``.
"""

from __future__ import annotations

import datetime as _dt
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError
from compaction.core.run_options import posthoc_level
from compaction.core.model import TableIdentity
from compaction.core.posthoc import (
    LOOKBACK_SNAPSHOTS_DEFAULT,
    PLAN_PROPERTY,
    OwnSnapshot,
    PostHocDecision,
    decide,
    to_validate,
)
from compaction.ledger import Ledger, SnapshotCheck

#: (identity, snapshot ids oldest first, level) -> one result dict per snapshot (compaction.spark.posthoc).
Checker = Callable[[TableIdentity, Sequence[int], str], Sequence[Mapping[str, Any]]]


def own_snapshots(table: Any, *, lookback: int = LOOKBACK_SNAPSHOTS_DEFAULT) -> list[OwnSnapshot]:
    """Our snapshots (summary with ``icecompact.plan-id``) among the last ``lookback`` ancestors of the current
    snapshot of a pyiceberg table, newest first."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    out: list[OwnSnapshot] = []
    for _ in range(max(0, lookback)):
        if snapshot is None:
            break
        plan_id = snapshot.summary.get(PLAN_PROPERTY) if snapshot.summary is not None else None
        if plan_id:
            out.append(OwnSnapshot(int(snapshot.snapshot_id), snapshot.parent_snapshot_id, str(plan_id),
                                   _dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, _dt.timezone.utc)))
        if snapshot.parent_snapshot_id is None:
            break
        snapshot = metadata.snapshot_by_id(snapshot.parent_snapshot_id)
    return out


def pending_checks(ledger: Ledger, identity: TableIdentity, table: Any, now: _dt.datetime, *,
                   lookback: int = LOOKBACK_SNAPSHOTS_DEFAULT) -> list[PostHocDecision]:
    own = own_snapshots(table, lookback=lookback)
    if not own:
        return []
    checks = ledger.snapshot_checks(identity.dotted, identity.catalog, [s.snapshot_id for s in own])
    checked = {c.snapshot_id: c.result for c in checks}
    runs = ledger.plan_runs({s.plan_id for s in own})
    return decide(own, checked, runs, now)


def submit_checker(catalog: CatalogConfig, spark_settings: Any, *, progress: Callable[[str], None],
                   timeout_s: float | None = None) -> Checker:
    """The check as a spark-submit job (same Spark settings and catalog configuration as a compaction job)."""
    from compaction.ops.submit import SubmitRequest, read_group_result, run_submit

    def check(identity: TableIdentity, snapshot_ids: Sequence[int], level: str) -> list[Mapping[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="icecompact-check-") as tmp:
            result_path = Path(tmp) / "check.json"
            command = ("check", "--catalog", identity.catalog, *[a for ns in identity.namespace
                                                                for a in ("--namespace", ns)],
                       "--name", identity.name, *[a for sid in snapshot_ids for a in ("--snapshot", str(sid))],
                       "--result", str(result_path), "--validation", level)
            request = SubmitRequest(plan_path=result_path, group_id=0, result_path=result_path, catalog=catalog,
                                    settings=spark_settings, validation=level,
                                    app_name=f"icecompact-check-{identity.dotted}"[:200], command=command)
            progress(f"post-hoc check of {len(snapshot_ids)} snapshot(s): spark-submit ({spark_settings.master})")
            outcome = run_submit(request, on_output=progress, timeout_s=timeout_s)
            result = outcome.result or read_group_result(result_path)[0] or {}
            if result.get("error"):
                raise CompactionError(f"post-hoc check failed: {result['error']}")
            return list(result.get("checks") or [])

    return check


def run_posthoc_checks(ledger: Ledger, identity: TableIdentity, table: Any, checker: Checker, *, validation: str,
                       progress: Callable[[str], None] = lambda _m: None, now: _dt.datetime | None = None,
                       run_id: str | None = None) -> list[Mapping[str, Any]]:
    """Check the snapshots :func:`pending_checks` chooses and record every result. Returns the results (empty when
    nothing needed a check). The level is ``validation`` when it reads rows (count, checksum), else count: a
    snapshot nobody checked is checked at least by count."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    targets = to_validate(pending_checks(ledger, identity, table, now))
    if not targets:
        return []
    level = posthoc_level(validation)
    progress(f"post-hoc: {len(targets)} snapshot(s) of ours on main were never checked (their job ended between "
             f"commit and check): {', '.join(str(s.snapshot_id) for s in targets)}")
    results = list(checker(identity, [s.snapshot_id for s in targets], level))
    plans = {s.snapshot_id: s.plan_id for s in targets}
    ledger.record_snapshot_checks(identity.dotted, identity.catalog, [
        SnapshotCheck(int(r["snapshot_id"]), "post-hoc", str(r.get("level") or level), str(r["result"]),
                      plan_id=plans.get(int(r["snapshot_id"])), run_id=run_id, detail=str(r.get("detail") or ""))
        for r in results], now=now)
    for r in results:
        progress(f"post-hoc check of snapshot {r['snapshot_id']}: {r['result']} ({r.get('detail') or ''})")
    return results


def job_checks(result: Mapping[str, Any] | None, *, plan_id: str, run_id: str, level: str) -> list[SnapshotCheck]:
    """The checks a job group's result reports (``partitions[].validation.checks``), as ledger records: ``passed``
    (``skipped`` at level none, where nothing was compared) or ``failed``. A commit the job undid is off main and
    needs no record; one it could not undo is recorded failed."""
    out: dict[int, SnapshotCheck] = {}
    for partition in (result or {}).get("partitions") or []:
        validation = partition.get("validation") or {}
        part_level = str(validation.get("level") or level)
        for check in validation.get("checks") or []:
            sid = check.get("snapshot_id")
            if sid is None:
                continue
            verdict = ("skipped" if part_level == "none" else "passed") if check.get("ok") else "failed"
            previous = out.get(int(sid))
            if previous is not None and previous.result == "failed":
                continue
            out[int(sid)] = SnapshotCheck(int(sid), "job", part_level, verdict, plan_id=plan_id, run_id=run_id,
                                          detail=f"partition {partition.get('label')}")
    return list(out.values())
