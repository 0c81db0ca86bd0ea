"""Iceberg equality deletes, as Flink upserts and CDC pipelines write them, applied by every scan through the index:
a differential test whose oracle is Spark's own Iceberg read of the same snapshot.

Each case builds db.t with Spark SQL (appends, merge-on-read DELETEs: position delete files) and Iceberg Java's own
equality delete writer committed by a `RowDelta` in Spark's JVM (tests/equality_deletes.py: one JDBC catalog over
the SQLite file pyiceberg's catalog reads), builds the index, and for each of its WHEREs compares, with Spark's read
of the current snapshot through Iceberg's runtime (`oracle`: every delete file applied by Iceberg's own
`DeleteFileIndex` and `DeleteFilter`, rows as ((column, value), ...) multisets):
- the lookup's kept files: every data file holding a live matching row is kept (no false negative);
- the rows of every output of one scan (`handle.scan(where)`): Arrow, Arrow batches, DuckDB, Polars and the count
  for every WHERE; Spark's jar-free reads and Spark's Iceberg reader over the kept files for a case's first WHERE
  (a deleted key) and its last (every row), as each costs a Spark job (Python tasks for the jar-free reads).

The cases are the rules of Iceberg's table spec ("Scan Planning", "Equality Delete Files"): an equality delete applies to a data file
whose data sequence number is strictly lower than its own, in the same partition (spec id and values) or in every
partition when written under an unpartitioned spec; its values match NULL-safely, by field id, whatever the column
is called now. Every mismatch of a case is reported at once (deduplicated), naming the WHEREs and outputs that
show it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from equality_deletes import (
    Oracle,
    append,
    arrow_rows,
    create_table,
    current_snapshot,
    delete,
    oracle,
    oracle_rows,
    shared_catalog,
    write_equality_deletes,
)
from pyiceberg.manifest import DataFileContent

from indexlib.errors import UnsupportedFeature
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index

pytestmark = pytest.mark.spark

COLUMNS = "id BIGINT, g INT, k INT, s STRING"
WORDS = [None, "a", "b", "ab"]


def rows(ids: range | list[int], g: int = 0) -> list[dict[str, Any]]:
    """Rows of db.t: k NULL on multiples of 5 (else id % 3), s NULL on multiples of 4."""
    return [{"id": i, "g": g, "k": None if i % 5 == 0 else i % 3, "s": WORDS[i % 4]} for i in ids]


@pytest.fixture
def table(connectors: Any, config: Any, catalog: Any) -> Iterator[str]:
    """db.t as Spark names it, in the Spark catalog over `catalog`'s SQLite file (`catalog` made namespace db)."""
    with shared_catalog(connectors, config) as name:
        yield f"{name}.db.t"


def sequence_numbers(spark: Any, t: str) -> None:
    create_table(spark, t, COLUMNS)
    append(spark, t, rows(range(0, 20)))
    append(spark, t, rows(range(20, 40)))
    write_equality_deletes(spark, t, [{"id": 3}, {"id": 7}, {"id": 25}], ["id"])
    # re-inserted after the delete of their keys: a higher sequence number, live
    append(spark, t, [{"id": 3, "g": 1, "k": 9, "s": "again"}, {"id": 25, "g": 1, "k": None, "s": "again"}])
    # a Flink upsert: the new version of id 12 committed with the delete of its key (the same sequence number)
    write_equality_deletes(spark, t, [{"id": 12}, {"id": 30}], ["id"], data=[{"id": 12, "g": 1, "k": 9, "s": "new"}])


def partition_scope(spark: Any, t: str) -> None:
    create_table(spark, t, COLUMNS)  # spec 0: unpartitioned
    append(spark, t, rows(range(10, 16)))  # a data file of spec 0 (g = 0 in every row)
    spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD g")  # spec 1: identity(g)
    append(spark, t, rows(range(10, 20), g=0) + rows(range(10, 20), g=1))  # the same ids in both partitions
    spark.sql(f"ALTER TABLE {t} DROP PARTITION FIELD g")
    spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD k")  # spec 2: identity(k); its partition k = 0 is (0,) too
    append(spark, t, rows(range(10, 20), g=2))
    write_equality_deletes(spark, t, [{"id": 12}, {"id": 13}], ["id"], {"g": 0}, spec_id=1)  # spec 1, g = 0 only
    write_equality_deletes(spark, t, [{"id": 15}, {"id": 17}], ["id"], spec_id=0)  # spec 0: every partition


def null_safe(spark: Any, t: str) -> None:
    create_table(spark, t, COLUMNS)
    append(spark, t, rows(range(0, 20)))
    append(spark, t, rows(range(20, 40)))
    write_equality_deletes(spark, t, [{"k": None, "s": "a"}, {"k": 2, "s": None}], ["k", "s"])
    append(spark, t, rows(range(40, 50)))
    write_equality_deletes(spark, t, [{"k": None}], ["k"])
    append(spark, t, rows(range(50, 60)))  # after both deletes: its NULLs live


