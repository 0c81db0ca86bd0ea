"""Delta tables in Spark SQL through `skipindex serve` (docs/how-to/serve.md): Delta tables written and changed by
delta-spark (INSERT, DELETE / UPDATE / MERGE with deletion vectors, OPTIMIZE ZORDER, checkpoints, column mapping in
`name` and `id` mode with renames and drops, partitions by hostile strings, NULL and dates) are read by a Spark
catalog that knows only the service's address, with Iceberg's runtime alone (no Delta code on that path). The
oracle for rows is delta-spark's own read of the same Delta version; for files, the index's lookup of the filter
Spark pushed: the data files in Spark's physical plan are exactly the files the index kept.

The Spark cases run in `make test-long` (a dozen delta-spark commits and their reads cost about a minute).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import sweep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_tables import predicate
from test_serve import TOKEN, Serve, served_catalog
from test_spark_sql import batch_sql, configure, scanned

from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index
from indexlib.service.filters import RequestFilter
from indexlib.sources.delta import DeltaSource

DELTA_SERVICE_EXAMPLES = sweep("SKIPINDEX_DELTA_SERVICE_EXAMPLES", short=4, long=25)

pytestmark = [pytest.mark.servers, pytest.mark.long_only]

SERVED = "delta_served"  # this module's Spark catalog (one name per test module: catalogs live as long as the session)
HOSTILE = ["a b", "x/y", "c:d", "p%20q", "e=f", "ü\u00e9", "'q'", "", None]
DV = "'delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '3'"


def hostile_sql(start: int, rows: int) -> str:
    """batch_sql's rows with a partition column `p` of hostile strings (and NULL) and a date `d`."""
    cases = " ".join(f"WHEN {i} THEN {'NULL' if v is None else repr(v)}" for i, v in enumerate(HOSTILE))
    return (
        f"SELECT b.*, CASE id % {len(HOSTILE)} {cases} END AS p, date_add(DATE'2024-02-27', CAST(id % 4 AS INT)) AS d "
        f"FROM ({batch_sql(start, rows, 'id % 2', 'name')}) b"
    )


@dataclass
class Served:
    config: Any
    server: Serve
    paths: dict[str, Path]
    versions: dict[str, int]  # named Delta versions of `events`


def write_events(spark: Any, path: Path, versions: dict[str, int]) -> None:
    """`events`: column mapping by name, partitioned by hostile strings, deletion vectors, checkpoints; a rename
    and a drop half-way."""
    t = f"delta.`{path}`"

    def version() -> int:
        return int(spark.sql(f"DESCRIBE HISTORY {t} LIMIT 1").first()["version"])

    spark.sql(
        f"CREATE TABLE {t} (id BIGINT, g INT, k INT, f FLOAT, name STRING, p STRING, d DATE) USING delta "
        f"PARTITIONED BY (p) TBLPROPERTIES ({DV}, 'delta.columnMapping.mode' = 'name')"
    )
    versions["created"] = version()  # no rows yet
    spark.sql(hostile_sql(0, 300)).repartition(2).writeTo(t).append()
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 3")
    spark.sql(f"UPDATE {t} SET name = 'zz', k = k + 1 WHERE id % 10 = 4")
    versions["before rename"] = version()
    spark.sql(
        f"MERGE INTO {t} AS t USING ({hostile_sql(280, 40)}) AS u ON t.id = u.id "
        "WHEN MATCHED AND u.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.k = -1 WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE {t} DROP COLUMN g")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (g INT)")  # the dropped name again: NULL in every older file
    versions["renamed"] = version()


def write_days(spark: Any, path: Path) -> None:
    """`days`: column mapping by id, partitioned by a date, deletion vectors; OPTIMIZE ZORDER after deletes."""
    t = f"delta.`{path}`"
    spark.sql(
        f"CREATE TABLE {t} (id BIGINT, k INT, f FLOAT, name STRING, d DATE) USING delta PARTITIONED BY (d) "
        f"TBLPROPERTIES ({DV}, 'delta.columnMapping.mode' = 'id')"
    )
    spark.sql(f"SELECT id, k, f, name, d FROM ({hostile_sql(0, 200)})").repartition(2).writeTo(t).append()
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 5")
    spark.sql(f"OPTIMIZE {t} ZORDER BY (k)")
    spark.sql(f"DELETE FROM {t} WHERE id IN (12, 13, 14)")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN k TO key")


