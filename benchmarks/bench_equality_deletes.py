"""What applying Iceberg equality deletes costs the scans, side by side in one run (docs/how-to/read-rows.md).

Equality deletes are matched to the data files they apply to (indexlib/sources/iceberg_deletes.py) and dropped after
the read by a hash semi-join per kept file against the delete rows (indexlib/scans/equality.py). This measures that
price on tables that differ only in their deletes: FILES files of ROWS rows (`id`, `k`, a string), the same data in
each, and one equality delete file on `id` of DELETES rows committed after the data (under the unpartitioned spec:
it applies to every file), DELETES from 0 (no delete file) up. Per table: the Arrow scan (pyiceberg's reader, then
the join) and the DuckDB relation's count, of a non-selective WHERE (every file kept) and a point one (one file),
and the first lookup of a fresh handle (the snapshot's data manifests are read for the files' sequence numbers).

    python benchmarks/bench_equality_deletes.py [--files 20] [--rows 500000] [--deletes 0 1000 100000]

The delete files are committed by the tests' own helper (tests/iceberg_tables.py `commit_equality_deletes`, the
manifest a writer commits), with Parquet field ids as Iceberg writers write them. Prints a Markdown table for
docs/benchmarks.md: best of 3; compare within one run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from timing import best_of

from indexlib.config import load_config
from indexlib.handle import IndexHandle
from indexlib.indexing.build import build_index

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from iceberg_tables import commit_equality_deletes  # noqa: E402  (the tests' commit of delete files)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "k", LongType(), required=False),
    NestedField(3, "s", StringType(), required=False),
)


def _file(start: int, rows: int) -> pa.Table:
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "k": pa.array(ids % 97),
            "s": pa.array([f"row {i}" for i in range(rows)], pa.string()),
        }
    )


def _commit_equality_deletes(table, ids: np.ndarray) -> None:
    """One equality delete file on `id` holding `ids`, written with field ids as Iceberg writers write them."""
    field = pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"})
    commit_equality_deletes(table, pa.table([pa.array(ids, pa.int64())], schema=pa.schema([field])), [1])


def main(files: int, rows: int, deletes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "conf.toml"
        conf.write_text(
            f'[catalog]\nname = "bench"\ntype = "sql"\nuri = "sqlite:///{tmp}/catalog.db"\n'
            f'warehouse = "{tmp}/warehouse"\n'
        )
        config = load_config(conf)
        catalog = config.load_catalog()
        catalog.create_namespace("db")
        rng = np.random.default_rng(7)
        total = files * rows
        names = {}
        for count in deletes:
            name = f"db.eq_{count}"
            table = catalog.create_table(name, SCHEMA)
            for n in range(files):
                table.append(_file(n * rows, rows))
            build_index(config, name)
            if count:
                _commit_equality_deletes(catalog.load_table(name), rng.choice(total, count, replace=False))
            names[count] = name
        point = f"id = {rows // 2}"
        print(f"{files} files of {rows:,} rows; one equality delete file on id of N rows (every file); best of 3\n")
        print(
            "| delete rows | first lookup (fresh handle) | Arrow, `id >= 0` | DuckDB count, `id >= 0` "
            f"| Arrow, `{point}` | rows returned |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        base: dict[str, float] = {}
        for count, name in names.items():
            started = time.perf_counter()
            handle = IndexHandle.for_iceberg(catalog.load_table(name))
            handle.lookup("id >= 0")
            first = time.perf_counter() - started
            arrow = best_of(3, lambda h=handle: h.scan("id >= 0").to_arrow())
            duck = best_of(3, lambda h=handle: h.scan("id >= 0").to_duckdb().aggregate("count(*)").fetchall())
            one = best_of(3, lambda h=handle: h.scan(point).to_arrow())
            returned = handle.scan("id >= 0").count()
            assert returned == total - count, f"{name}: {returned} rows, expected {total - count}"
            cells = {"first": first, "arrow": arrow, "duck": duck, "one": one}
            base = base or cells
            shown = [
                f"{cells[key] * 1000:,.0f} ms" + (f" ({cells[key] / base[key]:.2f}x)" if count else "")
                for key in ("first", "arrow", "duck", "one")
            ]
            print(f"| {count:,} | {' | '.join(shown)} | {returned:,} |", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--deletes", type=int, nargs="+", default=[0, 1_000, 100_000])
    args = parser.parse_args()
    main(args.files, args.rows, args.deletes)
