"""The compaction plan: pure data, versioned, JSON round-trippable.

A :class:`CompactionPlan` is what the planner returns and what the Spark jobs consume. It records everything
needed to execute and to audit a run: the table and the snapshot it was planned against (``base_snapshot_id`` /
``base_sequence_number``, for stale-plan detection), the resolved policy, one :class:`PartitionDecision` per
considered partition (kind, human-readable reason, metrics), the :class:`JobGroup` s to execute (each a list of
:class:`CompactionTask` over whole files) and the partitions deferred by the run caps.

Serialisation: :meth:`CompactionPlan.to_dict` / :meth:`CompactionPlan.from_dict` and ``to_json`` / ``from_json``
round-trip exactly (``CompactionPlan.from_json(p.to_json()) == p``). The document carries
``plan_format_version``; a reader rejects versions it does not know (newer writers) with :class:`PlanningError`.
JSON is strict (no NaN/Infinity).

The enums :class:`CompactionKind` / :class:`CompactionMode` and :class:`PartitionDecision` are defined here (the
plan is their serialised home) and re-exported by :mod:`compaction.core.planner`.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping, Sequence

from compaction.core.errors import CompactionError, PlanningError
from compaction.core.model import PartitionFieldValue, PartitionKey, TableIdentity
from compaction.core.partition_filter import PartitionFilter
from compaction.core.policy import CompactionPolicy

__all__ = [
    "PLAN_FORMAT_VERSION",
    "CompactionKind",
    "CompactionMode",
    "PartitionDecision",
    "CompactionTask",
    "JobGroup",
    "DeferredPartition",
    "CompactionPlan",
    "partition_key_to_dict",
    "partition_key_from_dict",
]

PLAN_FORMAT_VERSION = 1

class CompactionKind(str, enum.Enum):
    """What to do with a partition. Ordered: ``NONE < MINOR < MAJOR`` (see :attr:`rank`)."""

    NONE = "none"
    MINOR = "minor"
    MAJOR = "major"

    @property
    def rank(self) -> int:
        return _KIND_RANK[self]


_KIND_RANK = {CompactionKind.NONE: 0, CompactionKind.MINOR: 1, CompactionKind.MAJOR: 2}


class CompactionMode(str, enum.Enum):
    """How decisions are made: ``auto`` applies the policy rules; ``minor`` / ``major`` force that kind on
    every partition that has something that kind can do (never on clean partitions)."""

    AUTO = "auto"
    MINOR = "minor"
    MAJOR = "major"


# --------------------------------------------------------------------------------------------------------------
# Strict JSON helpers


def _bad(what: str, value: object) -> PlanningError:
    return PlanningError(f"invalid compaction plan: bad {what}: {value!r}")


def _obj(value: object, what: str, keys: set[str], optional: set[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(what, value)
    present = set(value)
    allowed = keys | (optional or set())
    if not keys <= present or not present <= allowed:
        missing, unknown = sorted(keys - present), sorted(present - allowed)
        raise PlanningError(f"invalid compaction plan: {what} has missing keys {missing} / unknown keys {unknown}")
    return value


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(what, value)
    return value


def _opt_int(value: object, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _bad(what, value)
    return value


def _list(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(what, value)
    return value


def _number(value: object, what: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(what, value)
    return value


def _kind(value: object) -> CompactionKind:
    try:
        return CompactionKind(value)
    except ValueError:
        raise _bad("kind", value) from None


# --------------------------------------------------------------------------------------------------------------
# Value objects


def partition_key_to_dict(key: PartitionKey) -> dict[str, object]:
    return {
        "spec_id": key.spec_id,
        "fields": [
            {"name": f.name, "transform": f.transform, "source_column": f.source_column, "value": f.value}
            for f in key.fields
        ],
    }


def partition_key_from_dict(data: object) -> PartitionKey:
    obj = _obj(data, "partition key", {"spec_id", "fields"})
    fields = []
    for raw in _list(obj["fields"], "partition fields"):
        f = _obj(raw, "partition field", {"name", "transform", "source_column", "value"})
        value = f["value"]
        if value is not None and not isinstance(value, (int, float, str, bool)):
            raise _bad("partition value", value)
        fields.append(
            PartitionFieldValue(
                _str(f["name"], "field name"),
                _str(f["transform"], "transform"),
                _str(f["source_column"], "source column"),
                value,
            )
        )
    return PartitionKey(_int(obj["spec_id"], "spec_id"), tuple(fields))


@dataclass(frozen=True)
class PartitionDecision:
    """The planner's verdict on one partition. ``metrics`` holds numbers only (counts, bytes, ratios)."""

    partition: PartitionKey
    kind: CompactionKind
    reason: str
    metrics: Mapping[str, int | float]

    def to_dict(self) -> dict[str, object]:
        return {
            "partition": partition_key_to_dict(self.partition),
            "label": self.partition.label(),
            "kind": self.kind.value,
            "reason": self.reason,
            "metrics": {k: self.metrics[k] for k in sorted(self.metrics)},
        }

    @classmethod
    def from_dict(cls, data: object) -> PartitionDecision:
        obj = _obj(data, "decision", {"partition", "kind", "reason", "metrics"}, {"label"})
        raw_metrics = obj["metrics"]
        if not isinstance(raw_metrics, Mapping):
            raise _bad("metrics", raw_metrics)
        metrics = {_str(k, "metric name"): _number(v, f"metric {k}") for k, v in raw_metrics.items()}
        return cls(partition_key_from_dict(obj["partition"]), _kind(obj["kind"]), _str(obj["reason"], "reason"), metrics)


