PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-long lint format bench bench-anchors clean clean-jars dist jars docs docs-serve chromium hudi-env

# The table formats' Spark connectors (jvm/pom.xml), fetched with Maven once into JARS (indexlib/jars.py hands them to
# Spark as spark.jars). JVM_PROFILES=s3 adds hadoop-aws (s3a://) and its AWS SDK bundle.
JARS := .jars
JARS_STAMP := $(JARS)/.fetched
JVM_PROFILES ?=
MVN ?= mvn

# `make dist`: what spark-submit ships to executors (docs/how-to/spark-cluster.md)
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

# one line when Maven cannot fetch them (no Maven, or the registry cannot be reached); its output is in JARS.log
$(JARS_STAMP): jvm/pom.xml
	@command -v $(MVN) >/dev/null || { echo "make jars: no Maven ($(MVN)) on PATH: install it (Debian: apt-get install maven) to fetch the Spark connectors' jars"; exit 1; }
	@rm -rf $(JARS).tmp && mkdir -p $(JARS).tmp
	@$(MVN) -B -q -f jvm/pom.xml $(addprefix -P,$(JVM_PROFILES)) dependency:copy-dependencies \
	  -DoutputDirectory=$(abspath $(JARS).tmp) > $(JARS).log 2>&1 \
	  || { echo "make jars: Maven could not fetch the Spark connectors' jars (jvm/pom.xml): is the Maven registry reachable? see $(JARS).log"; exit 1; }
	@rm -rf $(JARS) && mv $(JARS).tmp $(JARS) && touch $(JARS_STAMP)

jars: $(JARS_STAMP)

# Apache Hudi for benchmarks/bench_anchors.py, on Spark 3.5 (Scala 2.12): no Hudi bundle for Spark 4.x is served, so
# its own venv (pyspark 3.5) and the bundle of jvm/hudi/pom.xml, fetched with Maven as `jars` does; the benchmark runs
# Hudi's side there as a subprocess. Its output is in HUDI_JARS.log
HUDI_VENV := .venv-hudi
HUDI_JARS := .jars-hudi
HUDI_STAMP := $(HUDI_JARS)/.fetched

$(HUDI_VENV)/.installed:
	$(shell command -v $(PYTHON) || echo python3) -m venv $(HUDI_VENV)
	$(HUDI_VENV)/bin/pip install --quiet 'pyspark==3.5.*' pyarrow
	touch $@

$(HUDI_STAMP): jvm/hudi/pom.xml
	@command -v $(MVN) >/dev/null || { echo "make hudi-env: no Maven ($(MVN)) on PATH"; exit 1; }
	@rm -rf $(HUDI_JARS).tmp && mkdir -p $(HUDI_JARS).tmp
	@$(MVN) -B -q -f jvm/hudi/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(abspath $(HUDI_JARS).tmp) > $(HUDI_JARS).log 2>&1 \
	  || { echo "make hudi-env: Maven could not fetch Hudi's bundle (jvm/hudi/pom.xml): see $(HUDI_JARS).log"; exit 1; }
	@rm -rf $(HUDI_JARS) && mv $(HUDI_JARS).tmp $(HUDI_JARS) && touch $(HUDI_STAMP)

hudi-env: $(HUDI_VENV)/.installed $(HUDI_STAMP)

# the demo needs no connector: without Maven it says so in one line and goes on
demo: $(STAMP)
	@$(MAKE) --no-print-directory -s jars || true
	$(BIN)/skipindex demo --conf conf/local.toml

# what CI runs (.ci/run): lint, then every test, each sweep (property tests, random histories) at its short profile
test: $(STAMP) $(JARS_STAMP) chromium lint
	$(BIN)/pytest

# the same suite with every sweep at its long profile (SKIPINDEX_LONG=1, tests/conftest.py: sweep), before each
# release and whenever a change touches a sweep's area: `make test-long TESTS=tests/test_pruning_properties.py`
TESTS ?=
test-long: $(STAMP) $(JARS_STAMP) chromium
	SKIPINDEX_LONG=1 $(BIN)/pytest $(TESTS)

# tests/test_docs_browser.py drives Debian's Chromium headless through Playwright, which downloads no browser of
# its own: installed from Debian's packages when missing (as root, or with sudo)
CHROMIUM ?= /usr/bin/chromium

chromium:
	@test -x $(CHROMIUM) || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# the inner loop: every rule table, no Spark, no long property runs (CI runs everything through `make test`)
test-fast: $(STAMP)
	$(BIN)/pytest -m 'not spark and not slow and not servers'