EDGES = "array(CAST('NaN' AS DOUBLE), CAST(-0.0 AS DOUBLE), 0.0D, 1.5D, NULL, -2.0D)"


def write_plain(spark: Any, path: Path) -> None:
    """`plain`: no column mapping (name mapping by the files' own names), no deletion vectors, unpartitioned; a
    double column with NaN, -0.0 and 0.0, and timestamps with microseconds."""
    t = f"delta.`{path}`"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, g INT, k INT, f FLOAT, name STRING, x DOUBLE, ts TIMESTAMP) USING delta")

    def edges(start: int, count: int) -> str:
        return (
            f"SELECT b.*, element_at({EDGES}, CAST(id % 6 + 1 AS INT)) AS x, "
            f"timestamp_micros(1700000000000000 + id * 1000001) AS ts FROM ({batch_sql(start, count, 'id % 2', 'name')}) b"
        )

    spark.sql(edges(0, 200)).repartitionByRange(3, "id").writeTo(t).append()
    spark.sql(f"INSERT INTO {t} {edges(200, 50)}")


@pytest.fixture(scope="module")
def served(connectors, tmp_path_factory) -> Served:
    spark = connectors
    spark.conf.set("spark.databricks.delta.snapshotPartitions", "2")
    root = tmp_path_factory.mktemp("delta-service")
    paths = {name: root / name for name in ("events", "days", "plain")}
    listed = "".join(f'{name} = "{path}"\n' for name, path in paths.items())
    conf, config, _ = served_catalog(root, f"[serve]\ntasks_per_batch = 3\n[serve.delta_tables]\n{listed}")
    versions: dict[str, int] = {}
    write_events(spark, paths["events"], versions)
    build_index(config, str(paths["events"]))
    t = f"delta.`{paths['events']}`"
    spark.sql(f"INSERT INTO {t} SELECT id, k, f, name AS label, p, d, g FROM ({hostile_sql(400, 30)})")
    spark.sql(f"DELETE FROM {t} WHERE id IN (5, 17, 401)")  # after the build: unindexed files and new vectors
    write_days(spark, paths["days"])
    build_index(config, str(paths["days"]))
    write_plain(spark, paths["plain"])
    build_index(config, str(paths["plain"]))
    server = Serve(conf).start()
    configure(
        spark, SERVED, {"": "org.apache.iceberg.spark.SparkCatalog", "type": "rest", "uri": server.url, "token": TOKEN}
    )
    yield Served(config, server, paths, versions)
    server.stop()


def rows(frame: Any) -> Counter:
    """The rows as a multiset, NaN as one value (NaN != NaN would make equal rows differ)."""
    return Counter(tuple("NaN" if v != v else v for v in row) for row in frame.collect())


def delta_rows(spark: Any, path: Path, where: str, version: int | None = None) -> Counter:
    travel = f" VERSION AS OF {version}" if version is not None else ""
    return rows(spark.sql(f"SELECT * FROM delta.`{path}`{travel} WHERE {where}"))


def index_kept(served: Served, table: str, pushed: Any, version: int | None = None) -> set[str]:
    source = DeltaSource(str(served.paths[table]))
    handle = IndexHandle.for_source(source, index_catalog=served.config.load_catalog())
    state = handle.current() if version is None else handle.state_at(version)
    schema = state.source.schema
    expression = RequestFilter.parse(pushed).pruning(schema, schema, case_sensitive=False).expression
    return set(handle.lookup(expression, case_sensitive=False, state=state).files)


