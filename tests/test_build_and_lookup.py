"""End to end on real components: SQLite catalog, Iceberg table with several snapshots, Spark build, lookup
checked against Spark SQL evaluated over every live file's rows."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from urllib.parse import urlparse

import pyarrow as pa
import pytest
from pyiceberg.conversions import from_bytes

from indexlib.indexing.build import build_index
from indexlib.lookup import lookup
from indexlib.query.model import Const
from indexlib.statistics.column_stats import parse_type
from indexlib.store.table import IndexTable

ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("small", pa.int32()),
        ("x", pa.float64()),
        ("r", pa.float32()),
        ("price", pa.decimal128(9, 2)),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("tstz", pa.timestamp("us", tz="UTC")),
        ("name", pa.string()),
        ("raw", pa.binary()),
        ("flag", pa.bool_()),
    ]
)
NAMES = ["", "alpha", "beta", "gamma", "Ωmega", "zeta", "é"]


def _batch(rng: random.Random, start: int, count: int) -> pa.Table:
    def maybe(value):
        return None if rng.random() < 0.1 else value

    rows = []
    for i in range(start, start + count):
        rows.append(
            {
                "id": i,
                "small": maybe(rng.randint(-50, 50)),
                "x": maybe(rng.choice([float("nan"), rng.uniform(-10, 10)])),
                "r": maybe(rng.choice([0.5, 1.25, -2.0])),
                "price": maybe(Decimal(rng.randint(0, 10_000)) / 100),
                "day": maybe(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 60))),
                "ts": maybe(dt.datetime(2024, 1, 1) + dt.timedelta(minutes=rng.randint(0, 100_000))),
                "tstz": maybe(dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=rng.randint(0, 100_000))),
                "name": maybe(rng.choice(NAMES)),
                "raw": maybe(bytes([rng.randint(0, 255)])),
                "flag": maybe(rng.random() < 0.5),
            }
        )
    return pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)


@pytest.fixture
def source(catalog):
    table = catalog.create_table("db.events", schema=ARROW_SCHEMA)
    return table


def _append_snapshots(table, rng, first_id: int, snapshots: int, rows: int = 40) -> int:
    for _ in range(snapshots):
        table.append(_batch(rng, first_id, rows))
        first_id += rows
    return first_id


def test_incremental_build_indexes_each_file_once_and_a_rerun_commits_nothing(config, catalog, source, spark):
    rng = random.Random(7)
    next_id = _append_snapshots(source, rng, 0, 2)
    first = build_index(config, "db.events", spark)
    assert first.committed and first.files_indexed == 2, "first build indexes the two files of two snapshots"

    index = IndexTable(catalog, config.index_namespace, "db.events")
    snapshots_before = len(index.load().metadata.snapshots)
    again = build_index(config, "db.events", spark)
    assert not again.committed and again.files_indexed == 0, "a rerun with nothing new commits nothing"
    index = IndexTable(catalog, config.index_namespace, "db.events")
    assert len(index.load().metadata.snapshots) == snapshots_before, "no snapshot is added by a no-op rerun"

    _append_snapshots(source, rng, next_id, 3)
    third = build_index(config, "db.events", spark)
    assert third.files_indexed == 3, "only the three files committed since the watermark are read"
    source.refresh()
    paths = IndexTable(catalog, config.index_namespace, "db.events").entries().column("file_path").to_pylist()
    live = [task.file.file_path for task in source.scan().plan_files()]
    assert sorted(paths) == sorted(live), "every live file has exactly one entry"
    assert IndexTable(catalog, config.index_namespace, "db.events").watermark() == source.current_snapshot().snapshot_id


def test_statistics_are_typed_and_exact(config, catalog, source, spark):
    data = _batch(random.Random(3), 0, 200)
    source.append(data)
    build_index(config, "db.events", spark)
    entry = IndexTable(catalog, config.index_namespace, "db.events").entries().to_pylist()[0]
    stats = {c["name"]: c for c in entry["columns"]}
    assert entry["record_count"] == 200
    for name in ARROW_SCHEMA.names:
        column = data.column(name)
        values = [v for v in column.to_pylist() if v is not None and v == v]  # drop NULL and NaN
        got = stats[name]
        assert got["null_count"] == column.null_count, f"null count of {name}"
        low, high = (from_bytes(parse_type(got["type"]), got[k]) for k in ("lower", "upper"))
        if name in ("day",):
            low, high = dt.date(1970, 1, 1) + dt.timedelta(low), dt.date(1970, 1, 1) + dt.timedelta(high)
        elif name in ("ts", "tstz"):
            epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC if name == "tstz" else None)
            low, high = epoch + dt.timedelta(microseconds=low), epoch + dt.timedelta(microseconds=high)
        key = (lambda s: s.encode()) if name == "name" else None  # strings in UTF-8 byte order
        expected = (min(values, key=key), max(values, key=key))
        assert (low, high) == expected, f"bounds of {name}: got {(low, high)}, expected {expected}"
    nans = sum(1 for v in data.column("x").to_pylist() if v is not None and v != v)
    assert stats["x"]["nan_count"] == nans, "NaNs are counted, never used as bounds"


WHERE = [
    "id = 17",
    "id BETWEEN 100 AND 130",
    "small < -45 OR small > 45",
    "NOT (small >= -40)",
    "x > 9.5",
    "x != x",
    "r = 1.25",
    "price <= 1.5",
    "price IN (12.34, 99.99)",
    "day = DATE '2024-01-05'",
    "day NOT IN (DATE '2024-01-05', NULL)",
    "ts >= TIMESTAMP '2024-03-05 00:00:00'",
    "tstz < TIMESTAMP '2024-01-02 00:00:00'",
    "name = 'é'",
    "name > 'zeta'",
    "name IS NULL AND flag",
    "raw IS NOT NULL AND NOT flag",
    "id > 230 AND name = ''",
]


def _local(path: str) -> str:
    return urlparse(path).path


@pytest.mark.parametrize("where", WHERE)
def test_lookup_keeps_every_file_with_a_matching_row(config, catalog, source, spark, where):
    rng = random.Random(11)
    next_id = _append_snapshots(source, rng, 0, 4, rows=30)
    build_index(config, "db.events", spark)
    _append_snapshots(source, rng, next_id, 1, rows=30)  # committed after the build: unindexed

    result = lookup(config, "db.events", where)
    source.refresh()
    live = [task.file.file_path for task in source.scan().plan_files()]
    frame = spark.read.parquet(*[_local(p) for p in live])
    matching = {_local(r[0]) for r in frame.where(where).select("_metadata.file_path").distinct().collect()}
    counts = frame.groupBy("_metadata.file_path").count().collect()
    matched_counts = dict(frame.where(where).groupBy("_metadata.file_path").count().collect())

    kept = {_local(p) for p in result.files}
    assert matching <= kept, f"a file holding a row matching {where!r} was skipped: {matching - kept}"
    assert set(result.files) <= set(live), "only live files are returned, as the source records them"
    never_true = isinstance(result.bound, Const) and not result.bound.value  # e.g. NOT IN with a NULL in the list
    assert result.summary["files_total"] == 5
    assert result.summary["files_unindexed"] <= (0 if never_true else 1), (
        "the unindexed file is kept only where its manifest entry cannot rule it out, and no file when the predicate "
        "is FALSE on every row"
    )
    assert "format statistics" in [stage.name for stage in result.stages], "the unindexed file is judged by its entry"
    for path in result.all_match:
        total = next(c for p, c in counts if _local(p) == _local(path))
        assert matched_counts.get(next(p for p, _ in counts if _local(p) == _local(path))) == total, (
            f"{path} claimed all-match for {where!r}"
        )


def test_the_build_sizes_bloom_filters_for_the_tables_file_count(config, catalog, spark):
    """60 files of 1,000 keys: filters for 0.5 / 60 false positives each, so the table keeps ~0.5 file per absent key
    (a 1 % filter would keep 0.6); the size follows from the rate, the configuration version is not changed by it."""
    from indexlib.index_kinds.split_block import bitset_of, optimal_bytes

    table = catalog.create_table("db.many", schema=pa.schema([("key", pa.int64())]))
    rng = random.Random(9)

    def append_file() -> None:
        table.append(pa.table({"key": pa.array(rng.sample(range(10**9), 1_000), pa.int64())}))

    for _ in range(60):
        append_file()
    build_index(config, "db.many", spark)
    append_file()
    build_index(config, "db.many", spark)  # one new file, in a table of 61

    def sizes(source_version: int) -> list[int]:
        entries = IndexTable(catalog, config.index_namespace, "db.many").entries().to_pylist()
        return [
            bitset_of(index["payload"]).nbytes
            for entry in entries
            if entry["source_version"] == source_version
            for column in entry["columns"]
            for index in column["indexes"] or ()
            if index["kind"] == "bloom"
        ]

    snapshots = [s.snapshot_id for s in table.refresh().snapshots()]
    first, second = sizes(snapshots[-2]), sizes(snapshots[-1])
    assert optimal_bytes(1_000, 0.01) < optimal_bytes(1_000, 0.5 / 61), "the rule below is visible in the sizes"
    assert len(first) == 60 and set(first) == {optimal_bytes(1_000, 0.5 / 60)}, "sized for the table's 60 files"
    assert second == [optimal_bytes(1_000, 0.5 / 61)], (
        "an incremental build sizes the new file's filter for the whole table (61 files), not for the one it indexes"
    )