@dataclass(frozen=True)
class CompactionTask:
    """One unit of work over whole files of one partition.

    MAJOR: rewrite ``data_files`` applying every delete of the partition (``delete_files`` lists all of them).
    A partition split into pieces has ``piece_count > 1`` tasks with disjoint ``data_files`` and identical
    ``delete_files``; all pieces of a partition are always in the same :class:`JobGroup`, so the group can commit
    the partition once all its pieces are written (and only then drop the dangling deletes).
    MINOR: merge the partition's fragment files (every delete applied), then convert the equality deletes of the
    other files into position deletes / DVs and merge position deletes to one per data file; ``data_files`` are
    the fragments to merge and the files the equality deletes may touch (read for the conversion).
    MAJOR with ``full_rewrite``: every data file a delete applies to and every small file is rewritten with all
    deletes applied. MAJOR without it: the small files and the delete-heavy segment files are rewritten, then the
    remaining deletes are converted and merged as in a MINOR (no equality delete is left either way).
    A MAJOR task may have no data files when every delete of the partition is dangling (only cleanup is left).
    """

    task_id: str
    partition: PartitionKey
    kind: CompactionKind
    data_files: tuple[str, ...]
    delete_files: tuple[str, ...]
    estimated_cost_bytes: int
    piece_index: int = 0
    piece_count: int = 1
    full_rewrite: bool = False

    def to_dict(self) -> dict[str, object]:
        extra: dict[str, object] = {"full_rewrite": True} if self.full_rewrite else {}
        return {
            **extra,
            "task_id": self.task_id,
            "partition": partition_key_to_dict(self.partition),
            "label": self.partition.label(),
            "kind": self.kind.value,
            "data_files": list(self.data_files),
            "delete_files": list(self.delete_files),
            "estimated_cost_bytes": self.estimated_cost_bytes,
            "piece_index": self.piece_index,
            "piece_count": self.piece_count,
        }

    @classmethod
    def from_dict(cls, data: object) -> CompactionTask:
        keys = {"task_id", "partition", "kind", "data_files", "delete_files", "estimated_cost_bytes"}
        obj = _obj(data, "task", keys | {"piece_index", "piece_count"}, {"label", "full_rewrite"})
        full = obj.get("full_rewrite", False)
        if not isinstance(full, bool):
            raise _bad("full_rewrite", full)
        return cls(
            task_id=_str(obj["task_id"], "task_id"),
            partition=partition_key_from_dict(obj["partition"]),
            kind=_kind(obj["kind"]),
            data_files=tuple(_str(p, "data file path") for p in _list(obj["data_files"], "data_files")),
            delete_files=tuple(_str(p, "delete file path") for p in _list(obj["delete_files"], "delete_files")),
            estimated_cost_bytes=_int(obj["estimated_cost_bytes"], "estimated_cost_bytes"),
            piece_index=_int(obj["piece_index"], "piece_index"),
            piece_count=_int(obj["piece_count"], "piece_count"),
            full_rewrite=full,
        )


