"""The DAG's run parameters, validated with the platform's own validators (no Airflow, no heavy imports).

Airflow's ``Param`` JSON schema catches wrong types and enum values when a run is created; :func:`parse_params`
then checks meaning (partition filter syntax, policy keys and ranges, table names and patterns, catalog name)
in the first task, before anything is inspected, planned or submitted. Every problem is a
:class:`~compaction.core.errors.ConfigError` whose message names the parameter. The partition filter is an Iceberg
row filter on source columns (:mod:`compaction.metadata.filters`); its syntax is checked here, its columns, literals and
projection against each selected table by the ``discover`` task (:func:`icecompact_airflow.tasks.discover`).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from compaction.core.errors import CompactionError, ConfigError
from compaction.core.identifiers import parse_table_identifier, validate_identifier_part
from compaction.core.intervals import TimeWindow
from compaction.core.plan import CompactionMode
from compaction.core.policy import CompactionPolicy
from compaction.core.queue import EXECUTOR_CHOICES, EXECUTOR_DEFAULT
from compaction.core.run_options import (
    MAX_PARALLEL_JOBS_DEFAULT,
    MAX_PARALLEL_JOBS_LIMIT,
    MAX_RETRIES_DEFAULT,
    MAX_RETRIES_LIMIT,
    VALIDATION_DEFAULT,
    VALIDATION_LEVELS,
)

_PATTERN_PART = re.compile(r"^[A-Za-z0-9_*?]+$")
_GLOB_CHARS = frozenset("*?")

#: Defaults of the DAG's params (also the values ``airflow dags test iceberg_compaction`` runs with).
DEFAULTS: Mapping[str, Any] = {
    "tables": ["*"],
    "mode": "auto",
    "partition_filter": None,
    "dry_run": False,
    "policy": {},
    "max_parallel_jobs": MAX_PARALLEL_JOBS_DEFAULT,
    "validation": VALIDATION_DEFAULT,
    "max_retries": MAX_RETRIES_DEFAULT,
    "catalog": None,
    "window": "auto",
    "executor": EXECUTOR_DEFAULT,
}


@dataclass(frozen=True)
class RunParams:
    tables: tuple[str, ...]
    mode: CompactionMode = CompactionMode.AUTO
    partition_filter: str | None = None  # row-filter text, syntax checked (bound per table by compile_partition_filter)
    dry_run: bool = False
    policy: Mapping[str, object] = field(default_factory=dict)
    max_parallel_jobs: int = MAX_PARALLEL_JOBS_DEFAULT
    validation: str = VALIDATION_DEFAULT
    max_retries: int = MAX_RETRIES_DEFAULT
    catalog: str | None = None
    window: TimeWindow = TimeWindow.AUTO
    executor: str = EXECUTOR_DEFAULT

    def matches(self, table: str) -> bool:
        """Whether ``namespace.table`` is selected by one of the names or glob patterns in ``tables``."""
        return any(fnmatch.fnmatchcase(table, p) for p in self.tables)

    @property
    def explicit_tables(self) -> tuple[str, ...]:
        """The entries of ``tables`` that are plain names (they must exist)."""
        return tuple(t for t in self.tables if not _GLOB_CHARS & set(t))


def _bad(name: str, value: object, why: str) -> ConfigError:
    return ConfigError(f"invalid DAG param {name}={value!r}: {why}")


def _tables(value: object) -> tuple[str, ...]:
    items: Sequence[object]
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise _bad("tables", value, "expected a list of NAMESPACE.TABLE names or glob patterns")
    if not items:
        raise _bad("tables", value, "expected at least one table name or pattern (use '*' for every table)")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise _bad("tables", value, f"entry {item!r} is not a non-empty string")
        if _GLOB_CHARS & set(item):
            if not all(_PATTERN_PART.match(p) for p in item.split(".")):
                raise _bad("tables", value, f"pattern {item!r} may only use letters, digits, _, '.', '*' and '?'")
        else:
            try:
                parse_table_identifier(item, "catalog")
            except ConfigError as e:
                raise _bad("tables", value, e.message) from None
        out.append(item)
    return tuple(dict.fromkeys(out))


def _int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, value, "expected an integer")
    if not lo <= value <= hi:
        raise _bad(name, value, f"expected {lo} <= {name} <= {hi}")
    return value


def parse_params(raw: Mapping[str, Any]) -> RunParams:
    """Validate the DAG's params (missing keys take :data:`DEFAULTS`). Raises ConfigError / PlanningError."""
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown DAG param(s) {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
    values = {**DEFAULTS, **{k: v for k, v in raw.items()}}
    try:
        mode = CompactionMode(values["mode"])
    except ValueError:
        raise _bad("mode", values["mode"], "expected one of auto, minor, major") from None
    text = values["partition_filter"]
    if text is not None and not isinstance(text, str):
        raise _bad("partition_filter", text, "expected filter text such as \"ts >= '2024-01-02'\"")
    partition_filter = text.strip() if text and text.strip() else None
    if partition_filter is not None:
        from compaction.metadata.filters import parse_row_filter  # pyiceberg's parser; never imported when the DAG is parsed

        try:
            parse_row_filter(partition_filter)
        except CompactionError as e:
            raise _bad("partition_filter", text, e.message) from None
    if not isinstance(values["dry_run"], bool):
        raise _bad("dry_run", values["dry_run"], "expected true or false")
    policy = values["policy"]
    if policy is None:
        policy = {}
    if not isinstance(policy, Mapping):
        raise _bad("policy", policy, "expected an object of policy keys, e.g. {\"major.delete-ratio\": 0.2}")
    try:
        CompactionPolicy.resolve({}, policy)
    except CompactionError as e:
        raise _bad("policy", dict(policy), e.message) from None
    validation = values["validation"]
    if validation not in VALIDATION_LEVELS:
        raise _bad("validation", validation, f"expected one of {', '.join(VALIDATION_LEVELS)}")
    catalog = values["catalog"]
    if catalog is not None:
        if not isinstance(catalog, str):
            raise _bad("catalog", catalog, "expected a catalog name")
        catalog = catalog.strip() or None
        if catalog is not None:
            try:
                validate_identifier_part(catalog, "catalog name")
            except ConfigError as e:
                raise _bad("catalog", catalog, e.message) from None
    try:
        window = TimeWindow(values["window"])
    except ValueError:
        raise _bad("window", values["window"], f"expected one of {', '.join(w.value for w in TimeWindow)}") from None
    executor = values["executor"]
    if executor not in EXECUTOR_CHOICES:
        raise _bad("executor", executor, f"expected one of {', '.join(EXECUTOR_CHOICES)}")
    return RunParams(
        tables=_tables(values["tables"]),
        mode=mode,
        partition_filter=partition_filter,
        dry_run=values["dry_run"],
        policy=dict(policy),
        max_parallel_jobs=_int("max_parallel_jobs", values["max_parallel_jobs"], 1, MAX_PARALLEL_JOBS_LIMIT),
        validation=validation,
        max_retries=_int("max_retries", values["max_retries"], 0, MAX_RETRIES_LIMIT),
        catalog=catalog,
        window=window,
        executor=executor,
    )

