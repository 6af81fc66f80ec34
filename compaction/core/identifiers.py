"""Validation of user-supplied names before they reach a catalog, Spark conf or SQL.

Names end up in Spark SQL (quoted) and in conf keys; we accept only plain identifiers so that no crafted name
can change the meaning of a statement (``db.t; DROP TABLE x``, backticks, quotes, comments).
"""

from __future__ import annotations

import re

from compaction.core.errors import ConfigError
from compaction.core.model import TableIdentity

IDENTIFIER_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def validate_identifier_part(part: str, what: str = "identifier") -> str:
    if not IDENTIFIER_PATTERN.match(part):
        raise ConfigError(
            f"invalid {what} {part!r}: only letters, digits and underscores are allowed (starting with a letter or _)"
        )
    return part


def parse_table_identifier(text: str, catalog: str) -> TableIdentity:
    """Parse ``namespace.table`` (nested namespaces allowed) into a validated :class:`TableIdentity`."""
    parts = (text or "").strip().split(".")
    if len(parts) < 2:
        raise ConfigError(f"invalid table name {text!r}: expected NAMESPACE.TABLE")
    for part in parts:
        validate_identifier_part(part, "table name part")
    validate_identifier_part(catalog, "catalog name")
    return TableIdentity(catalog=catalog, namespace=tuple(parts[:-1]), name=parts[-1])


def quoted(identity: TableIdentity) -> str:
    """Spark SQL reference with every part back-quoted (parts are validated, so no escaping is needed)."""
    return ".".join(f"`{p}`" for p in (identity.catalog, *identity.namespace, identity.name))
