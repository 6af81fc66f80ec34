"""Execute a :class:`~compaction.core.maintenance.MaintenancePlan` on Spark with Iceberg's own actions.

* **ExpireSnapshots** (``SparkActions.expireSnapshots``) with the plan's ``expireOlderThan`` / ``retainLast``. Before
  it runs, the same expiry is *applied without committing* on the live table (``table.expireSnapshots()...apply()``,
  Iceberg's ``RemoveSnapshots``, metadata only): if it would remove a snapshot the plan protects (in-flight runs
  need it) the action is refused. Iceberg always also applies the table's own ``history.expire.*`` properties and
  per-ref retention (``RemoveSnapshots.internalApply``), which the planner folded into the same numbers.
* **RewriteManifests** (``SparkActions.rewriteManifests``) of the current snapshot. The replaced manifests stay
  referenced by older snapshots: nothing is deleted now (the next expiry removes them).
* **DeleteOrphanFiles** (``SparkActions.deleteOrphanFiles``) fed our own listing of the table location
  (``compareToFileList``: path, last modified, length, listed with Spark's file index like Iceberg's Hadoop listing)
  so that (1) only files last modified before the plan's ``orphan_older_than_ms`` (never newer than the oldest
  in-flight run or write lease) are candidates, (2) the bytes of what was deleted are known. Iceberg compares
  candidates with every file any snapshot's metadata references by scheme + authority + path; with
  ``prefixMismatchMode(ERROR)`` (set explicitly, Iceberg's default) a file that metadata references under another
  scheme or authority (``s3`` vs ``s3a`` not declared equal, another bucket alias) makes the whole action fail
  instead of deleting anything: an orphan is proven, not guessed. ``equalSchemes`` / ``equalAuthorities`` come from
  the policy (Iceberg already counts ``s3n``/``s3a`` as ``s3``). Locations go through Hadoop ``Path``, which
  normalizes a trailing or doubled slash.

* **Metadata versions** that left the metadata log (``write.metadata.delete-after-commit.enabled`` tables only): the
  versions numbered below every version of the log, which Iceberg's own catalogs delete on commit and a REST
  server may keep (:func:`dropped_metadata_files`).

Large expiries (``expire-snapshots.driver-min-snapshots``) run Iceberg's table API on the driver instead of the Spark
action; locations Hadoop cannot list (``s3://`` with S3FileIO) are listed through the table's FileIO.

Files and bytes removed by the expiry are measured as the difference between a listing of the table location
before and after it (writers only add files, so what disappeared is what the expiry deleted).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from compaction.core.errors import MaintenanceError
from compaction.core.maintenance import MaintenanceAction, MaintenancePlan
from compaction.core.identifiers import quoted
from compaction.spark.jvm import activate, jvm, load_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MaintenanceError", "OrphanSafetyError", "ActionResult", "OK_STATUSES", "execute_plan", "list_files",
           "MAINTENANCE_RESULT_FORMAT_VERSION", "result_payload", "results_from_payload",
           "is_manifest_conflict", "retry_on_manifest_conflict", "classify_removed", "metadata_version",
           "dropped_metadata_files", "action_error"]


class OrphanSafetyError(MaintenanceError):
    """Orphan removal refused: a file could not be proven orphan (scheme/authority mismatch with metadata)."""


#: Action statuses that are not a failure of the run.
OK_STATUSES = ("succeeded", "deferred")


@dataclass(frozen=True)
class ActionResult:
    action: MaintenanceAction
    status: str  # succeeded | deferred (lost a race, nothing changed; the next run retries) | refused | failed

    @property
    def ok(self) -> bool:
        """Done, or harmlessly put off to the next run."""
        return self.status in OK_STATUSES
    files_removed: int = 0
    bytes_removed: int | None = 0
    duration_ms: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"action": self.action.value, "status": self.status, "files_removed": self.files_removed,
                "bytes_removed": self.bytes_removed, "duration_ms": self.duration_ms, "detail": self.detail,
                "error": self.error}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActionResult:
        """The inverse of :meth:`to_dict` (the ``maintain`` job's result file, read by the host)."""
        try:
            bytes_removed = data.get("bytes_removed")
            return cls(MaintenanceAction(data["action"]), str(data["status"]), int(data.get("files_removed") or 0),
                       None if bytes_removed is None else int(bytes_removed), int(data.get("duration_ms") or 0),
                       dict(data.get("detail") or {}), None if data.get("error") is None else str(data["error"]))
        except (KeyError, TypeError, ValueError) as e:
            raise MaintenanceError(f"invalid maintenance action result {data!r}: {e}") from e


#: Version of the ``maintain`` job's result file (``python -m compaction.spark maintain --result R``): the host reads
#: only the version it knows, as the job reads only the plan format version it knows.
MAINTENANCE_RESULT_FORMAT_VERSION = 1


def result_payload(plan_id: str, results: Sequence[ActionResult], *, complete: bool = True,
                   error: str | None = None) -> dict[str, Any]:
    """The ``maintain`` job's result file: every action's result, ``complete`` false in the checkpoint a job killed
    mid-plan leaves (what it did so far), ``error`` when the job could not execute the plan at all."""
    return {"maintenance_result_format_version": MAINTENANCE_RESULT_FORMAT_VERSION, "plan_id": plan_id,
            "complete": complete, "results": [r.to_dict() for r in results], "error": error}


def results_from_payload(payload: Mapping[str, Any], plan_id: str) -> list[ActionResult]:
    """The action results of a :func:`result_payload`, checked: its version and that it is ``plan_id``'s."""
    version = payload.get("maintenance_result_format_version")
    if version != MAINTENANCE_RESULT_FORMAT_VERSION:
        raise MaintenanceError(f"unsupported maintenance result format version {version!r} "
                               f"(this version reads {MAINTENANCE_RESULT_FORMAT_VERSION})")
    if payload.get("plan_id") != plan_id:
        raise MaintenanceError(f"maintenance result is for plan {payload.get('plan_id')!r}, not {plan_id!r}")
    return [ActionResult.from_dict(r) for r in payload.get("results") or ()]


def _hadoop_file_system(spark: SparkSession, location: str) -> Any | None:
    """Hadoop's file system for ``location``, or ``None`` when Hadoop has none for its scheme (``s3://`` tables use
    Iceberg's S3FileIO; Spark here has no S3A)."""
    j = jvm(spark)
    try:
        return j.org.apache.hadoop.fs.Path(location).getFileSystem(spark._jsc.hadoopConfiguration())
    except Exception:  # noqa: BLE001 - py4j: UnsupportedFileSystemException (No FileSystem for scheme "s3")
        return None


def _qualified(spark: SparkSession, location: str) -> str:
    """The location as the listing names files: as Hadoop qualifies it (``file:/x`` for ``/x`` or ``file:///x/``),
    or as it is (without a trailing slash) where Hadoop cannot list it and the table's FileIO does."""
    fs = _hadoop_file_system(spark, location)
    if fs is None:
        return location.rstrip("/")
    return str(fs.makeQualified(jvm(spark).org.apache.hadoop.fs.Path(location)).toString())


#: What a listing is: one row per file.
LISTING_SCHEMA = "file_path string, last_modified timestamp, length long"


def _hidden(relative: str, visible_prefixes: tuple[str, ...]) -> bool:
    """Iceberg's listing skips names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``, ``_temporary``), except
    under the table's own write paths (a table's ``write.data.path`` may itself be an underscore folder: object
    stores that admit only data file names under ``data/`` make tables put them under ``_data/``)."""
    if any(relative.startswith(p) for p in visible_prefixes):
        return False
    return any(part.startswith(("_", ".")) for part in relative.split("/") if part)


def _list_with_file_io(spark: SparkSession, table: Any, location: str, visible: tuple[str, ...]) -> DataFrame:
    """The listing through the table's FileIO (``SupportsPrefixOperations.listPrefix``: S3FileIO lists objects by
    prefix), for storage Hadoop cannot list."""
    import datetime as _dt

    prefix = location.rstrip("/") + "/"  # never the sibling table "t2" of "t"
    try:
        listed = table.io().listPrefix(prefix).iterator()
    except Exception as e:  # noqa: BLE001 - py4j: the FileIO supports no prefix listing
        raise MaintenanceError(f"cannot list {prefix}: neither Hadoop nor the table's FileIO "
                               f"({table.io().getClass().getName()}) can list it: {str(e)[:300]}") from e
    rows = []
    while listed.hasNext():
        info = listed.next()
        path = str(info.location())
        if _hidden(path[len(prefix):], visible):
            continue
        rows.append((path, _dt.datetime.fromtimestamp(int(info.createdAtMillis()) / 1000.0, _dt.timezone.utc),
                     int(info.size())))
    return spark.createDataFrame(rows, LISTING_SCHEMA)


def list_files(spark: SparkSession, location: str, table: Any | None = None) -> DataFrame:
    """Every file under ``location`` (recursively, hidden ``_``/``.`` names skipped as Iceberg's listing does):
    ``file_path`` (string), ``last_modified`` (timestamp), ``length`` (long). Where Hadoop can list the location,
    Spark's binaryFile source lists it (the content column is never selected, so no file is read); elsewhere
    (``s3://`` with S3FileIO) the table's FileIO does."""
    from pyspark.sql import functions as F

    if table is not None and _hadoop_file_system(spark, location) is None:
        props = table.properties()
        visible = tuple(str(props.get(k)).rstrip("/")[len(location.rstrip("/")) + 1:] + "/"
                        for k in ("write.data.path", "write.metadata.path")
                        if props.get(k) and str(props.get(k)).startswith(location.rstrip("/") + "/"))
        return _list_with_file_io(spark, table, location, visible)
    # ignoreMissingFiles: a file listed and gone before its task reads its status is simply not in the listing.
    # Writers and compactions commit meanwhile and delete old metadata.json files beyond
    # write.metadata.previous-versions-max (the maintenance soak hit it: the expiry failed with
    # SparkFileNotFoundException); a file that no longer exists is neither an orphan candidate nor bytes to count.
    df = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").option("ignoreMissingFiles", "true")
          .load(location)
          .select(F.col("path").alias("file_path"), F.col("modificationTime").alias("last_modified"),
                  F.col("length")))
    return df


def _sizes(spark: SparkSession, location: str, table: Any | None = None) -> dict[str, int]:
    return {r.file_path: int(r.length)
            for r in list_files(spark, location, table).select("file_path", "length").collect()}


def _jmap(spark: SparkSession, pairs: tuple[tuple[str, str], ...]) -> Any:
    m = jvm(spark).java.util.HashMap()
    for k, v in pairs:
        m.put(k, v)
    return m


def classify_removed(paths: set[str], location: str) -> dict[str, int]:
    """Counts of removed files by kind, from their names (Iceberg's naming): under the table's ``metadata/``,
    ``snap-*.avro`` manifest lists, other ``.avro`` manifests, ``.stats``/``.puffin`` statistics, ``.metadata.json``
    metadata files (deleted by commits, not by the expiry: kept apart); anything else is a data or delete file."""
    out = {"data_and_delete_files": 0, "manifests": 0, "manifest_lists": 0, "statistics_files": 0,
           "metadata_files": 0}
    root = location.rstrip("/") + "/"
    for path in paths:
        relative = path[len(root):] if path.startswith(root) else path
        name = relative.rsplit("/", 1)[-1]
        if name.endswith(".metadata.json") or name.endswith(".metadata.json.gz"):
            out["metadata_files"] += 1
        elif "metadata/" in relative and name.endswith(".avro"):
            out["manifest_lists" if name.startswith("snap-") else "manifests"] += 1
        elif "metadata/" in relative and name.endswith((".stats", ".puffin")):
            out["statistics_files"] += 1
        else:
            out["data_and_delete_files"] += 1
    return out


