"""The spark-submit hook: a pure command builder and a runner that really runs spark-submit (3 real submits)."""

from __future__ import annotations

import builtins
import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError, ConfigError, RewriteJobError
from compaction.ops import submit
from compaction.spark.session import SparkSettings
from compaction.ops.submit import (
    SparkSubmitError,
    SubmitOutcome,
    SubmitRequest,
    build_command,
    build_py_files,
    format_properties,
    make_app_name,
    py_files_for,
    redact,
    run_submit,
    split_conf,
    write_properties_file,
)

URI_SECRET = "uri-s3cret"
PROP_SECRET = "prop=s3cret:with\\odd\nchars"
TOKEN_SECRET = "tok-s3cret"
FAKE_JARS = (Path("/opt/jars/iceberg-runtime.jar"), Path("/opt/jars/postgresql.jar"))


def _pg_catalog(name: str = "pg", **props: str) -> CatalogConfig:
    return CatalogConfig(name, {"type": "sql", "uri": f"postgresql+psycopg2://compactor:{URI_SECRET}@db:5432/ice",
                                "warehouse": "file:///data/wh", **props})


def _request(catalog: CatalogConfig, master: str = "local[2]", **kwargs: Any) -> SubmitRequest:
    values: dict[str, Any] = dict(
        plan_path=Path("/plans/p.json"), group_id=2, result_path=Path("/results/r.json"), catalog=catalog,
        settings=SparkSettings(master=master), spark_binary="/opt/spark/bin/spark-submit", jars=FAKE_JARS,
        app_name=make_app_name("db.orders", "0123456789abcdef", 2),
    )
    values.update(kwargs)
    return SubmitRequest(**values)


# ------------------------------------------------------------------------------------------------ pure builder
def test_build_command_is_pure_and_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(_pg_catalog(), extra_conf={"spark.executor.memory": "1g"})
    first = build_command(request, properties_file=Path("/secret/dir/p.properties"), py_files=None)

    def no_io(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"build_command did I/O: {args!r}")

    for target, attr in [(builtins, "open"), (os, "open"), (os, "stat"), (os, "lstat"), (os, "listdir"),
                         (os, "scandir"), (subprocess, "Popen")]:
        monkeypatch.setattr(target, attr, no_io)
    second = build_command(request, properties_file=Path("/secret/dir/p.properties"), py_files=None)
    third = build_command(_request(_pg_catalog(), extra_conf={"spark.executor.memory": "1g"}),
                          properties_file=Path("/secret/dir/p.properties"), py_files=None)
    monkeypatch.undo()

    assert first == second == third
    assert first[:7] == ["/opt/spark/bin/spark-submit", "--master", "local[2]", "--deploy-mode", "client",
                         "--name", "icecompact-db.orders-01234567-g2"]
    conf = [first[i + 1] for i, a in enumerate(first) if a == "--conf"]
    assert [c.split("=", 1)[0] for c in conf] == sorted(c.split("=", 1)[0] for c in conf)
    assert "spark.sql.catalog.pg=org.apache.iceberg.spark.SparkCatalog" in conf
    assert "spark.sql.catalog.pg.uri=jdbc:postgresql://db:5432/ice" in conf
    assert "spark.executor.memory=1g" in conf
    assert first[first.index("--jars") + 1] == ",".join(str(j) for j in FAKE_JARS)
    assert first[first.index("--driver-class-path") + 1] == os.pathsep.join(str(j) for j in FAKE_JARS)
    assert first[first.index("--properties-file") + 1] == "/secret/dir/p.properties"
    assert "--py-files" not in first and "--packages" not in first
    entry = first.index(str(submit.entry_script_path()))
    assert submit.entry_script_path().name == "__main__.py" and submit.entry_script_path().is_file()
    assert first[entry:] == [str(submit.entry_script_path()), "run", "--plan", "/plans/p.json", "--group", "2",
                             "--result", "/results/r.json", "--catalog", "pg", "--validation", "count",
                             "--max-retries", "3"]


