PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint format bench clean

$(BIN)/python:
	$(shell command -v $(PYTHON) || echo python3) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/skipindex demo --conf conf/local.toml

test: $(STAMP) lint
	$(BIN)/pytest

# the inner loop: every rule table, no Spark, no long property runs (CI runs everything through `make test`)
test-fast: $(STAMP)
	$(BIN)/pytest -m 'not spark and not slow and not servers'

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_lookup.py
	$(BIN)/python benchmarks/bench_lookup_scale.py --files 10000 100000 --chart docs/lookup_scale.png
	$(BIN)/python benchmarks/bench_build.py --lineitem-scale 1
	$(BIN)/python benchmarks/bench_automaton.py
	$(BIN)/python benchmarks/bench_changes.py

lint: $(STAMP)
	$(BIN)/ruff check indexlib jobs tests benchmarks airflow_dags
	$(BIN)/ruff format --check indexlib jobs tests benchmarks airflow_dags
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff check --fix indexlib jobs tests benchmarks airflow_dags
	$(BIN)/ruff format indexlib jobs tests benchmarks airflow_dags

clean:
	rm -rf $(VENV) .skipindex
