"""Every Python block a reader would paste from the README and the docs site runs here, against real tables (issue
45): an Iceberg `tpch.lineitem` and `db.events` in a SQLite catalog, a Delta table for the Delta page, each indexed,
and what the pages leave to the reader given as they describe it (`catalog`, `catalog_properties`, `handle`, `spark`,
`conf/local.toml` in the working directory). A page's blocks run top to bottom in one namespace. The blocks that
cannot run here are listed in NOT_RUN with the reason, and each entry must still match a block, so the list cannot
hide a new one. The `skipindex build` and `explain` command lines of the pages run too, as written.

The results are checked against the truth where a block computes one: the files a lookup keeps hold every matching
row, and the rows read through the index are those SQL returns over the table."""

from __future__ import annotations

import datetime as dt
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, LongType, NestedField, StringType

from indexlib.config import load_config
from indexlib.indexing.build import build_index

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^ *```python\n(.*?)^ *```", re.M | re.S)
# (page, text the block holds): why it is not run here
NOT_RUN = {
    ("docs/how-to/serve.md", "127.0.0.1:8181"): "the local section's clients need its `skipindex serve` running: "
    "tests/test_serve_local.py starts it as the page does and runs these blocks as printed",
    ("docs/spark-sql.md", "127.0.0.1:8181"): "the same",
    ("docs/how-to/serve.md", "skipindex.example.com"): "a production address (the service behind a TLS proxy): the "
    "same client calls run against a local service in tests/test_serve_local.py and tests/test_serve.py",
    ("docs/index-kinds.md", "class MyKindIndex"): "a sketch of a kind, its methods elided (`...`)",
    ("docs/getting-started/iceberg.md", 'Path("lake")'): "the local section runs as printed in an empty folder, "
    "with its TOML file and command lines, in tests/test_getting_started_local.py",
    ("docs/getting-started/iceberg.md", "conf/lake.toml"): "the same",
}
DELTA_PATH = "s3://lake/events"  # the Delta page's table: a local Delta table here


def _blocks(page: Path) -> list[tuple[int, str]]:
    text = page.read_text()
    return [(text[: m.start()].count("\n") + 1, textwrap.dedent(m.group(1))) for m in FENCE.finditer(text)]


