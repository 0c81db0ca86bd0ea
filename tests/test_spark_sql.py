"""Spark SQL planned by the index through `skipindex serve` (docs/how-to/serve.md; docs/spark-sql.md). The Spark
catalog `served` knows the service's address and token and nothing else; Iceberg's Spark runtime plans its scans
with `POST .../plan` (server-side planning) and reads the files the answer names. The tables were written and
changed by Spark itself through `test`, Iceberg's JdbcCatalog over the same SQLite catalog the service reads:
INSERT, merge-on-read DELETE / UPDATE / MERGE (position delete files on format version 2, deletion vectors on 3),
partition and schema evolution, commits after the index's build. Spark's own read of the same snapshot through
`test` (client-side planning) is the oracle for rows; for the files, the index's lookup of the filter Spark pushed:
the data files in Spark's physical plan are exactly the files the index kept.
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import sweep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_tables import FLOATS, WORDS, predicate
from test_serve import TOKEN, Serve, served_catalog

from indexlib.errors import UnsupportedFeature
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index
from indexlib.lookup import FORMAT_STAGE
from indexlib.scans.spark import CONNECTOR, FILES, from_lookup, reader_of
from indexlib.service.filters import RequestFilter

SPARK_SQL_EXAMPLES = sweep("SKIPINDEX_SPARK_SQL_EXAMPLES", short=4, long=20)

pytestmark = pytest.mark.servers

WRITER, SERVED = "test", "served"  # the writer's name is the SQLite catalog's (served_catalog): its rows' catalog_name
MERGE_ON_READ = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read'"
)


def _values(words: list[Any]) -> str:
    return ", ".join("NULL" if w is None else repr(w) for w in words)


def batch_sql(start: int, rows: int, g: str, name: str = "s") -> str:
    """iceberg_tables.batch's rows in Spark SQL: the columns and value sets the drawn predicates range over."""
    return (
        f"SELECT id, CAST({g} AS INT) AS g, CAST(CASE WHEN id % 5 = 0 THEN NULL ELSE id % 11 END AS INT) AS k, "
        f"CAST(element_at(array({_values(FLOATS)}), CAST(id % 6 + 1 AS INT)) AS FLOAT) AS f, "
        f"element_at(array({_values(WORDS)}), CAST(id % 6 + 1 AS INT)) AS {name} "
        f"FROM range({start}, {start + rows})"
    )


def configure(spark: Any, catalog: str, properties: dict[str, str]) -> None:
    """A Spark catalog, configured on the running session (Spark makes a catalog when a query first names it)."""
    for key, value in properties.items():
        spark.conf.set(f"spark.sql.catalog.{catalog}{'.' + key if key else ''}", value)


@dataclass
class Lake:
    config: Any
    catalog: Any
    server: Serve
    snapshots: dict[str, int]  # the history's named snapshots of db.t


