"""REST catalogs from Airflow connections, and the overview's table pointers of a REST catalog (read through the
catalog API and cached), on the session's SeaweedFS. No Spark, no api-server: seconds."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from compaction.ops.fleet import PointerCache, build_overview
from compaction.ledger import Ledger
from icecompact_airflow.connections import connection_env, get_connection, resolve_catalog


def _define(monkeypatch: pytest.MonkeyPatch, name: str, connection: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_ICECOMPACT_CATALOG_{name.upper()}", json.dumps(connection))


def test_rest_connection_secrets_come_from_login_and_password(monkeypatch: pytest.MonkeyPatch,
                                                              object_store: Any) -> None:
    catalog = object_store.catalog(f"cn_{uuid.uuid4().hex[:8]}")
    for key, value in connection_env(catalog).items():
        monkeypatch.setenv(key, value)
    conn = get_connection(f"icecompact_catalog_{catalog.name}")  # Airflow's own reading of the environment
    assert conn is not None and conn.login == object_store.access_key and conn.password == object_store.secret_key
    assert "credential" not in conn.extra_dejson and conn.extra_dejson["type"] == "rest"
    resolved = resolve_catalog(catalog.name)
    assert dict(resolved.properties) == dict(catalog.properties)
    assert resolved.load().list_namespaces() is not None  # the credential works (OAuth2 client credentials)

    # A password alone is a bearer token; a uri over http(s) is a REST catalog even without "type".
    _define(monkeypatch, "tok", {"conn_type": "generic", "password": "t0ken-abc",
                                 "extra": {"uri": "https://catalog.example/api", "warehouse": "analytics"}})
    assert dict(resolve_catalog("tok").properties) == {"uri": "https://catalog.example/api",
                                                        "warehouse": "analytics", "type": "rest", "token": "t0ken-abc"}
    # A client id without its secret is refused (not silently an anonymous catalog).
    _define(monkeypatch, "half", {"conn_type": "generic", "login": "client",
                                  "extra": {"type": "rest", "uri": "https://catalog.example/api"}})
    with pytest.raises(ConfigError, match="needs its secret in the password field"):
        resolve_catalog("half")
    # SQL connections as before: the password field is the database password, kept out of the uri.
    sql = CatalogConfig("sqlpw", {"type": "sql", "uri": "postgresql+psycopg2://compactor:db-s3cret@db:5432/iceberg"})
    (value,) = connection_env(sql).values()
    assert json.loads(value)["extra"]["uri"] == "postgresql+psycopg2://compactor@db:5432/iceberg"
    _define(monkeypatch, "sqlpw", json.loads(value))
    assert dict(resolve_catalog("sqlpw").properties) == {
        "type": "sql", "uri": "postgresql+psycopg2://compactor@db:5432/iceberg", "password": "db-s3cret"}


def test_rest_overview_pointers_are_cached_and_refreshed_in_the_background(object_store: Any,
                                                                           tmp_path: Path) -> None:
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    # The session's REST catalogs share SeaweedFS's one warehouse: other tests' tables are listed too, so this test
    # looks at its own namespaces only.
    run = uuid.uuid4().hex[:8]
    catalog = object_store.catalog(f"ov_{run}")
    t1, t2, t3 = f"ov_{run}_a.t1", f"ov_{run}_a.t2", f"ov_{run}_b.t3"
    mine = {t1, t2, t3}
    loaded = catalog.load()
    for namespace in (f"ov_{run}_a", f"ov_{run}_b"):
        loaded.create_namespace(namespace)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    for name in (t1, t2, t3):
        loaded.create_table(name, schema, properties={"format-version": "2"}).append(
            pa.table({"id": pa.array([1, 2], pa.int64())}))
    cache = PointerCache(workers=2)
    HOUR = 3600.0  # pointers this young are used as they are (no timing assumption on a busy machine)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        def overview(pointer_max_age_s: float = HOUR) -> Any:
            return build_overview(catalog, ledger, budget_s=None, pointer_cache=cache,
                                  pointer_max_age_s=pointer_max_age_s)

        cold = overview()
        assert not cold.pointers_cached and cold.pointers_source == "catalog API"
        assert mine <= {r.table_ref for r in cold.tables}
        assert mine <= set(cold.refreshed) and all(r.current for r in cold.tables if r.table_ref in mine)

        warm = overview()
        assert warm.pointers_cached and not mine & set(warm.refreshed) and not mine & set(warm.stale)
        assert warm.pointers_read_at == cold.pointers_read_at

        # A new snapshot is not seen while the pointers are young enough ...
        loaded.load_table(t1).append(pa.table({"id": pa.array([3], pa.int64())}))
        assert not mine & set(overview().refreshed)
        # ... an older reading still answers (the change is not seen yet) and starts a background reading ...
        stale = overview(pointer_max_age_s=0)
        assert stale.pointers_cached and not mine & set(stale.refreshed)
        cache.wait_idle(catalog, timeout=120)
        # ... whose pointers the next answer uses: the changed table, and only it, is re-inspected.
        fresh = overview()
        assert mine & set(fresh.refreshed) == {t1} and not mine & set(fresh.stale)
        assert fresh.pointers_read_at > cold.pointers_read_at
        latest = ledger.latest_health_samples(catalog.name)
        assert latest[t1].metadata_location == loaded.load_table(t1).metadata_location
        assert not mine & set(overview().refreshed)
