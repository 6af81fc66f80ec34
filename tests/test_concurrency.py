"""MAJOR against a concurrent writer on the PostgreSQL catalog: no row lost or resurrected, conflicts retried."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.runner import run_table
from compaction.spark import jvm as J
from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit
from icecompact_testing.oracle import read_table
from compaction.demo.workload import BASE_TS_US, DAY_US, WorkloadSpec, generate, ts_from_micros


def _day_of(ts: Any) -> int:
    epoch = ts_from_micros(0)
    return (ts - epoch).days


class Writer:
    """Commits position deletes (Spark DELETE), equality deletes (Java API) and appends to the compacted
    partitions, keeping the expected multiset of live rows. A failed commit changes nothing and is retried."""

    def __init__(self, spark, ref: str, expected: Counter, seed: int) -> None:  # type: ignore[no-untyped-def]
        self.spark, self.ref, self.expected = spark, ref, Counter(expected)
        self.rng = random.Random(seed)
        self.next_id = 10_000_000
        self.ops: Counter = Counter()
        self.failures: Counter = Counter()

    def _live_ids(self) -> list[int]:
        return sorted({row[0] for row in self.expected if row[0] is not None})

    def delete_by_id(self) -> None:
        victim = self.rng.choice(self._live_ids())
        self.spark.sql(f"DELETE FROM {self.ref} WHERE id = {int(victim)}")
        for row in [r for r in self.expected if r[0] == victim]:
            del self.expected[row]

    def equality_delete(self) -> None:
        victim = self.rng.choice(self._live_ids())
        rows = [r for r in self.expected if r[0] == victim]
        day = _day_of(rows[0][2])
        if any(_day_of(r[2]) != day for r in rows):
            return  # keep the model exact: one partition per equality delete
        table = J.load_table(self.spark, self.ref)
        table.refresh()
        write_and_commit(self.spark, table, [EqualityDeleteSpec(("id",), ((victim,),), partition=(day,))])
        for row in rows:
            del self.expected[row]

    def append(self) -> None:
        self.next_id += 1
        day = self.rng.randrange(2)
        ts_us = BASE_TS_US + day * DAY_US + self.rng.randrange(DAY_US)
        row = (self.next_id, "EU", ts_from_micros(ts_us), 7, "concurrent")
        self.spark.sql(
            f"INSERT INTO {self.ref} VALUES ({self.next_id}, 'EU', timestamp_micros({ts_us}), 7, 'concurrent')"
        )
        self.expected[row] += 1

    def step(self) -> None:
        op = self.rng.choice([self.delete_by_id, self.equality_delete, self.append])
        for _attempt in range(5):
            try:
                op()
                self.ops[op.__name__] += 1
                return
            except Exception:  # a conflict with the compaction commit: Iceberg committed nothing
                self.failures[op.__name__] += 1
                time.sleep(0.2)


def test_major_races_a_concurrent_writer(spark, postgres_catalog: CatalogConfig, tmp_path: Path) -> None:
    spec = WorkloadSpec(seed=31, partitioning="days_ts", days_span=2, commits=3, rows_per_commit=60,
                        use_equality_deletes=True)
    workload = generate(spark, postgres_catalog, "conc.t", spec)
    writer = Writer(spark, workload.table, workload.expected_rows, seed=31)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        reports: list[Any] = []
        errors: list[BaseException] = []

        def compact() -> None:
            try:
                reports.append(run_table(postgres_catalog, "conc.t", mode=CompactionMode.MAJOR, ledger=ledger,
                                         max_parallel_jobs=2, max_retries=6, validation="count"))
            except BaseException as e:  # surfaced by the assertion below
                errors.append(e)

        thread = threading.Thread(target=compact)
        thread.start()
        # The writer works while the compaction runs, and takes at least 3 steps however fast that was.
        while thread.is_alive() or sum(writer.ops.values()) < 3:
            writer.step()
            time.sleep(0.1)
        thread.join()
        assert not errors, errors
        report = reports[0]
        table = postgres_catalog.load().load_table(workload.identifier)
        final = read_table(table)
        assert final.rows == writer.expected, "rows lost or resurrected"
        assert sum(writer.ops.values()) >= 3, writer.ops

        outcomes = ledger.outcomes(report.run_id)
        conflicts = ledger.conflicts(report.run_id)
        assert sum(o.conflicts for o in outcomes) == len(conflicts)
        assert all(o.status in (OutcomeStatus.COMMITTED, OutcomeStatus.NO_OP, OutcomeStatus.SKIPPED,
                                OutcomeStatus.CONFLICT) for o in outcomes), [(o.partition_label, o.status, o.error) for o in outcomes]
        # Whatever the race left behind, a second run (writer stopped) ends with every partition compacted.
        second = run_table(postgres_catalog, "conc.t", mode=CompactionMode.MAJOR, ledger=ledger, validation="count")
        assert second.status is RunStatus.SUCCEEDED, second.errors
        final = read_table(postgres_catalog.load().load_table(workload.identifier))
        assert final.rows == writer.expected
        assert not final.applicable_deletes
        print(f"writer ops {dict(writer.ops)}, writer failures {dict(writer.failures)}, "
              f"compaction conflicts {len(conflicts)}: {[c.error_class for c in conflicts]}")
