PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint format bench clean dist

# `make dist`: what spark-submit ships to executors (README, "Deploying")
DIST ?= dist
PACK_VENV ?= build/pack-venv
# what the packed environment installs: the project and its runtime dependencies (no extras), not editable
PACK_INSTALL ?= .

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
	$(BIN)/python benchmarks/bench_build.py --lineitem-scale 1 --lineitem-order generated
	$(BIN)/python benchmarks/bench_build.py --small-files 0 --skip-kinds --no-per-file --id-files 2000 --lineitem-scale 3 --lineitem-files 200 --runs 2
	$(BIN)/python benchmarks/bench_build.py --small-files 0 --skip-kinds --choice
	$(BIN)/python benchmarks/bench_automaton.py
	$(BIN)/python benchmarks/bench_changes.py
	$(BIN)/python benchmarks/bench_query.py --chart docs/query_bench.png
	$(BIN)/python benchmarks/bench_query.py --row-groups 16 --build-runs 3
	$(BIN)/python benchmarks/bench_lookup_scale.py --files 10000 100000 --row-groups 8 --runs 5
	$(BIN)/python benchmarks/bench_serve.py

lint: $(STAMP)
	$(BIN)/ruff check indexlib jobs tests benchmarks airflow_dags
	$(BIN)/ruff format --check indexlib jobs tests benchmarks airflow_dags
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff check --fix indexlib jobs tests benchmarks airflow_dags
	$(BIN)/ruff format indexlib jobs tests benchmarks airflow_dags

# A fresh venv (venv-pack packs only venvs made by `venv`/virtualenv and refuses editable installs), the project
# installed non-editable with the versions the dev venv pins (its `pip freeze` as constraints), packed with venv-pack.
dist: $(STAMP)
	rm -rf $(PACK_VENV) && mkdir -p $(DIST) $(dir $(PACK_VENV))
	$(shell command -v $(PYTHON) || echo python3) -m venv $(PACK_VENV)
	$(BIN)/pip freeze --exclude-editable > $(PACK_VENV).constraints.txt
	$(PACK_VENV)/bin/pip install --quiet --no-cache-dir --constraint $(PACK_VENV).constraints.txt $(PACK_INSTALL)
	$(BIN)/venv-pack --quiet --force --prefix $(PACK_VENV) --output $(DIST)/skipindex-env.tar.gz
	$(BIN)/python -c "import sys, zipfile, pathlib; \
	  z = zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED); \
	  [z.writestr(zipfile.ZipInfo(str(p), (1980, 1, 1, 0, 0, 0)), p.read_bytes()) \
	   for p in sorted(pathlib.Path('indexlib').rglob('*.py'))]" $(DIST)/skipindex.zip
	@echo "$(DIST)/skipindex-env.tar.gz (--archives ...#environment) and $(DIST)/skipindex.zip (--py-files) written"

clean:
	rm -rf $(VENV) .skipindex build $(DIST)
