"""Every route Spark SQL takes through `skipindex serve` returns Spark SQL's rows: the current snapshot (planned by the
index) and every older snapshot (`VERSION AS OF`, `TIMESTAMP AS OF`: the request names a snapshot and its schema),
on a table Spark wrote through a history of renames, a drop and re-add of a name, a type promotion, partition
evolution, deletes and commits after the index's build, over columns holding NaN, -0.0 and NULL.

Truth is Spark SQL's WHERE over the snapshot's rows read whole: the rows collected without a filter and filtered by
Spark over an in-memory DataFrame, where no reader, statistic or planning is consulted (never Spark's own Iceberg
planning, which loses NaN rows). `make test-long` draws 30 predicates per test, `make test` 2 beside the explicit
examples; `SKIPINDEX_ROUTES_EXAMPLES=N` sets the number (docs/explanation/testing.md).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import sweep
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_serve import TOKEN, Serve, call, served_catalog
from test_spark_sql import configure, plans, scanned

from indexlib.indexing.build import build_index

pytestmark = pytest.mark.servers

TABLE = "db.routes"
# Spark keeps a catalog it made for the session: names of their own, not test_spark_sql.py's; the writer's name is the
# SQLite catalog's (its rows' catalog_name)
WRITER, SERVED = "routes", "routes_served"
EXAMPLES = sweep("SKIPINDEX_ROUTES_EXAMPLES", 2, 30)  # drawn predicates (short in make test, long in test-long)
FLOATS = ["CAST('NaN' AS DOUBLE)", "CAST('-0.0' AS DOUBLE)", "NULL", "0.0D", "1.5D", "690.0D", "2000.0D", "-3.0D"]


def batch(start: int, rows: int, miles: str = "d", tag: str = "s") -> str:
    """Rows of the history's columns: f and the distance column hold NaN, -0.0, 0.0 and NULL among numbers."""
    floats = ", ".join(FLOATS)
    return (
        f"SELECT id, CAST(id % 3 AS INT) AS p, CAST(CASE WHEN id % 7 = 0 THEN NULL ELSE id % 11 END AS INT) AS k, "
        f"element_at(array({floats}), CAST(id % {len(FLOATS)} + 1 AS INT)) AS f, "
        f"element_at(array({floats}), CAST((id DIV 3) % {len(FLOATS)} + 1 AS INT)) * 10 AS {miles}, "
        f"CASE WHEN id % 5 = 0 THEN NULL ELSE concat('t', CAST(id % 4 AS STRING)) END AS {tag} "
        f"FROM range({start}, {start + rows})"
    )


@dataclass(frozen=True)
class Snapshot:
    id: int
    committed_at: str
    miles: str  # the distance column's name in this snapshot's schema
    tag: bool  # whether `s` is a column of this snapshot's schema
    long_k: bool  # k promoted to BIGINT


@dataclass
class History:
    snapshots: list[Snapshot]
    server: Serve
    catalog: Any


def write_history(spark: Any, config: Any) -> list[Snapshot]:
    """db.routes (format version 2, merge-on-read), partitioned from its start, written by Spark."""
    found: list[Snapshot] = []
    name = f"{WRITER}.{TABLE}"

    def snapshot(miles: str, tag: bool, long_k: bool) -> None:
        row = spark.sql(
            f"SELECT snapshot_id, CAST(committed_at AS STRING) FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1"
        ).first()
        found.append(Snapshot(row[0], row[1], miles, tag, long_k))

    def insert(query: str, files: int = 2) -> None:
        spark.sql(query).repartitionByRange(files, "id").writeTo(name).append()

    spark.sql(
        f"CREATE TABLE {name} (id BIGINT, p INT, k INT, f DOUBLE, d DOUBLE, s STRING) USING iceberg "
        "PARTITIONED BY (p) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read')"
    )
    insert(batch(0, 120))
    snapshot("d", True, False)
    insert(batch(120, 80))
    snapshot("d", True, False)
    build_index(config, TABLE)
    spark.sql(f"DELETE FROM {name} WHERE id % 13 = 0")  # position delete files
    snapshot("d", True, False)
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN d TO miles")
    spark.sql(f"ALTER TABLE {name} ALTER COLUMN k TYPE BIGINT")
    insert(batch(200, 60, "miles"))
    snapshot("miles", True, True)
    spark.sql(f"ALTER TABLE {name} DROP COLUMN s")
    spark.sql(f"ALTER TABLE {name} ADD COLUMN s STRING")  # the same name, a new field
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD bucket(2, id)")
    insert(batch(260, 60, "miles"))
    snapshot("miles", True, True)
    build_index(config, TABLE)
    insert(batch(320, 40, "miles"), files=1)  # after the last build: unindexed
    spark.sql(f"UPDATE {name} SET f = CAST('NaN' AS DOUBLE) WHERE id % 17 = 0")
    snapshot("miles", True, True)
    nan_only = f"SELECT id, p, k, CAST('NaN' AS DOUBLE) AS f, miles, s FROM ({batch(360, 6, 'miles')})"
    insert(nan_only, files=1)  # an append of files whose f is NaN alone: no bounds at all
    snapshot("miles", True, True)
    spark.sql(f"DELETE FROM {name} WHERE id = 361")
    snapshot("miles", True, True)
    return found


