"""Health of a catalog's tables over time: health samples from metadata, and the overview of every table.

* :func:`sample_table` inspects one table (metadata only, pyiceberg), runs the planner in ``auto`` mode under the
  table's own policy and condenses both into a :class:`~compaction.core.health.HealthSample`;
  :func:`record_sample` stores it in the ledger (best effort: a ledger problem never fails an inspection).
* :func:`build_overview` answers "which table needs attention" for a whole catalog from the ledger and the
  catalog's metadata pointers only: one query lists every table with its current metadata file; a table whose
  latest sample was taken at that metadata file (and recently enough for the decision to hold) is not inspected
  again. Changed tables are re-inspected within a time budget, stalest first; the rest are shown from their last
  sample, marked stale, and left to :func:`refresh_tables` (the UI runs it after answering).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from compaction.catalog import CatalogConfig
from compaction.core.errors import CatalogError, CompactionError
from compaction.core.health import HealthSample, attention, attention_key, sample_from_state

if TYPE_CHECKING:
    from compaction.core.model import TableState
    from compaction.ledger import HealthSampleRecord, Ledger, RunRecord

log = logging.getLogger(__name__)

#: A sample older than this is re-taken even when the table did not change (decisions depend on time too).
SAMPLE_MAX_AGE_S = 3600.0
#: Default time the overview may spend re-inspecting changed tables before it answers.
REFRESH_BUDGET_S = 0.5
#: How far back the overview's per-table chart of delete files reaches, and its number of points.
SERIES_DAYS = 14
SERIES_POINTS = 40


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


# ------------------------------------------------------------------------------------------------ samples
def sample_state(state: TableState, *, metadata_location: str | None = None, now: _dt.datetime | None = None,
                 overrides: Mapping[str, object] | None = None, ledger: Ledger | None = None) -> HealthSample:
    """The health sample of an inspected ``state``: the planner's ``auto`` decision under the table's policy (with
    ``ledger``, ``compaction.minor.interval`` measures from each partition's last committed MINOR, as in a run)."""
    from compaction.core.planner import plan
    from compaction.core.plan import CompactionMode
    from compaction.core.policy import CompactionPolicy

    decided = None
    problem = None
    try:
        policy = CompactionPolicy.resolve(state.properties, dict(overrides or {}))
    except CompactionError as e:  # invalid compaction.* table properties: health without a decision
        policy, problem = CompactionPolicy(), f"no decision: {e}"
    if problem is None:
        try:
            extra: dict[str, Any] = {}
            if ledger is not None and getattr(policy, "minor_interval_seconds", 0) > 0:
                by_label = ledger.last_committed(state.identity.dotted, "minor", catalog=state.identity.catalog)
                extra["last_minor_at"] = {p.key: by_label[p.key.label()] for p in state.partitions
                                          if p.key.label() in by_label}
            decided = plan(state, policy, CompactionMode.AUTO, now or _utcnow(), plan_id="health-sample", **extra)
        except CompactionError as e:  # e.g. a format v1 table
            problem = f"no decision: {e}"
    sample = sample_from_state(state, policy, decided, metadata_location=metadata_location)
    if problem is not None:
        log.info("%s: %s", state.identity, problem)
        sample = dataclasses.replace(sample, decision_reason=problem)
    return sample


def sample_table(catalog: CatalogConfig, table_name: str, *, loaded: Any | None = None,
                 now: _dt.datetime | None = None, ledger: Ledger | None = None) -> tuple[HealthSample, TableState]:
    """Inspect ``table_name`` (metadata only) and return its health sample and the inspected state.

    ``loaded`` is an already loaded pyiceberg catalog (saves opening one per table)."""
    from compaction.core.identifiers import parse_table_identifier
    from compaction.inspect import load_table, table_state

    if loaded is None:
        identity, table = load_table(catalog, table_name)
    else:
        identity = parse_table_identifier(table_name, catalog.name)
        try:
            table = loaded.load_table((*identity.namespace, identity.name))
        except Exception as e:  # NoSuchTableError and the catalog database's own errors
            raise CatalogError(f"cannot load table {identity.dotted!r} from catalog {catalog.name!r}: {e}") from e
    state = table_state(table, identity)
    return sample_state(state, metadata_location=getattr(table, "metadata_location", None), now=now,
                        ledger=ledger), state


def record_sample(sample: HealthSample, source: str, *, ledger: Ledger | None = None,
                  now: _dt.datetime | None = None,
                  warn: Callable[[str], None] | None = None) -> HealthSampleRecord | None:
    """Store ``sample`` in the ledger (``ledger`` or the default one). Never raises a ledger problem: it is
    reported through ``warn`` (default: the log) and ``None`` is returned."""
    from compaction.ledger import Ledger, LedgerError

    try:
        if ledger is not None:
            return ledger.record_health_sample(sample, source=source, now=now)
        with Ledger.open() as opened:
            return opened.record_health_sample(sample, source=source, now=now)
    except LedgerError as e:
        message = f"health sample of {sample.catalog}.{sample.table_ref} not recorded: {e}"
        (warn or log.warning)(message)
        return None


# ------------------------------------------------------------------------------------------------ catalog
def metadata_locations(catalog: CatalogConfig, loaded: Any | None = None) -> dict[str, str | None]:
    """Every table of the (SQL) catalog with its current metadata file, in one query on the catalog database."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    cat: Any = loaded if loaded is not None else catalog.load()
    t = IcebergTables
    stmt = select(t.table_namespace, t.table_name, t.metadata_location).where(t.catalog_name == catalog.name)
    type_filter = getattr(cat, "_iceberg_type_filter", None)
    condition = type_filter() if callable(type_filter) else None
    if condition is not None:  # skip views (rows written by other engines)
        stmt = stmt.where(condition)
    try:
        with Session(cat.engine) as session:
            rows = session.execute(stmt).all()
    except Exception as e:  # the catalog database's own errors
        raise CatalogError(f"cannot list the tables of catalog {catalog.name!r}: {e}") from e
    return {f"{ns}.{name}": location for ns, name, location in sorted(rows)}


# ------------------------------------------------------------------------------------------------ overview
@dataclass(frozen=True)
class TableOverview:
    """One row of the overview. ``sample`` is the latest health sample (``None``: never inspected); ``current``
    says whether it was taken at the table's current metadata file."""

    table_ref: str
    sample: HealthSample | None
    sampled_at: _dt.datetime | None
    current: bool
    last_run: RunRecord | None
    series: tuple[tuple[_dt.datetime, int], ...]
    attention_level: int
    attention_label: str
    error: str | None = None

    def sort_key(self) -> tuple[object, ...]:
        s = self.sample
        return attention_key(self.attention_level, s.delete_files if s else 0, s.delete_ratio if s else 0.0,
                             s.fragment_files if s else 0, self.table_ref)

    def to_dict(self) -> dict[str, object]:
        return {
            "table": self.table_ref,
            "health": None if self.sample is None else {
                k: v for k, v in self.sample.to_dict().items() if k not in ("partitions_detail",)},
            "sampled_at": None if self.sampled_at is None else self.sampled_at.isoformat(),
            "current": self.current,
            "last_run": None if self.last_run is None else self.last_run.to_dict(),
            "delete_files_series": [[at.isoformat(), n] for at, n in self.series],
            "attention": {"level": self.attention_level, "label": self.attention_label},
            "error": self.error,
        }


@dataclass(frozen=True)
class Overview:
    catalog: str
    generated_at: _dt.datetime
    tables: tuple[TableOverview, ...]
    refreshed: tuple[str, ...]
    stale: tuple[str, ...]
    elapsed_s: float

    def to_dict(self) -> dict[str, object]:
        return {"catalog": self.catalog, "generated_at": self.generated_at.isoformat(),
                "tables": [t.to_dict() for t in self.tables], "refreshed": list(self.refreshed),
                "stale": list(self.stale), "elapsed_s": round(self.elapsed_s, 4)}


def needs_sample(location: str | None, latest: HealthSampleRecord | None, now: _dt.datetime,
                 max_age_s: float = SAMPLE_MAX_AGE_S) -> bool:
    """Whether a table must be inspected again: never sampled, metadata changed, or the sample is too old."""
    if latest is None or latest.metadata_location != location:
        return True
    return (now - latest.recorded_at).total_seconds() > max_age_s


def refresh_tables(catalog: CatalogConfig, names: Iterable[str], ledger: Ledger, *, source: str = "ui",
                   budget_s: float | None = None, loaded: Any | None = None,
                   now: Callable[[], _dt.datetime] = _utcnow) -> tuple[list[str], dict[str, str]]:
    """Inspect and record ``names`` in order until ``budget_s`` is spent (``None``: all). Returns the tables
    refreshed and the errors by table. Tables already being refreshed by another thread are skipped."""
    cat = loaded if loaded is not None else catalog.load()
    started = time.monotonic()
    done: list[str] = []
    errors: dict[str, str] = {}
    for name in names:
        if budget_s is not None and time.monotonic() - started >= budget_s:
            break
        key = (catalog.name, name)
        with _IN_FLIGHT_LOCK:
            if key in _IN_FLIGHT:
                continue
            _IN_FLIGHT.add(key)
        try:
            sample, _ = sample_table(catalog, name, loaded=cat, now=now(), ledger=ledger)
            record_sample(sample, source, ledger=ledger, now=now())
            done.append(name)
        except CompactionError as e:
            errors[name] = str(e)
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(key)
    return done, errors


_IN_FLIGHT: set[tuple[str, str]] = set()
_IN_FLIGHT_LOCK = threading.Lock()


def build_overview(catalog: CatalogConfig, ledger: Ledger, *, budget_s: float | None = REFRESH_BUDGET_S,
                   max_age_s: float = SAMPLE_MAX_AGE_S, now: _dt.datetime | None = None,
                   source: str = "ui") -> Overview:
    """Every table of ``catalog`` with its health, decision, last run and delete-file series, most urgent first.

    Reads the catalog's table pointers (one query) and the ledger (three queries); re-inspects changed tables
    for at most ``budget_s`` seconds (``None``: all of them)."""
    clock = time.monotonic()
    at = now or _utcnow()
    loaded = catalog.load()
    locations = metadata_locations(catalog, loaded)
    latest = ledger.latest_health_samples(catalog.name)
    todo = [t for t in locations if needs_sample(locations[t], latest.get(t), at, max_age_s)]
    # Never inspected first, then the oldest samples.
    todo.sort(key=lambda t: (t in latest, latest[t].recorded_at if t in latest else at, t))
    refreshed: list[str] = []
    errors: dict[str, str] = {}
    if todo and (budget_s is None or budget_s > 0):
        refreshed, errors = refresh_tables(catalog, todo, ledger, source=source, budget_s=budget_s, loaded=loaded,
                                           now=(lambda: at) if now is not None else _utcnow)
        if refreshed:
            latest = ledger.latest_health_samples(catalog.name)
    runs = ledger.latest_runs(catalog.name)
    series = ledger.health_series(catalog.name, since=at - _dt.timedelta(days=SERIES_DAYS), points=SERIES_POINTS)
    rows = []
    stale = []
    for name, location in locations.items():
        sample = latest.get(name)
        current = sample is not None and not needs_sample(location, sample, at, max_age_s)
        if not current and name not in errors:
            stale.append(name)
        run = runs.get(name)
        att = attention(sample.decision if sample else None, run.status.value if run else None, sample is not None)
        rows.append(TableOverview(
            table_ref=name, sample=sample, sampled_at=sample.recorded_at if sample else None, current=current,
            last_run=run, series=tuple(series.get(name, ())), attention_level=att.level, attention_label=att.label,
            error=errors.get(name)))
    rows.sort(key=TableOverview.sort_key)
    return Overview(catalog=catalog.name, generated_at=at, tables=tuple(rows), refreshed=tuple(refreshed),
                    stale=tuple(stale), elapsed_s=time.monotonic() - clock)


# ------------------------------------------------------------------------------------------------ sorting
SORT_KEYS: Mapping[str, Callable[[TableOverview], Any]] = {
    "attention": TableOverview.sort_key,
    "table": lambda r: r.table_ref,
    "delete_files": lambda r: (r.sample.delete_files if r.sample else -1, r.table_ref),
    "delete_ratio": lambda r: (r.sample.delete_ratio if r.sample else -1.0, r.table_ref),
    "fragment_files": lambda r: (r.sample.fragment_files if r.sample else -1, r.table_ref),
    "data_files": lambda r: (r.sample.data_files if r.sample else -1, r.table_ref),
    "decision": lambda r: ({"major": 2, "minor": 1, "none": 0}.get(r.sample.decision or "", -1) if r.sample else -1,
                           r.table_ref),
    "last_run": lambda r: (r.last_run.started_at.timestamp() if r.last_run else 0.0, r.table_ref),
}
#: The natural direction of each sort (True: descending, the biggest / most urgent first).
SORT_DESCENDING: Mapping[str, bool] = {"attention": False, "table": False, "delete_files": True,
                                       "delete_ratio": True, "fragment_files": True, "data_files": True,
                                       "decision": True, "last_run": True}


def sort_rows(rows: Sequence[TableOverview], key: str, descending: bool | None = None) -> list[TableOverview]:
    """Rows sorted by ``key`` (one of :data:`SORT_KEYS`; unknown keys sort by attention)."""
    if key not in SORT_KEYS:
        key = "attention"
    desc = SORT_DESCENDING[key] if descending is None else descending
    return sorted(rows, key=SORT_KEYS[key], reverse=desc)
