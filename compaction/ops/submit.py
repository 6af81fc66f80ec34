"""The spark-submit "hook": a pure command builder and a runner, in the style of Airflow's Spark provider.

``icecompact run`` and the Airflow ``SparkSubmitOperator`` path both go through this module, so a Spark job is
launched the same way everywhere:

- :class:`SubmitRequest` is a resolved, immutable description of one job (one plan group). Building it does
  the little I/O needed to make it complete (locating ``spark-submit`` and the jars, see
  :func:`compaction.spark.session.jar_paths`); after that every field is a plain value.
- :func:`build_command` turns a request into argv. It is **pure**: no file system, no environment, no clock.
  Spark conf comes from :func:`compaction.spark.session.spark_conf` (the single source of truth shared with the
  in-process session), then ``SubmitRequest.extra_conf``.
- :func:`run_submit` writes the secret part of the conf to a private properties file, runs the command,
  streams its output, enforces a timeout and returns a :class:`SubmitOutcome`. It does not interpret the
  job's result (that is the caller's business).

Secrets never go to argv (argv is world-readable in ``/proc`` and ends up in logs): the catalog's
:meth:`~compaction.catalog.CatalogConfig.spark_secret_conf` and any conf entry whose key looks secret
(:data:`compaction.core.redaction.SECRET_KEY_PATTERN`) or whose value carries URL credentials go into a ``0600`` Java properties file
in a ``0700`` temp dir, passed with ``--properties-file`` and removed when the job ends.

.. note::
   In Spark 3.5, ``--properties-file`` *replaces* ``$SPARK_CONF_DIR/spark-defaults.conf``: when a job has
   secrets, the cluster-wide defaults file is not read for that job. Everything this platform needs is passed
   explicitly, so this is acceptable; put site settings you rely on into ``SparkSettings.extra_conf`` (or
   ``SubmitRequest.extra_conf``). Jobs without secrets get no properties file and keep spark-defaults.conf.
   Spark trims leading/trailing whitespace of values read from a properties file.

In ``cluster`` deploy mode the plan and result paths, the ``--driver-class-path`` entries and the properties
file content travel to a remote driver: paths must be on storage both sides see, and secrets are shipped by
the cluster manager's own conf mechanism (configure its secret handling accordingly).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from compaction import settings
from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError, ConfigError, RewriteJobError
from compaction.core.run_options import VALIDATION_DEFAULT, check_validation_level
from compaction.core.redaction import has_url_credentials, is_secret_key, redact_argv
from compaction.spark.contract import progress_path
from compaction.spark.session import SparkSettings, jar_paths, spark_conf

log = logging.getLogger(__name__)

SPARK_SUBMIT = "spark-submit"
DEPLOY_MODES = ("client", "cluster")
MAX_RETRIES_DEFAULT = 3
PROGRESS_PREFIX = "icecompact:"
TAIL_LINES = 60
KILL_GRACE_S = 5.0
_DRAIN_AFTER_EXIT_S = 2.0
# Spark's log4j2 default layout: "yy/MM/dd HH:mm:ss LEVEL logger: message".
_SPARK_LOG_RECORD = re.compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_SPARK_NOISE = (
    "Using Spark's default log4j profile",
    "Setting default log level to",
    "To adjust logging level use sc.setLogLevel",
)
_CONTINUATION = re.compile(r"^(\s|Caused by:|\.\.\. \d+ more|[\w.$]+(Exception|Error|Throwable)\b)")


# ------------------------------------------------------------------------------------------------ request
def find_spark_binary() -> str:
    """``spark-submit`` next to the running interpreter (the venv's pyspark), else on PATH."""
    beside = Path(sys.executable).parent / SPARK_SUBMIT  # not resolved: a venv's python is a symlink
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(SPARK_SUBMIT)
    if found:
        return found
    raise ConfigError(
        f"{SPARK_SUBMIT} not found next to {sys.executable} nor on PATH: install pyspark into this environment "
        f"(pip install 'pyspark==4.1.4' or 'pyspark==3.5.9'), or install Apache Spark 4.1 or 3.5 and put its bin/ on "
        f"PATH"
    )


def make_app_name(table: str, plan_id: str, group: int) -> str:
    """``icecompact-<table>-<plan_id[:8]>-g<group>`` with anything unusual in the table name replaced."""
    safe_table = re.sub(r"[^A-Za-z0-9_.-]", "_", table) or "table"
    return f"icecompact-{safe_table}-{plan_id[:8]}-g{group}"


def is_local_master(master: str) -> bool:
    return master.startswith("local")


def _is_secret(key: str, value: str) -> bool:
    return is_secret_key(key) or has_url_credentials(value)


@dataclass(frozen=True)
class SubmitRequest:
    """One Spark job: run group ``group_id`` of the plan at ``plan_path`` and write the result to ``result_path``.

    ``spark_binary`` and ``jars`` are resolved on construction when left ``None`` (``jars`` from
    :func:`~compaction.spark.session.jar_paths`, empty when ``settings.packages`` is used); pass them explicitly
    to build a request without touching the file system.
    """

    plan_path: Path
    group_id: int
    result_path: Path
    catalog: CatalogConfig
    settings: SparkSettings = field(default_factory=SparkSettings)
    deploy_mode: str = "client"
    extra_conf: Mapping[str, str] = field(default_factory=dict)
    app_name: str | None = None
    validation: str = VALIDATION_DEFAULT
    max_retries: int = MAX_RETRIES_DEFAULT
    spark_binary: str | None = None
    jars: tuple[Path, ...] | None = None
    #: The entry point's arguments when the job is not ``run`` of a plan's group (e.g. the post-hoc ``check`` of
    #: compaction.ops.posthoc); ``plan_path`` and ``group_id`` are then unused. Never a secret.
    command: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.deploy_mode not in DEPLOY_MODES:
            raise ConfigError(f"invalid deploy mode {self.deploy_mode!r}: use one of {', '.join(DEPLOY_MODES)}")
        if self.deploy_mode == "cluster" and is_local_master(self.settings.master):
            raise ConfigError(f"deploy mode 'cluster' cannot be used with master {self.settings.master!r}")
        check_validation_level(self.validation)
        if isinstance(self.group_id, bool) or not isinstance(self.group_id, int) or self.group_id < 0:
            raise ConfigError(f"invalid group id {self.group_id!r}: expected an integer >= 0")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigError(f"invalid max retries {self.max_retries!r}: expected an integer >= 0")
        for key, value in self.extra_conf.items():
            if not isinstance(key, str) or not isinstance(value, str) or not key:
                raise ConfigError(f"invalid Spark conf entry {key!r}: keys and values must be non-empty strings")
        object.__setattr__(self, "plan_path", Path(self.plan_path))
        object.__setattr__(self, "result_path", Path(self.result_path))
        object.__setattr__(self, "extra_conf", dict(self.extra_conf))
        if self.spark_binary is None:
            object.__setattr__(self, "spark_binary", find_spark_binary())
        if self.jars is None:
            try:
                resolved = tuple(jar_paths(self.settings))
            except CompactionError:
                raise
            except Exception as e:  # missing wheel, unreadable jar, ...
                raise ConfigError(f"cannot locate the Spark jars: {e}") from e
            object.__setattr__(self, "jars", resolved)
        else:
            object.__setattr__(self, "jars", tuple(Path(j) for j in self.jars))

    @property
    def name(self) -> str:
        return self.app_name or f"{self.settings.app_name}-g{self.group_id}"


@dataclass(frozen=True)
class SubmitOutcome:
    returncode: int
    result: dict[str, Any] | None
    duration_s: float
    tail_of_log: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class SparkSubmitError(RewriteJobError):
    """spark-submit failed without a usable result (non-zero exit, signal, timeout, unreadable result)."""

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        tail: Sequence[str] = (),
        signal_name: str | None = None,
        timed_out: bool = False,
        result: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.tail = tuple(tail)
        self.signal_name = signal_name
        self.timed_out = timed_out
        self.result = result


# ------------------------------------------------------------------------------------------------ command
def entry_script_path() -> Path:
    """File path of ``compaction/spark/__main__.py`` (computed, not checked: no I/O)."""
    return Path(__file__).parent.parent / "spark" / "__main__.py"


def split_conf(request: SubmitRequest) -> tuple[dict[str, str], dict[str, str]]:
    """(public conf for argv, secret conf for the properties file). Pure."""
    conf = spark_conf(request.settings, [request.catalog])
    conf.update(request.extra_conf)
    secrets = dict(request.catalog.spark_secret_conf())
    public: dict[str, str] = {}
    for key, value in conf.items():
        if _is_secret(key, value):
            secrets[key] = value
        else:
            public[key] = value
    return public, secrets


@dataclass(frozen=True)
class SubmitParts:
    """The pieces of a spark-submit command, for callers that assemble it themselves (Airflow's
    ``SparkSubmitOperator``): every field maps onto one spark-submit option. Never holds a secret."""

    master: str
    deploy_mode: str
    name: str
    conf: Mapping[str, str]
    jars: tuple[str, ...]
    driver_class_path: tuple[str, ...]
    packages: str | None
    properties_file: str | None
    py_files: str | None
    application: str
    application_args: tuple[str, ...]


def submit_parts(
    request: SubmitRequest,
    *,
    properties_file: Path | None,
    py_files: Path | None,
    entry_script: Path | None = None,
) -> SubmitParts:
    """The spark-submit options for ``request``. Pure and deterministic; never a secret (see :func:`split_conf`)."""
    public, _ = split_conf(request)
    jars = [str(j) for j in request.jars or ()]
    class_path = list(jars)
    # Fold conf that duplicates a dedicated flag into that flag (the flag would otherwise silently win).
    for extra in filter(None, public.pop("spark.jars", "").split(",")):
        if extra not in jars:
            jars.append(extra)
    for extra in filter(None, public.pop("spark.driver.extraClassPath", "").split(os.pathsep)):
        if extra not in class_path:
            class_path.append(extra)
    packages = request.settings.packages
    if packages:
        public.pop("spark.jars.packages", None)
    return SubmitParts(
        master=request.settings.master,
        deploy_mode=request.deploy_mode,
        name=request.name,
        conf={key: public[key] for key in sorted(public)},
        jars=tuple(jars),
        driver_class_path=tuple(class_path),
        packages=packages or None,
        properties_file=None if properties_file is None else str(properties_file),
        py_files=None if py_files is None else str(py_files),
        application=str(entry_script or entry_script_path()),
        application_args=request.command if request.command is not None else (
            "run",
            "--plan", str(request.plan_path),
            "--group", str(request.group_id),
            "--result", str(request.result_path),
            "--catalog", request.catalog.name,
            "--validation", request.validation,
            "--max-retries", str(request.max_retries),
        ),
    )


def build_command(
    request: SubmitRequest,
    *,
    properties_file: Path | None,
    py_files: Path | None,
    entry_script: Path | None = None,
) -> list[str]:
    """The spark-submit argv for ``request``. Pure and deterministic: same input, same argv; never a secret."""
    parts = submit_parts(request, properties_file=properties_file, py_files=py_files, entry_script=entry_script)
    argv = [
        str(request.spark_binary or SPARK_SUBMIT),
        "--master", parts.master,
        "--deploy-mode", parts.deploy_mode,
        "--name", parts.name,
    ]
    for key, value in parts.conf.items():
        argv += ["--conf", f"{key}={value}"]
    if parts.jars:
        argv += ["--jars", ",".join(parts.jars)]
    if parts.driver_class_path:
        argv += ["--driver-class-path", os.pathsep.join(parts.driver_class_path)]
    if parts.packages:
        argv += ["--packages", parts.packages]
    if parts.properties_file is not None:
        argv += ["--properties-file", parts.properties_file]
    if parts.py_files is not None:
        argv += ["--py-files", parts.py_files]
    argv += [parts.application, *parts.application_args]
    return argv


def redact(argv: Iterable[str]) -> list[str]:
    """argv safe to log (:func:`compaction.core.redaction.redact_argv`)."""
    return redact_argv(argv)


# ------------------------------------------------------------------------------------------------ properties
def _escape_properties(text: str, *, is_key: bool) -> str:
    """java.util.Properties escaping (the file is read as UTF-8 by Spark, so non-ASCII stays as is)."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "=:":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "#!" and i == 0:
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(conf: Mapping[str, str]) -> str:
    return "".join(
        f"{_escape_properties(k, is_key=True)}={_escape_properties(v, is_key=False)}\n" for k, v in sorted(conf.items())
    )


def write_properties_file(conf: Mapping[str, str], directory: Path) -> Path:
    """Write ``conf`` as a Java properties file readable by its owner only (mode 0600)."""
    path = Path(directory) / "spark-submit.properties"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as fh:
                fh.write(format_properties(conf))
        finally:
            os.close(fd)
    except OSError as e:
        raise ConfigError(f"cannot write the Spark properties file in {directory}: {e}") from e
    return path


# ------------------------------------------------------------------------------------------------ py-files
def _package_files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}
    )


def build_py_files(cache_dir: Path | None = None) -> Path:
    """Zip of the ``compaction`` package for ``--py-files``, cached by content hash (deterministic bytes)."""
    import compaction

    package_root = Path(compaction.__file__).resolve().parent
    base = package_root.parent
    try:
        files = _package_files(package_root)
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.relative_to(base).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        target_dir = (cache_dir or settings.cache_dir()) / "py-files"
        target_dir.mkdir(parents=True, exist_ok=True)
        target = target_dir / f"compaction-{digest.hexdigest()[:16]}.zip"
        if target.exists():
            return target
        fd, tmp_name = tempfile.mkstemp(dir=target_dir, suffix=".zip.tmp")
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp_name, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for path in files:
                    info = zipfile.ZipInfo(path.relative_to(base).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                    info.external_attr = 0o644 << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, path.read_bytes())
            os.chmod(tmp_name, 0o644)
            os.replace(tmp_name, target)
        finally:
            if os.path.exists(tmp_name):
                os.unlink(tmp_name)
    except OSError as e:
        raise ConfigError(f"cannot build the --py-files archive of the compaction package: {e}") from e
    return target


def py_files_for(request: SubmitRequest, cache_dir: Path | None = None) -> Path | None:
    """The ``--py-files`` zip for non-local masters; ``None`` for ``local*`` (the driver's venv has our code)."""
    return None if is_local_master(request.settings.master) else build_py_files(cache_dir)


# ------------------------------------------------------------------------------------------------ running
class OutputFilter:
    """Drops Spark's INFO/WARN log records (and their stack traces) unless verbose; keeps everything else."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self._keeping = True

    def __call__(self, line: str) -> bool:
        if self.verbose or line.startswith(PROGRESS_PREFIX) or PROGRESS_PREFIX in line[:40]:
            return True
        record = _SPARK_LOG_RECORD.match(line)
        if record:
            self._keeping = record.group(1) in {"ERROR", "FATAL"}
            return self._keeping
        if any(line.startswith(n) for n in _SPARK_NOISE):
            return False
        if _CONTINUATION.match(line):
            return self._keeping
        self._keeping = True
        return True


def _signal_of(returncode: int) -> int | None:
    if returncode < 0:
        return -returncode
    if 128 < returncode <= 128 + 64:
        return returncode - 128
    return None


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _kill_group(proc: subprocess.Popen[str], grace_s: float) -> None:
    """SIGTERM the whole process group, give it ``grace_s``, then SIGKILL whatever is left of the group."""
    pgid = proc.pid  # start_new_session=True: the child leads its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    try:
        for line in stream:
            lines.put(line.rstrip("\r\n"))
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)


def read_group_result(result_path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(result, error) of a job group from its files: the result; else the incomplete result of a job that ended
    early (what it had committed and validated is recorded, the rest fails); else nothing."""
    result = _read_result(result_path)
    if result is not None:
        return result, None
    try:
        incomplete = _read_result(progress_path(result_path))
    except SparkSubmitError:
        incomplete = None
    if incomplete is not None:
        done = len(incomplete.get("partitions") or [])
        return incomplete, (f"the job ended before writing its result (spark-submit failed or was killed) after "
                            f"reporting {done} partition(s); the rest is recorded failed")
    return None, None


def _read_result(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SparkSubmitError(f"cannot read the job result {path}: {e}") from e
    if not isinstance(data, dict):
        raise SparkSubmitError(f"job result {path} is not a JSON object")
    return data


def _check_java(env: Mapping[str, str]) -> None:
    if env.get("JAVA_HOME") or shutil.which("java", path=env.get("PATH")):
        return
    raise ConfigError("java not found: install a Java 17 runtime (apt-get install openjdk-17-jre-headless) or set JAVA_HOME")


def submit_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYTHONUNBUFFERED", "1")  # progress lines of the Python driver arrive as they are printed
    return env


def run_submit(
    request: SubmitRequest,
    *,
    on_output: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
    verbose: bool = False,
    entry_script: Path | None = None,
    env: Mapping[str, str] | None = None,
    kill_grace_s: float = KILL_GRACE_S,
) -> SubmitOutcome:
    """Run ``request`` with spark-submit and return its outcome; no interpretation of the job's result.

    Raises :class:`SparkSubmitError` (a :class:`RewriteJobError`) when the job exits non-zero without writing
    a result, is killed by a signal (its result, if any, is attached), times out, or writes an unreadable
    result. ``KeyboardInterrupt`` kills the process group and propagates. A result file left by an earlier
    run at ``result_path`` is removed first so it cannot be mistaken for this run's.
    """
    child_env = submit_env(env)
    _check_java(child_env)
    if timeout_s is not None and timeout_s <= 0:
        raise ConfigError(f"invalid timeout {timeout_s!r}: expected a positive number of seconds")
    keep = OutputFilter(verbose)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    started = time.monotonic()
    deadline = None if timeout_s is None else started + timeout_s
    timed_out = False
    try:
        request.result_path.unlink(missing_ok=True)
        progress_path(request.result_path).unlink(missing_ok=True)
        request.result_path.parent.mkdir(parents=True, exist_ok=True)
        private_dir = Path(tempfile.mkdtemp(prefix="icecompact-submit-"))  # mode 0700
    except OSError as e:
        raise ConfigError(f"cannot prepare the spark-submit run: {e}") from e
    proc: subprocess.Popen[str] | None = None
    completed = False
    try:
        _, secrets = split_conf(request)
        properties = write_properties_file(secrets, private_dir) if secrets else None
        argv = build_command(
            request, properties_file=properties, py_files=py_files_for(request), entry_script=entry_script
        )
        log.info("spark-submit: %s", " ".join(redact(argv)))
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, encoding="utf-8", errors="replace", bufsize=1, env=child_env, start_new_session=True,
            )
        except OSError as e:
            raise ConfigError(f"cannot start {argv[0]}: {e}") from e
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), name="spark-submit-output", daemon=True)
        reader.start()

        def emit(line: str) -> None:
            if keep(line):
                tail.append(line)
                if on_output is not None:
                    on_output(line)

        eof = False
        exited_at: float | None = None
        while not eof:
            now = time.monotonic()
            wait = 0.2 if deadline is None else min(0.2, deadline - now)
            if wait <= 0:
                timed_out = True
                break
            try:
                line = lines.get(timeout=wait)
            except queue.Empty:
                # A straggler that inherited our pipe must not keep us waiting once spark-submit has exited.
                if proc.poll() is not None:
                    if exited_at is None:
                        exited_at = now
                    if now - exited_at > _DRAIN_AFTER_EXIT_S:
                        break
                continue
            if line is None:
                eof = True
            else:
                emit(line)
        if not timed_out:
            try:
                proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            _kill_group(proc, kill_grace_s)
        reader.join(timeout=_DRAIN_AFTER_EXIT_S)
        while True:  # whatever arrived while we were killing or joining
            try:
                pending = lines.get_nowait()
            except queue.Empty:
                break
            if pending is not None:
                emit(pending)
        completed = True
    finally:
        if proc is not None:
            if not completed:  # interrupted (KeyboardInterrupt, on_output raised, ...): nothing may outlive us
                _kill_group(proc, kill_grace_s)
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(private_dir, ignore_errors=True)

    duration = time.monotonic() - started
    returncode = proc.returncode
    tail_lines = tuple(tail)
    last = "\n".join(tail_lines[-25:])
    if timed_out:
        raise SparkSubmitError(
            f"spark-submit timed out after {timeout_s:g} s; its process group was killed\n{last}",
            returncode=returncode, tail=tail_lines, timed_out=True,
        )
    result = _read_result(request.result_path)
    signum = _signal_of(returncode)
    if signum is not None:
        name = _signal_name(signum)
        raise SparkSubmitError(
            f"spark-submit was killed by {name} (exit code {returncode})\n{last}",
            returncode=returncode, tail=tail_lines, signal_name=name, result=result,
        )
    if returncode != 0 and result is None:
        raise SparkSubmitError(
            f"spark-submit failed with exit code {returncode} and wrote no result\n{last}",
            returncode=returncode, tail=tail_lines,
        )
    return SubmitOutcome(returncode=returncode, result=result, duration_s=duration, tail_of_log=tail_lines)
