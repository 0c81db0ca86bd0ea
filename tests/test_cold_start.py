"""What a cold lookup imports (issue 40: a cold `skipindex explain` and a fresh planner's first lookup in under 1 s).

The rule: the lookup path (`import indexlib.cli`, a whole `skipindex explain`, `from indexlib import IndexHandle` and
a fresh handle's first lookup) imports only what a lookup uses. Spark, the planning service's web stack, the DuckDB
and Polars scans, Delta's client (for an Iceberg table), the build's sketches, sqlglot's dialects other than the
one asked for, and the automaton machinery (unless a predicate reads an automaton) are imported inside the
functions that need them, with `if TYPE_CHECKING:` imports for annotations. pandas is not on the list: pyarrow
imports it with `pyarrow.dataset`, which pyiceberg's file IO imports, so no lookup can leave it out.

Not a timed test: it lists the modules each process imported, which the machine's load does not change
(`benchmarks/bench_lookup_scale.py --cold-start` measures the time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from indexlib.indexing.build import build_index

# imported only by the commands and functions that use them
ON_DEMAND_PACKAGES = {
    "pyspark",
    "py4j",
    "fastapi",
    "starlette",
    "uvicorn",
    "duckdb",
    "polars",
    "deltalake",
    "datasketches",
    "matplotlib",
    "airflow",
}
ON_DEMAND_MODULES = (
    "indexlib.automaton.query",  # the automaton machinery: a lookup that reads an automaton
    "indexlib.automaton.build",  # ... and the build
    "indexlib.indexing.build",
    "indexlib.indexing.file_indexer",
    "indexlib.service",
    "indexlib.scans",
    "indexlib.demo",
)
SQLGLOT_DIALECTS = "sqlglot.dialects."
SQLGLOT_BASE_DIALECT = "sqlglot.dialects.dialect"  # the ANSI reading every parse uses

PROBE = """
import json, sys
{body}
print(json.dumps(sorted(sys.modules)))
"""


def _imported(body: str, cwd: Path) -> list[str]:
    """The modules a fresh interpreter holds after running `body`."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=textwrap.dedent(body))],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def _on_demand(modules: list[str]) -> list[str]:
    """The on-demand packages (by top-level name) and modules among `modules`."""
    packages = {name.split(".")[0] for name in modules} & ON_DEMAND_PACKAGES
    own = [name for name in modules if name.startswith(ON_DEMAND_MODULES)]
    dialects = [name for name in modules if name.startswith(SQLGLOT_DIALECTS) and name != SQLGLOT_BASE_DIALECT]
    return sorted(packages) + own + dialects


def _check(modules: list[str], what: str) -> None:
    eager = _on_demand(modules)
    assert not eager, (
        f"{what} imported {eager}: the lookup path imports only what a lookup uses; import these inside the "
        "functions that use them (tests/test_cold_start.py, docs/architecture.md)"
    )


@pytest.fixture
def indexed(config, catalog):
    """db.small, three appends, indexed in this process (few files: no Spark)."""
    table = catalog.create_table("db.small", schema=pa.schema([("id", pa.int64()), ("tag", pa.string())]))
    for start in (0, 10, 20):
        table.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64()), "tag": ["a", "b"] * 5}))
    build_index(config, "db.small")
    return table


def test_importing_the_command_line_imports_no_on_demand_module(tmp_path):
    _check(_imported("import indexlib.cli", tmp_path), "`import indexlib.cli`")


@pytest.mark.parametrize("where", ["id = 13", "id IN (3, 13, 99)"])
def test_a_cold_explain_imports_no_on_demand_module(conf_path, indexed, where):
    modules = _imported(
        f"""
        import contextlib, io
        from indexlib.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = main(["explain", "--conf", {str(conf_path)!r}, "--table", "db.small", "--where", {where!r}])
        assert code == 0 and "files kept" in out.getvalue(), out.getvalue()
        """,
        conf_path.parent,
    )
    _check(modules, f"`skipindex explain --where {where!r}`")


def test_a_fresh_planner_process_and_its_first_lookup_import_no_on_demand_module(conf_path, indexed):
    modules = _imported(
        f"""
        from indexlib import IndexHandle, load_config
        catalog = load_config({str(conf_path)!r}).load_catalog()
        handle = IndexHandle.for_iceberg(catalog.load_table("db.small"))
        assert handle.lookup("id = 13").files
        """,
        conf_path.parent,
    )
    _check(modules, "a fresh process's `IndexHandle` and first lookup")


def test_a_lookup_that_reads_an_automaton_imports_the_machinery_then(conf_path, indexed):
    """The other side of the rule: the automaton machinery is imported when a lookup reads an automaton (a
    predicate on the tag column, which has one)."""
    modules = _imported(
        f"""
        from indexlib import IndexHandle, load_config
        catalog = load_config({str(conf_path)!r}).load_catalog()
        handle = IndexHandle.for_iceberg(catalog.load_table("db.small"))
        result = handle.lookup("tag LIKE '%z'")  # min/max cannot rule out a suffix
        assert not result.files, [stage.name for stage in result.stages]
        """,
        conf_path.parent,
    )
    assert "indexlib.automaton.query" in modules
