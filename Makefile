PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format clean

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

lint: $(STAMP)
	$(BIN)/ruff check indexlib jobs tests
	$(BIN)/ruff format --check indexlib jobs tests

format: $(STAMP)
	$(BIN)/ruff check --fix indexlib jobs tests
	$(BIN)/ruff format indexlib jobs tests

clean:
	rm -rf $(VENV) .skipindex
