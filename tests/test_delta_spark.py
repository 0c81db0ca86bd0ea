"""delta-spark for real (docs/how-to/read-rows.md): a Delta table written and changed by Spark's own
Delta connector (`io.delta:delta-spark_4.1_2.13`, jvm/pom.xml), step by step: INSERTs, DELETE / UPDATE / MERGE
with deletion vectors (stored in 'u' files, as Spark writes them), OPTIMIZE with ZORDER (files rewritten, vectors
purged), checkpoints (`delta.checkpointInterval`), builds between some steps and not others. After every step the
project's lookups are checked against brute force: every row delta-spark reads (no filter pushed into its reader),
with the file it came from, filtered by DuckDB with the same SQL: a lookup never drops a file holding a matching
row. At the end, hypothesis-drawn predicates: the same rule, and the DuckDB relation through the index returns
exactly those rows.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pytest
from conftest import sweep
from hypothesis import HealthCheck, given, settings
from iceberg_tables import predicate
from test_spark_sql import batch_sql

from indexlib.config import load_config
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index
from indexlib.scans.spark import CONNECTOR, from_lookup, reader_of

DELTA_SPARK_EXAMPLES = sweep("SKIPINDEX_DELTA_SPARK_EXAMPLES", short=4, long=16)

CHECKED = ("id = 55", "k = 7", "name = 'zz'", "g = 1 AND f > 0.5", "k IS NULL OR id IN (3, 284, 999)", "f != 0.5")


@dataclass(frozen=True)
class Step:
    """One change Spark makes (SQL, `{t}` the table), and whether the index is built after it."""

    name: str
    sql: str
    build: bool = False


HISTORY = [
    Step("insert", "INSERT INTO {t} " + batch_sql(0, 200, "id % 2", "name"), build=True),
    Step("delete with vectors", "DELETE FROM {t} WHERE id % 10 = 3"),
    Step("update with vectors", "UPDATE {t} SET name = 'zz', k = k + 1 WHERE id % 10 = 4"),
    Step(
        "merge with vectors",
        "MERGE INTO {t} AS t USING (" + batch_sql(180, 40, "id % 2", "name") + ") AS u ON t.id = u.id "
        "WHEN MATCHED AND u.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.k = -1 WHEN NOT MATCHED THEN INSERT *",
        build=True,
    ),
    Step("insert after the build", "INSERT INTO {t} " + batch_sql(300, 50, "id % 2", "name")),
    Step("optimize zorder", "OPTIMIZE {t} ZORDER BY (k)"),
    Step("delete after optimize", "DELETE FROM {t} WHERE id IN (55, 301)", build=True),
]


@dataclass
class DeltaLake:
    config: Any
    path: Path
    handle: IndexHandle

    @property
    def table(self) -> str:
        return f"delta.`{self.path}`"


def make_table(spark: Any, root: Path, properties: dict[str, str] | None = None) -> DeltaLake:
    """The table `events` under `root`, with deletion vectors and a checkpoint every 3 commits (`properties`: more
    table properties, or others)."""
    chosen = {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "3", **(properties or {})}
    listed = ", ".join(f"'{key}' = '{value}'" for key, value in chosen.items())
    conf = root / "conf.toml"
    conf.write_text('[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n')
    config = load_config(conf)
    path = root / "events"
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, g INT, k INT, f FLOAT, name STRING) USING delta PARTITIONED BY (g) "
        f"TBLPROPERTIES ({listed})"
    )
    handle = IndexHandle.for_delta(str(path), index_catalog=config.load_catalog())
    return DeltaLake(config, path, handle)


def every_row(spark: Any, lake: DeltaLake) -> pa.Table:
    """Every row delta-spark reads (deletion vectors applied, nothing pushed down), with its file's name."""
    frame = spark.sql(f"SELECT *, _metadata.file_name AS _file FROM {lake.table}")
    return pa.Table.from_pylist([row.asDict() for row in frame.collect()], schema=_SCHEMA)


_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("g", pa.int32()),
        ("k", pa.int32()),
        ("f", pa.float32()),
        ("name", pa.string()),
        ("_file", pa.string()),
    ]
)


def matching(rows: pa.Table, where: str) -> pa.Table:
    return duckdb.connect().from_arrow(rows).query("t", f"SELECT * FROM t WHERE {where}").to_arrow_table()


def check(lake: DeltaLake, rows: pa.Table, where: str, step: str, spark: Any = None) -> None:
    """The lookup keeps every file holding a match; with `spark`, also no file delta-spark's own data skipping drops
    rightly (bar files the log cannot tell free of NaN: it keeps no NaN count, and NaN is above every number)."""
    kept = {os.path.basename(p) for p in lake.handle.lookup(where).files}
    holding = set(matching(rows, where).column("_file").to_pylist())
    assert holding <= kept, (
        f"after {step}: the lookup keeps every file holding a row with {where}: lost {holding - kept}"
    )
    if spark is not None:
        own = {
            os.path.basename(unquote(p)) for p in spark.sql(f"SELECT * FROM {lake.table} WHERE {where}").inputFiles()
        }
        nan_unknown = set(rows.column("_file").to_pylist()) if re.search(r"\bf\b", where) else set()
        beyond = kept - own - holding - nan_unknown
        assert not beyond, f"after {step}: {where} keeps files delta-spark's own data skipping rightly drops: {beyond}"