def test_build_command_packages_and_overrides() -> None:
    request = _request(_pg_catalog(), settings=SparkSettings(master="local[1]", packages="g:a:1"), jars=(),
                       deploy_mode="client", validation="checksum", max_retries=0)
    argv = build_command(request, properties_file=None, py_files=Path("/c/z.zip"), entry_script=Path("/t/e.py"))
    assert argv[argv.index("--packages") + 1] == "g:a:1"
    assert not any(a.startswith("spark.jars.packages=") for a in argv)  # not duplicated as --conf
    assert "--jars" not in argv and "--properties-file" not in argv
    assert argv[argv.index("--py-files") + 1] == "/c/z.zip"
    assert argv[argv.index("/t/e.py") + 1:][-4:] == ["--validation", "checksum", "--max-retries", "0"]


@pytest.mark.parametrize("kwargs", [
    {"validation": "full"}, {"deploy_mode": "cluster"}, {"deploy_mode": "yarn"}, {"group_id": -1},
    {"max_retries": -2}, {"extra_conf": {"spark.x": 1}},
])
def test_request_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        _request(_pg_catalog(), **kwargs)


def test_missing_spark_submit_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="install pyspark"):
        submit.find_spark_binary()


# ------------------------------------------------------------------------------------------------ secrets
def test_no_secret_in_argv_and_properties_file_is_private(tmp_path: Path) -> None:
    other = CatalogConfig("pg2", {"type": "sql", "uri": "postgresql+psycopg2://u@db2/ice", "password": PROP_SECRET})
    request = _request(
        _pg_catalog(), extra_conf={
            **other.spark_conf(), **other.spark_secret_conf(),
            "spark.hadoop.fs.s3a.session.token": TOKEN_SECRET,
            "spark.custom.dsn": f"postgresql://x:{URI_SECRET}@h/db",
        })
    public, secrets = split_conf(request)
    argv = build_command(request, properties_file=tmp_path / "p.properties", py_files=None)
    joined = "\0".join(argv)
    for secret in (URI_SECRET, PROP_SECRET, TOKEN_SECRET, "prop=s3cret"):
        assert secret not in joined
    assert secrets == {
        "spark.sql.catalog.pg.jdbc.password": URI_SECRET,
        "spark.sql.catalog.pg2.jdbc.password": PROP_SECRET,
        "spark.hadoop.fs.s3a.session.token": TOKEN_SECRET,
        "spark.custom.dsn": f"postgresql://x:{URI_SECRET}@h/db",
    }
    assert "spark.sql.catalog.pg.jdbc.user=compactor" in argv  # the user name is not a secret

    path = write_properties_file(secrets, tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text(encoding="utf-8")
    assert f"spark.sql.catalog.pg.jdbc.password={URI_SECRET}\n" in text
    assert "spark.sql.catalog.pg2.jdbc.password=prop\\=s3cret\\:with\\\\odd\\nchars\n" in text
    assert len(text.splitlines()) == 4
    with pytest.raises(ConfigError):  # never overwrites (O_EXCL)
        write_properties_file(secrets, tmp_path)


def test_properties_escaping() -> None:
    assert format_properties({"a b": " x=y:z\\w\r\n\tq", "#k": "v"}) == "\\#k=v\na\\ b=\\ x\\=y\\:z\\\\w\\r\\n\\tq\n"


def test_redact() -> None:
    argv = ["spark-submit", "--conf", "spark.sql.catalog.c.jdbc.password=hunter2", "--conf",
            "spark.hadoop.fs.s3a.secret.key=abc", "--conf", "spark.sql.catalog.c.uri=jdbc:postgresql://u:pw@h/db",
            "--conf", "spark.ui.enabled=false", "--name", "app"]
    assert redact(argv) == ["spark-submit", "--conf", "spark.sql.catalog.c.jdbc.password=***", "--conf",
                            "spark.hadoop.fs.s3a.secret.key=***", "--conf",
                            "spark.sql.catalog.c.uri=jdbc:postgresql://u:***@h/db",
                            "--conf", "spark.ui.enabled=false", "--name", "app"]


# ------------------------------------------------------------------------------------------------ py-files
def test_py_files_only_for_non_local_masters(tmp_path: Path) -> None:
    assert py_files_for(_request(_pg_catalog(), master="local[2]"), tmp_path) is None
    assert py_files_for(_request(_pg_catalog(), master="local-cluster[2,1,1024]"), tmp_path) is None
    remote = _request(_pg_catalog(), master="spark://master:7077")
    archive = py_files_for(remote, tmp_path)
    assert archive is not None and archive.parent == tmp_path / "py-files"
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        assert "compaction/core/planner.py" in names
        assert "compaction/ops/submit.py" in names
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        assert zf.read("compaction/core/planner.py") == Path(submit.__file__).parents[1].joinpath(
            "core", "planner.py").read_bytes()
    mtime = archive.stat().st_mtime_ns
    assert build_py_files(tmp_path) == archive and archive.stat().st_mtime_ns == mtime  # cached by content
    argv = build_command(remote, properties_file=None, py_files=archive)
    assert argv[argv.index("--py-files") + 1] == str(archive)


def test_signal_return_codes() -> None:
    assert submit._signal_of(-9) == 9 and submit._signal_of(137) == 9 and submit._signal_of(143) == 15
    assert submit._signal_of(0) is None and submit._signal_of(1) is None and submit._signal_of(8) is None


def test_output_filter_drops_spark_noise_keeps_progress_and_errors() -> None:
    keep = submit.OutputFilter()
    lines = [
        "25/01/02 10:00:00 WARN NativeCodeLoader: Unable to load native-hadoop library",
        "java.io.IOException: noisy", "\tat org.apache.X.y(X.java:1)",
        "25/01/02 10:00:01 INFO SparkContext: Running Spark version 3.5.9",
        "Setting default log level to \"WARN\".",
        "icecompact: group 2 partition 1/3 MAJOR",
        "25/01/02 10:00:02 ERROR Executor: Exception in task 0.0", "\tat org.apache.Y.z(Y.java:2)",
        "Traceback (most recent call last):", "  File \"x.py\", line 1", "RuntimeError: boom",
    ]
    assert [line for line in lines if keep(line)] == lines[5:]
    assert all(submit.OutputFilter(verbose=True)(line) for line in lines)


# ------------------------------------------------------------------------------------------------ real runs
STAND_IN = textwrap.dedent('''
    import argparse, json, os, sys, time
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["run"])
    for opt in ("--plan", "--result", "--catalog", "--validation"):
        p.add_argument(opt, required=True)
    p.add_argument("--group", type=int, required=True)
    p.add_argument("--max-retries", type=int, required=True)
    args = p.parse_args()
    plan = json.load(open(args.plan))
    if plan["mode"] == "fail":
        print("icecompact: about to fail", flush=True)
        print("stand-in failure marker 7f3a", file=sys.stderr, flush=True)
        sys.exit(3)
    if plan["mode"] == "sleep":
        with open(plan["pid_file"], "w") as fh:
            json.dump({"pid": os.getpid(), "pgid": os.getpgid(0)}, fh)
        print("icecompact: sleeping", flush=True)
        time.sleep(600)
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    value = spark.sql("SELECT 1 AS one").collect()[0]["one"]
    secret = plan["secret"].encode()
    leaked = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if secret in fh.read():
                    leaked.append(pid)
        except OSError:
            pass
    catalog_key = f"spark.sql.catalog.{args.catalog}"
    result = {
        "args": vars(args), "one": value, "leaked_in_cmdline": leaked,
        "catalog_impl": spark.conf.get(catalog_key, None),
        "catalog_uri": spark.conf.get(catalog_key + ".uri", None),
        "password": spark.conf.get(catalog_key + ".jdbc.password", None),
        "app_name": spark.sparkContext.appName,
    }
    print("icecompact: done", flush=True)
    spark.stop()
    with open(args.result, "w") as fh:
        json.dump(result, fh)
''')


def _real_request(tmp_path: Path, mode: str, **plan: Any) -> tuple[SubmitRequest, Path]:
    catalog = CatalogConfig.sqlite("sq_submit", tmp_path / "c.db", tmp_path / "wh")
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps({"mode": mode, **plan}))
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    request = SubmitRequest(
        plan_path=plan_path, group_id=1, result_path=tmp_path / "out" / "result.json", catalog=catalog,
        settings=SparkSettings(master="local[1]"), app_name=make_app_name("db.t", "feedfacecafe", 1),
        validation="checksum", max_retries=2,
        extra_conf={"spark.sql.catalog.sq_submit.jdbc.password": PROP_SECRET},
    )
    return request, script


