# Two commands do all set-up on a fresh machine: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: install browser demo test lint typecheck bench clean

install:
	@scripts/install.sh

browser:
	@scripts/install.sh --with-browser

# The compaction DAG run for real by `airflow dags test` (Airflow home: $ICECOMPACT_HOME/airflow, default
# ~/.icecompact/airflow); see README "Airflow". `icecompact demo` is the same without Airflow.
demo: install
	$(PY) -m icecompact_airflow.demo

lint: install
	$(VENV)/bin/lint-imports --config setup.cfg

typecheck: install
	$(VENV)/bin/mypy compaction/core
	$(VENV)/bin/mypy --ignore-missing-imports --follow-imports=silent icecompact_airflow dags plugins

test: install browser lint typecheck
	$(PY) -m pytest tests -q

bench: install
	$(PY) bench/inspect_scale.py
	$(PY) bench/major.py
	$(PY) bench/minor.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache
