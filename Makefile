# Two commands do all set-up on a fresh machine: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
# The Spark line (docs/compatibility.md): 4.1 (default, Scala 2.13) or 3.5 (Scala 2.12), each in a venv of its own
# with the official Iceberg runtime of that line. `make demo SPARK=3.5`, `make test-smoke SPARK=3.5`.
SPARK ?= 4.1
ifeq ($(SPARK),4.1)
VENV := .venv
else
VENV := .venv-spark$(SPARK)
endif
PY := $(VENV)/bin/python
export SPARK_LOCAL_IP ?= 127.0.0.1
# The other line CI runs the smoke set on, and the Iceberg release it uses there (the oldest we claim).
OTHER_SPARK ?= 3.5
OTHER_ICEBERG ?= 1.10.2

.PHONY: install browser demo demo-s3 test lint typecheck bench bench-scale clean

install:
	@SPARK=$(SPARK) VENV=$(VENV) scripts/install.sh

browser:
	@SPARK=$(SPARK) VENV=$(VENV) scripts/install.sh --with-browser

# The other engines the suite runs beside ours (a PyFlink venv and its jars, Trino from Maven Central); not the demo's.
.PHONY: test-rig
test-rig:
	@SPARK=$(SPARK) VENV=$(VENV) scripts/install.sh --with-test-rig

# The compaction DAG run for real by `airflow dags test` (Airflow home: $ICECOMPACT_HOME/airflow, default
# ~/.icecompact/airflow); see README "Airflow". `icecompact demo` is the same without Airflow.
demo: install
	$(PY) -m icecompact_airflow.demo

# The same demo on a local S3 endpoint + Iceberg REST catalog (SeaweedFS, installed by `make install`); see
# docs/catalogs.md. `$(PY) -m icecompact_airflow.demo --serve` starts that server again to explore the table.
demo-s3: install
	$(PY) -m icecompact_airflow.demo --object-store

lint: install
	$(VENV)/bin/lint-imports --config setup.cfg

typecheck: install
	$(VENV)/bin/mypy compaction/core
	$(VENV)/bin/mypy --ignore-missing-imports --follow-imports=silent icecompact_airflow dags plugins

# The full suite on the default line, then the smoke set (tests marked `spark_line_smoke`) on the other line with the
# oldest Iceberg release we claim.
# TEST_WORKERS: pytest-xdist processes, each with its own Spark session and servers; modules stay whole on one worker
# (module fixtures are built once). Most of a test's time is spent waiting on JVMs and servers, so two workers on
# two cores nearly halve the wall time. TEST_WORKERS=0 runs in one process. The workers take the modules longest
# first (tests/module_order.py), not in xdist's own order, which would leave the single-test soak for the end.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)
test: install browser test-rig lint typecheck
	$(PY) -m pytest tests -q $(XDIST) --durations=25
	$(MAKE) --no-print-directory test-smoke SPARK=$(OTHER_SPARK) ICECOMPACT_ICEBERG_VERSION=$(OTHER_ICEBERG) JVM_ARCHIVE=0

# The seeded random-shape correctness tests (MINOR, MAJOR) over 40 table shapes instead of make test's 10.
.PHONY: test-wide
test-wide: install
	ICECOMPACT_RANDOM_SHAPES=40 $(PY) -m pytest tests/test_minor.py tests/test_major.py -q $(XDIST) \
		-k "random_cdc_tables or removes_equality_deletes"

# The pure tier alone (tests marked `unit`: no JVM, no server), in well under a minute; the tiers are in tests/conftest.py.
.PHONY: test-fast
test-fast: install
	$(PY) -m pytest tests -q -m unit

# The smoke set alone on one line: `make test-smoke SPARK=3.5 [ICECOMPACT_ICEBERG_VERSION=1.12.0]`.
.PHONY: test-smoke
# JVM_ARCHIVE=0: no class-data archive for the session's Spark JVMs (tests/jvm_archive.py); building one costs more
# than the few JVMs of the smoke set save.
JVM_ARCHIVE ?= 1
test-smoke: install
	@echo ">> smoke set on Spark $(SPARK), Iceberg $(or $(ICECOMPACT_ICEBERG_VERSION),(the default of the line))"
	ICECOMPACT_ICEBERG_VERSION=$(ICECOMPACT_ICEBERG_VERSION) ICECOMPACT_TEST_JVM_ARCHIVE=$(JVM_ARCHIVE) \
		$(PY) -m pytest tests -q $(XDIST) -m spark_line_smoke

bench: install
	$(PY) bench/inspect_scale.py
	$(PY) bench/major.py
	$(PY) bench/minor.py
	$(PY) bench/scale.py

# Production-shape tables of ~100 MB, ~500 MB and ~2 GB (bulk generator): every contender at every size, ~1 h on
# 2 cores. SIZES=s,m for a shorter run; FORMAT=3 for deletion vectors.
bench-scale: install
	$(PY) bench/scale.py --sizes $${SIZES:-s,m,l} --format-version $${FORMAT:-2}