def write_history(spark: Any, config: Any) -> dict[str, int]:
    """db.t (format version 2) and db.v3 (format version 3, deletion vectors), written and changed by Spark, and
    db.mixed (position delete files on version 2, then upgraded to 3: deletion vectors beside them); all
    indexed half-way (the project's build, here without Spark: the tables are small), then changed again (files
    and deletes the index has not seen)."""
    snapshots = {}

    def current(table: str) -> int:
        return spark.sql(
            f"SELECT snapshot_id FROM {WRITER}.{table}.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).first()[0]

    def insert(table: str, query: str, files: int = 1) -> None:  # one data file per id range (and partition)
        spark.sql(query).repartitionByRange(files, "id").writeTo(f"{WRITER}.{table}").append()

    spark.sql(
        f"CREATE TABLE {WRITER}.db.t (id BIGINT, g INT, k INT, f FLOAT, s STRING) USING iceberg "
        f"TBLPROPERTIES ('format-version'='2', {MERGE_ON_READ})"
    )
    insert("db.t", batch_sql(0, 300, "id DIV 100 % 2"), files=3)
    spark.sql(f"DELETE FROM {WRITER}.db.t WHERE id < 10 OR id = 150")  # position delete files
    snapshots["deleted"] = current("db.t")
    spark.sql(f"ALTER TABLE {WRITER}.db.t ADD PARTITION FIELD g")  # partition evolution
    insert("db.t", batch_sql(300, 200, "id % 3"), files=2)
    snapshots["partitioned"] = current("db.t")
    spark.sql(f"ALTER TABLE {WRITER}.db.t RENAME COLUMN s TO name")  # schema evolution: rename, promotions
    spark.sql(f"ALTER TABLE {WRITER}.db.t ALTER COLUMN k TYPE BIGINT")
    spark.sql(f"ALTER TABLE {WRITER}.db.t ALTER COLUMN f TYPE DOUBLE")
    spark.sql(f"UPDATE {WRITER}.db.t SET k = k + 1, name = 'ab' WHERE id % 7 = 0")
    spark.sql(
        f"MERGE INTO {WRITER}.db.t AS t USING ({batch_sql(390, 30, 'id % 2', 'name')}) AS u ON t.id = u.id "
        "WHEN MATCHED AND u.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.k = -1 "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(
        f"CREATE TABLE {WRITER}.db.v3 (id BIGINT, g INT, k INT, f FLOAT, name STRING) USING iceberg "
        f"PARTITIONED BY (g) TBLPROPERTIES ('format-version'='3', {MERGE_ON_READ})"
    )
    insert("db.v3", batch_sql(0, 300, "id % 2", "name"), files=3)
    spark.sql(f"DELETE FROM {WRITER}.db.v3 WHERE id % 10 = 3")  # deletion vectors
    spark.sql(f"UPDATE {WRITER}.db.v3 SET name = 'zz' WHERE id % 10 = 4")
    spark.sql(
        # (not ids ending in 3, 4 or 5: test_deletion_vectors_reach_spark counts those)
        f"MERGE INTO {WRITER}.db.v3 AS t USING (SELECT * FROM ({batch_sql(280, 40, 'id % 2', 'name')}) "
        "WHERE id % 10 NOT IN (3, 4, 5)) AS u ON t.id = u.id "
        "WHEN MATCHED AND u.id % 2 = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET t.k = -1 "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql(
        f"CREATE TABLE {WRITER}.db.mixed (id BIGINT, g INT, k INT, f FLOAT, name STRING) USING iceberg "
        f"TBLPROPERTIES ('format-version'='2', {MERGE_ON_READ})"
    )
    insert("db.mixed", batch_sql(0, 300, "id % 2", "name"), files=3)
    spark.sql(f"DELETE FROM {WRITER}.db.mixed WHERE id % 10 = 3")  # position delete files, on version 2
    spark.sql(f"ALTER TABLE {WRITER}.db.mixed SET TBLPROPERTIES ('format-version'='3')")
    insert("db.mixed", batch_sql(300, 200, "id % 2", "name"), files=2)
    spark.sql(f"DELETE FROM {WRITER}.db.mixed WHERE id % 10 = 6 AND id >= 300")  # deletion vectors, on version 3
    for table in ("db.t", "db.v3", "db.mixed"):
        build_index(config, table)
    insert("db.t", batch_sql(500, 30, "id % 2", "name"))  # after the build: unindexed, and new deletes
    spark.sql(f"DELETE FROM {WRITER}.db.t WHERE id IN (105, 305, 505)")
    spark.sql(f"DELETE FROM {WRITER}.db.v3 WHERE id % 10 = 5")
    # on the version-3 files only: a vector for an older file would take in its position deletes (Iceberg merges them)
    spark.sql(f"UPDATE {WRITER}.db.mixed SET name = 'zz' WHERE id % 10 = 7 AND id >= 300")
    snapshots["last"] = current("db.t")
    return snapshots


@pytest.fixture(scope="module")
def lake(connectors, tmp_path_factory) -> Lake:
    spark = connectors
    root = tmp_path_factory.mktemp("spark-sql")
    # two tasks a batch: Spark's client fetches the plans' further batches (`POST .../tasks`)
    conf, config, catalog = served_catalog(root, "[serve]\ntasks_per_batch = 2\n")
    configure(
        spark,
        WRITER,
        {
            "": "org.apache.iceberg.spark.SparkCatalog",
            "type": "jdbc",
            "uri": f"jdbc:sqlite:{root / 'catalog.db'}",
            "warehouse": f"file:{root / 'warehouse'}",
        },
    )
    snapshots = write_history(spark, config)
    server = Serve(conf).start()
    # everything Spark knows of the service (docs/how-to/serve.md)
    served = {"": "org.apache.iceberg.spark.SparkCatalog", "type": "rest", "uri": server.url, "token": TOKEN}
    configure(spark, SERVED, {**served, "scan-planning-mode": "server"})
    yield Lake(config, catalog, server, snapshots)
    server.stop()


def rows(df: Any) -> Counter:
    return Counter(tuple(row) for row in df.collect())


@dataclass(frozen=True)
class Scanned:
    """What the Iceberg scan in a DataFrame's physical plan reads: its data files (what its tasks open) and the
    filter it pushed into Iceberg's planning (the `filter` of its plan request), as Iceberg's JSON."""

    files: set[str]
    filter: Any


def _call_hidden(spark: Any, target: Any, name: str) -> Any:
    """`target.name()` for a method of a package-private Iceberg class (py4j calls only public classes' methods)."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    cls = target.getClass()
    while cls is not None:
        if any(m.getName() == name and m.getParameterCount() == 0 for m in cls.getDeclaredMethods()):
            method = cls.getDeclaredMethod(name, gateway.new_array(jvm.java.lang.Class, 0))
            method.setAccessible(True)
            return method.invoke(target, gateway.new_array(jvm.java.lang.Object, 0))
        cls = cls.getSuperclass()
    raise AssertionError(f"{target.getClass().getName()} has no method {name}")


def scanned(df: Any) -> Scanned | None:
    """The DataFrame's one Iceberg scan (its `collect()` reuses the plan: one plan request); None when Spark's
    optimizer left no scan (it proved the filter FALSE)."""
    spark = df.sparkSession
    expressions = spark._jvm.org.apache.iceberg.expressions
    found = []
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() == "LocalTableScanExec":
            continue
        assert leaf.getClass().getSimpleName() == "BatchScanExec", leaf.toString()
        files = set()
        partitions = leaf.inputPartitions().iterator()
        while partitions.hasNext():
            tasks = _call_hidden(spark, partitions.next(), "taskGroup").tasks().iterator()
            while tasks.hasNext():
                files.add(tasks.next().file().location())
        pushed = _call_hidden(spark, leaf.scan(), "filter")  # SparkScan.filter(): the filters, AND-ed
        found.append(Scanned(files, json.loads(expressions.ExpressionParser.toJson(pushed))))
    assert len(found) <= 1, "one Iceberg scan"
    return found[0] if found else None


def index_kept(lake: Lake, table: str, pushed: Any) -> Any:
    """The index's lookup of the filter Spark pushed, converted as the service converts a plan's filter."""
    handle = IndexHandle.for_iceberg(lake.catalog.load_table(table))
    schema = handle.current().source.schema
    expression = RequestFilter.parse(pushed).pruning(schema, schema, case_sensitive=False).expression
    return handle.lookup(expression, case_sensitive=False)


def plans(server: Serve) -> dict[str, int]:
    request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("skipindex_plans_total{"):
            route = line.split('"')[1]
            found[route] = int(line.rsplit(" ", 1)[1])
    return found


@settings(max_examples=SPARK_SQL_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(["db.t", "db.v3"]), drawn=predicate())
def test_spark_sql_through_the_service_reads_the_rows_and_files_the_index_keeps(lake, connectors, table, drawn):
    spark, (where, _) = connectors, drawn
    before = plans(lake.server).get("index", 0)
    served = spark.sql(f"SELECT * FROM {SERVED}.{table} WHERE {where}")
    seen = scanned(served)
    got = rows(served)
    own = spark.sql(f"SELECT *, _file FROM {WRITER}.{table} WHERE {where}").collect()
    assert got == Counter(tuple(row)[:-1] for row in own), (
        f"Spark SQL planned by the service returns the rows of Spark's own planning: {where}"
    )
    if seen is None:  # Spark proved the filter FALSE and planned no scan
        return
    assert plans(lake.server).get("index", 0) > before, "the current snapshot is planned by the index"
    kept = index_kept(lake, table, seen.filter)
    assert seen.files == set(kept.files), f"Spark's scan opens exactly the files the index kept for {seen.filter}"
    assert {row[-1] for row in own} <= seen.files, f"every file holding a row matching {where} is read"


@pytest.mark.parametrize(
    "snapshot, where",
    [
        ("deleted", "s IS NULL OR k = 3"),
        ("partitioned", "g = 1 AND id > 300 OR id IN (5, 150, 333)"),
    ],
)
def test_version_as_of_reads_that_snapshot(lake, connectors, snapshot, where):
    spark = connectors
    query = f"SELECT * FROM {{}}.db.t VERSION AS OF {lake.snapshots[snapshot]} WHERE {where}"
    before = plans(lake.server).get("upstream", 0)
    assert rows(spark.sql(query.format(SERVED))) == rows(spark.sql(query.format(WRITER))), (
        f"VERSION AS OF {snapshot}: the rows of that snapshot, in its own schema ({where})"
    )
    assert plans(lake.server).get("upstream", 0) > before, "an older snapshot is planned by pyiceberg's planning"


def test_the_index_prunes_what_spark_planning_cannot(lake, connectors):
    """Equality on a column whose value lies inside other files' ranges (the UPDATE's files hold every 7th id of the
    table): Spark's own planning reads every file whose range holds it; the index's Bloom filters drop the indexed
    files that do not hold it. The files committed after its build (unindexed) are judged by their manifest entries,
    as Spark's own planning judges them, so the service reads no file that planning rightly skips."""
    spark, where = connectors, "id = 55"
    own = scanned(spark.sql(f"SELECT * FROM {WRITER}.db.t WHERE {where}"))
    served = scanned(spark.sql(f"SELECT * FROM {SERVED}.db.t WHERE {where}"))
    assert own is not None and served is not None
    kept = IndexHandle.for_iceberg(lake.catalog.load_table("db.t")).lookup(where)
    assert own.files - served.files, f"the index drops files Spark's own planning reads for {where}"
    assert FORMAT_STAGE in [stage.name for stage in kept.stages], "the table has files committed after the build"
    holding = {row[0] for row in spark.sql(f"SELECT _file FROM {WRITER}.db.t WHERE {where}").collect()}
    assert served.files - own.files <= holding, "no file Spark's own planning rightly skips is read"


# (WHERE, the rule). Truth: the same rows with -0.0 made 0.0 (`f + 0`), read without pushdown.
NEGATIVE_ZERO = [
    ("f = 0", "a file whose only zero is -0.0 holds rows equal to 0"),
    ("f = -0.0", "and to -0.0 (the same value)"),
    ("f IN (0.0, 3.0)", "an IN holding 0 keeps it too"),
    ("f >= 0", "-0.0 is not below 0"),
    ("f <= 0", "nor above it"),
    ("f < 0", "and not below it either"),
    ("f > -0.0", "nor above -0.0"),
]


@pytest.fixture(scope="module")
def zero_table(lake, connectors) -> str:
    """db.zero, written by Spark: one file whose every f is -0.0 (Iceberg's bounds -0.0..-0.0), one of 1.5s."""
    spark = connectors
    spark.sql(f"CREATE TABLE {WRITER}.db.zero (id BIGINT, f DOUBLE) USING iceberg")
    for start, value in ((0, "CAST('-0.0' AS DOUBLE)"), (50, "1.5D")):
        spark.sql(f"SELECT id, {value} AS f FROM range({start}, {start + 50})").coalesce(1).writeTo(
            f"{WRITER}.db.zero"
        ).append()
    build_index(lake.config, "db.zero")
    return "db.zero"


@pytest.mark.parametrize(("where", "rule"), NEGATIVE_ZERO, ids=[where for where, _ in NEGATIVE_ZERO])
def test_spark_sql_through_the_service_keeps_negative_zero_rows(lake, connectors, zero_table, where, rule):
    """Spark's own Iceberg planning (1.12) compares manifest bounds in Iceberg's order, where -0.0 < 0.0: it skips
    the -0.0 file for `f = 0` and `f >= 0` (docs/spark-sql.md, "What the tests check"). The index's
    bounds are compared as SQL compares values, so the service keeps it; Iceberg's reader then reads its rows."""
    spark = connectors
    truth = rows(spark.sql(f"SELECT * FROM (SELECT id, f + 0 AS f FROM {WRITER}.{zero_table}) WHERE {where}"))
    served = rows(spark.sql(f"SELECT id, f + 0 AS f FROM {SERVED}.{zero_table} WHERE {where}"))
    assert served == truth, f"{where}: {rule}"
    handle = IndexHandle.for_iceberg(lake.catalog.load_table(zero_table))
    for scan, read in every_scan(spark, handle, where).items():
        got = Counter((r["id"], r["f"] + 0) for r in read().to_pylist())
        assert got == truth, f"{scan}: {where}: {rule}"


# (WHERE, the rule). In Spark SQL NaN is larger than every number and equal to itself.
NAN = [
    ("f > 100.0", "NaN is above every number"),
    ("f >= 100.0", "and not below one"),
    ("NOT (f <= 100.0)", "a negated bound too"),
    ("f < 100.0", "NaN is below none"),
    ("f = 'NaN'", "NaN equals NaN"),
    ("f IS NULL", "NULL is not NaN"),
]


@pytest.fixture(scope="module")
def nan_table(lake, tmp_path_factory) -> str:
    """db.nan: files written by pyarrow (whose Parquet statistics leave NaN out, where Spark's writer writes none
    for a column holding NaN) and added with `add_files`: NaN beside small numbers, NaN and NULL only, and large
    numbers."""
    directory = tmp_path_factory.mktemp("nan-files")
    table = lake.catalog.create_table("db.nan", schema=pa.schema([("id", pa.int64()), ("f", pa.float64())]))
    paths = []
    for n, values in enumerate(
        (
            [math.nan if i % 3 == 0 else float(i) for i in range(30)],
            [math.nan if i % 2 == 0 else None for i in range(30)],
            [i * 100.0 for i in range(30)],
        )
    ):
        path = directory / f"nan-{n}.parquet"
        pq.write_table(pa.table({"id": range(n * 30, n * 30 + 30), "f": pa.array(values, pa.float64())}), path)
        paths.append(str(path))
    table.add_files(paths)
    build_index(lake.config, "db.nan")
    return "db.nan"


@pytest.mark.parametrize(("where", "rule"), NAN, ids=[where for where, _ in NAN])
def test_spark_sql_through_the_service_keeps_nan_rows(lake, connectors, nan_table, where, rule):
    """Iceberg's readers in Spark drop row groups by Parquet statistics that leave NaN out, and Spark's own Iceberg
    planning drops files by bounds that do too; through the service, a NaN-prone file's residual says NaN may
    match, so Spark reads its rows and applies its own WHERE."""
    spark = connectors
    # truth: the WHERE over a computed column (f + 0 is f, NaN and NULL too), which no reader is given
    # (NaN as text: two NaN floats are not equal, so rows holding them would never compare equal)
    shown = "id, CAST(f + 0 AS STRING) AS f"
    truth = rows(spark.sql(f"SELECT {shown} FROM (SELECT id, f + 0 AS f FROM {WRITER}.{nan_table}) WHERE {where}"))
    served = rows(spark.sql(f"SELECT {shown} FROM {SERVED}.{nan_table} WHERE {where}"))
    assert served == truth, f"{where}: {rule}"


def test_deletion_vectors_reach_spark(lake, connectors):
    spark = connectors
    deleted = rows(spark.sql(f"SELECT id FROM {SERVED}.db.v3 WHERE id % 10 IN (3, 5)"))
    assert deleted == Counter(), "rows deleted by deletion vectors stay deleted through the service"
    updated = rows(spark.sql(f"SELECT name FROM {SERVED}.db.v3 WHERE id % 10 = 4"))
    assert updated == Counter({("zz",): 30}), "UPDATE's new rows, and not the old ones"


def staged_files(df: Any) -> set[str]:
    """The data files the one Iceberg scan in the DataFrame's physical plan opens, asserted to be Iceberg's staged
    scan (a set of tasks handed to it, not planned by it)."""
    found: set[str] = set()
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() == "LocalTableScanExec":  # Spark proved the filter FALSE: no scan
            continue
        assert "IcebergStagedScan" in leaf.toString(), leaf.toString()
        partitions = leaf.inputPartitions().iterator()
        while partitions.hasNext():
            tasks = _call_hidden(df.sparkSession, partitions.next(), "taskGroup").tasks().iterator()
            while tasks.hasNext():
                found.add(tasks.next().file().location())
    return found


@settings(max_examples=SPARK_SQL_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(["db.t", "db.v3"]), drawn=predicate())
def test_the_spark_scan_reads_the_kept_files_through_icebergs_own_reader(lake, connectors, table, drawn):
    """`Scan.to_spark` with Iceberg's runtime in the session: Iceberg's own reader, handed exactly the files
    the index kept (their position deletes and deletion vectors applied by Iceberg), returns Spark's own rows."""
    spark, (where, _) = connectors, drawn
    handle = IndexHandle.for_iceberg(lake.catalog.load_table(table))
    result = handle.lookup(where)
    assert reader_of(spark, result).how == CONNECTOR, "the runtime is in the session and no file is kept in part"
    frame = from_lookup(spark, result)
    got = rows(frame)
    own = spark.sql(f"SELECT * FROM {WRITER}.{table} WHERE {where}")
    assert got == rows(own), f"Iceberg's reader over the kept files returns Spark's own rows: {where}"
    if result.kept_files:  # none: an empty DataFrame, no scan
        assert staged_files(frame) <= set(result.files), f"the staged scan opens only the kept files: {where}"


@pytest.mark.parametrize("table, where", [("db.t", "id = 55"), ("db.v3", "id = 7 OR id = 13"), ("db.t", "name = 'ab'")])
def test_the_spark_scan_opens_only_the_kept_files(lake, connectors, table, where):
    """Shown from Spark's physical plan: the files Iceberg's staged scan opens are the files the index kept, fewer
    than the live files, and the rows are Spark's own."""
    spark = connectors
    result = IndexHandle.for_iceberg(lake.catalog.load_table(table)).lookup(where)
    frame = from_lookup(spark, result, reader=CONNECTOR)
    assert staged_files(frame) == set(result.files), f"{table}: Spark opens exactly the kept files for {where}"
    assert len(result.files) < result.files_total, f"{table}: the index pruned files for {where}"
    assert rows(frame) == rows(spark.sql(f"SELECT * FROM {WRITER}.{table} WHERE {where}")), f"{table}: {where}"


def every_scan(spark: Any, handle: IndexHandle, where: str) -> dict[str, Any]:
    """Each of the project's scans of `where`, as a callable giving an Arrow table."""
    return {
        "pyiceberg": lambda: handle.scan(where).to_arrow(),
        "duckdb": lambda: handle.scan(where).to_duckdb().to_arrow_table(),
        "polars": lambda: handle.scan(where).to_polars().collect().to_arrow(),
        "spark": lambda: handle.scan(where).to_spark(spark, FILES).toArrow(),
        "spark connector": lambda: handle.scan(where).to_spark(spark, CONNECTOR).toArrow(),
    }


def test_the_mixed_table_has_position_delete_files_and_deletion_vectors(lake, connectors):
    formats = {r[0] for r in connectors.sql(f"SELECT file_format FROM {WRITER}.db.mixed.delete_files").collect()}
    assert formats == {"PARQUET", "PUFFIN"}, "position delete files (version 2) beside deletion vectors (version 3)"


@settings(max_examples=SPARK_SQL_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(["db.t", "db.v3", "db.mixed"]), drawn=predicate())
def test_every_scan_returns_the_rows_spark_itself_reads(lake, connectors, table, drawn):
    """Tables Spark wrote (merge-on-read position deletes, deletion vectors, both on one table; renamed and promoted
    columns, partition evolution): every scan through the index returns Spark's own read of the same snapshot."""
    spark, (where, _) = connectors, drawn
    own = rows(spark.sql(f"SELECT * FROM {WRITER}.{table} WHERE {where}"))
    handle = IndexHandle.for_iceberg(lake.catalog.load_table(table))
    for scan, read in every_scan(spark, handle, where).items():
        try:
            got = Counter(tuple(r.values()) for r in read().to_pylist())
        except UnsupportedFeature as exc:  # pyiceberg refuses a WHERE it has no exact row filter for, in one line
            assert scan == "pyiceberg" and "\n" not in str(exc), f"{scan} refuses {where}: {exc}"
            continue
        assert got == own, f"{table}: {scan} returns Spark's own rows for {where}"