def _expire(spark: SparkSession, table: Any, plan: MaintenancePlan) -> ActionResult:
    assert plan.expire_older_than_ms is not None
    started = time.monotonic()
    table.refresh()
    # Enforce the in-flight protection on the table as it is now: Iceberg's own RemoveSnapshots, applied without a
    # commit, names exactly what the action will remove.
    preview = table.expireSnapshots().expireOlderThan(plan.expire_older_than_ms).retainLast(plan.retain_last).apply()
    would_remove = {int(s.snapshotId()) for s in preview}
    at_risk = sorted(would_remove & set(plan.protected_snapshot_ids))
    if at_risk:
        return ActionResult(MaintenanceAction.EXPIRE_SNAPSHOTS, "refused", detail={"at_risk": at_risk},
                            error=f"expiry would remove snapshot(s) {at_risk[:5]} in-flight work needs")
    location = _qualified(spark, plan.location)
    # Where the time goes (bench/expire_scale.py): the check above, the listings, Iceberg's action.
    timings = {"check_s": time.monotonic() - started}
    t = time.monotonic()
    before = _sizes(spark, location, table)
    timings["listing_before_s"] = time.monotonic() - t
    t = time.monotonic()
    j = jvm(spark)
    on_driver = len(would_remove) >= plan.policy.expire_driver_min_snapshots
    if on_driver:
        # Iceberg's RemoveSnapshots with its own clean-up (ReachableFileCleanup / IncrementalFileCleanup), manifest
        # lists read and files deleted on Iceberg's worker pool: the metadata is read once, not shipped to every
        # Spark task (what makes the action crawl on a table of 100,000 snapshots).
        #
        # Naming the snapshots (the preview's) makes RemoveSnapshots clean up by reachability, as the Spark action
        # does: a file is deleted only when no retained snapshot references its path. Left to itself on a table with
        # only `main` it picks IncrementalFileCleanup, which deletes the file of every entry an expired snapshot
        # removed, and a v3 deletion-vector Puffin file holds the DVs of several data files: when one of them was
        # replaced, the file went while the others' DVs were live (test_expiry_on_the_driver_removes_what_the_
        # spark_action_removes[3] read a deleted .puffin).
        pool = j.org.apache.iceberg.util.ThreadPools.getWorkerPool()
        update = table.expireSnapshots()
        for snapshot_id in sorted(would_remove):
            update = update.expireSnapshotId(snapshot_id)
        # Expired files are deleted by RemoveSnapshots' default (cleanExpiredFiles true up to 1.11, CleanupLevel.ALL
        # from 1.12, which deprecates cleanExpiredFiles): left at it, so neither line calls a deprecated method.
        update.expireOlderThan(plan.expire_older_than_ms).retainLast(plan.retain_last) \
            .planWith(pool).executeDeleteWith(pool).commit()
        result = None
    else:
        actions = j.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
        result = actions.expireSnapshots(table).expireOlderThan(plan.expire_older_than_ms) \
            .retainLast(plan.retain_last).execute()
    timings["action_s"] = time.monotonic() - t
    t = time.monotonic()
    after = _sizes(spark, location, table)
    timings["listing_after_s"] = time.monotonic() - t
    gone = set(before) - set(after)
    if result is not None:
        detail: dict[str, Any] = {
            "snapshots_expired": len(would_remove), "executor": "spark",
            "data_files": int(result.deletedDataFilesCount()),
            "position_delete_files": int(result.deletedPositionDeleteFilesCount()),
            "equality_delete_files": int(result.deletedEqualityDeleteFilesCount()),
            "manifests": int(result.deletedManifestsCount()),
            "manifest_lists": int(result.deletedManifestListsCount()),
            "statistics_files": int(result.deletedStatisticsFilesCount()),
        }
    else:
        # The table API returns no counts: what it deleted is what the listings say disappeared.
        detail = {"snapshots_expired": len(would_remove), "executor": "driver", **classify_removed(gone, location)}
    files = sum(v for k, v in detail.items() if k not in ("snapshots_expired", "executor", "metadata_files"))
    detail["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
    return ActionResult(MaintenanceAction.EXPIRE_SNAPSHOTS, "succeeded", files_removed=files,
                        bytes_removed=sum(before[p] for p in gone), detail=detail)


#: Attempts of a manifest rewrite that lost a race with a concurrent commit (see :func:`_rewrite_manifests`).
REWRITE_MANIFESTS_ATTEMPTS = 4


def is_manifest_conflict(error: BaseException) -> bool:
    """Whether ``error`` is Iceberg's ``BaseRewriteManifests.validateDeletedManifests`` refusing a manifest rewrite
    because a commit made after it read the table replaced one of the manifests it rewrote (a compaction or an
    overwrite drops manifest entries by rewriting the manifest). Nothing was committed: the rewrite is simply
    stale."""
    text = str(error)
    return "ValidationException" in text and "could not be found in the latest snapshot" in text


def retry_on_manifest_conflict(attempt: Callable[[], Any], refresh: Callable[[], None], *,
                               attempts: int = REWRITE_MANIFESTS_ATTEMPTS,
                               pause_s: Callable[[int], float] = lambda n: 0.5 * n) -> tuple[Any | None, int, str | None]:
    """Run ``attempt`` until it does not lose a race: ``(result, attempts used, last conflict)``; ``result`` is
    ``None`` when every attempt conflicted. Any other error propagates at once.

    Iceberg retries a manifest rewrite's commit only on ``CommitFailedException``; a ``ValidationException``
    ("Deleted manifest ... could not be found in the latest snapshot") ends it, although the cure is the same: read
    the table again and rewrite what is current now. Streaming tables replace manifests every minute (every
    compaction commit and overwrite rewrites the manifests whose entries it deletes), so without this the
    maintenance soak failed 3 of 18 runs."""
    last: str | None = None
    for n in range(1, attempts + 1):
        try:
            return attempt(), n, last
        except Exception as e:  # noqa: BLE001 - py4j.protocol.Py4JJavaError carrying Iceberg's exception
            if not is_manifest_conflict(e):
                raise
            last = str(e).split("\n", 2)[1][:300] if "\n" in str(e) else str(e)[:300]
            if n < attempts:
                time.sleep(pause_s(n))
                refresh()
    return None, attempts, last


def _rewrite_manifests(spark: SparkSession, table: Any) -> ActionResult:
    table.refresh()
    actions = jvm(spark).org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    result, used, conflict = retry_on_manifest_conflict(lambda: actions.rewriteManifests(table).execute(),
                                                        table.refresh)
    if result is None:
        # Every attempt raced a commit: nothing was committed (Iceberg cleans up the manifests it wrote), the
        # current manifests stay as they are and the next run rewrites them. Not a failure of the run.
        return ActionResult(MaintenanceAction.REWRITE_MANIFESTS, "deferred", files_removed=0, bytes_removed=0,
                            detail={"attempts": used, "conflict": conflict},
                            error=f"deferred: {used} attempts each raced a concurrent commit ({conflict})")
    rewritten = [int(m.length()) for m in result.rewrittenManifests()]
    added = [int(m.length()) for m in result.addedManifests()]
    # The replaced manifests stay referenced by older snapshots until they expire: nothing is deleted here.
    detail: dict[str, Any] = {"manifests_rewritten": len(rewritten), "manifests_added": len(added),
                              "bytes_rewritten": sum(rewritten), "bytes_added": sum(added)}
    if used > 1:
        detail.update(attempts=used, conflict=conflict)
    return ActionResult(MaintenanceAction.REWRITE_MANIFESTS, "succeeded", files_removed=0, bytes_removed=0,
                        detail=detail)


def _delete_orphans(spark: SparkSession, table: Any, plan: MaintenancePlan) -> ActionResult:
    from pyspark.sql import functions as F

    assert plan.orphan_older_than_ms is not None
    table.refresh()
    location = _qualified(spark, plan.location)
    cutoff_s = plan.orphan_older_than_ms / 1000.0
    listing = list_files(spark, location, table).cache()
    try:
        # Files at or after the cut-off never reach Iceberg: they may belong to a writer or a compaction that has
        # not committed yet (the action would filter them too; filtering here keeps the list we compare small).
        candidates = listing.where(F.col("last_modified") < F.to_timestamp(F.lit(cutoff_s)))
        j = jvm(spark)
        mode = j.org.apache.iceberg.actions.DeleteOrphanFiles.PrefixMismatchMode.ERROR
        action = (j.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession).deleteOrphanFiles(table)
                  .location(location).olderThan(plan.orphan_older_than_ms)
                  .compareToFileList(candidates.select("file_path", "last_modified")._jdf)
                  .prefixMismatchMode(mode)
                  .equalSchemes(_jmap(spark, plan.policy.orphans_equal_schemes))
                  .equalAuthorities(_jmap(spark, plan.policy.orphans_equal_authorities)))
        try:
            result = action.execute()
        except Exception as e:  # py4j.protocol.Py4JJavaError
            text = str(e)
            if "Unable to determine whether certain files are orphan" in text:
                conflicts = text.split("Conflicting authorities/schemes:", 1)[-1].split("\n", 1)[0].strip()
                raise OrphanSafetyError(
                    "orphan removal refused: metadata references files under another scheme or authority than the "
                    f"listing ({conflicts}); declare them equal with compaction.ops.maintenance.delete-orphans."
                    "equal-schemes / equal-authorities if they are the same storage") from e
            raise
        deleted = [str(p) for p in result.orphanFileLocations()]
        deleted_bytes = 0
        if deleted:
            paths = spark.createDataFrame([(p,) for p in deleted], "file_path string")
            row = listing.join(paths, "file_path").agg(F.sum("length").alias("b")).collect()[0]
            deleted_bytes = int(row.b or 0)
        return ActionResult(MaintenanceAction.DELETE_ORPHAN_FILES, "succeeded", files_removed=len(deleted),
                            bytes_removed=deleted_bytes,
                            detail={"older_than_ms": plan.orphan_older_than_ms, "sample": deleted[:20]})
    finally:
        listing.unpersist()