# The same contenders on local disk and on S3 (a throwaway SeaweedFS: S3 + Iceberg REST catalog) side by side in one
# run, ratios compared, S3 requests per contender, one >100 MB multipart upload checked (bench/results/scale_s3.*;
# ~25 min for s,m on 2 cores). Median of 3: one sample per contender is too noisy for a 10 % comparison on a shared
# machine. FORMAT=3 for deletion vectors (scale_s3_v3.*); REPEAT=1 for a quick look.
.PHONY: bench-scale-s3
bench-scale-s3: install
	$(PY) bench/scale.py --sizes $${SIZES:-s,m} --storage local,s3 --repeat $${REPEAT:-3} --format-version $${FORMAT:-2}

# An evolved table (unpartitioned, then days(ts) half-way; global equality deletes) against a single-spec table with
# the same data and deletes, and Iceberg's CALLs on it, side by side at the bulk size s (ours through
# spark-submit; bench/results/evolved.*; ~15 min on 2 cores). SIZE=xs MODES=major for a quick look.
.PHONY: bench-evolved
bench-evolved: install
	$(PY) bench/evolved.py --size $${SIZE:-s} --modes $${MODES:-major,auto}

clean:
	rm -rf .venv .venv-spark* build *.egg-info .pytest_cache .mypy_cache

# Metadata path at scale: inspect+plan vs Spark at 100k data files (bench/results/inspect_scale.*) and at
# 1,000,000 data files (bench/results/inspect_scale_1m.*; ~4 min of table building, peak memory, profile).
.PHONY: bench-metadata
bench-metadata: install
	$(PY) bench/inspect_scale.py
	$(PY) bench/inspect_scale.py --million

# The UI's overview page with 200 tables in the catalog: response time through a real api-server
# (bench/results/overview.*; ~3 min of table building). TABLES=50 for a shorter run.
.PHONY: bench-overview
bench-overview: install
	$(PY) bench/overview.py --tables $${TABLES:-200}

# Write amplification over a streaming run (bulk generator, compaction every 4 rounds): --mode auto against a full
# rewrite of every partition with deletes (bench/results/streaming.*; ~5 min at m). SIZE=s for a shorter run.
.PHONY: bench-streaming
bench-streaming: install
	$(PY) bench/streaming.py --size $${SIZE:-m}

# A live CDC writer and the scheduled DAG together on PostgreSQL with faults: 15 minutes per format (v2,
# v3), ~40 min in all (bench/results/soak.*). MINUTES=3 SIZE=xs for a quick look.
.PHONY: bench-soak
bench-soak: install
	$(PY) bench/soak.py --minutes $${MINUTES:-15} --size $${SIZE:-s} --formats $${FORMATS:-2,3}

# The same soak on the event-driven path: iceberg_compaction_on_health + the resident executor, the
# executor SIGKILLed mid-item; freshness replayed from the table history (bench/results/soak_health.*, freshness.*).
.PHONY: bench-freshness
bench-freshness: install
	$(PY) bench/freshness.py --minutes $${MINUTES:-15} --size $${SIZE:-s} --formats $${FORMATS:-2,3}

# Many small tables that each need a MINOR through the DAG: executor=submit against executor=resident
# (bench/results/fleet.*). TABLES=20 for a look.
.PHONY: bench-fleet
bench-fleet: install
	$(PY) bench/fleet.py --tables $${TABLES:-100}

# An idle resident executor's CPU and memory over 15 minutes (bench/results/idle.*).
.PHONY: bench-idle
bench-idle: install
	$(PY) bench/idle.py --minutes $${MINUTES:-15}

# Maintenance soak: writer + compaction + maintenance every minute (snapshot retention 5 min), 30 min
# per format (v2, v3) on PostgreSQL: plateau of snapshots / metadata bytes / manifests, storage <= 2x live bytes,
# 0 rows lost, retained snapshots re-read (bench/results/maintenance_soak.*). MINUTES=4 RETENTION=60 for a look.
.PHONY: bench-maintenance-soak
bench-maintenance-soak: install
	$(PY) bench/soak.py --maintenance --minutes $${MINUTES:-30} --formats $${FORMATS:-2,3} --retention-s $${RETENTION:-300}

# Both Spark lines side by side: bench/scale.py at m on Spark 4.1 and on Spark 3.5 (each with
# its line's default Iceberg), lines alternating, ours and Iceberg's CALL on each (bench/results/spark_lines.*;
# ~12 min on 2 cores). SIZE=s ROUNDS=1 for a look.
.PHONY: bench-spark-lines
bench-spark-lines: install
	$(MAKE) --no-print-directory install SPARK=3.5
	$(PY) bench/spark_lines.py --size $${SIZE:-m} --rounds $${ROUNDS:-2}
