# Developer shortcuts. `make test` is the README's test command and what CI runs.
PYTHON ?= python3

.PHONY: install run-local test lint format compile campaign goodput

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

# Fault campaign: generated fault plans and bad inputs, counts in benchmarks/results/.
campaign:
	$(PYTHON) -m benchmarks.fault_campaign --plans 2000 --inputs 1000 --out benchmarks/results

# Goodput of checkpoint policies: scaled trainer runs (~10 min), then the full-scale simulation.
goodput:
	nice -n 10 $(PYTHON) -m benchmarks.goodput_scaled --out benchmarks/results
	$(PYTHON) -m benchmarks.goodput_policy --out benchmarks/results
