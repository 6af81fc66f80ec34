#!/usr/bin/env bash
# Idempotent set-up: system packages (only when missing), a venv with pinned deps, the official Iceberg / JDBC jars
# of its Spark line from Maven Central (pinned, digests checked, cached in ~/.cache/icecompact/maven).
# Usage: [SPARK=4.1|3.5] [VENV=dir] scripts/install.sh [--with-browser] [--with-test-rig]
#   --with-browser: Debian's chromium (the UI tests); --with-test-rig: the test suite's other engines (a PyFlink venv
#   and its jars, Trino, the Nessie and Iceberg REST catalog servers): `make test` needs them, `make demo` does not.
#   SPARK picks the Spark line (default 4.1); its venv is .venv for the default line, .venv-spark<line> otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
SPARK=${SPARK:-4.1}
if [ "$SPARK" = 4.1 ]; then VENV=${VENV:-.venv}; else VENV=${VENV:-.venv-spark$SPARK}; fi
WITH_BROWSER=0
WITH_TEST_RIG=0
for arg in "$@"; do
  case "$arg" in
    --with-browser) WITH_BROWSER=1 ;;
    --with-test-rig) WITH_TEST_RIG=1 ;;
    *) echo "error: unknown option $arg" >&2; exit 2 ;;
  esac
done

die() { echo "error: $*" >&2; exit 1; }

# --- system packages (Debian) --------------------------------------------------------------------
missing=()
command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -qE 'version "(17|21)' || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
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
# The line's PySpark pin has one home, compaction/spark/artifacts.py (stdlib only, readable before the venv exists);
# every other pin is constraints.txt's.
pyspark_pin=$(PYTHONPATH=. "$PYTHON" -c "import sys; from compaction.spark.artifacts import SPARK_LINES as L
sys.exit('unknown Spark line $SPARK (supported: ' + ', '.join(L) + ')') if '$SPARK' not in L else print(L['$SPARK'].pyspark)")
constraints=$(mktemp); trap 'rm -f "$constraints"' EXIT
grep -v '^pyspark==' constraints.txt > "$constraints"; echo "pyspark==$pyspark_pin" >> "$constraints"
stamp=$VENV/.installed-$(cat setup.cfg testing/setup.cfg "$constraints" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  # The product (with its test tools as the `test` extra) and, beside it, the test rig (testing/: reference reader,
  # generators, soaks, throwaway servers), a distribution of its own that the product never imports.
  echo ">> pip install -c constraints.txt (pyspark==$pyspark_pin) -e .[test] -e testing into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -c "$constraints" -e ".[test]" -e testing
  "$VENV/bin/pip" check >/dev/null || { "$VENV/bin/pip" check; die "pip check failed"; }
  rm -f "$VENV"/.installed-*; touch "$stamp"
fi

# --- official jars of the line (never committed; cached, digests checked) --------------------------------------------
"$VENV/bin/python" -m compaction.spark.artifacts fetch --all

[ "$WITH_TEST_RIG" = 1 ] || exit 0

# --- the Flink upsert writer of the tests (testing/icecompact_testing/flink.py) --------------------------------------
# PyFlink pins a py4j that PySpark cannot share, so it gets a venv of its own, every package pinned by
# testing/flink-constraints.txt; its jars (Iceberg's Flink runtime, Hadoop's client) join the Maven cache above.
FLINK_VENV=${FLINK_VENV:-.venv-flink}
pyflink_pin=$(PYTHONPATH=testing "$PYTHON" -c 'from icecompact_testing.flink import PYFLINK_PIN; print(PYFLINK_PIN)')
flink_stamp=$FLINK_VENV/.installed-$( (echo "$pyflink_pin"; cat testing/flink-constraints.txt) | sha256sum | cut -c1-16)
if [ ! -f "$flink_stamp" ]; then
  [ -x "$FLINK_VENV/bin/python" ] || "$PYTHON" -m venv "$FLINK_VENV"
  echo ">> pip install -c testing/flink-constraints.txt $pyflink_pin into $FLINK_VENV"
  "$FLINK_VENV/bin/pip" install -q --disable-pip-version-check -c testing/flink-constraints.txt "$pyflink_pin"
  "$FLINK_VENV/bin/pip" check >/dev/null || { "$FLINK_VENV/bin/pip" check; die "pip check failed in $FLINK_VENV"; }
  rm -f "$FLINK_VENV"/.installed-*; touch "$flink_stamp"
fi
"$VENV/bin/python" -m icecompact_testing.flink fetch >/dev/null

# --- the Trino server of the interop tests (testing/icecompact_testing/trino.py) -------------------------------------
# Trino 483 from its official jars on Maven Central (the jar list's digest checked), into ~/.cache/icecompact/trino;
# it runs on a JDK >= 24 ($ICECOMPACT_TRINO_JAVA_HOME, or the newest under /usr/lib/jvm: Temurin 25 on these machines).
"$VENV/bin/python" -m icecompact_testing.trino fetch >/dev/null

# --- the other Iceberg REST catalog servers of the tests (testing/icecompact_testing/catalog_servers.py) ------------
# Nessie's runner jar and Iceberg's REST reference server (its fixture jars and their runtime) from Maven Central,
# pinned by digest, into ~/.cache/icecompact/catalog-servers; both run on the default Java 17.
"$VENV/bin/python" -m icecompact_testing.catalog_servers fetch >/dev/null
