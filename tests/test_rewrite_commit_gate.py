"""A rewrite commits itself (compaction.spark.major): Iceberg's planner and runner write the new files, then one
RewriteFiles of ours replaces them. The commit gate therefore holds the commit, not the rewrite: a writer taking a
write lease while a MAJOR writes its files is not held up (no commit intent is live then), the MAJOR's commit waits
for the lease, the writer's DELETE commits, and the MAJOR - whose rewritten file the DELETE touched - conflicts (its
new files deleted: that commit never landed), is planned again and commits. No row lost or resurrected."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.results import COMMITTED
from compaction.demo.workload import WorkloadSpec, generate
from compaction.ledger import Ledger, LedgerCommitGate
from compaction.ops import leases
from compaction.spark import major
from compaction.spark.validation import ValidationLevel
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table


def test_a_lease_taken_while_a_major_rewrites_goes_first(  # type: ignore[no-untyped-def]
        spark, postgres_catalog: CatalogConfig, tmp_path: Path, monkeypatch) -> None:
    catalog = postgres_catalog
    workload = generate(spark, catalog, "cdc.lease", WorkloadSpec(seed=31, partitioning="unpartitioned", commits=3,
                                                                   rows_per_commit=40))
    victim = min(row[0] for row in workload.expected_rows if row[0] is not None)
    lines: list[str] = []
    first_attempt: dict[str, object] = {}
    writer_errors: list[BaseException] = []
    writer_done = threading.Event()

    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        def writer() -> None:
            try:
                deadline = time.monotonic() + 120
                while not any("etl" in line for line in lines) and time.monotonic() < deadline:
                    time.sleep(0.05)  # until the MAJOR's commit waits for the lease
                first_attempt["commit_was_waiting"] = any("etl" in line for line in lines)
                spark.sql(f"DELETE FROM {workload.table} WHERE id = {victim}")
            except BaseException as e:  # noqa: BLE001 - reported by the test
                writer_errors.append(e)
            finally:
                ledger.release_write_lease(str(first_attempt["lease"]))
                writer_done.set()

        real = major._rewritten_groups

        def rewritten_then_a_writer_arrives(*args, **kwargs):  # type: ignore[no-untyped-def]
            groups, copies = real(*args, **kwargs)
            if "lease" not in first_attempt:
                # The files are written, nothing is committed: no intent is live, the lease is granted at once.
                first_attempt["intents"] = ledger.live_commit_intents("cdc.lease", catalog=catalog.name)
                first_attempt["lease"] = leases.acquire(ledger, "cdc.lease", catalog.name, holder="etl", wait_s=0)
                first_attempt["added"] = [str(f.location()) for g in groups for f in major._iterate(g.addedFiles())]
                threading.Thread(target=writer, daemon=True).start()
            return groups, copies

        monkeypatch.setattr(major, "_rewritten_groups", rewritten_then_a_writer_arrives)
        gate = LedgerCommitGate(ledger, catalog.name, "plan-lease", poll_s=0.1, progress=lines.append)
        run = compact_in_process(spark, catalog, "cdc.lease", CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                                 overrides={"major_full_rewrite": True}, gate=gate, progress=lines.append)
        assert writer_done.wait(120)

    assert not writer_errors, writer_errors
    assert first_attempt["intents"] == [] and first_attempt["commit_was_waiting"], (first_attempt, lines)
    [partition] = run.partitions
    assert partition.status == COMMITTED, (partition.status, partition.error, lines)
    assert partition.conflicts, "the MAJOR's first commit must have conflicted with the writer's DELETE"
    # The conflicting commit never landed: its new files are gone again.
    assert first_attempt["added"]
    assert not [p for p in first_attempt["added"] if os.path.exists(urlsplit(str(p)).path)]  # type: ignore[union-attr]

    table = catalog.load().load_table(workload.identifier)
    ours = table.snapshot_by_id(partition.commit_snapshot_ids[-1])
    delete = [s for s in table.metadata.snapshots if s.summary and s.summary.operation.value in ("delete", "overwrite")
              and "icecompact.plan-id" not in s.summary.additional_properties]
    assert delete and delete[-1].sequence_number < ours.sequence_number  # the writer committed first
    expected = {row: n for row, n in workload.expected_rows.items() if row[0] != victim}
    assert sum(expected.values()) < sum(workload.expected_rows.values())
    assert read_table(table).rows == expected
