#!/usr/bin/env bash
# Idempotent set-up: system packages (only when missing), .venv with pinned deps, repaired Iceberg jar.
# Usage: scripts/install.sh [--with-browser]
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
WITH_BROWSER=0
[ "${1:-}" = "--with-browser" ] && WITH_BROWSER=1

die() { echo "error: $*" >&2; exit 1; }

# --- system packages (Debian) --------------------------------------------------------------------
missing=()
command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -qE 'version "(17|21)' || missing+=(openjdk-17-jre-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || missing+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
if [ "$WITH_BROWSER" = 1 ]; then
  [ -x /usr/bin/chromium ] || missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing system packages: ${missing[*]} (install them with your package manager)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then
    die "missing system packages: ${missing[*]}; run as root: apt-get install -y ${missing[*]}"
  fi
  echo ">> apt-get install ${missing[*]}"
  $SUDO apt-get update -qq >/dev/null || die "apt-get update failed; install manually: apt-get install -y ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed; install manually: apt-get install -y ${missing[*]}"
fi

# --- Python virtualenv ---------------------------------------------------------------------------
command -v "$PYTHON" >/dev/null 2>&1 || die "Python 3.11 not found: install python3.11 (or set PYTHON=/path/to/python3.11)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || die "$PYTHON is not Python 3.11"
stamp=.venv/.installed-$(cat setup.cfg constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  echo ">> pip install -c constraints.txt -e .[test]"
  .venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"
  .venv/bin/pip check >/dev/null || { .venv/bin/pip check; die "pip check failed"; }
  rm -f .venv/.installed-*; touch "$stamp"
fi

# --- repaired Iceberg runtime companion jar (never committed; cached by jar digest) ---------------
.venv/bin/python -m compaction.spark.jar_repair