_METADATA_VERSION = re.compile(r"^v?(\d+)(?:-[^/]*?)?(?:\.gz)?\.metadata\.json(?:\.gz)?$")


def metadata_version(name: str) -> int | None:
    """The version number in a metadata file's name: ``00012-<uuid>.metadata.json`` (Iceberg's catalogs),
    ``v12.metadata.json`` (Hadoop tables, some REST servers); ``None`` for any other name (never deleted)."""
    m = _METADATA_VERSION.match(name)
    return int(m.group(1)) if m else None


def dropped_metadata_files(listed: list[str], current: str, log: list[str]) -> list[str]:
    """Of the metadata files ``listed`` (paths), those older than the whole metadata log: a version number lower
    than every version of the log and the current file. A commit in flight writes a *higher* version, and a file
    whose name carries no version is never chosen. Compared by name: every version lives in one metadata folder,
    whatever spelling of the folder (``file:/x`` vs ``file:///x``) a listing gives."""
    kept = {p.rsplit("/", 1)[-1] for p in [current, *log]}
    kept_versions = [v for v in (metadata_version(n) for n in kept) if v is not None]
    if not kept_versions:
        return []
    oldest_kept = min(kept_versions)
    out = []
    for path in listed:
        name = path.rsplit("/", 1)[-1]
        version = metadata_version(name)
        if name not in kept and version is not None and version < oldest_kept:
            out.append(path)
    return sorted(out)


