"""Ledger side of maintenance: runs, actions, in-flight compaction runs, write leases (SQLite)."""

from __future__ import annotations

import datetime as dt

from compaction.ledger import Ledger, RunStatus

UTC = dt.timezone.utc
T0 = dt.datetime(2025, 5, 1, 12, tzinfo=UTC)


def test_maintenance_records_in_flight_runs_and_leases(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with Ledger.open(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        run_id = ledger.start_maintenance("db.t", "cat", "m-1", '{"a": 1}', now=T0)
        ledger.record_maintenance_action(run_id, "expire_snapshots", "succeeded", reason="r", files_removed=3,
                                         bytes_removed=300, detail={"snapshots": 2}, now=T0)
        ledger.finish_maintenance(run_id, "succeeded", now=T0 + dt.timedelta(seconds=5))
        [run] = ledger.maintenance_runs("db.t", catalog="cat")
        assert run.status == "succeeded" and run.to_dict()["plan"] == {"a": 1}
        [action] = ledger.maintenance_actions(run_id)
        assert (action.files_removed, action.bytes_removed, action.detail) == (3, 300, {"snapshots": 2})

        live = ledger.start_run("db.t", "cat", now=T0)
        done = ledger.start_run("db.t", "cat", now=T0)
        ledger.finish_run(done, RunStatus.SUCCEEDED, 0, now=T0)
        ledger.start_run("db.t", "cat", dry_run=True, now=T0)
        assert [r.run_id for r in ledger.in_flight_runs("db.t", catalog="cat")] == [live]

        lease = ledger.acquire_write_lease("db.t", "cat", "writer-1", ttl_s=60, now=T0)
        assert [x.lease_id for x in ledger.active_write_leases("db.t", catalog="cat", now=T0)] == [lease]
        assert ledger.active_write_leases("db.t", catalog="cat", now=T0 + dt.timedelta(minutes=2)) == []
        ledger.release_write_lease(lease, now=T0 + dt.timedelta(seconds=1))
        assert ledger.active_write_leases("db.t", catalog="cat", now=T0 + dt.timedelta(seconds=2)) == []
