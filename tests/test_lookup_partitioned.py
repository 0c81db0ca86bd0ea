"""Temporal predicates on month- and day-partitioned Iceberg tables, end to end through `indexlib.lookup.lookup`.

Rule under test: a temporal predicate (`CAST(ts AS DATE) = ...`, `date_trunc(...)`, `year(ts)/month(ts)`, `ts + INTERVAL`,
`CURRENT_DATE - INTERVAL`) keeps no more files than the equivalent explicit range on `ts`, both before any index build
(only the partition stage prunes; every file is unindexed) and after one (partition then min/max). Every lookup is
also checked against the real rows: each live data file is read with pyarrow and the predicate evaluated on its
`ts` column, so a file holding a matching row must be kept, and a file reported "all match" must match on every row.

Each table is created once per module: for each transform one table that is never indexed and one that is built.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, MonthTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from indexlib.config import Config, load_config
from indexlib.indexing.build import build_index
from indexlib.lookup import LookupResult, lookup
from indexlib.query.sql import Clock

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "s", StringType()),
)
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("s", pa.string())])
TS_FIELD_ID = SCHEMA.find_field("ts").field_id
TRANSFORMS = {"month": (MonthTransform(), "ts_month"), "day": (DayTransform(), "ts_day")}

CLOCK = Clock(now=dt.datetime(2024, 4, 10, 12, 0, tzinfo=dt.UTC), time_zone=dt.UTC)
START, END = dt.datetime(2024, 1, 1), dt.datetime(2024, 5, 1)
STEP = dt.timedelta(hours=7)
# Rows on both sides of every bound the pairs below use, so an off-by-one in a rewrite drops a real row.
BOUNDARY_ROWS = [
    dt.datetime(2024, 1, 13, 23, 59, 59, 999999),
    dt.datetime(2024, 1, 14, 0, 0),
    dt.datetime(2024, 1, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 1, 30, 0, 0),
    dt.datetime(2024, 1, 31, 23, 59, 59, 999999),
    dt.datetime(2024, 2, 1, 0, 0),
    dt.datetime(2024, 2, 2, 23, 59, 59, 999999),
    dt.datetime(2024, 2, 3, 0, 0),
    dt.datetime(2024, 2, 9, 23, 59, 59, 999999),
    dt.datetime(2024, 2, 10, 0, 0),
    dt.datetime(2024, 2, 10, 3, 30),  # the only 03:xx row of Feb 10 (the 7-hour grid skips hour 3 that day)
    dt.datetime(2024, 2, 10, 23, 59, 59, 999999),
    dt.datetime(2024, 2, 11, 0, 0),
    dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    dt.datetime(2024, 3, 1, 0, 0),
    dt.datetime(2024, 3, 31, 23, 59, 59, 999999),
    dt.datetime(2024, 4, 1, 0, 0),
    dt.datetime(2024, 4, 2, 23, 59, 59, 999999),
    dt.datetime(2024, 4, 3, 0, 0),
]
NULL_ROWS = 3  # one NULL-partition file: never a match, never "all match"
# The day-partitioned table keeps rows on every 4th day plus the days of the boundary rows (~45 files).
DAY_TABLE_DAYS = {START.date() + dt.timedelta(days=n) for n in range(0, (END - START).days, 4)} | {
    t.date() for t in BOUNDARY_ROWS
}


def _timestamps(kind: str) -> list[dt.datetime]:
    grid = [START + STEP * n for n in range((END - START) // STEP + 1) if START + STEP * n < END]
    values = sorted(set(grid) | set(BOUNDARY_ROWS))
    if kind == "day":
        values = [t for t in values if t.date() in DAY_TABLE_DAYS]
    return values


def _rows(kind: str) -> pa.Table:
    ts: list[dt.datetime | None] = [*_timestamps(kind), *([None] * NULL_ROWS)]
    return pa.Table.from_pydict(
        {"id": list(range(len(ts))), "ts": ts, "s": [f"s{i % 5}" for i in range(len(ts))]}, schema=ARROW_SCHEMA
    )


# --- pairs: temporal predicate and its equivalent explicit range [lo, hi) on ts ---------------------------------------


@dataclass(frozen=True)
class Pair:
    id: str
    temporal: str
    lo: dt.datetime | None
    hi: dt.datetime | None
    # the temporal predicate's extra condition on top of the range (it then selects a subset of the range's rows)
    extra: Callable[[pa.ChunkedArray], pa.ChunkedArray] | None = None

    @property
    def explicit(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"ts >= TIMESTAMP '{self.lo:%Y-%m-%d %H:%M:%S}'")
        if self.hi is not None:
            parts.append(f"ts < TIMESTAMP '{self.hi:%Y-%m-%d %H:%M:%S}'")
        return " AND ".join(parts)

    def range_mask(self, ts: pa.ChunkedArray) -> pa.ChunkedArray:
        """SQL three-valued truth of the explicit range per row (NULL ts -> NULL)."""
        mask = pa.chunked_array([pa.array([True] * len(ts))]) if len(ts) else pa.chunked_array([], pa.bool_())
        if self.lo is not None:
            mask = pc.and_kleene(mask, pc.greater_equal(ts, pa.scalar(self.lo, pa.timestamp("us"))))
        if self.hi is not None:
            mask = pc.and_kleene(mask, pc.less(ts, pa.scalar(self.hi, pa.timestamp("us"))))
        return mask

    def temporal_mask(self, ts: pa.ChunkedArray) -> pa.ChunkedArray:
        mask = self.range_mask(ts)
        return pc.and_kleene(mask, self.extra(ts)) if self.extra else mask


def _day(y: int, m: int, d: int) -> dt.datetime:
    return dt.datetime(y, m, d)


PAIRS = [
    Pair("cast_date_eq", "CAST(ts AS DATE) = DATE '2024-02-10'", _day(2024, 2, 10), _day(2024, 2, 11)),
    Pair(
        "date_trunc_month_eq",
        "date_trunc('month', ts) = TIMESTAMP '2024-03-01 00:00:00'",
        _day(2024, 3, 1),
        _day(2024, 4, 1),
    ),
    Pair("year_and_month", "year(ts) = 2024 AND month(ts) = 2", _day(2024, 2, 1), _day(2024, 3, 1)),
    Pair(
        "date_trunc_day_between",
        "date_trunc('day', ts) BETWEEN TIMESTAMP '2024-01-30 00:00:00' AND TIMESTAMP '2024-02-02 00:00:00'",
        _day(2024, 1, 30),
        _day(2024, 2, 3),
    ),
    Pair("ts_plus_interval_lt", "ts + INTERVAL '1' DAY < TIMESTAMP '2024-01-15 00:00:00'", None, _day(2024, 1, 14)),
    Pair("current_date_minus_interval", "CAST(ts AS DATE) >= CURRENT_DATE - INTERVAL '7' DAY", _day(2024, 4, 3), None),
    # all rows are in 2024, so month-of-year 2 is exactly February 2024; decided from month/day partition values
    Pair("month_alone", "month(ts) = 2", _day(2024, 2, 1), _day(2024, 3, 1)),
    Pair(
        "day_of_month_alone",
        "day(ts) = 10 AND ts < TIMESTAMP '2024-03-01 00:00:00'",
        None,
        _day(2024, 3, 1),
        extra=lambda ts: pc.equal(pc.day(ts), 10),
    ),
    Pair(
        "hour_and_cast_date",
        "hour(ts) = 3 AND CAST(ts AS DATE) = DATE '2024-02-10'",
        _day(2024, 2, 10),
        _day(2024, 2, 11),
        extra=lambda ts: pc.equal(pc.hour(ts), 3),
    ),
]


# --- tables, built once per module --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    name: str
    ts_by_file: dict[str, pa.ChunkedArray]  # live data file path (as Iceberg records it) -> its ts column


@pytest.fixture(scope="module")
def module_config(tmp_path_factory) -> Config:
    root: Path = tmp_path_factory.mktemp("lookup_partitioned")
    conf = root / "conf.toml"
    conf.write_text(
        '[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'
        '[spark]\nmaster = "local[2]"\n'
    )
    config = load_config(conf)
    config.load_catalog().create_namespace("db")
    return config


@pytest.fixture(scope="module")
def tables(module_config, spark):
    """(kind, indexed) -> Built; each table created, filled (and indexed) on first use."""
    made: dict[tuple[str, bool], Built] = {}

    def get(kind: str, indexed: bool) -> Built:
        key = (kind, indexed)
        if key not in made:
            transform, partition_name = TRANSFORMS[kind]
            spec = PartitionSpec(
                PartitionField(source_id=TS_FIELD_ID, field_id=1000, transform=transform, name=partition_name)
            )
            name = f"db.events_{kind}_{'indexed' if indexed else 'unindexed'}"
            catalog = module_config.load_catalog()
            table = catalog.create_table(name, schema=SCHEMA, partition_spec=spec)
            table.append(_rows(kind))
            table = catalog.load_table(name)
            paths = [task.file.file_path for task in table.scan().plan_files()]
            if indexed:
                result = build_index(module_config, name, spark)
                assert result.committed and result.files_indexed == len(paths), "the build indexes every live file"
            made[key] = Built(name, {path: pq.read_table(urlparse(path).path, columns=["ts"])["ts"] for path in paths})
        return made[key]

    return get


def _matches(mask: pa.ChunkedArray) -> bool:
    return pc.any(mask.fill_null(False)).as_py() is True


def _all_match(mask: pa.ChunkedArray) -> bool:
    return len(mask) > 0 and pc.all(mask.fill_null(False)).as_py() is True


def _check_sound(label: str, where: str, result: LookupResult, built: Built, mask_of) -> None:
    """A file holding a matching row is kept; a file reported all-match matches on every row."""
    kept = set(result.files)
    assert result.files_total == len(built.ts_by_file), f"{label}: files_total counts every live file"
    assert kept <= set(built.ts_by_file), f"{label}: {where!r} returns only live files"
    dropped_matching = [p for p, ts in built.ts_by_file.items() if p not in kept and _matches(mask_of(ts))]
    assert not dropped_matching, f"{label}: {where!r} must never skip a file that holds a matching row"
    assert set(result.all_match) <= kept, f"{label}: {where!r} reports all-match only for kept files"
    wrongly_all = [p for p in result.all_match if not _all_match(mask_of(built.ts_by_file[p]))]
    assert not wrongly_all, f"{label}: {where!r} reports all-match only for files where every row matches"


@pytest.mark.parametrize("indexed", [False, True], ids=["before_build", "after_build"])
@pytest.mark.parametrize("kind", list(TRANSFORMS))
@pytest.mark.parametrize("pair", PAIRS, ids=[p.id for p in PAIRS])
def test_temporal_predicate_keeps_no_more_files_than_equivalent_range(
    module_config, tables, pair: Pair, kind: str, indexed: bool
):
    built = tables(kind, indexed)
    label = f"{kind}-partitioned, {'after' if indexed else 'before'} the index build"
    temporal = lookup(module_config, built.name, pair.temporal, CLOCK)
    explicit = lookup(module_config, built.name, pair.explicit, CLOCK)

    # Soundness of both against the real rows (the range must be sound for the comparison to mean anything).
    _check_sound(label, pair.temporal, temporal, built, pair.temporal_mask)
    _check_sound(label, pair.explicit, explicit, built, pair.range_mask)

    assert set(temporal.files) <= set(explicit.files), (
        f"{label}: {pair.temporal!r} must keep no more files than {pair.explicit!r} "
        f"(extra: {sorted(set(temporal.files) - set(explicit.files))})"
    )
    assert len(temporal.files) < temporal.files_total, f"{label}: {pair.temporal!r} must prune some files"

    judged_by_format = [] if indexed else ["format statistics"]
    assert [s.name for s in temporal.stages] == [
        "partition",
        *judged_by_format,
        "minmax",
        "key index",
        "bloom",
        "automaton",
    ], (
        "stages run partition, the format's statistics (where a file is unindexed), minmax, the key index, then one "
        "per index kind"
    )
    partition = temporal.stages[0]
    if indexed:
        assert temporal.files_unindexed == 0, f"{label}: every live file is indexed after the build"
    else:
        assert temporal.files_unindexed == len(temporal.files), f"{label}: before a build every kept file is unindexed"
        assert partition.files_out < partition.files_in, (
            f"{label}: the partition stage alone must prune for {pair.temporal!r} "
            f"({partition.files_in} in, {partition.files_out} out)"
        )


def test_explain_details_name_the_partition_field_and_the_statistics(module_config, tables):
    built = tables("month", True)
    result = lookup(module_config, built.name, "CAST(ts AS DATE) = DATE '2024-02-10' AND s LIKE '%x'", CLOCK)
    assert result.partition_fields == ["spec 0: ts_month = month(ts)"], "explain names the partition field lifted to"
    assert result.parsed == "(CAST(ts AS DATE) = DATE '2024-02-10' AND s LIKE '%x')", "explain shows the parsed form"
    assert result.predicate.startswith("((ts >= TIMESTAMP '2024-02-10 00:00:00'"), "and the rewritten range on ts"
    uses = dict(result.leaves)
    assert uses["ts >= TIMESTAMP '2024-02-10 00:00:00'"] == "lower/upper bounds and null/NaN counts of ts", (
        "each leaf says which statistics it reads"
    )
    assert uses["s LIKE '%x'"].startswith("null counts of s only (no literal prefix)"), (
        "a pattern without prefix says so"
    )
    assert "automata" in uses["s LIKE '%x'"], "and names the index kinds that can answer it"
