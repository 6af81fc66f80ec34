"""Watching tables' health for compaction triggered by it: the I/O around the pure rules of
compaction/core/triggering.py, used by the Airflow trigger (icecompact_airflow/health_trigger.py).

One :meth:`HealthWatcher.poll` reads every watched table's metadata pointer at once (one query on a SQL catalog,
:func:`compaction.ops.fleet.metadata_locations`), re-evaluates only the tables whose pointer moved (or that still need
work once the rate limit allows), and reads of those only the manifests not read before (manifests are immutable:
:class:`compaction.metadata.manifests.ManifestCache`). The evaluation is the planner's own ``auto`` decision, so an event
fires exactly when a run would find work; its payload names the table and the partitions.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import logging
import time
from typing import Any, Callable, Mapping, Sequence

from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.core.queue import WorkStatus
from compaction.core.triggering import (
    MIN_INTERVAL_SECONDS_DEFAULT,
    WatchedTable,
    fire_decision,
    should_evaluate,
)

log = logging.getLogger(__name__)
MAX_PARTITIONS_IN_EVENT = 50
#: After an event, a run of the table counts as waiting to start until it is recorded, for at most this long (or
#: until the watcher itself finds the catalog unreachable: see HealthWatcher._run_waiting).
PICKUP_TIMEOUT_S = 120.0


class HealthWatcher:
    """Polls the health of the tables of ``catalog`` matching ``tables`` (names or glob patterns). Not thread-safe:
    one poll at a time."""

    def __init__(self, catalog: CatalogConfig, tables: Sequence[str], *, overrides: Mapping[str, object] | None = None,
                 min_interval_s: float = MIN_INTERVAL_SECONDS_DEFAULT, ledger: Any = None,
                 progress: Callable[[str], None] = lambda _m: None) -> None:
        from compaction.metadata.manifests import ManifestCache

        self.catalog = catalog
        self.patterns = tuple(tables) or ("*",)
        self.overrides = dict(overrides or {})
        self.min_interval_s = float(min_interval_s)
        self.ledger = ledger
        self.progress = progress
        self.cache = ManifestCache()
        # Per table: the last state and plan, so a re-evaluation after a commit rebuilds and re-decides only the
        # partitions that commit touched.
        self._states: dict[str, Any] = {}
        self._plans: dict[str, Any] = {}
        self.watched: dict[str, WatchedTable] = {}
        self._loaded: Any = None
        #: When a poll last could not read the catalog (its table list, or a table and its ledger runs).
        self._unreachable_at: dict[str | None, _dt.datetime] = {}

    def _matches(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self.patterns)

    def poll(self, now: _dt.datetime | None = None) -> list[dict[str, Any]]:
        """One look at every watched table; the events of the tables that fire (see the module doc)."""
        from compaction.ops.fleet import metadata_locations

        now = now or _dt.datetime.now(_dt.timezone.utc)
        try:
            if self._loaded is None:
                self._loaded = self.catalog.load()
            listed = metadata_locations(self.catalog, self._loaded)
        except CompactionError:
            self._unreachable_at[None] = now
            raise
        locations = {n: loc for n, loc in listed.items() if self._matches(n)}
        events = []
        for name, location in locations.items():
            previous = self.watched.get(name)
            if not should_evaluate(previous, location, now, self.min_interval_s):
                continue
            try:
                event = self._evaluate(name, location, previous, now)
            except CompactionError as e:  # one unreadable table must not stop the watch of the others
                log.warning("health watch: %s.%s: %s", self.catalog.name, name, e)
                self._unreachable_at[name] = now
                continue
            if event is not None:
                events.append(event)
        for gone in set(self.watched) - set(locations):
            del self.watched[gone]
            self._states.pop(gone, None)
            self._plans.pop(gone, None)
        return events

    def _run_waiting(self, name: str, table_ref: str, last_fired: _dt.datetime | None, now: _dt.datetime) -> bool:
        """A run of the table is waiting to start: planned but not queued yet, or with a work item still queued; or
        the last event has not started one yet (an event takes the scheduler and a worker some seconds to become a
        run: firing again meanwhile would start a second run of the same work), for at most
        :data:`PICKUP_TIMEOUT_S`, and not once this watcher found the catalog unreachable after the event: the run
        it started then most likely failed before it could record itself (its ledger and catalog were down), and
        waiting out the timeout would leave the table without compaction for two minutes after every outage. A run
        whose items are all running or finished does not count (compaction.core.triggering: the next run queues
        behind it)."""
        if self.ledger is None:
            return False
        from compaction.ops.runner import settle_queued_runs

        # A run whose waiter died would look unfinished for ever: finish it from its work items first.
        settle_queued_runs(self.ledger, table_ref, self.catalog.name, now=now, progress=self.progress)
        for run in self.ledger.in_flight_runs(table_ref, catalog=self.catalog.name):
            items = self.ledger.work_items(run_id=run.run_id)
            if not items or any(i.status is WorkStatus.QUEUED for i in items):
                return True
        if last_fired is None or (now - last_fired).total_seconds() >= PICKUP_TIMEOUT_S:
            return False
        if any(at >= last_fired for at in (self._unreachable_at.get(None), self._unreachable_at.get(name)) if at):
            return False
        recent = self.ledger.runs(table_ref, catalog=self.catalog.name, limit=5)
        return not any(r.started_at >= last_fired for r in recent)

    def _evaluate(self, name: str, location: str | None, previous: WatchedTable | None,
                  now: _dt.datetime) -> dict[str, Any] | None:
        from compaction.core.planner import PlanCache
        from compaction.core.planner import plan as make_plan
        from compaction.core.policy import CompactionPolicy
        from compaction.metadata.inspect import TableStateCache, load_table, table_state
        from compaction.ops.runner import last_minor_times

        started = time.monotonic()
        identity, table = load_table(self.catalog, name)
        state = table_state(table, identity, manifest_cache=self.cache,
                            state_cache=self._states.setdefault(name, TableStateCache()))
        policy = CompactionPolicy.resolve(state.properties, self.overrides)
        last_minor = last_minor_times(self.ledger, state, policy) if self.ledger is not None else None
        plan = make_plan(state, policy, CompactionMode.AUTO, now, last_minor_at=last_minor,
                         cache=self._plans.setdefault(name, PlanCache()))
        work = [d for d in plan.decisions if d.kind is not CompactionKind.NONE]
        last_fired = previous.last_fired_at if previous else None
        waiting = bool(work) and self._run_waiting(name, identity.dotted, last_fired, now)
        fire, why = fire_decision(len(work), run_waiting=waiting, last_fired_at=last_fired, now=now,
                                  min_interval_s=self.min_interval_s)
        self.watched[name] = WatchedTable(location, bool(work), now if fire else last_fired)
        # The partition to explain: one with work, else the one with the most files.
        busiest = max(plan.decisions, default=None, key=lambda d: (
            d.kind is not CompactionKind.NONE, d.metrics.get("data_files", 0) + d.metrics.get("delete_files", 0)))
        self.progress(f"{self.catalog.name}.{name} @ {state.snapshot_id}: {why}"
                      f" ({(time.monotonic() - started) * 1000:.0f} ms)"
                      + (f"; {busiest.partition.label()}: {busiest.reason}" if busiest is not None else ""))
        if not fire:
            return None
        kinds: dict[str, int] = {}
        for d in work:
            kinds[d.kind.value] = kinds.get(d.kind.value, 0) + 1
        return {"catalog": self.catalog.name, "table": name, "snapshot_id": state.snapshot_id,
                "metadata_location": location, "kinds": kinds, "evaluated_at": now.isoformat(),
                "partitions": [d.partition.label() for d in work][:MAX_PARTITIONS_IN_EVENT]}
