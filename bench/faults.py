"""Faults between us and the catalog / the object store, on seeded schedules: does a compaction that meets them keep
every row, every committed file, commit at most once per task, end in a terminal state, and does the next run repair
what it left?

Per format version, seed and schedule kind a small merge-on-read table (``compaction.demo.workload``, days(ts),
equality + position deletes) is written on a throwaway SeaweedFS (S3 + its Iceberg REST catalog) with no faults.
Then MINOR and after it MAJOR run in this process (``inspect_table`` + ``plan`` + ``run_group`` of every job group,
validation ``count``: the runner function the tests use) through two fault proxies
(``icecompact_testing.faults.S3FaultProxy``): one in front of the S3 endpoint, one in front of the REST catalog;
Spark's catalog and our pyiceberg reads both go through them. Each mode gets a fresh schedule
(``FaultSchedule.draw``, seeded by seed, kind and mode) of the kind:

* ``reset``: connection resets (TCP RST, no answer) on S3 reads / writes and on REST reads;
* ``slowdown``: ``503 SlowDown`` with ``Retry-After`` on S3 reads / writes and on REST calls;
* ``latency``: delays of 0.2-1.5 s before forwarding, on anything;
* ``lost``: the table's REST commit (``POST .../tables/<t>``) forwarded, then its answer lost (a gateway's 503, or
  a connection reset after the server answered);
* ``mixed``: a random mix of all of the above plus S3 500 / 503 without Retry-After.

After each faulted run (all faults cleared) and checked through a direct catalog:

* ``rows``: the table's rows equal the rows before, read by the reference reader
  (``icecompact_testing.oracle.read_table``) and by Spark;
* ``missing``: files referenced by any snapshot in the table's metadata (data / delete files of every snapshot,
  manifest lists, manifests) that are no longer in the bucket (listed over S3): deleted committed files;
* ``dup``: task attempts (``icecompact.task-attempt``) of this run's plan (``icecompact.plan-id``) that are on more
  than one snapshot: duplicate commits;
* ``state``: the group results' statuses and partition statuses (``error:<type>`` when the run raised);
* ``next``: the same mode planned again without faults: ``clean`` (nothing left to do), ``repaired`` (the left work
  ran and succeeded, rows unchanged) or ``NOT repaired``.

Both sides' S3 traffic passes the S3 proxy: our pyiceberg reads (inspection, planning) and Spark's S3FileIO. The
catalog vends its store's ``s3.endpoint`` in each table's config, which Iceberg's Java REST client puts over the
client's own properties, so the REST proxy re-vends the S3 proxy's address (``rest_answers_revended`` in
``traffic``); without that, Spark's reads and writes would go to the store directly.

Usage::

    .venv/bin/python bench/faults.py                        # seeds 1 2, format v2, every kind
    .venv/bin/python bench/faults.py --seeds 1 2 3 --format-versions 2 3 --kinds reset lost

Results: ``bench/results/faults.{txt,json}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testing"))

from compaction.catalog import CatalogConfig  # noqa: E402
from compaction.core.plan import CompactionMode  # noqa: E402
from compaction.core.planner import plan  # noqa: E402
from compaction.core.policy import CompactionPolicy  # noqa: E402
from compaction.core.posthoc import PLAN_PROPERTY  # noqa: E402
from compaction.metadata.inspect import inspect_table  # noqa: E402
from icecompact_testing.faults import FaultSchedule, S3FaultProxy  # noqa: E402

TASK_PROPERTY = "icecompact.task-attempt"  # compaction.spark.major.TASK_PROPERTY (imported lazily there: Spark)
NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
KINDS = ("reset", "slowdown", "latency", "lost", "mixed")
MODES = (CompactionMode.MINOR, CompactionMode.MAJOR)
GOOD_STATUSES = {"committed", "no_op", "skipped"}
FULL = {"major_full_rewrite": True}  # MAJOR rewrites every file (the tiny table has nothing MAJOR would pick)

S3_META = r"/metadata/[^/]*\.(avro|json)$"
S3_DATA = r"\.parquet$"


def _schedules(kind: str, seed: int, mode: CompactionMode, table: str) -> tuple[FaultSchedule, FaultSchedule]:
    """(S3 schedule, catalog schedule) of ``kind`` for one run, reproducible from (kind, seed, mode)."""
    base = seed * 1000 + KINDS.index(kind) * 10 + MODES.index(mode) * 5
    commit = ("POST", rf"/tables/{table}$")
    s3_targets = [("GET", S3_META), ("GET", S3_DATA), ("PUT", ".*"), ("HEAD", ".*"), (None, ".*")]
    rest_targets = [("GET", rf"/tables/{table}$"), (None, ".*")]
    empty = FaultSchedule(base, ())
    if kind == "reset":
        return (FaultSchedule.draw(base, ["reset"], faults=3, requests=(1, 80), targets=s3_targets),
                FaultSchedule.draw(base + 1, ["reset"], faults=2, requests=(1, 12), targets=rest_targets))
    if kind == "slowdown":
        return (FaultSchedule.draw(base, ["slow_down"], faults=3, requests=(1, 80), targets=s3_targets),
                FaultSchedule.draw(base + 1, ["slow_down"], faults=2, requests=(1, 12), targets=rest_targets + [commit]))
    if kind == "latency":
        return (FaultSchedule.draw(base, ["latency"], faults=4, requests=(1, 80), targets=s3_targets),
                FaultSchedule.draw(base + 1, ["latency"], faults=2, requests=(1, 12), targets=rest_targets + [commit]))
    if kind == "lost":
        return empty, FaultSchedule.draw(base + 1, ["lost", "lost_reset"], faults=1, targets=[commit])
    if kind == "mixed":
        return (FaultSchedule.draw(base, ["reset", "slow_down", "latency", "500", "503"], faults=4, requests=(1, 80),
                                   targets=s3_targets),
                FaultSchedule.draw(base + 1, ["reset", "slow_down", "latency", "lost", "lost_reset"], faults=2,
                                   requests=(1, 12), targets=rest_targets + [commit, commit]))
    raise ValueError(kind)


class Bench:
    def __init__(self, spark: Any, server: Any) -> None:
        import pyarrow.fs as pafs

        self.spark = spark
        self.server = server
        self.direct = server.catalog("fdirect")
        from compaction.spark.session import register_catalog

        register_catalog(spark, self.direct)
        self.fs = pafs.S3FileSystem(access_key=server.access_key, secret_key=server.secret_key,
                                    endpoint_override=server.s3_endpoint, scheme="http", region="us-east-1")

    # --- checks -----------------------------------------------------------------------------------------------
    def _rows(self, name: str) -> tuple[Any, Any]:
        from icecompact_testing.oracle import read_table, spark_rows

        ns, t = name.split(".")
        oracle = read_table(self.direct.load().load_table((ns, t))).rows
        self.spark.sql(f"REFRESH TABLE {self.direct.name}.{name}")
        return oracle, spark_rows(self.spark, f"{self.direct.name}.{name}")

    def _missing_files(self, name: str) -> list[str]:
        """Files some snapshot in the metadata references that are gone from the bucket."""
        import pyarrow.fs as pafs
        from icecompact_testing.oracle import live_entries

        ns, t = name.split(".")
        table = self.direct.load().load_table((ns, t))
        referenced: set[str] = set()
        for snapshot in table.snapshots():
            referenced.add(snapshot.manifest_list)
            for manifest in snapshot.manifests(table.io):
                referenced.add(manifest.manifest_path)
            referenced.update(e.path for e in live_entries(table, snapshot.snapshot_id))
        location = table.metadata.location.removeprefix("s3://")
        listed = {f"s3://{info.path}" for info in self.fs.get_file_info(pafs.FileSelector(location, recursive=True))
                  if info.type == pafs.FileType.File}
        return sorted(p for p in referenced if p not in listed)

    def _duplicates(self, name: str, plan_id: str) -> tuple[int, int]:
        """(snapshots of the plan, task attempts on more than one snapshot)."""
        ns, t = name.split(".")
        table = self.direct.load().load_table((ns, t))
        tags = [s.summary.get(TASK_PROPERTY) for s in table.snapshots()
                if s.summary is not None and s.summary.get(PLAN_PROPERTY) == plan_id]
        return len(tags), len(tags) - len(set(tags))

    # --- one run ----------------------------------------------------------------------------------------------
    def _run(self, catalog: CatalogConfig, name: str, mode: CompactionMode) -> dict[str, Any]:
        from compaction.spark.job import run_group
        from compaction.spark.validation import ValidationLevel

        out: dict[str, Any] = {"plan_id": None, "groups": [], "partitions": [], "error": None}
        started = time.monotonic()
        try:
            state = inspect_table(catalog, name)
            overrides = FULL if mode is CompactionMode.MAJOR else None
            the_plan = plan(state, CompactionPolicy.resolve(state.properties, overrides), mode, NOW)
            out["plan_id"] = the_plan.plan_id
            for group in the_plan.groups:
                result = run_group(self.spark, the_plan, group.group_id, level=ValidationLevel.COUNT, max_retries=3)
                out["groups"].append({"status": result.status, "exit_code": result.exit_code, "error": result.error})
                out["partitions"] += [{"label": p.label, "status": str(getattr(p.status, "value", p.status)), "reason": p.reason,
                                       "error": p.error} for p in result.partitions]
        except Exception as e:  # noqa: BLE001 - recorded: the run's terminal state
            out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            out["traceback"] = traceback.format_exc()[-2000:]
        out["seconds"] = round(time.monotonic() - started, 1)
        return out

    def scenario(self, fmt: int, seed: int, kind: str) -> dict[str, Any]:
        from compaction.demo.workload import WorkloadSpec, generate
        from compaction.spark.session import register_catalog

        name = f"flt_{kind}_{seed}_v{fmt}_{uuid.uuid4().hex[:6]}.t"
        generate(self.spark, self.direct, name, WorkloadSpec(seed=seed, format_version=fmt, partitioning="days_ts",
                                                               commits=2))
        before_oracle, before_spark = self._rows(name)
        record: dict[str, Any] = {"format_version": fmt, "seed": seed, "kind": kind, "table": name,
                                  "rows": sum(before_oracle.values()), "modes": {}}
        for mode in MODES:
            if mode is CompactionMode.MAJOR:
                # MINOR leaves the tiny table with little to rewrite: new small files and position deletes for MAJOR.
                ref = f"{self.direct.name}.{name}"
                self.spark.sql(f"INSERT INTO {ref} SELECT id + 100000, region, ts, amount, note FROM {ref} WHERE id % 3 = 0")
                self.spark.sql(f"DELETE FROM {ref} WHERE id % 4 = 1")
                before_oracle, before_spark = self._rows(name)
            s3_schedule, rest_schedule = _schedules(kind, seed, mode, name.split(".")[1])
            with S3FaultProxy(self.server.s3_endpoint) as s3, S3FaultProxy(self.server.catalog_uri,
                                                                             vend_s3_endpoint=s3.endpoint) as rest:
                through = CatalogConfig(f"fx_{uuid.uuid4().hex[:8]}", {**self.direct.properties,
                                                                      "uri": rest.endpoint, "s3.endpoint": s3.endpoint})
                register_catalog(self.spark, through)
                s3.install(s3_schedule)
                rest.install(rest_schedule)
                run = self._run(through, name, mode)
                s3.clear()
                rest.clear()
                served = {"s3": [f"#{f.request} {f.method} {f.path.rsplit('/', 1)[-1][:40]}: {f.fault}" for f in s3.log],
                          "rest": [f"#{f.request} {f.method} {f.path.rsplit('/', 2)[-1]}: {f.fault}" for f in rest.log]}
                traffic = {"s3_requests": s3.requests, "rest_requests": rest.requests,
                           "rest_answers_revended": rest.vended}
            oracle, spark_seen = self._rows(name)
            missing = self._missing_files(name)
            commits, dups = self._duplicates(name, run["plan_id"]) if run["plan_id"] else (0, 0)
            statuses = sorted({p["status"] for p in run["partitions"]})
            if run["error"]:
                state = "error:" + run["error"].split(":", 1)[0]
            elif not run["plan_id"] or not run["groups"]:
                state = "nothing planned"
            else:
                state = ",".join(sorted({g["status"] for g in run["groups"]})) + " [" + ",".join(statuses) + "]"
            # The next run, without faults: is anything left, and does running it repair it?
            again = self._run(self.direct, name, mode)
            if again["error"]:
                repair = f"NOT repaired ({again['error'][:80]})"
            elif not again["groups"]:
                repair = "clean"
            else:
                ok = all(p["status"] in GOOD_STATUSES for p in again["partitions"])
                repair = "repaired" if ok else f"NOT repaired ({','.join(sorted({p['status'] for p in again['partitions']}))})"
            after_oracle, _ = self._rows(name)
            record["modes"][mode.value] = {
                "schedule": {"s3": s3_schedule.describe(), "rest": rest_schedule.describe()},
                "served": served, "traffic": traffic, "run": run, "state": state,
                "terminal": True,  # run_group returned or raised: nothing left running
                "rows_equal_oracle": oracle == before_oracle, "rows_equal_spark": spark_seen == before_spark,
                "missing_files": missing, "plan_commits": commits, "duplicate_commits": dups,
                "next": repair, "next_run": again, "rows_equal_after_next": after_oracle == before_oracle,
                "faults_served": len(served["s3"]) + len(served["rest"]),
            }
        return record


def _line(r: dict[str, Any], mode: str) -> str:
    m = r["modes"][mode]
    rows = "ok" if m["rows_equal_oracle"] and m["rows_equal_spark"] and m["rows_equal_after_next"] else "LOST/CHANGED"
    return (f"  v{r['format_version']} seed {r['seed']:<3} {r['kind']:<9} {mode:<6} faults {m['faults_served']:>2}  "
            f"rows {rows:<12} missing {len(m['missing_files']):>2}  commits {m['plan_commits']:>2} dup {m['duplicate_commits']}  "
            f"{m['state'][:60]:<60}  next: {m['next'][:50]}  ({m['run']['seconds']:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--format-versions", type=int, nargs="+", default=[2])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--out", default="faults")
    args = parser.parse_args()

    from compaction.demo.object_store import start_object_store
    from compaction.spark.session import SparkSettings, build_session

    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop Spark and the object store on a kill
    server = start_object_store()
    spark = build_session([], SparkSettings(master="local[2]", app_name="icecompact-bench-faults"))
    records: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        bench = Bench(spark, server)
        for fmt in args.format_versions:
            for seed in args.seeds:
                for kind in args.kinds:
                    try:
                        record = bench.scenario(fmt, seed, kind)
                    except Exception as e:  # noqa: BLE001 - a scenario that cannot be set up or checked
                        record = {"format_version": fmt, "seed": seed, "kind": kind, "setup_error": repr(e)[:500],
                                  "traceback": traceback.format_exc()[-2000:], "modes": {}}
                    records.append(record)
                    for mode in record["modes"]:
                        print(_line(record, mode), flush=True)
                    if "setup_error" in record:
                        print(f"  v{fmt} seed {seed} {kind}: SETUP/CHECK ERROR {record['setup_error']}", flush=True)
    finally:
        spark.stop()
        server.stop()

    runs = [(r, m) for r in records for m in r["modes"].values()]
    totals = {
        "runs": len(runs),
        "scenarios_with_setup_errors": sum(1 for r in records if "setup_error" in r),
        "faults_served": sum(m["faults_served"] for _, m in runs),
        "runs_with_rows_lost_or_changed": sum(1 for _, m in runs if not (m["rows_equal_oracle"] and m["rows_equal_spark"]
                                                                          and m["rows_equal_after_next"])),
        "committed_files_deleted": sum(len(m["missing_files"]) for _, m in runs),
        "duplicate_commits": sum(m["duplicate_commits"] for _, m in runs),
        "runs_not_terminal": sum(1 for _, m in runs if not m["terminal"]),
        "runs_failed_or_error": sum(1 for _, m in runs if m["state"].startswith("error") or "failed" in m["state"]),
        "not_repaired_by_next_run": sum(1 for _, m in runs if m["next"].startswith("NOT")),
    }
    header = (f"bench/faults.py - seeds {args.seeds}, format versions {args.format_versions}, kinds {args.kinds}; "
              f"MINOR then MAJOR per table, in-process run_group through S3 + REST fault proxies; "
              f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
              f"{time.monotonic() - started:.0f} s")
    lines = [header, ""]
    for r in records:
        lines += [_line(r, mode) for mode in r["modes"]]
        if "setup_error" in r:
            lines.append(f"  v{r['format_version']} seed {r['seed']} {r['kind']}: SETUP/CHECK ERROR {r['setup_error']}")
    lines += ["", "totals: " + ", ".join(f"{k} {v}" for k, v in totals.items()), "",
              "schedules and faults served (request number at the proxy, method, path tail, fault):"]
    for r in records:
        for mode, m in r["modes"].items():
            lines.append(f"  v{r['format_version']} seed {r['seed']} {r['kind']} {mode}: S3 {m['schedule']['s3']} "
                         f"REST {m['schedule']['rest']}")
            lines.append(f"    served: {m['served']['s3'] + m['served']['rest']}")
            if m["run"]["error"] or m["state"].find("failed") >= 0:
                lines.append(f"    error: {m['run']['error'] or [g['error'] for g in m['run']['groups']]}")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{args.out}.txt").write_text(text)
    (RESULTS_DIR / f"{args.out}.json").write_text(json.dumps({"args": vars(args), "totals": totals,
                                                             "records": records}, indent=1, default=str))


if __name__ == "__main__":
    main()
