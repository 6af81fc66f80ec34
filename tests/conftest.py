"""Session-wide real components: one SparkSession, a throwaway PostgreSQL cluster, per-test SQLite catalogs."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

# Isolate every test run from the user's own configuration before anything imports pyiceberg/airflow.
_RUN_HOME = Path(tempfile.mkdtemp(prefix="icecompact-tests-"))
os.environ["ICECOMPACT_HOME"] = str(_RUN_HOME / "home")
os.environ["PYICEBERG_HOME"] = str(_RUN_HOME / "pyiceberg")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
for _key in [k for k in os.environ if k.upper().startswith("PYICEBERG_CATALOG__")]:
    del os.environ[_key]

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from compaction.catalog import CatalogConfig  # noqa: E402
from module_order import longest_modules_first, module_weights  # noqa: E402

# Hypothesis draws the same examples on every run ("ci", the default), so a failure reproduces and CI never fails
# by chance; no example database (its replays would differ between machines). Loaded here, before the test modules
# are imported: a test's own @settings(...) fills what it leaves out from the profile loaded at that moment.
# ICECOMPACT_HYPOTHESIS_PROFILE=explore draws new random examples, 5x as many where a test does not fix its count:
# run it locally to look for new failures (then add the example found as a deterministic test).
settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("explore", parent=settings.get_profile("ci"), derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("ICECOMPACT_HYPOTHESIS_PROFILE", "ci"))


#: The smoke set CI also runs on the other Spark line (``make test-smoke SPARK=3.5``, docs/compatibility.md): MINOR
#: and MAJOR on v2 and v3 tables, an evolved-table scenario, the REST catalog + S3 path, the resident executor,
#: ``airflow dags test``, maintenance, the post-hoc check and the other engines' reads, plus the jars themselves.
#: One list, marked at collection (``spark_line_smoke``); a name that no longer matches a test fails the collection.
SPARK_LINE_SMOKE = (
    "tests/test_foundation.py::test_the_installed_line_uses_the_official_pinned_jars",
    "tests/test_foundation.py::test_spark_table_is_loaded_by_pyiceberg_and_back[sqlite]",
    # Iceberg's SnapshotChanges (1.11+) on one line, the Snapshot's own methods on the other.
    "tests/test_foundation.py::test_snapshot_changes_are_each_snapshots_own_manifest_entries",
    # PySpark 4 hands the session to inheritable_thread_target, PySpark 3.5 only the function.
    "tests/spark/test_background_threads.py::test_background_threads_keep_the_callers_properties",
    "tests/test_major.py::test_major_preserves_rows_on_random_cdc_tables[104]",  # v2, two partition fields
    "tests/test_major.py::test_major_preserves_rows_on_random_cdc_tables[105]",  # v3, evolved spec, PostgreSQL
    "tests/test_minor.py::test_minor_preserves_rows_and_removes_equality_deletes[306]",  # v2, evolved spec
    "tests/test_minor.py::test_minor_preserves_rows_and_removes_equality_deletes[304]",  # v3 (DVs), evolved spec
    "tests/test_evolved_scenarios.py::test_compaction_on_evolved_table[5-auto]",
    "tests/objectstore/test_s3_run.py::test_run_end_to_end_on_rest_and_s3",
    "tests/test_executor.py::test_resident_runs_are_recorded_and_share_one_warm_executor",
    "tests/airflow/test_dag.py::test_dag_test_compacts_with_spark_submit_then_has_nothing_to_do",
    "tests/test_maintenance.py::test_every_action_keeps_the_rows[3-True]",
    "tests/test_posthoc.py::test_a_job_killed_between_commit_and_check_is_checked_by_the_next_run",
    "tests/test_engines.py::test_engines_read_what_spark_reads_after_minor_and_major[311-v3]",
    # Row-group copy: the shaded Parquet library and Iceberg's ParquetIO of each line's runtime.
    "tests/test_row_group_copy.py::test_major_copies_clean_files_row_groups_and_decodes_the_rest_in_one_commit[3]",
)


#: Test tiers, one marker each (``make test-fast`` runs ``unit`` alone): ``airflow`` and ``objectstore`` by folder,
#: ``soak`` by module, ``spark`` for tests that use a Spark session or a throwaway server (by fixture) or say so
#: themselves (``@pytest.mark.spark``: a spark-submit of their own), ``unit`` for everything else - pure code, the
#: ledger on SQLite, nothing that starts a JVM.
TIER_BY_FOLDER = {"tests/airflow/": "airflow", "tests/objectstore/": "objectstore"}
SOAK_MODULES = ("tests/test_soak.py",)
HEAVY_FIXTURES = frozenset({"spark", "postgres_cluster", "object_store"})
JVM_TIERS = frozenset({"spark", "airflow", "objectstore", "soak"})


def _tier(item: pytest.Item) -> str:
    for folder, tier in TIER_BY_FOLDER.items():
        if item.nodeid.startswith(folder):
            return tier
    if item.nodeid.startswith(SOAK_MODULES):
        return "soak"
    if item.get_closest_marker("spark") or HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "spark"
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_modules_first(items, module_weights())  # the order pytest-xdist hands modules out in (tests/module_order.py)
    for item in items:
        tier = _tier(item)
        if not item.get_closest_marker(tier):
            item.add_marker(getattr(pytest.mark, tier))
    by_id = {item.nodeid: item for item in items}
    for nodeid in SPARK_LINE_SMOKE:
        if nodeid in by_id:
            by_id[nodeid].add_marker(pytest.mark.spark_line_smoke)
        elif not config.args or config.args == ["tests"]:
            raise pytest.UsageError(f"SPARK_LINE_SMOKE names {nodeid}, which is not a test any more")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test starts a Spark JVM: every Spark driver of the session maps the classes a typical session
    loads from one class-data-sharing archive (tests/jvm_archive.py) instead of loading them from the jars."""
    if session.config.option.collectonly or not any(_tier(item) in JVM_TIERS for item in session.items):
        return
    from jvm_archive import spark_submit_opts

    opts = spark_submit_opts()
    if opts:
        os.environ["SPARK_SUBMIT_OPTS"] = opts