@dataclass(frozen=True)
class JobGroup:
    """A set of tasks executed together (one Spark job). Groups are balanced by estimated cost."""

    group_id: int
    tasks: tuple[CompactionTask, ...]

    @property
    def estimated_cost_bytes(self) -> int:
        return sum(t.estimated_cost_bytes for t in self.tasks)

    @property
    def partitions(self) -> tuple[PartitionKey, ...]:
        seen: dict[PartitionKey, None] = {}
        for t in self.tasks:
            seen.setdefault(t.partition, None)
        return tuple(seen)

    def to_dict(self) -> dict[str, object]:
        return {
            "group_id": self.group_id,
            "estimated_cost_bytes": self.estimated_cost_bytes,
            "tasks": [t.to_dict() for t in self.tasks],
        }

    @classmethod
    def from_dict(cls, data: object) -> JobGroup:
        obj = _obj(data, "group", {"group_id", "tasks"}, {"estimated_cost_bytes"})
        return cls(
            _int(obj["group_id"], "group_id"),
            tuple(CompactionTask.from_dict(t) for t in _list(obj["tasks"], "tasks")),
        )


@dataclass(frozen=True)
class DeferredPartition:
    """A partition that needs compaction but was left out of this run by a run cap."""

    partition: PartitionKey
    kind: CompactionKind
    estimated_cost_bytes: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "partition": partition_key_to_dict(self.partition),
            "label": self.partition.label(),
            "kind": self.kind.value,
            "estimated_cost_bytes": self.estimated_cost_bytes,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: object) -> DeferredPartition:
        obj = _obj(data, "deferred partition", {"partition", "kind", "estimated_cost_bytes", "reason"}, {"label"})
        return cls(
            partition_key_from_dict(obj["partition"]),
            _kind(obj["kind"]),
            _int(obj["estimated_cost_bytes"], "estimated_cost_bytes"),
            _str(obj["reason"], "reason"),
        )


# --------------------------------------------------------------------------------------------------------------


_PLAN_KEYS = {
    "plan_format_version",
    "plan_id",
    "created_at",
    "table",
    "base_snapshot_id",
    "base_sequence_number",
    "format_version",
    "mode",
    "policy",
    "partition_filter",
    "custom_partition_filter",
    "decisions",
    "groups",
    "deferred",
}


