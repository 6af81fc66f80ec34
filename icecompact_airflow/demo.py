"""``make demo``: the compaction DAG run for real by ``airflow dags test`` on the embedded catalog.

1. Airflow home ``$ICECOMPACT_HOME/airflow`` (default ``~/.icecompact/airflow``): ``airflow.cfg`` with the repo's
   ``dags/`` and ``plugins/`` folders and no examples, ``airflow db migrate``, the ``icecompact_spark`` pool and the
   ``spark_default`` connection (``local[2]``, client mode). Re-running keeps what exists.
2. The demo merge-on-read table ``demo.events`` (CDC position and equality deletes) in the embedded catalog.
3. ``airflow dags test iceberg_compaction -c '{"mode": "major"}'``: real spark-submit on local Spark.
4. The before/after table per compacted partition (data files, delete files, file records, the validation each
   commit passed, as ``icecompact run`` prints it), from the run's outcomes in the ledger, and whether every commit
   was validated.

Afterwards ``AIRFLOW_HOME=~/.icecompact/airflow .venv/bin/airflow dags test iceberg_compaction`` works as is.

``--object-store`` (``make demo-s3``) does the same against a local S3 endpoint plus Iceberg REST catalog (SeaweedFS,
installed by ``make install``): the server keeps its data under ``$ICECOMPACT_HOME/objectstore`` and runs for the
length of the demo; the catalog is named ``lake`` and defined for Airflow and Spark through the
``PYICEBERG_CATALOG__LAKE__*`` variables, exactly as a user defines theirs. ``--serve`` starts the same server in the
foreground afterwards (Ctrl-C stops it) and prints those variables, to explore the table with ``icecompact``.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
SPARK_CONNECTION = {"conn_type": "spark", "host": "local[2]",
                    "extra": {"spark-binary": "spark-submit", "deploy-mode": "client"}}


def airflow_home() -> Path:
    from compaction import settings

    return settings.home() / "airflow"


def write_airflow_cfg(home: Path, repo: Path = REPO) -> Path:
    """Create or update ``airflow.cfg``: only the keys the platform needs; everything else keeps Airflow's default."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "airflow.cfg"
    cfg = configparser.ConfigParser(interpolation=None)
    if path.exists():
        cfg.read(path)
    wanted = {
        "core": {"dags_folder": str(repo / "dags"), "plugins_folder": str(repo / "plugins"), "load_examples": "False",
                 "parallelism": "4", "simple_auth_manager_users": "admin:admin"},
        "database": {"sql_alchemy_conn": f"sqlite:///{home / 'airflow.db'}"},
        "logging": {"logging_level": "INFO"},
    }
    for section, values in wanted.items():
        if not cfg.has_section(section):
            cfg.add_section(section)
        for key, value in values.items():
            cfg.set(section, key, value)
    # Shared by the scheduler's workers and the api-server (each would generate its own otherwise, and the
    # execution API would refuse the workers' tokens): created once, kept afterwards.
    for section, key in (("api_auth", "jwt_secret"), ("api", "secret_key")):
        if not cfg.has_section(section):
            cfg.add_section(section)
        if not cfg.get(section, key, fallback=""):
            cfg.set(section, key, secrets.token_urlsafe(48))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds secrets
    with os.fdopen(fd, "w") as fh:
        cfg.write(fh)
    return path


def airflow_env(home: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "AIRFLOW_HOME": str(home), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}


def _airflow(env: dict[str, str], *args: str, check: bool = True, quiet: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [str(Path(sys.executable).with_name("airflow")), *args]
    if quiet:
        return subprocess.run(argv, env=env, capture_output=True, text=True, check=check)
    return subprocess.run(argv, env=env, text=True, check=check)


def set_up_airflow(home: Path) -> dict[str, str]:
    write_airflow_cfg(home)
    env = airflow_env(home)
    print(f"Airflow home {home}: migrating the metadata DB ...", flush=True)
    _airflow(env, "db", "migrate")
    _airflow(env, "pools", "set", "icecompact_spark", "4", "icecompact Spark jobs (one at a time on SQLite)")
    if _airflow(env, "connections", "get", "spark_default", check=False).returncode != 0:
        _airflow(env, "connections", "add", "spark_default", "--conn-json", json.dumps(SPARK_CONNECTION))
    return env


def last_run_outcomes(table: str, catalog_name: str) -> list[Any]:
    """The partition outcomes of the table's latest run in the ledger (the DAG run records them there)."""
    from compaction.ledger import Ledger

    with Ledger.open() as ledger:
        runs = ledger.runs(table, catalog=catalog_name, limit=1)
        return ledger.outcomes(runs[0].run_id) if runs else []


def every_commit_validated(outcomes: Sequence[Any]) -> bool:
    """Whether the run committed and every commit passed its validation (the live rows of each partition it touched
    are the same before and after, docs/validation.md)."""
    commits = [o for o in outcomes if o.commit_snapshot_id is not None]
    return bool(commits) and all(o.validation_result == "passed" for o in commits)


OBJECT_STORE_CATALOG = "lake"


def object_store_home() -> Path:
    from compaction import settings

    return settings.home() / "objectstore"


def _demo_credentials() -> None:
    """Stable keys for the demo's server, so that ``--serve`` later answers with the same ones."""
    from compaction.demo.object_store import ACCESS_KEY_ENV, SECRET_KEY_ENV

    keys = object_store_home() / "keys.json"
    if not keys.exists():
        keys.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"access": "DEMO" + secrets.token_hex(8).upper(), "secret": secrets.token_urlsafe(24)}, fh)
    stored = json.loads(keys.read_text())
    os.environ.setdefault(ACCESS_KEY_ENV, stored["access"])
    os.environ.setdefault(SECRET_KEY_ENV, stored["secret"])