def _not_run(page: str, block: str) -> tuple[str, str] | None:
    """The NOT_RUN entry of a block, if it has one."""
    return next((key for key in NOT_RUN if key[0] == page and key[1] in block), None)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tables the pages name, written and indexed; the conf (`conf/local.toml` under `home`) and catalog."""
    home = tmp_path_factory.mktemp("reader")
    (home / "conf").mkdir()
    conf = home / "conf" / "local.toml"
    conf.write_text(
        f'[catalog]\nname = "prod"\ntype = "sql"\nuri = "sqlite:///{home}/catalog.db"\nwarehouse = "{home}/warehouse"\n'
    )
    config = load_config(conf)
    catalog = config.load_catalog()
    for namespace in ("tpch", "db"):
        catalog.create_namespace(namespace)
    lineitem = catalog.create_table(
        "tpch.lineitem", Schema(NestedField(1, "l_orderkey", LongType()), NestedField(2, "l_shipdate", DateType()))
    )
    for start in (0, 40, 80):  # three files of order keys, by ship date
        keys = list(range(start, start + 40))
        dates = [dt.date(1994, 6, 1) + dt.timedelta(days=k * 5) for k in keys]
        lineitem.append(pa.table({"l_orderkey": pa.array(keys, pa.int64()), "l_shipdate": pa.array(dates)}))
    events = catalog.create_table(
        "db.events", Schema(NestedField(1, "trace_id", StringType()), NestedField(2, "id", LongType()))
    )
    for shard in range(3):
        ids = [shard * 10 + i for i in range(10)]
        traces = ["abc" if i == 15 else f"t{i:04d}" for i in ids]
        events.append(pa.table({"trace_id": pa.array(traces, pa.string()), "id": pa.array(ids, pa.int64())}))
    delta = str(home / "events-delta")
    for day in (1, 2):
        data = pa.table({"dt": pa.array([dt.date(2024, 6, day)] * 5), "id": pa.array(range(5), pa.int64())})
        write_deltalake(delta, data, mode="append")
    for name in ("tpch.lineitem", "db.events", delta):
        build_index(config, name)
    (home / "conf" / "prod.toml").write_text(conf.read_text())  # the pages' production configuration
    properties = {"type": "sql", "uri": f"sqlite:///{home}/catalog.db", "warehouse": f"{home}/warehouse"}
    # A SQL catalog keys its tables by the catalog's name: the README loads it as "lake", the API page as "prod"
    lake = load_catalog("lake", **properties)
    for namespace in ("tpch", "db", "skipindex"):
        lake.create_namespace(namespace)
    for name in ("tpch.lineitem", "db.events", "skipindex.tpch__lineitem", "skipindex.db__events"):
        lake.register_table(name, catalog.load_table(name).metadata_location)
    return {"home": home, "config": config, "catalog": catalog, "properties": properties, "delta": delta}


def _namespace(tables: dict[str, Any], spark: Any) -> dict[str, Any]:
    """What the pages leave to the reader, as they describe it."""
    from indexlib import IndexHandle

    catalog = tables["catalog"]
    return {
        "catalog": catalog,
        "catalog_properties": tables["properties"],
        "handle": IndexHandle.for_iceberg(catalog.load_table("tpch.lineitem")),
        "spark": spark,
    }


def test_every_python_block_runs_against_real_tables(tables, spark, monkeypatch) -> None:
    monkeypatch.chdir(tables["home"])  # `load_config("conf/local.toml")`
    ran, not_run = [], set()
    for page in PAGES:
        where = str(page.relative_to(REPO))
        namespace = _namespace(tables, spark)
        for line, block in _blocks(page):
            if (entry := _not_run(where, block)) is not None:
                not_run.add(entry)
                continue
            code = block.replace(DELTA_PATH, tables["delta"])
            try:
                exec(compile(code, f"{where}:{line}", "exec"), namespace)  # noqa: S102 (the docs' own example)
            except Exception as exc:
                pytest.fail(f"{where}:{line}: the example fails: {type(exc).__name__}: {exc}")
            ran.append((where, line, namespace))
    assert not_run == set(NOT_RUN), f"every NOT_RUN entry names a block that exists: {set(NOT_RUN) - not_run}"
    assert len(ran) >= 8, f"the README and the pages' Python blocks ran: {[(w, n) for w, n, _ in ran]}"
    by_page = {}
    for where, _, namespace in ran:
        by_page[where] = namespace
    readme = by_page["README.md"]
    assert readme["rows"].column("l_orderkey").to_pylist() == [42], "README: the rows of l_orderkey = 42"
    assert len(readme["result"].files) == 1, "README: one of the three files holds order key 42, and is kept"
    events = by_page["docs/getting-started/iceberg.md"]["result"]
    assert len(events.files) == 1, "getting started: the one file holding trace_id 'abc' is kept"
    delta = by_page["docs/getting-started/delta.md"]["result"]
    assert len(delta.files) == 1, "Delta: the one file of dt = 2024-06-01 is kept"
    read_rows = by_page["docs/how-to/read-rows.md"]
    assert read_rows["rows"].column("l_orderkey").to_pylist() == [42], "read rows: pyiceberg scan"
    assert read_rows["rel"].aggregate("count(*)").fetchall() == [(1,)], "read rows: DuckDB relation"
    assert [r.l_orderkey for r in read_rows["df"].collect()] == [42], "read rows: Spark DataFrame"


COMMAND = re.compile(
    r"^ {4}skipindex ((?:build|explain)\b.*)$", re.M
)  # `serve` and `demo`: tests/test_serve.py, test_packaging.py


def test_every_build_and_explain_command_line_runs_against_real_tables(tables) -> None:
    """The `skipindex build` / `explain` lines the pages show, run as written in the reader's directory (its
    `conf/prod.toml` this run's catalog; the Delta page's table a local one)."""
    home = tables["home"]
    (home / "conf" / "prod.toml").write_text((home / "conf" / "local.toml").read_text())
    skipindex = str(Path(sys.executable).with_name("skipindex"))
    lines = [(page, m.group(1)) for page in PAGES for m in COMMAND.finditer(page.read_text())]
    assert len(lines) >= 4, "the getting-started pages show build and explain lines"
    for page, line in lines:
        command = shlex.split(re.split(r"\s+#\s", line)[0].replace(DELTA_PATH, tables["delta"]))
        done = subprocess.run([skipindex, *command], cwd=home, capture_output=True, text=True, timeout=300)
        where = f"{page.relative_to(REPO)}: skipindex {line}"
        assert done.returncode == 0, f"{where} fails: {done.stderr[-2000:]}"
        if command[0] == "explain":
            assert re.search(r"^files kept 1 of [23] ", done.stdout, re.M), f"{where}: one file holds the match"
