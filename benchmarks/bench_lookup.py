"""Lookup cost as the index grows: parse + bind, the min/max stage alone, and all index stages (min/max, Bloom,
automaton) over N index entries.

Not a test: prints a Markdown table for docs/benchmarks.md. Entries are built with the build's own per-column code
(statistics, automatic index choice) from synthetic columns (one sorted key, one random key, a tag, a timestamp),
so they have the real layout and payloads; no Parquet or catalog is involved, to time the algorithm alone.

    .venv/bin/python benchmarks/bench_lookup.py [--files 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import datetime as dt

import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestampType
from timing import best_of

from indexlib.indexing.file_indexer import DEFAULT_SETTINGS, index_column
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.query.sql import Clock
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, entry_row

SCHEMA = Schema(
    NestedField(1, "order_key", LongType()),
    NestedField(2, "part_key", LongType()),
    NestedField(3, "mode", StringType()),
    NestedField(4, "ts", TimestampType()),
)
ROWS_PER_FILE = 64  # statistics do not depend on the row count; keeps generation fast
QUERIES = [
    "order_key = 4242",
    "part_key IN (7, 42, 4242)",
    "mode = 'AIR' AND order_key < 50000",
    "CAST(ts AS DATE) = DATE '2024-03-01'",
    "starts_with(mode, 'RA') OR NOT (part_key BETWEEN 10 AND 20)",
    "year(ts) = 2024 AND month(ts) = 2 AND ts >= CURRENT_TIMESTAMP - INTERVAL '400' DAY",
]
CLOCK = Clock(now=dt.datetime(2024, 6, 1, tzinfo=dt.UTC), time_zone=dt.UTC)
MODES = np.array(["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"])


def _entries(files: int, rng: np.random.Generator) -> tuple[list[str], pa.Table]:
    rows, paths = [], []
    start = np.datetime64("2024-01-01T00:00:00", "us")
    for n in range(files):
        order = np.arange(n * ROWS_PER_FILE, (n + 1) * ROWS_PER_FILE, dtype=np.int64)
        part = rng.integers(0, 1_000_000, ROWS_PER_FILE)
        mode = MODES[rng.integers(0, len(MODES), ROWS_PER_FILE)]
        ts = start + (n * 3_600_000_000 + rng.integers(0, 3_600_000_000, ROWS_PER_FILE)).astype("timedelta64[us]")
        columns = [pa.array(order), pa.array(part), pa.array(mode), pa.array(ts)]
        stats = [
            index_column(f.field_id, f.name, f.field_type, pa.chunked_array([column]), DEFAULT_SETTINGS)
            for f, column in zip(SCHEMA.fields, columns, strict=True)
        ]
        path = f"s3://bucket/table/data/file-{n:07d}.parquet"
        paths.append(path)
        rows.append(entry_row(path, 1 << 20, ROWS_PER_FILE, 1, stats))
    return paths, pa.Table.from_pylist(rows, schema=ENTRY_ARROW_SCHEMA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    print("| files | query | parse+bind ms | min/max ms | kept | all index stages ms | files/s | kept |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for files in args.files:
        paths, entries = _entries(files, rng)
        for where in QUERIES:
            bind_s = best_of(5, lambda w=where: bound_predicate(w, SCHEMA, "db.t", CLOCK))
            predicate = bound_predicate(where, SCHEMA, "db.t", CLOCK)
            minmax_kept = prune(predicate, paths, entries, kinds=[]).kept
            minmax_s = best_of(3, lambda p=predicate, f=paths, e=entries: prune(p, f, e, kinds=[]))
            kept = prune(predicate, paths, entries).kept
            prune_s = best_of(3, lambda p=predicate, f=paths, e=entries: prune(p, f, e))
            print(
                f"| {files:,} | `{where}` | {bind_s * 1e3:.1f} | {minmax_s * 1e3:.1f} | {int(minmax_kept.sum()):,} | "
                f"{prune_s * 1e3:.1f} | {files / prune_s:,.0f} | {int(kept.sum()):,} |"
            )


if __name__ == "__main__":
    main()
