"""Freshness of a compacted table, measured after the fact: for every commit that turned a partition's
``auto`` decision from NONE to MINOR / MAJOR (a *crossing*), how long until a compaction of ours that had seen it was
committed, and validated.

Replayed from the table's history and the ledger, so it measures what happened, on any path (cron + spark-submit, or
health events + the resident executor):

* every snapshot of main in the window is planned as the watcher would plan it (the table's own policy, the
  planner's ``auto``); a partition *crosses* at the first writer's snapshot whose plan gives it work after a snapshot
  whose plan gave it none;
* it is *served* by the first committed outcome of that partition whose plan's base snapshot is the crossing one or
  later (a compaction planned before the crossing did not see its files); ``to_commit`` ends at that outcome's
  commit snapshot, ``to_validated`` when its job reported it validated (the work item's end on the resident path,
  the outcome's recording otherwise);
* crossings no compaction served before the end are counted apart (``unserved``), with how long ago they crossed;
* a table that always has work (a writer adding deletes faster than a cycle clears them) never crosses, so the
  *work age* is measured too: for every writer's snapshot, each partition it changed that then needed work, how long
  until a compaction of ours that had seen it was validated (``work_age``; a crossing is one such commit);
* where the time went (``profile_p50_s``): from the crossing until the serving run was planned (the watcher's poll,
  the event, Airflow starting the task; or waiting for the cron), in the queue, in the executor.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Sequence

from compaction.catalog import CatalogConfig


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def crossings(catalog: CatalogConfig, table_name: str, ledger: Any, *, since: float | None = None,
              until: float | None = None) -> dict[str, Any]:
    from compaction.core.plan import CompactionKind, CompactionMode
    from compaction.core.planner import PlanCache
    from compaction.core.planner import plan as make_plan
    from compaction.core.policy import CompactionPolicy
    from compaction.core.posthoc import PLAN_PROPERTY
    from compaction.metadata.inspect import TableStateCache, load_table, table_state
    from compaction.metadata.manifests import ManifestCache

    identity, table = load_table(catalog, table_name)
    chain = []
    current = table.current_snapshot()
    while current is not None:
        chain.append(current)
        current = table.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id else None
    chain.reverse()
    seq = {s.snapshot_id: int(s.sequence_number or 0) for s in chain}
    ts = {s.snapshot_id: s.timestamp_ms / 1000 for s in chain}
    cache = ManifestCache()
    states, plans = TableStateCache(), PlanCache()
    open_crossings: dict[str, dict[str, Any]] = {}
    found: list[dict[str, Any]] = []
    previous_work: set[str] = set()
    work_added: list[dict[str, Any]] = []  # (partition, writer snapshot) pairs that left the partition needing work
    previous_states: dict[Any, Any] = {}
    for snap in chain:
        if since is not None and snap.timestamp_ms / 1000 < since - 60:
            continue  # before the window (a minute of lead to know what needed work at its start)
        state = table_state(table, identity, snap.snapshot_id, manifest_cache=cache, state_cache=states)
        policy = CompactionPolicy.resolve(state.properties, {})
        now = _dt.datetime.fromtimestamp(snap.timestamp_ms / 1000, _dt.timezone.utc)
        plan = make_plan(state, policy, CompactionMode.AUTO, now, plan_id="replay", cache=plans)  # no content id needed
        work = {d.partition.label(): d.kind.value for d in plan.decisions if d.kind is not CompactionKind.NONE}
        summary = snap.summary.additional_properties if snap.summary else {}
        ours = PLAN_PROPERTY in summary
        in_window = since is None or snap.timestamp_ms / 1000 >= since
        for label, kind in work.items():
            if label not in previous_work and label not in open_crossings and not ours and in_window:
                crossing = {"partition": label, "kind": kind, "snapshot_id": snap.snapshot_id,
                            "t": snap.timestamp_ms / 1000, "seq": seq[snap.snapshot_id]}
                open_crossings[label] = crossing
                found.append(crossing)
        for label in list(open_crossings):
            if label not in work:
                del open_crossings[label]
        previous_work = set(work)
        # The incremental state keeps the object of a partition no commit touched: a new object is a change.
        if not ours and in_window:
            for p in state.partitions:
                label = p.key.label()
                if label in work and previous_states.get(p.key) is not p:
                    work_added.append({"partition": label, "t": snap.timestamp_ms / 1000,
                                       "seq": seq[snap.snapshot_id]})
        previous_states = {p.key: p for p in state.partitions}

    # Outcomes of ours that could serve a crossing: committed, with the time their validation ended.
    served_by: list[dict[str, Any]] = []
    for run in ledger.runs(identity.dotted, catalog=catalog.name, limit=10_000):
        if run.catalog != catalog.name or run.dry_run:
            continue
        items = {i.run_id: i for i in ledger.work_items(run_id=run.run_id)}
        item = items.get(run.run_id)
        for o in ledger.outcomes(run.run_id):
            if o.status.value != "committed" or o.commit_snapshot_id is None or o.base_snapshot_id is None:
                continue
            if o.base_snapshot_id not in seq or o.commit_snapshot_id not in ts:
                continue
            validated = (item.finished_at.timestamp() if item is not None and item.finished_at is not None
                         else o.recorded_at.timestamp())
            phases = {"planned_t": run.started_at.timestamp()}
            if item is not None and item.claimed_at is not None:
                phases.update(queued_t=item.enqueued_at.timestamp(), claimed_t=item.claimed_at.timestamp())
            served_by.append({"partition": o.partition_label, "base_seq": seq[o.base_snapshot_id],
                              "commit_t": ts[o.commit_snapshot_id], "validated_t": validated,
                              "kind": o.kind.value, "run_id": run.run_id, **phases})
    served_by.sort(key=lambda s: s["commit_t"])
    end = until if until is not None else max(ts.values(), default=0.0)
    latencies_commit, latencies_validated, unserved = [], [], []
    for c in found:
        s = next((x for x in served_by if x["partition"] == c["partition"] and x["base_seq"] >= c["seq"]), None)
        if s is None:
            unserved.append(round(end - c["t"], 1))
            continue
        c["to_commit_s"] = round(s["commit_t"] - c["t"], 2)
        c["to_validated_s"] = round(s["validated_t"] - c["t"], 2)
        c["served_by"] = s["kind"]
        # Where the time went: until the serving run was planned (detection, the event, Airflow starting the
        # task), queued until an executor took it, then the executor's work up to the validated end.
        c["to_plan_s"] = round(s["planned_t"] - c["t"], 2)
        if "claimed_t" in s:
            c["in_queue_s"] = round(s["claimed_t"] - s["queued_t"], 2)
            c["executor_s"] = round(s["validated_t"] - s["claimed_t"], 2)
        latencies_commit.append(c["to_commit_s"])
        latencies_validated.append(c["to_validated_s"])
    ages, ages_unserved = [], 0
    for w in work_added:
        s = next((x for x in served_by if x["partition"] == w["partition"] and x["base_seq"] >= w["seq"]), None)
        if s is None:
            ages_unserved += 1
        else:
            ages.append(s["validated_t"] - w["t"])
    return {
        "work_age": {"changes": len(work_added), "served": len(ages), "unserved": ages_unserved,
                     "to_validated_p50_s": _round(_quantile(ages, 0.5)),
                     "to_validated_p95_s": _round(_quantile(ages, 0.95))},
        "snapshots": len(chain), "crossings": len(found), "served": len(latencies_validated),
        "unserved_age_s": sorted(unserved),
        "to_commit_p50_s": _quantile(latencies_commit, 0.5), "to_commit_p95_s": _quantile(latencies_commit, 0.95),
        "to_validated_p50_s": _quantile(latencies_validated, 0.5),
        "to_validated_p95_s": _quantile(latencies_validated, 0.95),
        "to_validated_max_s": max(latencies_validated, default=None),
        "manifest_cache": {"hits": cache.hits, "misses": cache.misses},
        "profile_p50_s": {phase: _quantile([c[phase] for c in found if phase in c], 0.5)
                          for phase in ("to_plan_s", "in_queue_s", "executor_s")},
        "detail": found[:2000],
    }