def several_field_sets(spark: Any, t: str) -> None:
    create_table(spark, t, COLUMNS)
    append(spark, t, rows(range(0, 20)))
    append(spark, t, rows(range(20, 40)))
    write_equality_deletes(spark, t, [{"id": 1}, {"id": 2}, {"id": 33}], ["id"])
    append(spark, t, rows([2, *range(40, 50)], g=1))  # id 2 again: live, unless (k, s) below matches it
    write_equality_deletes(spark, t, [{"k": 1, "s": "b"}, {"k": None, "s": "ab"}], ["k", "s"])
    write_equality_deletes(spark, t, [{"id": 45}, {"id": 46}], ["id"])


def position_and_equality(spark: Any, t: str) -> None:
    create_table(spark, t, COLUMNS)
    append(spark, t, rows(range(0, 30)))  # one data file
    delete(spark, t, "id IN (4, 5, 6)")  # a position delete file for it
    write_equality_deletes(spark, t, [{"id": 6}, {"id": 7}, {"id": 8}], ["id"])
    delete(spark, t, "id = 9 OR s = 'ab'")  # planned with the equality deletes: positions of the rest
    append(spark, t, rows(range(30, 40)))


def schema_evolution(spark: Any, t: str) -> None:
    create_table(spark, t, COLUMNS)
    append(spark, t, rows(range(0, 30)))
    write_equality_deletes(spark, t, [{"k": 1, "s": "a"}, {"k": None, "s": "b"}], ["k", "s"])
    write_equality_deletes(spark, t, [{"id": 2}, {"id": 3}], ["id"])
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN k TO kk")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN s TO name")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN kk TYPE BIGINT")
    renamed = [{"id": r["id"], "g": r["g"], "kk": r["k"], "name": r["s"]} for r in rows(range(30, 40))]
    append(spark, t, renamed)  # after the deletes: live


@dataclass(frozen=True)
class Case:
    rule: str
    build: Callable[[Any, str], None]
    # in both Spark SQL and the index's (ANSI) dialect; the first names a deleted key, the last matches every row
    wheres: tuple[str, ...]


CASES = {
    "sequence numbers": Case(
        "an equality delete applies only to data files with a strictly lower data sequence number: rows inserted "
        "after it, or committed with it (a Flink upsert), are live",
        sequence_numbers,
        ("id = 3", "id = 12", "id BETWEEN 5 AND 30", "k IS NULL", "id >= 0"),
    ),
    "partition scope": Case(
        "an equality delete written in a partition applies only to data files of that spec and partition (not to "
        "another spec's partition with the same values); one written under an unpartitioned spec, everywhere",
        partition_scope,
        ("id = 12", "id = 15", "g = 0 AND id BETWEEN 11 AND 16", "k IS NULL", "id >= 0"),
    ),
    "NULL-safe": Case(
        "equality deletes match NULL-safely: a NULL in an equality column deletes the rows where that column IS NULL",
        null_safe,
        ("k IS NULL", "id = 25", "id BETWEEN 20 AND 45", "s IS NULL", "id >= 0"),
    ),
    "several field sets": Case(
        "equality delete files with different equality field ids ((id) and (k, s)) each apply by their own columns",
        several_field_sets,
        ("id = 2", "k = 1", "id BETWEEN 10 AND 45", "k IS NULL", "id >= 0"),
    ),
    "position and equality": Case(
        "position deletes and equality deletes of one data file both apply",
        position_and_equality,
        ("id = 6", "id = 9", "id BETWEEN 3 AND 12", "k IS NULL", "id >= 0"),
    ),
    "schema evolution": Case(
        "equality deletes match by field id: they apply after their columns are renamed (and promoted int -> long)",
        schema_evolution,
        ("kk = 1", "id = 3", "id BETWEEN 2 AND 12", "kk IS NULL", "name = 'a'", "id >= 0"),
    ),
}


def outputs(spark: Any, found: Any, with_spark: bool) -> dict[str, Callable[[], pa.Table]]:
    """The outputs of one scan, as Arrow tables (`with_spark`: Spark's two readers too)."""
    read = {
        "to_arrow()": found.to_arrow,
        "to_arrow_batch_reader()": lambda: found.to_arrow_batch_reader().read_all(),
        "to_duckdb()": lambda: found.to_duckdb().to_arrow_table(),
        "to_polars()": lambda: found.to_polars().collect().to_arrow(),
    }
    if with_spark:
        read["to_spark(reader='files')"] = lambda: found.to_spark(spark, reader="files").toArrow()
        read["to_spark(reader='connector')"] = lambda: found.to_spark(spark, reader="connector").toArrow()
    return read


def _differ(got: Counter, truth: Counter) -> str:
    missing, extra = list((truth - got).elements()), list((got - truth).elements())
    return (
        f"{sum(got.values())} rows, Spark {sum(truth.values())}; "
        f"missing {len(missing)} e.g. {missing[:2]}; extra {len(extra)} e.g. {extra[:2]}"
    )


