"""The classification and the backoff of metadata reads (the real S3 fault: tests/objectstore/test_s3_faults.py)."""

from __future__ import annotations

import pytest

from compaction.core.errors import CatalogError, StorageUnavailableError
from compaction.metadata.storage_retry import is_transient_storage_error, with_storage_retries

PYARROW_500 = OSError("When reading information for key 'db/t/metadata/snap-1.avro' in bucket 'wh': AWS Error "
                      "INTERNAL_FAILURE during GetObject operation: We encountered an internal error, please try again.")


@pytest.mark.parametrize("error", [
    PYARROW_500,
    OSError("AWS Error SLOW_DOWN during GetObject operation: Please reduce your request rate."),
    OSError("AWS Error NETWORK_CONNECTION during GetObject operation: curl error 7"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError("timed out"),
])
def test_transient(error: BaseException) -> None:
    assert is_transient_storage_error(error)


def _wrapped_404() -> BaseException:
    try:
        raise OSError("AWS Error NO_SUCH_KEY during GetObject operation: The specified key does not exist.")
    except OSError as cause:
        try:
            raise ValueError("cannot read manifest list") from cause
        except ValueError as e:
            return e


@pytest.mark.parametrize("error", [
    OSError("AWS Error ACCESS_DENIED during GetObject operation: Access Denied"),
    FileNotFoundError("db/t/metadata/snap-503.avro"),
    _wrapped_404(),
    ValueError("not a storage error"),
    CatalogError("table not found"),
])
def test_not_transient(error: BaseException) -> None:
    assert not is_transient_storage_error(error)


def test_retries_with_backoff_until_the_read_succeeds() -> None:
    failures = [PYARROW_500, PYARROW_500]
    sleeps: list[float] = []
    lines: list[str] = []

    def read() -> str:
        if failures:
            raise failures.pop()
        return "state"

    assert with_storage_retries(read, what="inspect db.t", sleep=sleeps.append, progress=lines.append) == "state"
    assert sleeps == [0.5, 1.0]
    assert len(lines) == 2 and "retry 1/5" in lines[0] and "INTERNAL_FAILURE" in lines[0]


def test_gives_up_with_a_clear_retryable_error() -> None:
    sleeps: list[float] = []

    def read() -> str:
        raise PYARROW_500

    with pytest.raises(StorageUnavailableError) as info:
        with_storage_retries(read, what="inspect db.t", attempts=4, sleep=sleeps.append)
    assert info.value.retryable and info.value.exit_code == 12
    assert "inspect db.t" in str(info.value) and "4 times" in str(info.value)
    assert info.value.__cause__ is PYARROW_500
    assert sleeps == [0.5, 1.0, 2.0]


def test_a_permanent_error_is_raised_at_once() -> None:
    calls = []

    def read() -> str:
        calls.append(1)
        raise OSError("AWS Error ACCESS_DENIED during GetObject operation")

    with pytest.raises(OSError):
        with_storage_retries(read, what="x", sleep=lambda _s: None)
    assert len(calls) == 1


def _sqlalchemy_error(uri: str, statement: str = "SELECT 1") -> BaseException:
    import sqlalchemy

    engine = sqlalchemy.create_engine(uri)
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text(statement))
    except Exception as e:  # noqa: BLE001 - the error under test
        return e
    finally:
        engine.dispose()
    raise AssertionError("no error")


def test_a_sql_catalogs_database_that_refuses_connections_is_transient(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = _sqlalchemy_error(f"postgresql+psycopg2://icecompact@127.0.0.1:{port}/catalog")
    assert is_transient_storage_error(refused)
    try:
        raise CatalogError("cannot open catalog 'c'") from refused  # as CatalogConfig.load wraps it
    except CatalogError as e:
        assert is_transient_storage_error(e)
    # A database that answers with an error is no outage.
    missing = _sqlalchemy_error(f"sqlite:///{tmp_path / 'c.db'}", "SELECT * FROM iceberg_tables")
    assert "no such table" in str(missing) and not is_transient_storage_error(missing)
