"""The pure maintenance planner and policy: retention, in-flight protection, manifests, orphans."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.core.errors import ConfigError, PlanningError
from compaction.core.maintenance import (
    InFlight,
    MaintenanceAction as A,
    MaintenancePlan,
    MaintenanceState,
    RefInfo,
    SnapshotInfo,
    plan_maintenance,
    simulate_expiry,
)
from compaction.core.maintenance_policy import MaintenancePolicy
from compaction.core.model import TableIdentity

UTC = dt.timezone.utc
NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR = 3600 * 1000
TABLE = TableIdentity("cat", ("db",), "t")


def chain(n: int, step_ms: int = HOUR, start_id: int = 1) -> tuple[SnapshotInfo, ...]:
    """n snapshots, one per step, the newest at NOW - step."""
    return tuple(SnapshotInfo(start_id + i, start_id + i - 1 if i else None, NOW_MS - (n - i) * step_ms) for i in range(n))


def state(snaps: tuple[SnapshotInfo, ...], *, refs: tuple[RefInfo, ...] | None = None, manifests: tuple[int, ...] = (),
          in_flight: tuple[InFlight, ...] = (), props: dict[str, str] | None = None) -> MaintenanceState:
    head = snaps[-1].snapshot_id if snaps else None
    return MaintenanceState(TABLE, "file:/wh/db/t", 2, props or {}, head, snaps,
                            refs if refs is not None else ((RefInfo("main", head),) if head else ()),
                            manifest_sizes=manifests, metadata_file_bytes=4096, metadata_log_entries=3,
                            in_flight=in_flight)


def policy(**kw: object) -> MaintenancePolicy:
    return MaintenancePolicy.resolve({}, kw)


def test_policy_reads_iceberg_properties_and_cautious_defaults() -> None:
    p = MaintenancePolicy.resolve({"history.expire.max-snapshot-age-ms": "3600000",
                                   "history.expire.min-snapshots-to-keep": "3", "gc.enabled": "true",
                                   "compaction.ops.maintenance.delete-orphans.equal-schemes": "s3a,s3n=s3"})
    assert (p.max_snapshot_age_ms, p.min_snapshots_to_keep) == (3_600_000, 3)
    assert p.orphans_enabled is False and p.orphans_older_than_s == 3 * 86400
    assert p.orphans_equal_schemes == (("s3a,s3n", "s3"),)
    assert MaintenancePolicy.from_dict(p.to_dict()) == p
    with pytest.raises(ConfigError, match="unknown maintenance run parameter"):
        MaintenancePolicy.resolve({}, {"nope": 1})
    with pytest.raises(ConfigError, match="min-snapshots-to-keep"):
        MaintenancePolicy.resolve({"history.expire.min-snapshots-to-keep": "0"})


def test_expires_by_age_beyond_min_snapshots() -> None:
    snaps = chain(10)  # ages 10h .. 1h
    plan = plan_maintenance(state(snaps), policy(max_snapshot_age_ms=5 * HOUR), NOW)
    d = plan.decision(A.EXPIRE_SNAPSHOTS)
    assert d.run and plan.expected_expired_snapshot_ids == (1, 2, 3, 4, 5)
    assert plan.expire_older_than_ms == NOW_MS - 5 * HOUR
    assert "5 of 10 snapshot(s) past retention" in d.reason and "with the Spark action" in d.reason
    # a large history is expired on the driver (the Spark action ships the whole metadata to every task)
    big = plan_maintenance(state(snaps), policy(max_snapshot_age_ms=5 * HOUR, expire_driver_min_snapshots=5), NOW)
    assert "on the driver (5 >= expire-snapshots.driver-min-snapshots=5)" in big.decision(A.EXPIRE_SNAPSHOTS).reason
    # min-snapshots-to-keep wins over age
    plan = plan_maintenance(state(snaps), policy(max_snapshot_age_ms=1, min_snapshots_to_keep=8), NOW)
    assert plan.expected_expired_snapshot_ids == (1, 2)


def test_in_flight_run_protects_its_base_and_everything_since_it_started() -> None:
    snaps = chain(10)
    run = InFlight("run", "r1", NOW - dt.timedelta(hours=2, minutes=30), snapshot_ids=(3,))
    plan = plan_maintenance(state(snaps, in_flight=(run,)), policy(max_snapshot_age_ms=1, clock_skew_s=0), NOW)
    # base snapshot 3 (7h old) and the snapshots committed after the run started (9, 10) are kept
    assert plan.expected_expired_snapshot_ids == (1, 2)
    assert set(plan.protected_snapshot_ids) == {3, 9, 10}
    assert "cut-off moved back" in plan.decision(A.EXPIRE_SNAPSHOTS).reason
    # an abandoned run (older than the in-flight timeout) protects nothing and is noted
    old = InFlight("run", "r0", NOW - dt.timedelta(days=3), snapshot_ids=(3,))
    plan = plan_maintenance(state(snaps, in_flight=(old,)), policy(max_snapshot_age_ms=1), NOW)
    assert plan.expected_expired_snapshot_ids == tuple(range(1, 10)) and "abandoned" in plan.notes[0]


def test_refuses_when_a_refs_own_retention_would_expire_a_protected_snapshot() -> None:
    snaps = chain(6)
    refs = (RefInfo("main", 6, max_snapshot_age_ms=1, min_snapshots_to_keep=1),)
    run = InFlight("run", "r1", NOW, snapshot_ids=(2,))
    plan = plan_maintenance(state(snaps, refs=refs, in_flight=(run,)), policy(clock_skew_s=0), NOW)
    d = plan.decision(A.EXPIRE_SNAPSHOTS)
    assert not d.run and "in-flight" in d.reason and plan.expire_older_than_ms is None


def test_simulation_matches_iceberg_for_tags_branches_and_unreferenced() -> None:
    snaps = chain(6) + (SnapshotInfo(100, 2, NOW_MS - 5 * HOUR), SnapshotInfo(200, 3, NOW_MS - 30 * HOUR))
    refs = (RefInfo("main", 6), RefInfo("t1", 1, is_branch=False), RefInfo("old", 200, max_ref_age_ms=HOUR))
    expired, dropped = simulate_expiry(snaps, refs, now_ms=NOW_MS, older_than_ms=NOW_MS - 4 * HOUR,
                                       min_snapshots_to_keep=1, max_ref_age_ms=2**63 - 1)
    # tag t1 keeps 1; unreferenced 100 is older than the cut-off -> expired; ref "old" is past its age -> dropped
    assert dropped == {"old"} and 1 not in expired
    assert expired == {2, 100, 200}


def test_manifest_rewrite_threshold() -> None:
    snaps = chain(2)
    plan = plan_maintenance(state(snaps, manifests=(1000,) * 20), policy(), NOW)
    assert plan.runs(A.REWRITE_MANIFESTS) and "20 small manifest(s)" in plan.decision(A.REWRITE_MANIFESTS).reason
    plan = plan_maintenance(state(snaps, manifests=(1000,) * 3 + (8 << 20,)), policy(), NOW)
    assert not plan.runs(A.REWRITE_MANIFESTS)


def test_orphans_off_by_default_and_cut_off_never_newer_than_in_flight_work() -> None:
    snaps = chain(2)
    plan = plan_maintenance(state(snaps), policy(), NOW)
    assert not plan.runs(A.DELETE_ORPHAN_FILES) and "off" in plan.decision(A.DELETE_ORPHAN_FILES).reason
    lease = InFlight("lease", "writer-1", NOW - dt.timedelta(minutes=10))
    plan = plan_maintenance(state(snaps, in_flight=(lease,)),
                            policy(orphans_enabled=True, orphans_older_than_s=0, clock_skew_s=60), NOW)
    assert plan.runs(A.DELETE_ORPHAN_FILES)
    assert plan.orphan_older_than_ms == NOW_MS - 11 * 60 * 1000
    plan = plan_maintenance(state(snaps, props={"gc.enabled": "false"}),
                            MaintenancePolicy.resolve({"gc.enabled": "false"}, {"orphans_enabled": True}), NOW)
    assert plan.actions == () and "gc.enabled=false" in plan.decision(A.DELETE_ORPHAN_FILES).reason


def test_plan_round_trips_and_rejects_unknown_versions() -> None:
    run = InFlight("run", "r1", NOW - dt.timedelta(hours=1), snapshot_ids=(2,))
    plan = plan_maintenance(state(chain(8), manifests=(10,) * 20, in_flight=(run,)),
                            policy(max_snapshot_age_ms=HOUR, orphans_enabled=True), NOW)
    assert plan.plan_id.startswith("m-")
    assert MaintenancePlan.from_json(plan.to_json()) == plan
    assert plan.actions == (A.EXPIRE_SNAPSHOTS, A.REWRITE_MANIFESTS, A.DELETE_ORPHAN_FILES)
    bad = plan.to_dict() | {"maintenance_plan_format_version": 99}
    with pytest.raises(PlanningError, match="format version"):
        MaintenancePlan.from_dict(bad)
    # deterministic: same input, same plan id
    assert plan_maintenance(state(chain(8), manifests=(10,) * 20, in_flight=(run,)),
                            policy(max_snapshot_age_ms=HOUR, orphans_enabled=True), NOW).plan_id == plan.plan_id


def test_disabled_and_empty() -> None:
    plan = plan_maintenance(state(()), policy(), NOW)
    assert plan.actions == () and plan.decision(A.EXPIRE_SNAPSHOTS).reason == "no snapshots"
    plan = plan_maintenance(state(chain(3)), policy(enabled=False, orphans_enabled=True), NOW)
    assert plan.actions == ()
