"""Secrets kept out of everything the platform prints, logs, stores or passes on a command line: one set of rules for
the ledger's errors, spark-submit's argv and log lines, catalog errors and the UI."""

from __future__ import annotations

import re
from typing import Iterable

REDACTED = "***"

#: Configuration keys whose values are secrets (Spark's own ``spark.redaction.regex`` is similar).
SECRET_KEY_PATTERN = re.compile(r"password|passwd|pwd|secret|token|credential|access[._-]?key", re.IGNORECASE)
# ``scheme://user:password@`` userinfo; the password runs to the ``@`` (it may hold ``/``, ``:`` or ``%40``).
_URL_PASSWORD = re.compile(r"(?P<prefix>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*):(?P<password>[^@\s]*)@")
# ``password=...`` / ``pwd: ...`` pairs in free text (JDBC URLs, driver messages).
_KV_PASSWORD = re.compile(r"(?i)\b(?P<key>password|passwd|pwd)(?P<sep>\s*[=:]\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s&;,]+)")
# Shorter known secrets are not masked inside other text: "abc" would mask every occurrence of those letters.
_MIN_KNOWN_SECRET_LENGTH = 4


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY_PATTERN.search(key))


def has_url_credentials(text: str) -> bool:
    return bool(_URL_PASSWORD.search(text))


def redact_url_credentials(text: str) -> str:
    """``scheme://user:password@`` userinfo masked: ``scheme://user:***@``."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('prefix')}:{REDACTED}@", text)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text without passwords: URL userinfo, ``password=...`` pairs, and every known secret value."""
    out = redact_url_credentials(text)
    out = _KV_PASSWORD.sub(lambda m: f"{m.group('key')}{m.group('sep')}{REDACTED}", out)
    for secret in secrets:
        if secret:
            out = out.replace(secret, REDACTED)
    return out


def known_secret_parts(value: str) -> tuple[str, ...]:
    """The parts of a secret value to mask in text: the value and, for an OAuth2 ``client_id:secret`` credential, its
    secret half alone; parts too short to mask safely are left out."""
    parts = {value, *value.split(":", 1)[1:]}
    return tuple(sorted((p for p in parts if len(p) >= _MIN_KNOWN_SECRET_LENGTH), key=len, reverse=True))


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line safe to log: values of secret-looking ``key=value`` arguments and URL passwords masked."""
    out: list[str] = []
    for arg in argv:
        key, sep, _value = arg.partition("=")
        if sep and not key.startswith("-") and is_secret_key(key):
            arg = f"{key}={REDACTED}"
        out.append(redact_url_credentials(arg))
    return out