def start_demo_object_store() -> Any:
    from compaction.demo.object_store import start_object_store

    _demo_credentials()
    print(f"starting the local S3 endpoint + Iceberg REST catalog (SeaweedFS, data in {object_store_home()}) ...",
          flush=True)
    server = start_object_store(object_store_home() / "server")
    print(f"S3 {server.s3_endpoint}, REST catalog {server.catalog_uri}, catalog name {OBJECT_STORE_CATALOG!r}",
          flush=True)
    return server


def serve() -> int:
    """Run the demo's object store in the foreground and print how to point icecompact at it."""
    import time

    server = start_demo_object_store()
    try:
        print("\nin another shell:")
        for key, value in sorted(server.environment(OBJECT_STORE_CATALOG).items()):
            print(f"  export {key}='{value}'")
        print(f"  icecompact --catalog {OBJECT_STORE_CATALOG} inspect demo.events\n(Ctrl-C stops the server)", flush=True)
        while server.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icecompact_airflow.demo", description=__doc__)
    parser.add_argument("--table", default="demo.events")
    parser.add_argument("--mode", choices=["auto", "minor", "major"], default="major",
                        help="compaction mode of the DAG run (major: every partition with deletes is rewritten)")
    parser.add_argument("--object-store", action="store_true",
                        help="run the demo on a local S3 endpoint + Iceberg REST catalog (SeaweedFS) instead of the "
                             "embedded SQLite catalog")
    parser.add_argument("--serve", action="store_true",
                        help="only start the demo's object store in the foreground and print its catalog settings")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.serve:
        return serve()
    if not args.object_store:
        return run_demo(args.table, args.mode)
    server = start_demo_object_store()
    try:
        os.environ.update(server.environment(OBJECT_STORE_CATALOG))
        return run_demo(args.table, args.mode, catalog_name=OBJECT_STORE_CATALOG)
    finally:
        server.stop()


def run_demo(table: str, mode: str, catalog_name: str | None = None) -> int:
    """Create the demo table, compact it with ``airflow dags test``, print the before/after table."""
    from compaction.catalog import CatalogConfig
    from compaction.cli import format_before_after, format_health
    from compaction.metadata.inspect import inspect_table

    home = airflow_home()
    env = set_up_airflow(home)
    catalog = CatalogConfig.resolve(catalog_name) if catalog_name else CatalogConfig.embedded()
    where = f"catalog {catalog.name!r}" if catalog_name else f"the embedded catalog {catalog.name!r}"
    print(f"creating the demo table {table} in {where} ...", flush=True)
    catalog_args = ["--catalog", catalog_name] if catalog_name else []
    subprocess.run([str(Path(sys.executable).with_name("icecompact")), *catalog_args, "demo", "--table", table,
                    "--no-compact"], env=env, check=True, stdout=subprocess.DEVNULL)
    before = inspect_table(catalog, table)
    print(format_health(before), flush=True)

    conf: dict[str, Any] = {"tables": [table], "mode": mode}
    if catalog_name:
        conf["catalog"] = catalog_name
    print(f"\n$ airflow dags test iceberg_compaction -c '{json.dumps(conf)}'   (AIRFLOW_HOME={home})", flush=True)
    run = _airflow(env, "dags", "test", "iceberg_compaction", "-c", json.dumps(conf), check=False, quiet=False)

    after = inspect_table(catalog, table)
    outcomes = last_run_outcomes(table, catalog.name)
    print(f"\n{table}: before -> after (the run's outcomes in the ledger)")
    print(format_before_after(SimpleNamespace(before=before, after=after, outcomes=outcomes)))
    deletes_before = sum(len(p.delete_files) for p in before.partitions)
    deletes_after = sum(len(p.delete_files) for p in after.partitions)
    validated = every_commit_validated(outcomes)
    print(f"delete files: {deletes_before} -> {deletes_after}; every commit validated (live rows of each partition "
          f"unchanged): {'yes' if validated else 'NO'}")
    if catalog_name:
        print(f"\nnext: {Path(sys.executable)} -m icecompact_airflow.demo --serve   (the same object store, to explore "
              f"the table with icecompact --catalog {catalog_name})")
    else:
        print(f"\nnext: AIRFLOW_HOME={home} {Path(sys.executable).with_name('airflow')} dags test iceberg_compaction")
    if run.returncode != 0:
        print(f"airflow dags test exited {run.returncode}", file=sys.stderr)
        return run.returncode
    return 0 if validated else 1


if __name__ == "__main__":
    raise SystemExit(main())
