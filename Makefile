# Developer shortcuts. `make test` is the README's test command (CI runs it through .ci/run).
PYTHON ?= python3

.PHONY: install run-local test test-fast lint format compile campaign mutants bench lock goodput docs docs-serve

install:
	$(PYTHON) -m pip install --quiet -e ".[dev]"

run-local: install
	vsp run-local

test: install
	$(PYTHON) -m pytest -q

# The inner loop: every test not marked slow (no whole pipelines, no real training jobs, no
# real Slurm), under 90 s on 2 cores; `make test` runs everything.
test-fast:
	$(PYTHON) -m pytest -q -m "not slow"

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	lint-imports

format:
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

compile:
	vsp compile --out src/vsp/compiled

# Fault campaign: generated fault plans and bad inputs, counts in benchmarks/results/.
campaign:
	$(PYTHON) -m benchmarks.fault_campaign --plans 2000 --inputs 1000 --out benchmarks/results

# Mutation score of the fault campaign: planted bugs, each in a temporary copy of the code, must
# all be caught (at most 250 plans each); results in benchmarks/results/mutants.*.
mutants:
	$(PYTHON) -m benchmarks.mutants --out benchmarks/results

# Goodput of checkpoint policies: scaled runs on the emulator (~20 min), then the full-scale
# simulation.
goodput:
	nice -n 10 $(PYTHON) -m benchmarks.goodput.scaled --out benchmarks/results --seeds 6 --work-steps 20000 --parallel 2 --cases ours-async
	$(PYTHON) -m benchmarks.goodput.policy --out benchmarks/results

# The runtime lock the prebuilt step image installs: requirements/runtime.in from the
# components, then pip-compile (needs the package index). See docs/running-on-vertex.md, "The prebuilt step image".
lock:
	$(PYTHON) -m tools.runtime_lock --compile

# Every benchmark, results as JSON + Markdown in benchmarks/results/, then the goals table
# docs/benchmarks.md quotes (benchmarks/results/summary.md). step_start needs the package index.
BENCH = $(PYTHON) -m benchmarks
bench: install
	nice -n 10 $(BENCH).teardown.cost --out benchmarks/results
	nice -n 10 $(BENCH).teardown.shrink --out benchmarks/results
	nice -n 10 $(BENCH).polling.run --out benchmarks/results
	nice -n 10 $(BENCH).emulator.scale --out benchmarks/results
	nice -n 10 $(BENCH).goodput.metric --out benchmarks/results
	nice -n 10 $(BENCH).report_chart_cost --out benchmarks/results
	nice -n 10 $(BENCH).step_start.run --out benchmarks/results
	nice -n 10 $(BENCH).goodput.scaled --out benchmarks/results
	nice -n 10 $(BENCH).goodput.policy --out benchmarks/results
	$(BENCH).summary --doc docs/benchmarks.md

# The documentation site (mkdocs-material, docs/ and mkdocs.yml), warnings as errors, into .site/;
# docs-serve rebuilds it on every change at http://127.0.0.1:8000.
docs:
	$(PYTHON) -m mkdocs build --strict

docs-serve:
	$(PYTHON) -m mkdocs serve