@pytest.fixture(scope="module")
def history(connectors, tmp_path_factory) -> Any:
    spark = connectors
    root = tmp_path_factory.mktemp("routes")
    conf, config, catalog = served_catalog(root, "[serve]\ntasks_per_batch = 3\n", name=WRITER)
    writer = {
        "": "org.apache.iceberg.spark.SparkCatalog",
        "type": "jdbc",
        "uri": f"jdbc:sqlite:{root / 'catalog.db'}",
        "warehouse": f"file:{root / 'warehouse'}",
    }
    configure(spark, WRITER, writer)
    snapshots = write_history(spark, config)
    server = Serve(conf).start()
    served = {"": "org.apache.iceberg.spark.SparkCatalog", "type": "rest", "uri": server.url, "token": TOKEN}
    configure(spark, SERVED, {**served, "scan-planning-mode": "server"})
    yield History(snapshots, server, catalog)
    server.stop()


def normal(value: Any) -> Any:
    """A value as rows are compared: NaN as text (NaN is not equal to itself), -0.0 as 0.0 (equal in SQL)."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value + 0.0
    return value


def counted(rows: list[Any]) -> Counter:
    return Counter(tuple(normal(v) for v in row) for row in rows)


def truth(spark: Any, whole: Any, where: str) -> Counter:
    """`where` over rows read whole: Spark filters an in-memory DataFrame of them (no reader, no statistics)."""
    spark.createDataFrame(whole.collect(), whole.schema).createOrReplaceTempView("whole_rows")
    return counted(spark.sql(f"SELECT * FROM whole_rows WHERE {where}").collect())


# Predicates over the columns as a snapshot names them: {m} the distance column, NaN/-0.0/NULL around the literals
LEAVES = [
    "f > 100", "f >= 690", "f < 1", "f <= 0", "f = 0", "f = -0.0", "f IN (0.0, 1.5)", "f != 0",
    "f BETWEEN 680 AND 700", "f BETWEEN -1 AND 1", "NOT (f <= 100)", "f IS NULL", "f = 'NaN'", "isnan(f)",
    "{m} > 100", "{m} BETWEEN 6800 AND 7000", "{m} = 0", "{m} < 0", "{m} IS NOT NULL",
    "k = 3", "k > 8", "k IN (1, 2)", "id < 40", "id IN (5, 130, 250, 330)", "p = 1", "s = 't1'", "s IS NULL",
]  # fmt: skip
leaf = st.sampled_from(LEAVES)
predicates = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.tuples(children, st.sampled_from(["AND", "OR"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        children.map(lambda c: f"NOT ({c})"),
    ),
    max_leaves=4,
)


def check(spark: Any, served: Any, whole: Any, where: str, route: str) -> None:
    got = counted(served.where(where).collect())
    assert got == truth(spark, whole, where), f"{route}: Spark SQL through the service returns the rows of {where}"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(where="f BETWEEN 680 AND 700")
@example(where="({m} = 0 AND NOT (f <= 100))")
@example(where="({m} > 100 OR f >= 690)")
@given(where=predicates)
def test_every_snapshot_returns_spark_sqls_rows(history, connectors, where):
    """VERSION AS OF and TIMESTAMP AS OF each snapshot, renamed columns named as that snapshot names them: the
    service plans them (pyiceberg's planning with NaN kept, residuals every client can bind) and Spark reads
    exactly the rows of the WHERE."""
    spark = connectors
    for n, snap in enumerate(history.snapshots):
        clause = where.format(m=snap.miles)
        for travel in (f"VERSION AS OF {snap.id}", f"TIMESTAMP AS OF '{snap.committed_at}'"):
            if travel.startswith("TIMESTAMP") and n not in (0, len(history.snapshots) - 2):
                continue  # the timestamp route is the snapshot route by another name: two snapshots suffice
            served = spark.sql(f"SELECT * FROM {SERVED}.{TABLE} {travel}")
            whole = spark.sql(f"SELECT * FROM {WRITER}.{TABLE} {travel}")
            check(spark, served, whole, clause, f"{travel} (snapshot {n})")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(where="f BETWEEN 680 AND 700")
@example(where="(miles > 100 AND f = 0)")
@given(where=predicates)
def test_the_current_snapshot_returns_spark_sqls_rows(history, connectors, where):
    """The current snapshot, planned by the index (files committed after its build judged unindexed). Spark's
    incremental reads (`start-snapshot-id`) are not among the routes: Iceberg's REST client plans only `newScan` /
    `newBatchScan` through the service and an incremental append scan on its own (docs/spark-sql.md)."""
    spark, clause = connectors, where.format(m="miles")
    before = plans(history.server).get("index", 0)
    check(spark, spark.table(f"{SERVED}.{TABLE}"), spark.table(f"{WRITER}.{TABLE}"), clause, "current")
    if scanned(spark.table(f"{SERVED}.{TABLE}").where(clause)) is not None:  # (None: Spark proved it FALSE)
        assert plans(history.server).get("index", 0) > before, "the current snapshot is planned by the index"


def test_a_time_travel_across_a_rename_binds_in_the_client(history, connectors):
    """The regression: a snapshot before the rename, filtered on the renamed column, crashed in Spark's executors
    ("Cannot find field 'd'"): the residual named a column the client binds in the current schema."""
    spark = connectors
    before = history.snapshots[1]
    query = f"SELECT * FROM {{}}.{TABLE} VERSION AS OF {before.id} WHERE d = 15.0 OR d > 10000"
    got = counted(spark.sql(query.format(SERVED)).collect())
    whole = spark.sql(f"SELECT * FROM {WRITER}.{TABLE} VERSION AS OF {before.id}")
    assert got == truth(spark, whole, "d = 15.0 OR d > 10000"), "the rows of the snapshot before the rename"


def _planned(history: History, body: dict[str, Any]) -> dict[str, Any]:
    """The tasks of a plan (every batch), by data file path: the residual JSON each carries."""
    status, payload = call(history.server, "POST", f"/v1/namespaces/db/tables/{TABLE.split('.')[1]}/plan", body)
    assert status == 200, payload
    batches, tasks = [payload], {}
    for token in payload.get("plan-tasks", []):
        status, more = call(history.server, "POST", "/v1/namespaces/db/tables/routes/tasks", {"plan-task": token})
        assert status == 200, more
        batches.append(more)
    for batch_ in batches:
        for task in batch_.get("file-scan-tasks", []):
            tasks[task["data-file"]["file-path"]] = task.get("residual-filter", True)
    return tasks


@pytest.mark.parametrize("route", ["snapshot-id", "incremental", "stats-fields"])
def test_every_upstream_route_keeps_the_files_nan_matches_and_widens_their_residuals(history, route):
    """`f > 100` matches NaN in Spark SQL: pyiceberg's own planning drops a file whose bounds (NaN left out) lie at or
    below 100, so the service plans it with `f > 100 OR is_nan(f)`, and a NaN-prone file's residual says so too
    (the reader's row-group filter keeps NaN's row groups). Every file holding a match is planned."""
    table = history.catalog.load_table(TABLE)
    first, older = history.snapshots[0].id, history.snapshots[-2].id
    body: dict[str, Any] = {"filter": {"type": "gt", "term": "f", "value": 100.0}}
    if route == "snapshot-id":
        body |= {"snapshot-id": older, "use-snapshot-schema": True}
        files = [t.file for t in table.scan(snapshot_id=older).plan_files()]
    elif route == "incremental":
        body |= {"start-snapshot-id": first, "end-snapshot-id": older}
        scan = table.incremental_append_scan(from_snapshot_id_exclusive=first, to_snapshot_id_inclusive=older)
        files = [t.file for t in scan.plan_files()]
    else:
        body |= {"stats-fields": ["f"]}
        files = [t.file for t in table.scan().plan_files()]
    tasks = _planned(history, body)
    holding = set()
    for data in files:
        values = pq.read_table(data.file_path.removeprefix("file:"), columns=["f"]).column("f")
        nan = pc.any(pc.is_nan(values)).as_py()
        if nan or pc.any(pc.greater(values, 100.0)).as_py():
            holding.add(data.file_path)
        if nan and data.file_path in tasks:
            assert "is-nan" in json.dumps(tasks[data.file_path]), f"{route}: a NaN file's residual keeps NaN"
    assert any(pc.any(pc.is_nan(pq.read_table(p.removeprefix("file:")).column("f"))).as_py() for p in holding)
    assert holding <= set(tasks), f"{route}: every file holding a row with f > 100 (NaN included) is planned"


def test_an_older_snapshot_is_pruned_by_the_index_where_its_entries_hold(history):
    """The index's entries are facts about data files, whichever snapshot holds them: an older snapshot's plan keeps
    no more files than pyiceberg's planning of it, and drops those whose Bloom filters rule the key out (the
    UPDATE's files hold every 17th id, so their ranges span the whole table)."""
    table = history.catalog.load_table(TABLE)
    older = history.snapshots[-2].id
    for key in (18, 35, 250):
        body = {"snapshot-id": older, "filter": {"type": "eq", "term": "id", "value": key}}
        planned = set(_planned(history, body))
        own = {t.file.file_path for t in table.scan(row_filter=f"id = {key}", snapshot_id=older).plan_files()}
        holding = {
            t.file.file_path
            for t in table.scan(snapshot_id=older).plan_files()
            if key in pq.read_table(t.file.file_path.removeprefix("file:"), columns=["id"]).column("id").to_pylist()
        }
        assert holding <= planned <= own, f"id = {key}: every file holding it, and no file pyiceberg's planning drops"
        assert len(planned) < len(own), f"id = {key}: the index drops files pyiceberg's planning reads"