@pytest.fixture(scope="session")
def run_home() -> Path:
    return _RUN_HOME


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """The one SparkSession of the test session. Catalogs are registered on it per test."""
    from compaction.spark.session import SparkSettings, build_session

    session = build_session([], SparkSettings(master="local[2]", app_name="icecompact-tests"))
    yield session
    session.stop()


@pytest.fixture()
def sqlite_catalog(tmp_path: Path, spark) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A fresh SQLite catalog (own database and warehouse) registered in pyiceberg and in Spark."""
    name = f"sq_{uuid.uuid4().hex[:8]}"
    catalog = CatalogConfig.sqlite(name, tmp_path / "catalog.db", tmp_path / "warehouse")
    _register(spark, catalog)
    return catalog


def _register(spark, catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    from compaction.spark.session import register_catalog

    register_catalog(spark, catalog)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[object]:
    from icecompact_testing.postgres import start_cluster

    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture()
def postgres_catalog(tmp_path: Path, spark, postgres_cluster) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A fresh PostgreSQL catalog (own database, local warehouse) registered in pyiceberg and in Spark."""
    catalog: CatalogConfig = postgres_cluster.sql_catalog("pg", tmp_path / "warehouse")
    _register(spark, catalog)
    return catalog


@pytest.fixture(scope="session")
def object_store() -> Iterator[object]:
    """One SeaweedFS (S3 endpoint + Iceberg REST catalog) for the test session. Every REST catalog of the session
    serves the same warehouse: each test gets its own catalog *name* (Spark keeps a catalog's instance per name), but
    it sees the other tests' tables, so each test uses table names of its own."""
    from compaction.demo.object_store import start_object_store

    server = start_object_store()
    yield server
    server.stop()


@pytest.fixture()
def rest_catalog(spark, object_store) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A REST catalog with tables on S3 (the throwaway SeaweedFS), registered in pyiceberg and in Spark."""
    catalog = object_store.catalog()
    _register(spark, catalog)
    return catalog


@pytest.fixture(scope="session")
def trino(object_store) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """One throwaway Trino server (icecompact_testing.trino) for the session, its Iceberg catalog ``ice`` on the
    session's REST catalog + S3; started only by the tests that use it (all in tests/objectstore/test_trino.py, so
    one xdist worker starts it). Its JVM starts in the background: the first query waits for it, so its start-up
    overlaps the test's own table generation."""
    from icecompact_testing.trino import rest_catalog_properties, start_trino

    server = start_trino({"ice": rest_catalog_properties(object_store.catalog_properties())}, wait=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def catalog_servers(object_store) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """The other Iceberg REST catalog servers users run (icecompact_testing.catalog_servers: Nessie, Iceberg's REST
    reference server), tables on the session's SeaweedFS: ``catalog_servers(kind)`` starts that server on first use
    (then the same one for the session); every server started is stopped at the session's end."""
    from icecompact_testing.catalog_servers import start_catalog_server

    started: dict[str, object] = {}

    def server(kind: str) -> object:
        if kind not in started:
            started[kind] = start_catalog_server(kind, object_store)
        return started[kind]

    yield server
    for running in started.values():
        running.stop()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def hive_metastore() -> Iterator[object]:
    """One throwaway Hive metastore for the test session, started on first use. Its JVM starts in the background: the
    session's Spark starts meanwhile (ask for this fixture before ``spark``), a catalog on it waits for it."""
    from icecompact_testing.hive_metastore import start_hive_metastore

    server = start_hive_metastore(wait=False)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def any_catalog(request) -> CatalogConfig:  # type: ignore[no-untyped-def]
    return request.getfixturevalue(f"{request.param}_catalog")