@pytest.mark.spark  # a real spark-submit
def test_run_submit_real_spark_job(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    request, script = _real_request(tmp_path, "ok", secret="s3cret:with")
    request.result_path.parent.mkdir()
    request.result_path.write_text('{"stale": true}')  # a previous run's result must not be mistaken for ours
    seen: list[str] = []
    with caplog.at_level(logging.INFO, logger="compaction.ops.submit"):
        outcome = run_submit(request, on_output=seen.append, timeout_s=300, entry_script=script)

    assert isinstance(outcome, SubmitOutcome) and outcome.ok and outcome.returncode == 0
    result = outcome.result
    assert result is not None and "stale" not in result
    assert result["one"] == 1
    assert result["args"] == {"command": "run", "plan": str(request.plan_path), "group": 1,
                              "result": str(request.result_path), "catalog": "sq_submit",
                              "validation": "checksum", "max_retries": 2}
    assert result["catalog_impl"] == "org.apache.iceberg.spark.SparkCatalog"
    assert result["catalog_uri"] == f"jdbc:sqlite:{(tmp_path / 'c.db').resolve()}"
    assert result["password"] == PROP_SECRET  # reached the driver through the properties file, escaping intact
    assert result["leaked_in_cmdline"] == []  # ... and never through any process's argv
    assert result["app_name"] == "icecompact-db.t-feedface-g1"
    assert "icecompact: done" in seen and "icecompact: done" in outcome.tail_of_log
    assert not any(" WARN " in line or " INFO " in line for line in seen)
    assert outcome.duration_s > 0

    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "--properties-file" in logged and "s3cret" not in logged
    properties = Path(logged.split("--properties-file ")[1].split()[0])
    assert not properties.parent.exists()  # private temp dir removed


@pytest.mark.spark  # a real spark-submit
def test_run_submit_failure_is_rewrite_job_error(tmp_path: Path) -> None:
    request, script = _real_request(tmp_path, "fail")
    with pytest.raises(RewriteJobError) as info:
        run_submit(request, timeout_s=300, entry_script=script)
    err = info.value
    assert isinstance(err, SparkSubmitError) and isinstance(err, CompactionError)
    assert err.returncode == 3 and err.signal_name is None and not err.timed_out
    assert "exit code 3" in str(err) and "stand-in failure marker 7f3a" in str(err)
    assert "stand-in failure marker 7f3a" in err.tail and "icecompact: about to fail" in err.tail
    assert err.exit_code == RewriteJobError.exit_code


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


@pytest.mark.spark  # a real spark-submit
def test_run_submit_timeout_kills_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "driver.json"
    request, script = _real_request(tmp_path, "sleep", pid_file=str(pid_file))
    seen: list[str] = []
    with pytest.raises(SparkSubmitError) as info:
        run_submit(request, on_output=seen.append, timeout_s=20, entry_script=script, kill_grace_s=3)
    assert info.value.timed_out and "timed out after 20 s" in str(info.value)
    assert isinstance(info.value, RewriteJobError)
    assert pid_file.exists(), f"the stand-in driver never started within the timeout: {seen[-10:]}"
    driver = json.loads(pid_file.read_text())
    assert "icecompact: sleeping" in seen
    assert driver["pgid"] != os.getpgid(0)  # the job ran in its own process group ...
    assert not _alive(driver["pid"])  # ... the Python driver (a grandchild of spark-submit) is gone ...
    assert _group_members(driver["pgid"]) == []  # ... and so is every other member of the group


def test_interrupt_kills_process_group_and_removes_private_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """KeyboardInterrupt (here raised by on_output) kills the group and propagates; no JVM needed for this one."""
    fake = tmp_path / "fake-spark-submit"
    fake.write_text("#!/bin/sh\nsleep 600 &\necho \"icecompact: child $!\"\nwait\n")
    fake.chmod(0o755)
    request, _ = _real_request(tmp_path, "ok")
    request = SubmitRequest(**{**{f: getattr(request, f) for f in request.__dataclass_fields__},
                               "spark_binary": str(fake)})
    children: list[int] = []

    def interrupt(line: str) -> None:
        if line.startswith("icecompact: child "):
            children.append(int(line.split()[-1]))
            raise KeyboardInterrupt

    with caplog.at_level(logging.INFO, logger="compaction.ops.submit"):
        with pytest.raises(KeyboardInterrupt):
            run_submit(request, on_output=interrupt, timeout_s=60, kill_grace_s=1)
    assert children and not _alive(children[0])
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert not Path(logged.split("--properties-file ")[1].split()[0]).parent.exists()
