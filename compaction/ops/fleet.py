"""Health of a catalog's tables over time: health samples from metadata, and the overview of every table.

* :func:`sample_table` inspects one table (metadata only, pyiceberg), runs the planner in ``auto`` mode under the
  table's own policy and condenses both into a :class:`~compaction.core.health.HealthSample`;
  :func:`record_sample` stores it in the ledger (best effort: a ledger problem never fails an inspection).
* :func:`build_overview` answers "which table needs attention" for a whole catalog from the ledger and the
  catalog's metadata pointers only: on a SQL catalog one query lists every table with its current metadata file;
  other catalogs (REST) have no such listing, so their pointers come from the catalog's own API (namespaces, tables,
  one table load each, in parallel) through a :class:`PointerCache` that answers from its last reading and reads
  again in the background (see :data:`POINTER_MAX_AGE_S`). A table whose latest sample was taken at its current
  metadata file (and recently enough for the decision to hold) is not inspected again. Changed tables are
  re-inspected within a time budget, stalest first; the rest are shown from their last sample, marked stale, and
  left to :func:`refresh_tables` (the UI runs it after answering).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
#: Table pointers of a catalog without a listing query (REST) younger than this are used as they are; older ones
#: still answer, while a background reading replaces them.
POINTER_MAX_AGE_S = 30.0
#: Pointers older than this (an overview after a long idle time) are read again before answering.
POINTER_STALE_LIMIT_S = 900.0
#: Concurrent table loads when reading a REST catalog's pointers (one HTTP request each; bounded so that an
#: overview never floods the catalog).
POINTER_LOAD_WORKERS = 8


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
    from compaction.metadata.inspect import load_table, table_state

    if loaded is None:
        identity, table = load_table(catalog, table_name)
    else:
        identity = parse_table_identifier(table_name, catalog.name)
        try:
            table = loaded.load_table((*identity.namespace, identity.name))
        except Exception as e:  # NoSuchTableError and the catalog database's own errors
            raise CatalogError(f"cannot load table {identity.dotted!r} from catalog {catalog.name!r}: {e}") from e
    state = table_state(table, identity)
    sample = sample_state(state, metadata_location=getattr(table, "metadata_location", None), now=now,
                          ledger=ledger)
    m = metadata_stats(table)
    return dataclasses.replace(sample, snapshots=m["snapshots"], metadata_file_bytes=m["metadata_file_bytes"],
                               manifests=m["manifests"], manifest_bytes=m["manifest_bytes"]), state


def metadata_stats(table: Any) -> dict[str, int | None]:
    """What the sample measures of the table's metadata, cheaply: the snapshots of the loaded metadata,
    the metadata file's size (one stat/HEAD) and the current snapshot's manifests with their bytes (its manifest
    list, which the inspection has just read: pyiceberg caches it). A value that cannot be read is ``None``: the
    sample is still recorded (health over time never fails on it)."""
    out: dict[str, int | None] = {"snapshots": None, "metadata_file_bytes": None, "manifests": None,
                                  "manifest_bytes": None}
    metadata = getattr(table, "metadata", None)
    if metadata is None:
        return out
    out["snapshots"] = len(metadata.snapshots)
    location = getattr(table, "metadata_location", None)
    try:
        if location:
            out["metadata_file_bytes"] = len(table.io.new_input(location))
        current = table.current_snapshot()
        manifests = current.manifests(table.io) if current is not None else []
        out["manifests"] = len(manifests)
        out["manifest_bytes"] = sum(int(m.manifest_length) for m in manifests)
    except Exception as e:  # noqa: BLE001 - FileIO errors (OSError, botocore, ...): the sample goes without them
        log.info("metadata size of %s not measured: %s: %s", location, type(e).__name__, e)
    return out


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
    """Every table of the catalog with its current metadata file, read now: one query on the catalog database of a
    SQL catalog, else the catalog's API (see :func:`catalog_api_locations`)."""
    cat: Any = loaded if loaded is not None else catalog.load()
    if not catalog.is_sql:
        return {name: location for name, (location, _) in catalog_api_locations(catalog, cat).items()}
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

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