def _delete_dropped_metadata(spark: SparkSession, table: Any) -> ActionResult:
    table.refresh()
    metadata = table.operations().current()
    current = str(metadata.metadataFileLocation())
    log = [str(e.file()) for e in metadata.previousFiles()]
    folder = current.rsplit("/", 1)[0]
    listing = {r.file_path: int(r.length)
               for r in list_files(spark, _qualified(spark, folder), table).select("file_path", "length").collect()}
    doomed = dropped_metadata_files(list(listing), current, log)
    io = table.io()
    deleted = []
    for path in doomed:
        try:
            io.deleteFile(path)
            deleted.append(path)
        except Exception:  # noqa: BLE001 - py4j: already gone (a commit deleted it meanwhile) or not deletable now
            continue
    return ActionResult(MaintenanceAction.METADATA_FILES, "succeeded", files_removed=len(deleted),
                        bytes_removed=sum(listing[p] for p in deleted),
                        detail={"log_entries": len(log), "sample": [p.rsplit("/", 1)[-1] for p in deleted[:20]]})


def action_error(error: BaseException) -> str:
    """What a failed action reports (the run's ledger row, the job's result): the Java exception chain of a py4j
    error as ``Class: message`` lines, never its stack trace nor py4j's wrapper; any other error as
    ``Type: message``.

    ``CommitStateUnknownException`` (the catalog's answer to the commit was lost: a gateway's 5xx, a dropped
    connection) says what it means: Iceberg's rule is that such a commit may have taken effect, so it is neither
    retried nor cleaned up (``SnapshotProducer``/``RemoveSnapshots`` delete nothing), and the next run reads the
    table again and plans from what is there (tests/objectstore/test_faults_maintenance_executor.py)."""
    from compaction.spark.validation import java_exception_chain

    chain = java_exception_chain(error)
    if not chain:
        return f"{type(error).__name__}: {str(error)[:2000]}"
    parts = []
    for cls, message in chain[:4]:
        first = (message or "").strip().split("\n", 1)[0][:300]
        parts.append(f"{cls.rsplit('.', 1)[-1]}: {first}" if first and first != "None" else cls.rsplit(".", 1)[-1])
    text = "; caused by ".join(parts)
    # A connection that broke on the commit's POST (reset, timed out after the catalog took it) is as unknown as a
    # lost answer, although Iceberg's REST client raises a plain RESTException for it.
    broken_post = (chain[0][0].endswith("RESTException") and "POST" in (chain[0][1] or "")
                   and any(cls.startswith("java.net.") or cls.endswith(("IOException", "NoHttpResponseException"))
                           for cls, _ in chain[1:]))
    if broken_post or any(cls.endswith("CommitStateUnknownException") for cls, _ in chain):
        text = ("the catalog's answer to the commit was lost, it may have taken effect: nothing was deleted, the "
                f"next run reads the table again ({text})")
    return text


