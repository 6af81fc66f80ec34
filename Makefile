# Two commands do all set-up on a fresh machine: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: install demo test lint typecheck bench clean

install:
	@scripts/install.sh

demo: install
	$(VENV)/bin/icecompact demo

lint: install
	$(VENV)/bin/lint-imports --config setup.cfg

typecheck: install
	$(VENV)/bin/mypy compaction/core

test: install lint typecheck
	$(PY) -m pytest tests -q

bench: install
	$(PY) bench/inspect_scale.py
	$(PY) bench/major.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache
