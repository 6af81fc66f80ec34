"""Maintenance policy: when to expire snapshots, rewrite manifests and delete orphan files, and how far.

Resolved like :mod:`compaction.core.policy`, lowest to highest precedence::

    code default  <  table property  <  run parameter (``overrides``)

Where Iceberg defines a table property for the same thing, that property *is* the key (so Iceberg's own
``expire_snapshots`` procedure and we read the same retention): ``history.expire.max-snapshot-age-ms``,
``history.expire.min-snapshots-to-keep``, ``history.expire.max-ref-age-ms`` (Iceberg ``TableProperties``, applied by
``RemoveSnapshots``), ``write.metadata.previous-versions-max`` / ``write.metadata.delete-after-commit.enabled``
(applied by Iceberg on every commit; we only report them), ``commit.manifest.target-size-bytes`` (what a small
manifest is) and ``gc.enabled`` (Iceberg refuses to expire or delete orphans when it is ``false``; so do we).
Everything Iceberg has no key for is ours, under ``compaction.ops.maintenance.``.

The defaults are what a cautious operator would pick: expiry follows the table's own retention (Iceberg's defaults:
5 days, at least 1 snapshot); manifests are rewritten only when many small ones pile up; orphan removal is **off**
unless ``compaction.ops.maintenance.delete-orphans.enabled=true``, and then only for files older than 3 days (Iceberg's
``DeleteOrphanFiles`` default) unless set lower.

Run parameters accept the full key, the key without the ``compaction.`` prefix, or the field name, as the
compaction policy does. Unknown run parameters are an error; unknown table properties are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

from compaction.core.errors import ConfigError
from compaction.core.policy import (
    PROPERTY_PREFIX,
    _at_least,
    _no_check,
    _parse_bool,
    parse_duration,
    _parse_int,
    _parse_knob,
    _Knob,
)

__all__ = [
    "MaintenancePolicy",
    "MAX_SNAPSHOT_AGE_MS",
    "MAX_SNAPSHOT_AGE_MS_DEFAULT",
    "MIN_SNAPSHOTS_TO_KEEP",
    "MIN_SNAPSHOTS_TO_KEEP_DEFAULT",
    "MAX_REF_AGE_MS",
    "MAX_REF_AGE_MS_DEFAULT",
    "METADATA_PREVIOUS_VERSIONS_MAX",
    "METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT",
    "METADATA_DELETE_AFTER_COMMIT_ENABLED",
    "METADATA_DELETE_AFTER_COMMIT_ENABLED_DEFAULT",
    "MANIFEST_TARGET_SIZE_BYTES",
    "MANIFEST_TARGET_SIZE_BYTES_DEFAULT",
    "GC_ENABLED",
    "GC_ENABLED_DEFAULT",
    "MAINTENANCE_ENABLED",
    "MAINTENANCE_ENABLED_DEFAULT",
    "EXPIRE_ENABLED",
    "EXPIRE_ENABLED_DEFAULT",
    "REWRITE_MANIFESTS_ENABLED",
    "REWRITE_MANIFESTS_ENABLED_DEFAULT",
    "EXPIRE_DRIVER_MIN_SNAPSHOTS",
    "EXPIRE_DRIVER_MIN_SNAPSHOTS_DEFAULT",
    "REWRITE_MANIFESTS_SMALL_COUNT",
    "REWRITE_MANIFESTS_SMALL_COUNT_DEFAULT",
    "SMALL_MANIFEST_TARGET_FRACTION",
    "ORPHANS_ENABLED",
    "ORPHANS_ENABLED_DEFAULT",
    "ORPHANS_OLDER_THAN",
    "ORPHANS_OLDER_THAN_DEFAULT",
    "ORPHANS_EQUAL_SCHEMES",
    "ORPHANS_EQUAL_SCHEMES_DEFAULT",
    "ORPHANS_EQUAL_AUTHORITIES",
    "ORPHANS_EQUAL_AUTHORITIES_DEFAULT",
    "IN_FLIGHT_TIMEOUT",
    "IN_FLIGHT_TIMEOUT_DEFAULT",
    "CLOCK_SKEW",
    "CLOCK_SKEW_DEFAULT",
    "parse_equivalences",
]

# -- Iceberg's own table properties (org.apache.iceberg.TableProperties; same defaults) ---------------------------

#: Snapshots of a branch older than this are expired (unless needed for min-snapshots-to-keep). Iceberg: 5 days.
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_SNAPSHOT_AGE_MS_DEFAULT = 5 * 24 * 60 * 60 * 1000
#: Each branch keeps at least this many of its newest ancestors. Iceberg: 1.
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MIN_SNAPSHOTS_TO_KEEP_DEFAULT = 1
#: Branches and tags (never ``main``) whose snapshot is older than this are removed. Iceberg: Long.MAX_VALUE.
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
MAX_REF_AGE_MS_DEFAULT = 2**63 - 1
#: Previous metadata.json files kept in the metadata log (Iceberg applies it on commit). Iceberg: 100.
METADATA_PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT = 100
#: Whether a commit deletes the metadata.json files that fall out of the metadata log. Iceberg: false.
METADATA_DELETE_AFTER_COMMIT_ENABLED = "write.metadata.delete-after-commit.enabled"
METADATA_DELETE_AFTER_COMMIT_ENABLED_DEFAULT = False
#: Target size of manifests (Iceberg's merge and rewrite aim for it). Iceberg: 8 MiB.
MANIFEST_TARGET_SIZE_BYTES = "commit.manifest.target-size-bytes"
MANIFEST_TARGET_SIZE_BYTES_DEFAULT = 8 * 1024 * 1024
#: ``false``: the table shares files with others; Iceberg refuses expiry and orphan removal. Iceberg: true.
GC_ENABLED = "gc.enabled"
GC_ENABLED_DEFAULT = True

# -- ours ---------------------------------------------------------------------------------------------------------

#: Master switch of all maintenance of the table.
MAINTENANCE_ENABLED = "compaction.ops.maintenance.enabled"
MAINTENANCE_ENABLED_DEFAULT = True
#: Expire snapshots by the table's retention (the history.expire.* keys above).
EXPIRE_ENABLED = "compaction.ops.maintenance.expire-snapshots.enabled"
EXPIRE_ENABLED_DEFAULT = True
#: Expire with Iceberg's table API on the driver (``RemoveSnapshots`` with its own file clean-up, on Iceberg's
#: worker pool) when at least this many snapshots expire; fewer go through the Spark action. The Spark action
#: ships the table, with every snapshot of its metadata, to each of its tasks: at 100,000 snapshots (an 87 MB
#: metadata file) Iceberg's ``expire_snapshots`` procedure ran for more than an hour deserializing it. ``0``: always
#: the driver.
EXPIRE_DRIVER_MIN_SNAPSHOTS = "compaction.ops.maintenance.expire-snapshots.driver-min-snapshots"
EXPIRE_DRIVER_MIN_SNAPSHOTS_DEFAULT = 1000
#: Rewrite the current snapshot's manifests when they pile up.
REWRITE_MANIFESTS_ENABLED = "compaction.ops.maintenance.rewrite-manifests.enabled"
REWRITE_MANIFESTS_ENABLED_DEFAULT = True
#: Rewrite when the current snapshot has at least this many small manifests (smaller than 75 % of
#: ``commit.manifest.target-size-bytes``): every streaming fast-append adds one. At least 2.
REWRITE_MANIFESTS_SMALL_COUNT = "compaction.ops.maintenance.rewrite-manifests.small-manifest-count"
REWRITE_MANIFESTS_SMALL_COUNT_DEFAULT = 16
SMALL_MANIFEST_TARGET_FRACTION = 0.75
#: Delete orphan files (files under the table location that no metadata references). Off unless set.
ORPHANS_ENABLED = "compaction.ops.maintenance.delete-orphans.enabled"
ORPHANS_ENABLED_DEFAULT = False
#: Only files older than this are orphan candidates (a duration: seconds or 30m/2h/3d). Iceberg's default: 3 days.
ORPHANS_OLDER_THAN = "compaction.ops.maintenance.delete-orphans.older-than"
ORPHANS_OLDER_THAN_DEFAULT = 3 * 24 * 3600
#: Schemes that name the same storage, Iceberg's ``equalSchemes`` syntax: ``s3a,s3n=s3;wasbs=wasb``. Iceberg
#: already treats ``s3n,s3a`` as ``s3``; these are added to that.
ORPHANS_EQUAL_SCHEMES = "compaction.ops.maintenance.delete-orphans.equal-schemes"
ORPHANS_EQUAL_SCHEMES_DEFAULT = ""
#: Authorities that name the same storage (``equalAuthorities``): ``bucket.s3.amazonaws.com=bucket``.
ORPHANS_EQUAL_AUTHORITIES = "compaction.ops.maintenance.delete-orphans.equal-authorities"
ORPHANS_EQUAL_AUTHORITIES_DEFAULT = ""
#: A run or write lease recorded as in flight for longer than this is taken as abandoned (its process died without
#: finishing it) and no longer protects snapshots or files; the plan says so. A duration; default 1 day.
IN_FLIGHT_TIMEOUT = "compaction.ops.maintenance.in-flight-timeout"
IN_FLIGHT_TIMEOUT_DEFAULT = 24 * 3600
#: Margin subtracted from the start of the oldest in-flight run / lease (clocks of hosts differ). Default 5 min.
CLOCK_SKEW = "compaction.ops.maintenance.clock-skew"
CLOCK_SKEW_DEFAULT = 300


def parse_equivalences(key: str, value: object) -> tuple[tuple[str, str], ...]:
    """``"s3a,s3n=s3;x=y"`` -> ``(("s3a,s3n", "s3"), ("x", "y"))`` (Iceberg's map form: comma-separated keys)."""
    if isinstance(value, (tuple, list)):
        pairs = [(str(a), str(b)) for a, b in value]
    elif isinstance(value, str):
        pairs = []
        for item in filter(None, (part.strip() for part in value.split(";"))):
            left, sep, right = item.partition("=")
            if not sep or not left.strip() or not right.strip():
                raise ConfigError(f"invalid value {value!r} for {key}: expected 'a,b=c;d=e'")
            pairs.append((",".join(p.strip() for p in left.split(",") if p.strip()), right.strip()))
    else:
        raise ConfigError(f"invalid value {value!r} for {key}: expected 'a,b=c;d=e'")
    return tuple(sorted(pairs))


def _iceberg_positive_long(value: object) -> str | None:
    assert isinstance(value, int)
    return None if value >= 0 else "must be >= 0"


_KNOBS: tuple[_Knob, ...] = (
    _Knob("max_snapshot_age_ms", MAX_SNAPSHOT_AGE_MS, _parse_int, _iceberg_positive_long),
    _Knob("min_snapshots_to_keep", MIN_SNAPSHOTS_TO_KEEP, _parse_int, _at_least(1)),
    _Knob("max_ref_age_ms", MAX_REF_AGE_MS, _parse_int, _iceberg_positive_long),
    _Knob("metadata_previous_versions_max", METADATA_PREVIOUS_VERSIONS_MAX, _parse_int, _at_least(1)),
    _Knob("metadata_delete_after_commit", METADATA_DELETE_AFTER_COMMIT_ENABLED, _parse_bool, _no_check),
    _Knob("manifest_target_size_bytes", MANIFEST_TARGET_SIZE_BYTES, _parse_int, _at_least(1)),
    _Knob("gc_enabled", GC_ENABLED, _parse_bool, _no_check),
    _Knob("enabled", MAINTENANCE_ENABLED, _parse_bool, _no_check),
    _Knob("expire_enabled", EXPIRE_ENABLED, _parse_bool, _no_check),
    _Knob("expire_driver_min_snapshots", EXPIRE_DRIVER_MIN_SNAPSHOTS, _parse_int, _at_least(0)),
    _Knob("rewrite_manifests_enabled", REWRITE_MANIFESTS_ENABLED, _parse_bool, _no_check),
    _Knob("rewrite_manifests_small_count", REWRITE_MANIFESTS_SMALL_COUNT, _parse_int, _at_least(2)),
    _Knob("orphans_enabled", ORPHANS_ENABLED, _parse_bool, _no_check),
    _Knob("orphans_older_than_s", ORPHANS_OLDER_THAN, parse_duration, _at_least(0)),
    _Knob("orphans_equal_schemes", ORPHANS_EQUAL_SCHEMES, parse_equivalences, _no_check),
    _Knob("orphans_equal_authorities", ORPHANS_EQUAL_AUTHORITIES, parse_equivalences, _no_check),
    _Knob("in_flight_timeout_s", IN_FLIGHT_TIMEOUT, parse_duration, _at_least(1)),
    _Knob("clock_skew_s", CLOCK_SKEW, parse_duration, _at_least(0)),
)
_BY_FIELD: dict[str, _Knob] = {k.field: k for k in _KNOBS}
_BY_ALIAS: dict[str, _Knob] = {}
for _k in _KNOBS:
    _BY_ALIAS[_k.key] = _k
    _BY_ALIAS[_k.field] = _k
    if _k.key.startswith(PROPERTY_PREFIX):
        _BY_ALIAS[_k.key[len(PROPERTY_PREFIX):]] = _k
del _k



@dataclass(frozen=True)
class MaintenancePolicy:
    """Resolved maintenance settings (validated on construction). See the module docstring for each key."""

    max_snapshot_age_ms: int = MAX_SNAPSHOT_AGE_MS_DEFAULT
    min_snapshots_to_keep: int = MIN_SNAPSHOTS_TO_KEEP_DEFAULT
    max_ref_age_ms: int = MAX_REF_AGE_MS_DEFAULT
    metadata_previous_versions_max: int = METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT
    metadata_delete_after_commit: bool = METADATA_DELETE_AFTER_COMMIT_ENABLED_DEFAULT
    manifest_target_size_bytes: int = MANIFEST_TARGET_SIZE_BYTES_DEFAULT
    gc_enabled: bool = GC_ENABLED_DEFAULT
    enabled: bool = MAINTENANCE_ENABLED_DEFAULT
    expire_enabled: bool = EXPIRE_ENABLED_DEFAULT
    expire_driver_min_snapshots: int = EXPIRE_DRIVER_MIN_SNAPSHOTS_DEFAULT
    rewrite_manifests_enabled: bool = REWRITE_MANIFESTS_ENABLED_DEFAULT
    rewrite_manifests_small_count: int = REWRITE_MANIFESTS_SMALL_COUNT_DEFAULT
    orphans_enabled: bool = ORPHANS_ENABLED_DEFAULT
    orphans_older_than_s: int = ORPHANS_OLDER_THAN_DEFAULT
    orphans_equal_schemes: tuple[tuple[str, str], ...] = ()
    orphans_equal_authorities: tuple[tuple[str, str], ...] = ()
    in_flight_timeout_s: int = IN_FLIGHT_TIMEOUT_DEFAULT
    clock_skew_s: int = CLOCK_SKEW_DEFAULT

    def __post_init__(self) -> None:
        for knob in _KNOBS:
            value = getattr(self, knob.field)
            parsed = _parse_knob(knob, knob.key, value)
            if parsed != value or type(parsed) is not type(value):
                object.__setattr__(self, knob.field, parsed)

    @property
    def small_manifest_bytes(self) -> int:
        """Manifests strictly smaller than this are small (75 % of ``commit.manifest.target-size-bytes``)."""
        return int(SMALL_MANIFEST_TARGET_FRACTION * self.manifest_target_size_bytes)

    @staticmethod
    def property_keys() -> dict[str, str]:
        """Field name -> table-property key."""
        return {k.field: k.key for k in _KNOBS}

    @classmethod
    def resolve(cls, table_properties: Mapping[str, str],
                overrides: Mapping[str, object] | None = None) -> MaintenancePolicy:
        """Code defaults < table properties < run-parameter overrides."""
        values: dict[str, object] = {}
        for knob in _KNOBS:
            if knob.key in table_properties:
                values[knob.field] = _parse_knob(knob, knob.key, table_properties[knob.key])
        seen: dict[str, str] = {}
        for raw_key in sorted(overrides or {}):
            value = (overrides or {})[raw_key]
            found = _BY_ALIAS.get(str(raw_key).strip())
            if found is None:
                known = ", ".join(k.key for k in _KNOBS)
                raise ConfigError(f"unknown maintenance run parameter {raw_key!r} (value {value!r}); known keys: {known}")
            if value is None:
                continue
            if found.field in seen:
                raise ConfigError(f"maintenance run parameter {found.key} given twice ({seen[found.field]!r} and {raw_key!r})")
            seen[found.field] = raw_key
            values[found.field] = _parse_knob(found, raw_key, value)
        return cls(**values)  # type: ignore[arg-type]

    @staticmethod
    def is_key(key: str) -> bool:
        """Whether ``key`` (any accepted spelling) is a maintenance key (the CLI splits ``--set`` with it)."""
        return key.strip() in _BY_ALIAS

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = [list(p) for p in value] if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> MaintenancePolicy:
        unknown = sorted(set(data) - set(_BY_FIELD))
        if unknown:
            raise ConfigError(f"unknown maintenance policy field(s) {unknown!r}")
        return cls(**{name: _parse_knob(_BY_FIELD[name], name, value) for name, value in data.items()})  # type: ignore[arg-type]