def execute_plan(spark: SparkSession, plan: MaintenancePlan, *,
                 progress: Callable[[str], None] = lambda _m: None,
                 on_result: Callable[[list[ActionResult]], None] = lambda _r: None) -> list[ActionResult]:
    """Run the plan's actions in order (expire, rewrite manifests, delete orphans). An action that fails or is
    refused is reported and the next ones still run, except orphan removal after a failed expiry (what the
    expiry left unreferenced must not be taken for an orphan by a half-done run: it is simply retried next time).
    ``on_result`` gets the results so far after each action: the ``maintain`` job checkpoints them, so that what a
    job killed mid-plan already removed is still recorded."""
    activate(spark)
    table = load_table(spark, quoted(plan.table))
    results: list[ActionResult] = []
    for action in plan.actions:
        if action is MaintenanceAction.DELETE_ORPHAN_FILES and not all(r.ok for r in results):
            results.append(ActionResult(action, "refused", bytes_removed=None,
                                        error="an earlier maintenance action did not succeed"))
            continue
        started = time.monotonic()
        try:
            if action is MaintenanceAction.EXPIRE_SNAPSHOTS:
                result = _expire(spark, table, plan)
            elif action is MaintenanceAction.REWRITE_MANIFESTS:
                result = _rewrite_manifests(spark, table)
            elif action is MaintenanceAction.DELETE_ORPHAN_FILES:
                result = _delete_orphans(spark, table, plan)
            elif action is MaintenanceAction.METADATA_FILES:
                result = _delete_dropped_metadata(spark, table)
            else:
                continue
        except OrphanSafetyError as e:
            result = ActionResult(action, "refused", bytes_removed=None, error=str(e))
        except Exception as e:  # noqa: BLE001 - py4j / Iceberg errors: reported per action, the run goes on
            result = ActionResult(action, "failed", bytes_removed=None, error=action_error(e))
        result = ActionResult(result.action, result.status, result.files_removed, result.bytes_removed,
                              int((time.monotonic() - started) * 1000), result.detail, result.error)
        progress(f"icecompact: {action.value}: {result.status}, {result.files_removed} file(s), "
                 f"{result.bytes_removed if result.bytes_removed is not None else '?'} byte(s) removed"
                 + (f" ({result.error})" if result.error else ""))
        results.append(result)
        on_result(list(results))
    return results
