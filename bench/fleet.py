"""Fleet: many small tables that each need a MINOR, compacted through the DAG, with a spark-submit per job
group (``executor=submit``) and with the resident executor (``executor=resident``), side by side in one run.

Set-up: a throwaway PostgreSQL cluster holds the Iceberg catalog (JDBC) and the ledger; ``--tables`` small CDC tables
(appends plus equality and position deletes) are written once. The DAG ``iceberg_compaction`` runs with
``airflow dags test`` (tasks in-process, real Airflow metadata DB), mode ``minor``, first with ``executor=submit``
(two parallel spark-submits, as the DAG's default), then - every table rolled back to its snapshot before the first
run - with ``executor=resident`` (the catalog's executor is started on demand inside the timed run). Both runs must
compact every table with every outcome committed and validated; the ratio is their wall-clock times.

Writes ``bench/results/fleet.{txt,json}``::

    .venv/bin/python bench/fleet.py [--tables 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, ROOT  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)

NAMESPACE = "fleet"


def _airflow_env(home: Path) -> None:
    """AIRFLOW_* for this process, before anything imports Airflow (the test rig's isolated home)."""
    from icecompact_testing.airflow_processes import isolated_home_env

    os.environ.update({**isolated_home_env(home, {"admin": uuid.uuid4().hex}),
                       "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING", "ICECOMPACT_DAG_SCHEDULE": "none"})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--out", default=str(RESULTS_DIR / "fleet"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="icecompact-fleet-"))
    _airflow_env(work / "airflow")
    os.environ["ICECOMPACT_HOME"] = str(work / "home")

    from compaction.catalog import CatalogConfig
    from compaction.ops.executor import stop_executors
    from compaction.ledger import Ledger
    from compaction.spark.session import SparkSettings, build_session
    from icecompact_testing.postgres import start_cluster
    from compaction.demo.workload import WorkloadSpec, generate
    from icecompact_airflow.connections import connection_env

    from icecompact_testing.airflow_processes import AirflowProcesses

    airflow = AirflowProcesses(Path(os.environ["AIRFLOW_HOME"]))
    airflow.cli("db", "migrate")
    airflow.cli("pools", "set", "icecompact_spark", "4", "icecompact", timeout=120)
    cluster = start_cluster()
    spark = None
    try:
        catalog = CatalogConfig(f"fleet{uuid.uuid4().hex[:6]}", {
            "type": "sql", "uri": cluster.sqlalchemy_uri(cluster.create_database("fleet_catalog")),
            "warehouse": (work / "warehouse").as_uri()})
        (work / "warehouse").mkdir()
        ledger_url = cluster.sqlalchemy_uri(cluster.create_database("fleet_ledger"))
        os.environ.update({**connection_env(catalog), "ICECOMPACT_LEDGER_URL": ledger_url,
                           "ICECOMPACT_CATALOG": catalog.name})
        spark = build_session([catalog], SparkSettings(master="local[2]", app_name="icecompact-fleet-setup"))
        t0 = time.time()
        before: dict[str, int] = {}
        for i in range(args.tables):
            name = f"{NAMESPACE}.t{i:03d}"
            generate(spark, catalog, name, WorkloadSpec(seed=1000 + i, partitioning="days_ts", commits=2,
                                                        rows_per_commit=40, days_span=2))
            before[name] = catalog.load().load_table((NAMESPACE, f"t{i:03d}")).current_snapshot().snapshot_id
        print(f"fleet: {args.tables} tables written in {time.time() - t0:.0f} s", flush=True)

        from airflow.dag_processing.dagbag import DagBag

        figures: dict[str, Any] = {"tables": args.tables}
        for executor in ("submit", "resident"):
            if executor == "resident":  # the same starting point for both runs
                for name, snapshot_id in before.items():
                    spark.sql(f"CALL {catalog.name}.system.rollback_to_snapshot('{name}', {snapshot_id})")
            dag = DagBag(dag_folder=str(ROOT / "dags")).get_dag("iceberg_compaction")
            conf = {"tables": [f"{NAMESPACE}.*"], "catalog": catalog.name, "mode": "minor", "executor": executor,
                    "window": "all"}
            started = time.time()
            dag_run = dag.test(run_conf=conf)
            took = time.time() - started
            state = str(getattr(dag_run.state, "value", dag_run.state))
            with Ledger.open(ledger_url) as ledger:
                runs = [r for r in ledger.runs(limit=10_000) if r.airflow_run_id == dag_run.run_id]
                outcomes = [o for r in runs for o in ledger.outcomes(r.run_id)]
            committed = sum(1 for o in outcomes if o.status.value == "committed" and o.validation_result == "passed")
            figures[executor] = {"wall_s": round(took, 1), "dag_run": state, "runs": len(runs),
                                 "run_statuses": sorted({r.status.value for r in runs}),
                                 "partitions_committed_validated": committed, "outcomes": len(outcomes)}
            print(f"fleet: executor={executor}: {took:.0f} s, DAG run {state}, {len(runs)} runs "
                  f"{figures[executor]['run_statuses']}, {committed}/{len(outcomes)} partitions committed and "
                  f"validated", flush=True)
        with Ledger.open(ledger_url) as ledger:
            stop_executors(ledger, progress=lambda _m: None)
        ratio = figures["submit"]["wall_s"] / figures["resident"]["wall_s"]
        same = (figures["submit"]["partitions_committed_validated"] == figures["resident"]["partitions_committed_validated"]
                and figures["submit"]["runs"] == figures["resident"]["runs"] == args.tables)
        met = ratio >= 5 and same and figures["resident"]["dag_run"] == "success"
        lines = [f"fleet: {args.tables} small tables that each need a MINOR, through the DAG (dags test), PostgreSQL "
                 f"catalog and ledger, local[2], 2 cores",
                 f"  executor=submit:   {figures['submit']['wall_s']:7.1f} s  {figures['submit']}",
                 f"  executor=resident: {figures['resident']['wall_s']:7.1f} s  {figures['resident']}",
                 f"  {'MET    ' if met else 'NOT MET'}  resident over submit >= 5x faster, same outcomes: "
                 f"{ratio:.1f}x, same outcomes {same}",
                 f"  per table: submit {figures['submit']['wall_s'] / args.tables:.1f} s, resident "
                 f"{figures['resident']['wall_s'] / args.tables:.1f} s (the resident figure includes the executor's "
                 f"start)"]
        figures["ratio"] = round(ratio, 2)
        figures["met"] = met
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
        out.with_suffix(".json").write_text(json.dumps(figures, indent=1))
        print("\n".join(lines), flush=True)
        return 0 if met else 1
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