WHERE = {
    "events": [
        "TRUE",
        "id = 55",
        "p = 'a b'",
        "p IS NULL",
        "p = ''",
        "p = 'x/y' AND k > 3",
        "label = 'zz'",
        "g IS NULL",
        "d = DATE'2024-02-29'",
        "f > 0.5 OR id < 20",
    ],
    "days": ["d = DATE'2024-03-01'", "key = 7", "id IN (12, 15, 16)", "d > DATE'2024-02-28' AND key IS NULL"],
    "plain": [
        "id = 42",
        "k = 3 AND g = 1",
        "name IS NULL",
        "f != 0.5",
        "x > 0",
        "x = 0.0",
        "x < 0",
        "x != 1.5",
        "x = CAST('NaN' AS DOUBLE)",
        "x IS NULL OR x <= -0.0",
        "ts > TIMESTAMP'2023-11-14 22:16:40.000001'",
    ],
}


@pytest.mark.parametrize("table, where", [(t, w) for t, ws in WHERE.items() for w in ws])
def test_spark_sql_reads_a_delta_table_through_the_service_as_delta_spark_reads_it(served, connectors, table, where):
    spark = connectors
    frame = spark.sql(f"SELECT * FROM {SERVED}.delta.{table} WHERE {where}")
    seen = scanned(frame)
    got = rows(frame)
    assert got == delta_rows(spark, served.paths[table], where), (
        f"Spark SQL through the service returns delta-spark's rows of {table}: {where}"
    )
    if seen is not None:
        kept = index_kept(served, table, seen.filter)
        assert seen.files == kept, f"Spark opens exactly the files the index kept for {where} on {table}"


@pytest.mark.parametrize("name", ["created", "before rename", "renamed"])
def test_version_as_of_reads_that_delta_version(served, connectors, name):
    spark = connectors
    version = served.versions[name]
    for where in ("id % 7 = 1", "p = 'c:d' OR k = 4"):
        got = rows(spark.sql(f"SELECT * FROM {SERVED}.delta.events VERSION AS OF {version} WHERE {where}"))
        assert got == delta_rows(spark, served.paths["events"], where, version), (
            f"VERSION AS OF {version} ({name}) reads that Delta version's rows and columns: {where}"
        )


RENAMED = {"events": {"name": "label"}, "days": {"k": "key", "g": "(id % 2)"}, "plain": {}}


@settings(
    max_examples=DELTA_SERVICE_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=st.sampled_from(sorted(RENAMED)), drawn=predicate())
def test_drawn_predicates_read_delta_sparks_rows_from_the_files_the_index_keeps(served, connectors, table, drawn):
    spark, (where, _) = connectors, drawn
    for old, new in RENAMED[table].items():  # the drawn columns as each table names them
        where = re.sub(rf"\b{old}\b", new, where)
    frame = spark.sql(f"SELECT * FROM {SERVED}.delta.{table} WHERE {where}")
    seen = scanned(frame)
    assert rows(frame) == delta_rows(spark, served.paths[table], where), (
        f"Spark SQL through the service returns delta-spark's rows of {table}: {where}"
    )
    if seen is not None:
        assert seen.files == index_kept(served, table, seen.filter), f"Spark opens the index's kept files: {where}"


AGGREGATES = [
    ("plain", "SELECT count(*) FROM {t}"),
    ("plain", "SELECT count(*), min(id), max(id), count(k) FROM {t} WHERE id > 10"),
    ("events", "SELECT count(*) FROM {t}"),
    ("events", "SELECT count(*) FROM {t} WHERE p = 'a b'"),
    ("events", "SELECT count(*) FROM {t} WHERE p IS NULL"),
    ("days", "SELECT count(*), max(key) FROM {t} WHERE d = DATE'2024-02-28'"),
]


@pytest.mark.parametrize("table, query", AGGREGATES)
def test_aggregates_pushed_into_icebergs_scan_count_delta_sparks_rows(served, connectors, table, query):
    """Iceberg's runtime answers COUNT(*) (and MIN / MAX / COUNT(col) where the files carry statistics, which the
    service sends none of) from the planned files' record counts when no task has deletes: a file kept beyond the
    filter's partitions, or a record count that is not the file's, would be a wrong count."""
    spark = connectors
    got = spark.sql(query.format(t=f"{SERVED}.delta.{table}")).collect()
    own = spark.sql(query.format(t=f"delta.`{served.paths[table]}`")).collect()
    assert [tuple(r) for r in got] == [tuple(r) for r in own], f"{query} on {table}: delta-spark's answer"
