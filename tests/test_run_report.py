"""`icecompact run` on a table whose partition spec evolved: the before/after table's rows are (spec, partition),
never overlap and add up to the whole table; the progress stream has one final line per partition; every
committed partition shows the validation it passed. Through real spark-submit, like tests/test_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction.catalog import CatalogConfig
from compaction.cli import WHOLE_TABLE_LABEL, format_before_after
from compaction.core.plan import CompactionMode
from compaction.metadata.inspect import inspect_table
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.runner import run_table
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate


@pytest.fixture()
def ledger(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


def _cells(table: str) -> dict[str, list[str]]:
    """The before/after table's rows by partition label (columns split on runs of two spaces)."""
    rows: dict[str, list[str]] = {}
    for line in table.splitlines()[2:]:
        if line.startswith("note:"):
            break
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        assert cells[0] not in rows, f"partition listed twice: {cells[0]}"
        rows[cells[0]] = cells
    return rows


def _change(cell: str) -> tuple[int, int]:
    before, after = cell.split(" -> ")
    return int(before), int(after)


def test_before_after_counts_add_up_on_an_evolved_table(spark, sqlite_catalog: CatalogConfig, ledger: Ledger) -> None:
    """The defect: files of the old spec (unpartitioned here, with global equality deletes) were counted under every
    partition of the new spec (bucket(4, id)), so the columns did not add up to the table."""
    workload = generate(spark, sqlite_catalog, "evo.t", WorkloadSpec(
        seed=28, partitioning="unpartitioned", commits=2, rows_per_commit=24, evolve_spec=True,
        global_eq_deletes=True, noise_eq_deletes=False, null_key_fraction=0.0))
    state = inspect_table(sqlite_catalog, "evo.t")
    assert len({p.key.spec_id for p in state.partitions}) == 2, "the scenario needs files under two specs"
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    lines: list[str] = []
    report = run_table(sqlite_catalog, "evo.t", mode=CompactionMode.MAJOR, ledger=ledger, progress=lines.append,
                       max_parallel_jobs=1)
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines)
    assert read_table(sqlite_catalog.load().load_table(workload.identifier)).rows == before.rows

    text = format_before_after(report)
    rows = _cells(text)
    whole = rows.pop(WHOLE_TABLE_LABEL)
    whole = [whole[0], "", "", *whole[1:]]  # its kind and status cells are empty
    assert "note: partition specs 0, 1: a row is one (spec, partition)" in " ".join(text.split())
    assert all(label.startswith("spec=") for label in rows)
    # Listed rows hold every change: their before/after columns add up to the whole table's change.
    for column in (3, 4, 5):  # data files, delete files, file records
        table_before, table_after = _change(whole[column])
        listed = [_change(cells[column]) for cells in rows.values()]
        unlisted = {p.key.label(): p for p in state.partitions if p.key.label() not in rows}
        unlisted_count = sum((p.data_file_count, len(p.delete_files), p.data_records)[column - 3]
                             for p in unlisted.values())
        assert sum(b for b, _ in listed) + unlisted_count == table_before, (column, text)
        assert sum(a for _, a in listed) + unlisted_count == table_after, (column, text)
    assert _change(whole[3])[0] == sum(p.data_file_count for p in state.partitions)

    outcomes = ledger.outcomes(report.run_id)
    by_label = {p.key.label(): p for p in state.partitions}
    for o in outcomes:
        # The job counted only the partition's own files, never the old spec's files under each new partition.
        own = by_label[o.partition_label]
        assert o.data_files_before is not None and o.data_files_before <= own.data_file_count
        assert o.delete_files_before is not None and o.delete_files_before <= len(own.delete_files)
    committed = [o for o in outcomes if o.status is OutcomeStatus.COMMITTED]
    assert committed
    for o in committed:
        assert (o.validation_level, o.validation_result) == ("count", "passed"), o
        assert rows[o.partition_label][-1] == "passed (count)"
    # One final line per reported partition in the progress stream, agreeing with the ledger.
    finals = [line for line in lines if line.startswith("icecompact: spec=") and " -> " in line]
    assert len(finals) == len(outcomes), finals
    for o in outcomes:
        assert sum(1 for line in finals if line.startswith(f"icecompact: {o.partition_label} -> {o.status.value} ")) == 1