def mismatches(spark: Any, handle: IndexHandle, where: str, truth: Oracle, with_spark: bool) -> list[tuple[str, str]]:
    """(what, how it differs from Spark's read) for the lookup and each output of a scan of `where` (`outputs`). A
    refusal (`UnsupportedFeature`) is a mismatch; any other error propagates."""
    found: list[tuple[str, str]] = []
    try:
        kept = {k.file.path for k in handle.lookup(where).kept_files}
        if not truth.files <= kept:
            found.append(("lookup kept_files", f"drops files with live matching rows: {sorted(truth.files - kept)}"))
    except UnsupportedFeature as exc:
        found.append(("lookup kept_files", f"UnsupportedFeature: {exc}"))
    scan = handle.scan(where)
    for name, read in outputs(spark, scan, with_spark).items():
        try:
            got = arrow_rows(read())
        except UnsupportedFeature as exc:
            found.append((name, f"UnsupportedFeature: {exc}"))
            continue
        if got != truth.rows:
            found.append((name, _differ(got, truth.rows)))
    try:
        count = scan.count()
        if count != sum(truth.rows.values()):
            found.append(("count()", f"{count}, Spark {sum(truth.rows.values())}"))
    except UnsupportedFeature as exc:
        found.append(("count()", f"UnsupportedFeature: {exc}"))
    return found


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_every_scan_applies_equality_deletes_as_spark_does(
    connectors: Any, config: Any, catalog: Any, table: str, case: Case
) -> None:
    spark = connectors
    case.build(spark, table)
    build_index(config, "db.t")
    source = catalog.load_table("db.t")
    assert source.current_snapshot().snapshot_id == current_snapshot(spark, table), "pyiceberg sees the last commit"
    handle = IndexHandle.for_iceberg(source)
    seen: dict[str, list[str]] = {}  # how a read differs -> the (WHERE, output) pairs it shows in
    for n, where in enumerate(case.wheres):
        # Spark's readers on the first WHERE (a deleted key) and the last (every row): ~1.5 s a read, Python tasks
        with_spark = n in (0, len(case.wheres) - 1)
        for what, how in mismatches(spark, handle, where, oracle(spark, table, where), with_spark):
            seen.setdefault(how, []).append(f"{where!r} {what}")
    assert not seen, f"{case.rule}:\n" + "\n".join(f"- {how}\n  in: {', '.join(where)}" for how, where in seen.items())


def test_the_oracle_applies_the_deletes_the_helpers_commit(connectors: Any, catalog: Any, table: str) -> None:
    """Spark's read drops exactly the rows the committed equality deletes match (an int too large for a Java int;
    NULL-safe on (k, s); a Flink-style upsert's own row kept) and the rows of Spark's own position delete, and
    pyiceberg's catalog sees every commit made in the JVM, with the equality field ids written."""
    spark = connectors
    create_table(spark, table, COLUMNS)
    before = append(spark, table, rows(range(0, 20)) + [{"id": 2**40, "g": 0, "k": 1, "s": "big"}])
    write_equality_deletes(spark, table, [{"id": 3}, {"id": 2**40}], ["id"])
    upserted = {"id": 100, "g": 1, "k": None, "s": "a"}
    write_equality_deletes(spark, table, [{"k": None, "s": "a"}], ["k", "s"], data=[upserted])
    last = delete(spark, table, "id = 7")
    everything = oracle_rows(spark, table, "TRUE", before)
    assert sum(everything.values()) == 21, "the snapshot before the deletes reads every row"

    def deleted(row: tuple[tuple[str, Any], ...]) -> bool:
        values = dict(row)
        return values["id"] in (3, 7, 2**40) or (values["k"] is None and values["s"] == "a")

    expected = Counter({row: n for row, n in everything.items() if not deleted(row)})
    expected[tuple(upserted.items())] += 1
    assert sum(expected.values()) == 18, "ids 3 and 2**40, 7 (position) and 5 (k NULL, s 'a') deleted; 100 added"
    assert oracle_rows(spark, table, "TRUE") == expected, "Spark drops the deleted rows, keeps the upsert's own row"
    source = catalog.load_table("db.t")
    assert source.current_snapshot().snapshot_id == last, "pyiceberg's catalog sees the JVM's and Spark's commits"
    deletes: Counter[tuple[Any, ...]] = Counter()
    for manifest in source.current_snapshot().manifests(source.io):
        for entry in manifest.fetch_manifest_entry(source.io):
            f = entry.data_file
            if f.content != DataFileContent.DATA:
                deletes[(f.content, tuple(f.equality_ids or ()), int(f.record_count))] += 1
    assert deletes == Counter(
        {
            (DataFileContent.EQUALITY_DELETES, (1,), 2): 1,
            (DataFileContent.EQUALITY_DELETES, (3, 4), 1): 1,
            (DataFileContent.POSITION_DELETES, (), 1): 1,
        }
    ), "one equality delete file per call, with its field ids, beside Spark's position delete file"
