"""Process-wide locations and environment switches (the embedded default lives under ``ICECOMPACT_HOME``)."""

from __future__ import annotations

import os
from pathlib import Path

ICECOMPACT_HOME_ENV = "ICECOMPACT_HOME"
ICECOMPACT_HOME_DEFAULT = "~/.icecompact"
ICECOMPACT_CACHE_ENV = "ICECOMPACT_CACHE_DIR"


def home() -> Path:
    """Folder for the embedded catalog, warehouse and ledger (created on first use)."""
    path = Path(os.environ.get(ICECOMPACT_HOME_ENV) or ICECOMPACT_HOME_DEFAULT).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Folder for build products that are never committed (the repaired Iceberg companion jar)."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "icecompact"
    path = Path(os.environ.get(ICECOMPACT_CACHE_ENV) or default).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