bench: $(STAMP) $(JARS_STAMP) hudi-env
	$(BIN)/python benchmarks/bench_lookup.py
	$(BIN)/python benchmarks/bench_lookup_scale.py --warm-ab --keep build/warm-ab $(if $(BENCH_AGAINST),--against $(BENCH_AGAINST))
	$(BIN)/python benchmarks/bench_lookup_scale.py --files 10000 100000 --chart docs/lookup_scale.png
	$(BIN)/python benchmarks/bench_build.py --lineitem-scale 1 --lineitem-order generated
	$(BIN)/python benchmarks/bench_build.py --small-files 0 --skip-kinds --no-per-file --id-files 2000 --lineitem-scale 3 --lineitem-files 200 --runs 2
	$(BIN)/python benchmarks/bench_build.py --small-files 0 --skip-kinds --choice
	$(BIN)/python benchmarks/bench_automaton.py
	$(BIN)/python benchmarks/bench_changes.py
	$(BIN)/python benchmarks/bench_follow.py
	$(BIN)/python benchmarks/bench_query.py --chart docs/query_bench.png
	$(BIN)/python benchmarks/bench_query.py --row-groups 16 --build-runs 3
	$(BIN)/python benchmarks/bench_lookup_scale.py --files 10000 100000 --row-groups 8 --runs 5
	$(BIN)/python benchmarks/bench_serve.py
	$(BIN)/python benchmarks/bench_spark_sql.py
	$(BIN)/python benchmarks/bench_delta_sql.py
	$(BIN)/python benchmarks/bench_equality_deletes.py
	$(BIN)/python benchmarks/bench_free_text.py --spark
	$(MAKE) --no-print-directory bench-anchors

# issue 44's comparison alone (docs/benchmarks.md, "Against the alternatives"): ~40 minutes on 2 cores
bench-anchors: $(STAMP) $(JARS_STAMP) hudi-env
	$(BIN)/python benchmarks/bench_anchors.py --json build/bench_anchors.json --chart docs/anchors_bench.png

lint: $(STAMP)
	$(BIN)/ruff check indexlib jobs tests benchmarks airflow_dags docs/hooks
	$(BIN)/ruff format --check indexlib jobs tests benchmarks airflow_dags docs/hooks
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(MAKE) --no-print-directory docs

# The docs site (mkdocs.yml): built strict, so a broken link or anchor, a page missing from the nav or a setting
# without help fails; the CLI and configuration references are generated from the code (docs/hooks/reference.py).
# Not --quiet: mkdocs 1.6 then counts no warnings, and a strict build with broken links exits 0.
DOCS_SITE ?= site

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d $(DOCS_SITE)

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict -a 127.0.0.1:8000

format: $(STAMP)
	$(BIN)/ruff check --fix indexlib jobs tests benchmarks airflow_dags docs/hooks
	$(BIN)/ruff format indexlib jobs tests benchmarks airflow_dags docs/hooks

# A fresh venv (venv-pack packs only venvs made by `venv`/virtualenv and refuses editable installs), the project
# installed non-editable with the versions the dev venv pins (its `pip freeze` as constraints), packed with venv-pack.
dist: $(STAMP) $(JARS_STAMP)
	rm -rf $(PACK_VENV) && mkdir -p $(DIST) $(dir $(PACK_VENV))
	$(shell command -v $(PYTHON) || echo python3) -m venv $(PACK_VENV)
	$(BIN)/pip freeze --exclude-editable > $(PACK_VENV).constraints.txt
	$(PACK_VENV)/bin/pip install --quiet --no-cache-dir --constraint $(PACK_VENV).constraints.txt $(PACK_INSTALL)
	$(BIN)/venv-pack --quiet --force --prefix $(PACK_VENV) --output $(DIST)/skipindex-env.tar.gz
	$(BIN)/python -c "import sys, zipfile, pathlib; \
	  z = zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED); \
	  [z.writestr(zipfile.ZipInfo(str(p), (1980, 1, 1, 0, 0, 0)), p.read_bytes()) \
	   for p in sorted(pathlib.Path('indexlib').rglob('*.py'))]" $(DIST)/skipindex.zip
	rm -rf $(DIST)/jars && mkdir -p $(DIST)/jars
	$(BIN)/python -c "import shutil, sys; from indexlib.jars import spark_jars; \
	  [shutil.copy2(j, sys.argv[1]) for j in spark_jars()]" $(DIST)/jars
	@echo "$(DIST)/skipindex-env.tar.gz (--archives ...#environment), $(DIST)/skipindex.zip (--py-files) and $(DIST)/jars/ (--jars) written"

# the jars stay (a fresh fetch is a few hundred MB): `make clean-jars` removes them
clean:
	rm -rf $(VENV) .skipindex build $(DIST) $(DOCS_SITE)

clean-jars:
	rm -rf $(JARS) $(JARS).tmp $(JARS).log