@dataclass(frozen=True)
class CompactionPlan:
    """A complete, self-describing compaction plan for one table at one snapshot.

    ``plan_id`` is, unless the caller chose one, :meth:`content_id`: a hash of everything else in the plan
    (including ``created_at``), so equal inputs give equal ids. ``partition_filter`` is the filter used when it
    was a :class:`PartitionFilter`; a plain callable is recorded only as ``custom_partition_filter=True``.
    ``decisions`` are sorted by partition; every partition passing the filter has one.
    """

    plan_id: str
    created_at: _dt.datetime
    table: TableIdentity
    base_snapshot_id: int | None
    base_sequence_number: int
    format_version: int
    mode: CompactionMode
    policy: CompactionPolicy
    decisions: tuple[PartitionDecision, ...] = ()
    groups: tuple[JobGroup, ...] = ()
    deferred: tuple[DeferredPartition, ...] = ()
    partition_filter: PartitionFilter | None = None
    custom_partition_filter: bool = False
    plan_format_version: int = PLAN_FORMAT_VERSION

    def __post_init__(self) -> None:
        # A plan holds UTC: an offset of a historic zone (local mean time, +00:09:21) does not survive isoformat()
        # and back on every Python, so such a plan would not round-trip, and its id would depend on the planner's
        # zone. A naive time is taken as UTC.
        created = self.created_at
        utc = created.replace(tzinfo=_dt.timezone.utc) if created.tzinfo is None else created.astimezone(_dt.timezone.utc)
        object.__setattr__(self, "created_at", utc)

    # Convenience ----------------------------------------------------------------------------------------------
    @property
    def tasks(self) -> tuple[CompactionTask, ...]:
        return tuple(t for g in self.groups for t in g.tasks)

    @property
    def scheduled_partitions(self) -> tuple[PartitionKey, ...]:
        """Partitions with at least one task in this plan, in group order."""
        seen: dict[PartitionKey, None] = {}
        for t in self.tasks:
            seen.setdefault(t.partition, None)
        return tuple(seen)

    @property
    def estimated_cost_bytes(self) -> int:
        return sum(g.estimated_cost_bytes for g in self.groups)

    @property
    def is_empty(self) -> bool:
        return not self.groups

    def decision_for(self, key: PartitionKey) -> PartitionDecision | None:
        for d in self.decisions:
            if d.partition == key:
                return d
        return None

    def iter_files(self) -> Iterator[tuple[int, str]]:
        """``(group_id, path)`` for every data and delete file path referenced by the plan's tasks."""
        for g in self.groups:
            for t in g.tasks:
                for p in t.data_files:
                    yield g.group_id, p
                for p in t.delete_files:
                    yield g.group_id, p

    # Serialisation --------------------------------------------------------------------------------------------
    def _content_dict(self, decisions: bool = True) -> dict[str, object]:
        return {
            "plan_format_version": self.plan_format_version,
            "created_at": self.created_at.isoformat(),
            "table": {
                "catalog": self.table.catalog,
                "namespace": list(self.table.namespace),
                "name": self.table.name,
            },
            "base_snapshot_id": self.base_snapshot_id,
            "base_sequence_number": self.base_sequence_number,
            "format_version": self.format_version,
            "mode": self.mode.value,
            "policy": self.policy.to_dict(),
            "partition_filter": None if self.partition_filter is None else self.partition_filter.to_dict(),
            "custom_partition_filter": self.custom_partition_filter,
            "decisions": [d.to_dict() for d in self.decisions] if decisions else _DECISIONS_PLACEHOLDER,
            "groups": [g.to_dict() for g in self.groups],
            "deferred": [d.to_dict() for d in self.deferred],
        }

    def content_id(self, decision_digests: Sequence[str | None] | None = None) -> str:
        """Deterministic id: the first 20 hex digits of the SHA-256 of the plan's canonical JSON content in which
        each decision is replaced by its :func:`decision_digest` (the hex SHA-256 of its canonical JSON). Hashing a
        digest per decision lets a re-plan that kept most decisions hash 64 characters for each instead of its
        whole JSON (tens of MB on a table of 10^5 partitions).

        ``decision_digests``: the digest of each decision, in order, where a caller kept it (None: computed here)."""
        content = self._content_dict(decisions=False)
        if decision_digests is None:
            digests = [decision_digest(d) for d in self.decisions]
        else:
            digests = [h if h is not None else decision_digest(d) for h, d in zip(decision_digests, self.decisions)]
        # json.dumps of a dict with indent=None is '{' + ', '.join('"key": value') + '}', and of a list of hex
        # strings '["h1", "h2"]': hashed piece by piece.
        digest = hashlib.sha256(b"{")
        for i, (key, value) in enumerate(content.items()):
            digest.update(f"{', ' if i else ''}{_dumps(key, indent=None)}: ".encode("utf-8"))
            if value is _DECISIONS_PLACEHOLDER:
                digest.update(('["' + '", "'.join(digests) + '"]' if digests else "[]").encode("ascii"))
            else:
                digest.update(_dumps(value, indent=None).encode("utf-8"))
        digest.update(b"}")
        return digest.hexdigest()[:20]

    def with_content_id(self) -> CompactionPlan:
        return replace(self, plan_id=self.content_id())

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"plan_format_version": self.plan_format_version, "plan_id": self.plan_id}
        out.update(self._content_dict())
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return _dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CompactionPlan:
        if not isinstance(data, Mapping):
            raise _bad("document", data)
        version = data.get("plan_format_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise PlanningError(f"invalid compaction plan: missing or bad plan_format_version {version!r}")
        if version != PLAN_FORMAT_VERSION:
            raise PlanningError(
                f"unsupported compaction plan format version {version} (this code reads version {PLAN_FORMAT_VERSION})"
            )
        obj = _obj(data, "plan", _PLAN_KEYS)
        try:
            table_obj = _obj(obj["table"], "table", {"catalog", "namespace", "name"})
            table = TableIdentity(
                _str(table_obj["catalog"], "catalog"),
                tuple(_str(n, "namespace") for n in _list(table_obj["namespace"], "namespace")),
                _str(table_obj["name"], "table name"),
            )
            created_raw = _str(obj["created_at"], "created_at")
            try:
                created_at = _dt.datetime.fromisoformat(created_raw)
            except ValueError:
                raise _bad("created_at", created_raw) from None
            try:
                mode = CompactionMode(obj["mode"])
            except ValueError:
                raise _bad("mode", obj["mode"]) from None
            policy_raw = obj["policy"]
            if not isinstance(policy_raw, Mapping):
                raise _bad("policy", policy_raw)
            policy = CompactionPolicy.from_dict(policy_raw)
            filter_raw = obj["partition_filter"]
            if filter_raw is not None and not isinstance(filter_raw, Mapping):
                raise _bad("partition_filter", filter_raw)
            custom = obj["custom_partition_filter"]
            if not isinstance(custom, bool):
                raise _bad("custom_partition_filter", custom)
            return cls(
                plan_id=_str(obj["plan_id"], "plan_id"),
                created_at=created_at,
                table=table,
                base_snapshot_id=_opt_int(obj["base_snapshot_id"], "base_snapshot_id"),
                base_sequence_number=_int(obj["base_sequence_number"], "base_sequence_number"),
                format_version=_int(obj["format_version"], "format_version"),
                mode=mode,
                policy=policy,
                decisions=tuple(PartitionDecision.from_dict(d) for d in _list(obj["decisions"], "decisions")),
                groups=tuple(JobGroup.from_dict(g) for g in _list(obj["groups"], "groups")),
                deferred=tuple(DeferredPartition.from_dict(d) for d in _list(obj["deferred"], "deferred")),
                partition_filter=None if filter_raw is None else PartitionFilter.from_dict(filter_raw),
                custom_partition_filter=custom,
                plan_format_version=version,
            )
        except PlanningError:
            raise
        except CompactionError as e:  # e.g. ConfigError from an invalid policy inside the document
            raise PlanningError(f"invalid compaction plan: {e.message}") from e

    @classmethod
    def from_json(cls, text: str | bytes) -> CompactionPlan:
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, TypeError) as e:
            raise PlanningError(f"invalid compaction plan: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise _bad("document", type(data).__name__)
        return cls.from_dict(data)


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-finite number {name} in JSON")


_DECISIONS_PLACEHOLDER = object()


def decision_json(decision: PartitionDecision) -> str:
    """The canonical JSON of one decision, as it appears in the plan's canonical JSON."""
    return _dumps(decision.to_dict(), indent=None)


def decision_digest(decision: PartitionDecision) -> str:
    """The hex SHA-256 of :func:`decision_json`: what the plan's content id hashes for each decision."""
    return hashlib.sha256(decision_json(decision).encode("utf-8")).hexdigest()


def _dumps(data: object, indent: int | None) -> str:
    try:
        return json.dumps(data, indent=indent, sort_keys=False, allow_nan=False, ensure_ascii=False)
    except ValueError as e:
        raise PlanningError(f"compaction plan is not JSON-serialisable: {e}") from e
