"""Every secret shape the platform meets is masked by the one set of rules, wherever the text goes."""

from __future__ import annotations

import pytest

from compaction.core.redaction import (
    has_url_credentials,
    is_secret_key,
    known_secret_parts,
    redact_argv,
    redact_text,
)

URL_SECRETS = [
    ("postgresql+psycopg2://alice:hunter2@db:5432/ledger", "postgresql+psycopg2://alice:***@db:5432/ledger"),
    ("jdbc:postgresql://u:pa/ss@h/db", "jdbc:postgresql://u:***@h/db"),  # a password with a slash
    ("postgresql://u:p%40ss@h/d", "postgresql://u:***@h/d"),
    ("s3://key:sec:ret@bucket/x", "s3://key:***@bucket/x"),
    ("https://:tok@api.example/v1", "https://:***@api.example/v1"),
]


@pytest.mark.parametrize(("text", "expected"), URL_SECRETS)
def test_url_passwords_are_masked_in_text_and_argv(text: str, expected: str) -> None:
    assert has_url_credentials(text)
    assert redact_text(f"cannot connect to {text} (timeout)") == f"cannot connect to {expected} (timeout)"
    assert redact_argv(["--conf", f"spark.sql.catalog.c.uri={text}"]) == ["--conf", f"spark.sql.catalog.c.uri={expected}"]


def test_text_without_credentials_is_unchanged() -> None:
    for text in ("s3://bucket/warehouse/db/t", "http://127.0.0.1:8080/compaction", "user@example.com",
                 "partition ts_day=2026-01-01: 3 files"):
        assert not has_url_credentials(text)
        assert redact_text(text) == text


def test_password_pairs_and_known_secrets_in_free_text() -> None:
    assert redact_text("jdbc:postgresql://h/d?user=u&password=pw x") == "jdbc:postgresql://h/d?user=u&password=*** x"
    assert redact_text("FATAL: pwd: 's3cr et' rejected") == "FATAL: pwd: *** rejected"
    assert redact_text("token abcd1234 refused", ["abcd1234"]) == "token *** refused"


@pytest.mark.parametrize("key", ["spark.sql.catalog.c.jdbc.password", "spark.hadoop.fs.s3a.secret.key",
                                 "spark.sql.catalog.c.s3.secret-access-key", "spark.sql.catalog.c.token",
                                 "spark.sql.catalog.c.credential", "spark.hadoop.fs.s3a.access.key",
                                 "spark.sql.catalog.c.s3.session-token"])
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)
    assert redact_argv(["--conf", f"{key}=value1"]) == ["--conf", f"{key}=***"]


def test_ordinary_keys_are_kept() -> None:
    argv = ["spark-submit", "--conf", "spark.ui.enabled=false", "--name", "app", "--password-file=x"]
    assert redact_argv(argv) == argv  # a flag's own name is not a secret


def test_known_secret_parts_mask_the_secret_half_of_a_client_credential() -> None:
    assert known_secret_parts("client-id:client-secret") == ("client-id:client-secret", "client-secret")
    assert known_secret_parts("abc") == ()  # too short to mask inside other text
