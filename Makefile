# Developer shortcuts. `make test` is the README's test command and what CI runs.
PYTHON ?= python3

.PHONY: install run-local test lint format compile

install:
	$(PYTHON) -m pip install --quiet -e ".[dev]"

run-local: install
	vsp run-local

test: install
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format:
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

compile:
	vsp compile