def _all_namespaces(loaded: Any) -> list[tuple[str, ...]]:
    """Every namespace, nested ones included (one listing per namespace). A child must extend its parent: a
    catalog that ignores ``parent`` and answers the top level again cannot make this loop."""
    queue = [tuple(ns) for ns in loaded.list_namespaces()]
    found: list[tuple[str, ...]] = []
    while queue:
        namespace = queue.pop(0)
        if namespace in found:
            continue
        found.append(namespace)
        try:
            children = [tuple(c) for c in loaded.list_namespaces(namespace)]
        except Exception:  # noqa: BLE001 - catalogs without nested namespaces may refuse the parent parameter
            children = []
        queue += [c for c in children if len(c) > len(namespace) and c[:len(namespace)] == namespace]
    return found


def _catalog_per_thread(catalog: CatalogConfig, loaded: Any) -> Callable[[], Any]:
    """The pyiceberg catalog a worker thread uses. pyiceberg's HiveCatalog has one Thrift connection that each call
    opens and closes: two threads sharing it close each other's transport ("Transport not open"), so on Hive every
    thread loads its own; other catalogs' clients are shared."""
    if not catalog.is_hive:
        return lambda: loaded
    local = threading.local()

    def own() -> Any:
        if not hasattr(local, "catalog"):
            local.catalog = catalog.load()
        return local.catalog

    return own


def catalog_api_locations(catalog: CatalogConfig, loaded: Any,
                          workers: int = POINTER_LOAD_WORKERS) -> dict[str, tuple[str | None, float]]:
    """Every table of a catalog that has no listing query (REST): ``name -> (metadata location, monotonic time its
    load began)``, from the catalog's API: list the namespaces and their tables, then load every table (metadata
    only, ``workers`` at a time) for its current metadata file. A table that cannot be loaded has location ``None``
    (the overview then inspects it and shows the error); a table dropped meanwhile is left out."""
    from pyiceberg.exceptions import NoSuchTableError

    mine = _catalog_per_thread(catalog, loaded)
    try:
        namespaces = _all_namespaces(loaded)
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(namespaces))),
                                thread_name_prefix="icecompact-list") as pool:
            identifiers = [tuple(i) for listed in pool.map(lambda ns: mine().list_tables(ns), namespaces)
                           for i in listed]
    except Exception as e:  # HTTP and authentication errors of the catalog
        raise CatalogError(f"cannot list the tables of catalog {catalog.name!r}: {e}") from e

    def pointer(identifier: tuple[str, ...]) -> tuple[str, str | None, float] | None:
        started = time.monotonic()
        try:
            return ".".join(identifier), mine().load_table(identifier).metadata_location, started
        except NoSuchTableError:  # dropped between the listing and the load
            return None
        except Exception as e:  # noqa: BLE001 - one unreadable table must not hide the others
            log.warning("catalog %s: cannot load %s for its metadata pointer: %s", catalog.name,
                        ".".join(identifier), e)
            return ".".join(identifier), None, started

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(identifiers))),
                            thread_name_prefix="icecompact-pointers") as pool:
        loaded_pointers = [p for p in pool.map(pointer, identifiers) if p is not None]
    return {name: (location, started) for name, location, started in sorted(loaded_pointers, key=lambda p: p[0])}


@dataclass(frozen=True)
class TablePointers:
    """The tables of a catalog with their current metadata file, as of ``read_at`` (when the reading that listed
    them began); ``cached``: taken from an earlier reading rather than read for this answer."""

    locations: Mapping[str, str | None]
    read_at: _dt.datetime
    cached: bool
    source: str

    def age_s(self, now: _dt.datetime | None = None) -> float:
        return max(0.0, ((now or _utcnow()) - self.read_at).total_seconds())


@dataclass
class _PointerEntry:
    locations: dict[str, tuple[str | None, float]]
    listed_at: float  # monotonic time the listing began
    listed_wall: _dt.datetime
    refreshing: threading.Thread | None = None
    last_error: str | None = None


@dataclass
class PointerCache:
    """Table pointers of catalogs without a listing query, kept between overviews (one per api-server process).

    :meth:`pointers` answers from the last reading when it is younger than ``max_age_s``; when older, it still
    answers from it and starts one background reading (never two for a catalog at once); when older than
    ``stale_limit_s`` or absent, it reads before answering. Inspections report the pointer they loaded
    (:meth:`note`), so a table re-inspected by the overview is never compared with an older pointer."""

    workers: int = POINTER_LOAD_WORKERS
    _entries: dict[tuple[str, str], _PointerEntry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def _key(catalog: CatalogConfig) -> tuple[str, str]:
        # Same name, other properties (another server, other credentials): another entry. Hashed, not kept in clear.
        digest = hashlib.sha256(json.dumps(sorted(catalog.properties.items())).encode()).hexdigest()
        return catalog.name, digest

    def pointers(self, catalog: CatalogConfig, *, max_age_s: float = POINTER_MAX_AGE_S,
                 stale_limit_s: float = POINTER_STALE_LIMIT_S, loaded: Any | None = None) -> TablePointers:
        key = self._key(catalog)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or time.monotonic() - entry.listed_at > stale_limit_s:
            entry = self._read(catalog, key, loaded)
            return self._view(entry, cached=False)
        if time.monotonic() - entry.listed_at > max_age_s:
            self._refresh_in_background(catalog, key)
        return self._view(entry, cached=True)

    def read(self, catalog: CatalogConfig, loaded: Any | None = None) -> TablePointers:
        """Read the pointers now (and keep them)."""
        return self._view(self._read(catalog, self._key(catalog), loaded), cached=False)

    def note(self, catalog: CatalogConfig, table: str, location: str | None, read_started: float) -> None:
        """A pointer loaded at monotonic time ``read_started`` (an inspection): kept when newer than the cached one."""
        with self._lock:
            entry = self._entries.get(self._key(catalog))
            if entry is not None and entry.locations.get(table, (None, float("-inf")))[1] < read_started:
                entry.locations[table] = (location, read_started)

    def wait_idle(self, catalog: CatalogConfig, timeout: float | None = None) -> None:
        """Wait for a background reading of ``catalog`` to end (tests, benchmarks)."""
        with self._lock:
            entry = self._entries.get(self._key(catalog))
            thread = entry.refreshing if entry else None
        if thread is not None:
            thread.join(timeout)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _read(self, catalog: CatalogConfig, key: tuple[str, str], loaded: Any | None) -> _PointerEntry:
        listed_at, listed_wall = time.monotonic(), _utcnow()
        cat = loaded if loaded is not None else catalog.load()
        locations = catalog_api_locations(catalog, cat, self.workers)
        with self._lock:
            old = self._entries.get(key)
            if old is not None:
                # Keep what an inspection noted after this reading began: it is newer than what was just read
                # (and a table created meanwhile is kept even though this listing missed it).
                for name, (location, started) in old.locations.items():
                    if started > listed_at and started > locations.get(name, (None, float("-inf")))[1]:
                        locations[name] = (location, started)
                if old.listed_at > listed_at:  # a concurrent, later reading already landed
                    return old
            entry = _PointerEntry(dict(sorted(locations.items())), listed_at, listed_wall,
                                  refreshing=old.refreshing if old else None)
            self._entries[key] = entry
        return entry

    def _refresh_in_background(self, catalog: CatalogConfig, key: tuple[str, str]) -> None:
        def work() -> None:
            try:
                self._read(catalog, key, None)
            except CompactionError as e:  # kept: the answer goes on showing the last reading and its age
                log.warning("catalog %s: background reading of table pointers failed: %s", catalog.name, e)
                with self._lock:
                    if key in self._entries:
                        self._entries[key].last_error = str(e)
            finally:
                with self._lock:
                    if key in self._entries and self._entries[key].refreshing is threading.current_thread():
                        self._entries[key].refreshing = None

        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (entry.refreshing is not None and entry.refreshing.is_alive()):
                return
            entry.refreshing = threading.Thread(target=work, name=f"icecompact-pointers-{catalog.name}", daemon=True)
            entry.last_error = None
            entry.refreshing.start()

    def _view(self, entry: _PointerEntry, cached: bool) -> TablePointers:
        with self._lock:
            locations = {name: location for name, (location, _) in entry.locations.items()}
        return TablePointers(locations, entry.listed_wall, cached, "catalog API")


#: The pointer cache of this process (the api-server's overview).
POINTER_CACHE = PointerCache()


def table_pointers(catalog: CatalogConfig, loaded: Any | None = None, *, cache: PointerCache | None = None,
                   max_age_s: float = POINTER_MAX_AGE_S) -> TablePointers:
    """The catalog's tables and current metadata files for an overview: read now on a SQL catalog (one query),
    else from ``cache`` (default :data:`POINTER_CACHE`; see :class:`PointerCache`)."""
    if catalog.is_sql:
        at = _utcnow()
        return TablePointers(metadata_locations(catalog, loaded), at, False, "catalog database")
    return (cache or POINTER_CACHE).pointers(catalog, max_age_s=max_age_s, loaded=loaded)


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
    #: Where the table list and metadata pointers came from and when they were read (see :class:`TablePointers`).
    pointers_read_at: _dt.datetime | None = None
    pointers_cached: bool = False
    pointers_source: str = "catalog database"

    @property
    def pointers_age_s(self) -> float:
        return 0.0 if self.pointers_read_at is None else max(
            0.0, (self.generated_at - self.pointers_read_at).total_seconds())

    def to_dict(self) -> dict[str, object]:
        return {"catalog": self.catalog, "generated_at": self.generated_at.isoformat(),
                "tables": [t.to_dict() for t in self.tables], "refreshed": list(self.refreshed),
                "stale": list(self.stale), "elapsed_s": round(self.elapsed_s, 4),
                "pointers": {"source": self.pointers_source, "cached": self.pointers_cached,
                             "read_at": None if self.pointers_read_at is None else self.pointers_read_at.isoformat(),
                             "age_s": round(self.pointers_age_s, 1)}}


def needs_sample(location: str | None, latest: HealthSampleRecord | None, now: _dt.datetime,
                 max_age_s: float = SAMPLE_MAX_AGE_S) -> bool:
    """Whether a table must be inspected again: never sampled, metadata changed, or the sample is too old."""
    if latest is None or latest.metadata_location != location:
        return True
    return (now - latest.recorded_at).total_seconds() > max_age_s


def refresh_tables(catalog: CatalogConfig, names: Iterable[str], ledger: Ledger, *, source: str = "ui",
                   budget_s: float | None = None, loaded: Any | None = None,
                   now: Callable[[], _dt.datetime] = _utcnow,
                   pointer_cache: PointerCache | None = None) -> tuple[list[str], dict[str, str]]:
    """Inspect and record ``names`` in order until ``budget_s`` is spent (``None``: all). Returns the tables
    refreshed and the errors by table. Tables already being refreshed by another thread are skipped. On a catalog
    without a listing query, the pointer each inspection loaded goes to ``pointer_cache`` (default
    :data:`POINTER_CACHE`)."""
    cat = loaded if loaded is not None else catalog.load()
    pointers = None if catalog.is_sql else (pointer_cache or POINTER_CACHE)
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
            load_started = time.monotonic()
            sample, _ = sample_table(catalog, name, loaded=cat, now=now(), ledger=ledger)
            if pointers is not None:
                pointers.note(catalog, name, sample.metadata_location, load_started)
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
                   source: str = "ui", pointer_cache: PointerCache | None = None,
                   pointer_max_age_s: float = POINTER_MAX_AGE_S) -> Overview:
    """Every table of ``catalog`` with its health, decision, last run and delete-file series, most urgent first.

    Reads the catalog's table pointers (SQL: one query; otherwise from ``pointer_cache``, read again when older
    than ``pointer_max_age_s``, see :class:`PointerCache`) and the ledger (three queries); re-inspects changed tables
    for at most ``budget_s`` seconds (``None``: all of them)."""
    clock = time.monotonic()
    at = now or _utcnow()
    # A REST catalog is opened (token, config request) only when the answer needs it: a warm overview does not.
    loaded = catalog.load() if catalog.is_sql else None
    pointers = table_pointers(catalog, loaded, cache=pointer_cache, max_age_s=pointer_max_age_s)
    locations = pointers.locations
    latest = ledger.latest_health_samples(catalog.name)
    todo = [t for t in locations if needs_sample(locations[t], latest.get(t), at, max_age_s)]
    # Never inspected first, then the oldest samples.
    todo.sort(key=lambda t: (t in latest, latest[t].recorded_at if t in latest else at, t))
    refreshed: list[str] = []
    errors: dict[str, str] = {}
    if todo and (budget_s is None or budget_s > 0):
        refreshed, errors = refresh_tables(catalog, todo, ledger, source=source, budget_s=budget_s,
                                           loaded=loaded if loaded is not None else catalog.load(),
                                           now=(lambda: at) if now is not None else _utcnow,
                                           pointer_cache=pointer_cache)
        if refreshed:
            latest = ledger.latest_health_samples(catalog.name)
            if pointers.cached:  # an inspection just loaded a newer pointer than the cached one
                locations = {**locations, **{t: latest[t].metadata_location for t in refreshed if t in latest}}
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
                    stale=tuple(stale), elapsed_s=time.monotonic() - clock, pointers_read_at=pointers.read_at,
                    pointers_cached=pointers.cached, pointers_source=pointers.source)


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