@pytest.fixture(scope="module")
def delta_lake(connectors, tmp_path_factory) -> tuple[DeltaLake, dict[str, Any]]:
    """The table after its whole history, each step checked as it happened (`test_every_step`)."""
    spark = connectors
    spark.conf.set("spark.databricks.delta.snapshotPartitions", "2")  # log replay in 2 tasks, not 50: a small table
    lake = make_table(spark, tmp_path_factory.mktemp("delta-spark"))
    seen: dict[str, Any] = {"builds": []}
    for step in HISTORY:
        spark.sql(step.sql.format(t=lake.table))
        if step.build:
            seen["builds"].append((step.name, build_index(lake.config, str(lake.path))))
        rows = every_row(spark, lake)
        for where in CHECKED:
            check(lake, rows, where, step.name, spark)
    return lake, seen


def test_every_step_keeps_every_file_holding_a_match(delta_lake):
    """The checks ran in the fixture, after each step; here, that the steps did what the test is about."""
    lake, seen = delta_lake
    actions = [json.loads(line) for f in sorted((lake.path / "_delta_log").glob("*.json")) for line in f.open()]
    vectors = [a["add"]["deletionVector"] for a in actions if a.get("add", {}).get("deletionVector")]
    assert vectors and {v["storageType"] for v in vectors} == {"u"}, "Spark's DELETE/UPDATE/MERGE wrote vectors"
    assert list((lake.path / "_delta_log").glob("*.checkpoint.parquet")), "the log has a checkpoint"
    assert any(a.get("commitInfo", {}).get("operation") == "OPTIMIZE" for a in actions), "OPTIMIZE committed"
    builds = dict(seen["builds"])
    assert builds["delete after optimize"].entries_dropped > 0, "the build after OPTIMIZE drops the removed files"
    assert builds["delete after optimize"].files_indexed > 0, "and indexes the files OPTIMIZE wrote"


@settings(max_examples=DELTA_SPARK_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=predicate())
def test_lookups_and_rows_through_the_index_equal_brute_force(delta_lake, connectors, drawn):
    (lake, _), (where, _) = delta_lake, drawn
    rows = every_row(connectors, lake)
    check(lake, rows, where, "the whole history")
    expected = matching(rows, where).drop_columns(["_file"])
    got = lake.handle.scan(where).to_duckdb().to_arrow_table().select(expected.column_names)
    assert Counter(map(tuple, (r.values() for r in got.to_pylist()))) == Counter(
        map(tuple, (r.values() for r in expected.to_pylist()))
    ), f"the rows through the index are delta-spark's rows matching {where}"


@settings(max_examples=DELTA_SPARK_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=predicate())
def test_the_spark_scan_reads_the_kept_files_through_delta_sparks_own_reader(delta_lake, connectors, drawn):
    """`Scan.to_spark` with delta-spark in the session: Delta's own reader (deletion vectors applied by it),
    handed exactly the kept files, returns delta-spark's rows matching the WHERE."""
    (lake, _), (where, _) = delta_lake, drawn
    expected = matching(every_row(connectors, lake), where).drop_columns(["_file"])
    result = lake.handle.lookup(where)
    frame = from_lookup(connectors, result, reader=CONNECTOR)
    got = pa.Table.from_pylist([row.asDict() for row in frame.collect()], schema=_SCHEMA.remove(5))
    assert Counter(map(tuple, (r.values() for r in got.to_pylist()))) == Counter(
        map(tuple, (r.values() for r in expected.to_pylist()))
    ), f"delta-spark's reader over the kept files returns delta-spark's rows matching {where}"
    opened = {os.path.basename(unquote(p)) for p in frame.inputFiles()}
    assert opened <= {os.path.basename(p) for p in result.files}, f"Spark opens only the kept files for {where}"


def test_the_spark_scan_opens_only_the_kept_files_of_a_delta_table(delta_lake, connectors):
    lake, _ = delta_lake
    result = lake.handle.lookup("id = 55 OR id = 7")
    frame = from_lookup(connectors, result)
    assert reader_of(connectors, result).how == CONNECTOR, "delta-spark in the session: its own reader by default"
    opened = {os.path.basename(unquote(p)) for p in frame.inputFiles()}
    assert opened == {os.path.basename(p) for p in result.files}, "Spark's file index holds exactly the kept files"
    assert len(result.files) < result.files_total, "the index pruned files"
