"""Scans through the index on files with and without Parquet field ids, against the same engine's limit.

TPC-H lineitem at `--scale`, sorted by `l_shipdate` and cut into `--files` Parquet files (bench_query.py's layout),
as two Iceberg tables over the same rows in one SQLite catalog: `bench.small`, the files registered with `add_files`
(no field ids: read through the table's name mapping, the usual migration path), and `bench.ids`, each file's rows
appended by pyiceberg (field ids). Both indexed by the build, in this process. Per table and query, side by side in
one run (best of `--runs`):

- DuckDB: its own `read_parquet` over every file with the WHERE; `handle.scan(where).to_duckdb()`
  on a warm handle (lookup + relation + count); the limit: `read_parquet` over only the files holding a match.
- Spark (`--spark`, local[2], with the connectors' jars when `make jars` fetched them): its own
  `spark.read.parquet(every file).filter(where)`; `handle.scan(where).to_spark(spark, reader)` with
  the jar-free reads (`reader="files"`) and, where Iceberg's runtime is in the session, with Iceberg's own reader
  over the kept files (`reader="connector"`); the limit: Spark's read of only the files holding a match; each
  counted. Which path read the kept files (`routes`: Spark's Parquet reader or pyiceberg in Spark tasks).

The targets of issue 40: through the index within 1.5x (+10 ms) of the limit where the index keeps at most 1.2x
the true files; no more than 1.1x the engine's own full read on non-selective queries. Row counts are asserted
equal across the ways.

    python benchmarks/bench_scan_paths.py --scale 0.3 --files 200 --spark     # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from bench_build import _lineitem_files, _registered, bench_spark
from timing import best_of

from indexlib.config import load_config
from indexlib.handle import open_handle
from indexlib.indexing.build import build_index

TABLES = {"without field ids": "bench.small", "with field ids": "bench.ids"}


def _queries(con: duckdb.DuckDBPyConnection, paths: list[str]) -> list[tuple[str, str]]:
    middle = paths[len(paths) // 2]
    key = con.sql(f"SELECT l_orderkey FROM read_parquet('{middle}') LIMIT 1 OFFSET 500").fetchall()[0][0]
    keys = [
        r[0]
        for r in con.sql(
            f"SELECT l_orderkey FROM read_parquet('{middle}') USING SAMPLE reservoir(10 ROWS) REPEATABLE (40)"
        ).fetchall()
    ]
    return [
        ("point", f"l_orderkey = {key}"),
        ("IN 10", f"l_orderkey IN ({', '.join(map(str, keys))})"),
        ("absent", "l_orderkey = -1"),
        ("LIKE", "l_comment LIKE '%Tiresias%'"),
        ("non-selective", "l_quantity > 10"),
    ]


def _with_field_ids(conf: Path, paths: list[str]) -> None:
    """bench.ids: each file's rows appended by pyiceberg (one file each, with field ids)."""
    catalog = load_config(conf).load_catalog()
    table = catalog.create_table("bench.ids", schema=pq.read_schema(paths[0]))
    for path in paths:
        table.append(pq.read_table(path))


def _true_files(con: duckdb.DuckDBPyConnection, paths: list[str], where: str) -> list[str]:
    query = f"SELECT DISTINCT filename FROM read_parquet({paths!r}, filename = true) WHERE {where}"
    return sorted(r[0] for r in con.sql(query).fetchall())


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _ways(
    con: duckdb.DuckDBPyConnection, spark: Any, handle: Any, live: list[str], true: list[str], where: str
) -> dict[str, Callable[[], int]]:
    """Each way of counting the rows matching `where`, by name."""

    def duck(files: list[str]) -> int:
        return con.sql(f"SELECT count(*) FROM read_parquet({files!r}) WHERE {where}").fetchall()[0][0] if files else 0

    ways: dict[str, Callable[[], int]] = {
        "duckdb own": lambda: duck(live),
        "duckdb index": lambda: handle.scan(where).to_duckdb().aggregate("count(*)").fetchall()[0][0],
        "duckdb limit": lambda: duck(true),
    }
    if spark is None:
        return ways
    from indexlib.scans.spark_connectors import has_runtime

    def own_spark(files: list[str]) -> int:
        return spark.read.parquet(*files).filter(where).count() if files else 0

    ways |= {
        "spark own": lambda: own_spark(live),
        "spark index": lambda: handle.scan(where).to_spark(spark, "files").count(),
        "spark limit": lambda: own_spark(true),
    }
    if has_runtime(spark, "iceberg"):
        ways["spark connector"] = lambda: handle.scan(where).to_spark(spark, "connector").count()
    return ways


def measure(conf: Path, runs: int, spark: Any) -> list[dict[str, Any]]:
    config = load_config(conf)
    con = duckdb.connect()
    rows = []
    for label, name in TABLES.items():
        handle = open_handle(config, name)
        live = sorted(k.file.path.removeprefix("file://") for k in handle.lookup("l_orderkey >= 0").kept_files)
        for query, where in _queries(con, live):
            result = handle.lookup(where)
            true = _true_files(con, live, where)

            ways = _ways(con, spark, handle, live, true, where)
            counts = {way: action() for way, action in ways.items()}
            assert len(set(counts.values())) == 1, f"{label} {query}: row counts differ {counts}"
            row = {"table": label, "query": query, "kept": len(result.files), "true": len(true)}
            row |= {way: best_of(runs, action) for way, action in ways.items()}
            if spark is not None:
                try:
                    from indexlib.scans.spark import routes
                except ImportError:  # a checkout from before routes()
                    routes = None
                if routes is not None:
                    row["spark paths"] = dict(Counter(r.how for r in routes(result).values()))
            rows.append(row)
            print(row, flush=True)
    return rows


def _print(rows: list[dict[str, Any]], engines: list[str]) -> None:
    for engine in engines:
        own_label = "spark own" if engine == "spark connector" else f"{engine} own"
        print(
            f"\n| table | query | kept / true files | {own_label} | {engine}: through the index | limit | index / limit |"
        )
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            name = "spark" if engine == "spark connector" else engine
            own, limit = row[f"{name} own"], row[f"{name} limit"]
            index = row[f"{engine} index" if engine != "spark connector" else engine]
            ratio = f"{index / limit:.2f}x" if limit > 0.0005 else "-"
            paths = f" ({row['spark paths']})" if engine == "spark" and "spark paths" in row else ""
            print(
                f"| {row['table']} | {row['query']} | {row['kept']} / {row['true']} | {_ms(own)} | "
                f"{_ms(index)}{paths} | {_ms(limit)} | {ratio} |"
            )


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.3)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also the Spark scan (local[2])")
    parser.add_argument("--directory", type=Path, help="reuse the tables made there by an earlier run")
    args = parser.parse_args(argv)
    directory = args.directory or Path(tempfile.mkdtemp(prefix="bench-scan-paths-"))
    conf = directory / "conf.toml"
    if not conf.exists():
        started = time.perf_counter()
        directory.mkdir(parents=True, exist_ok=True)
        paths = _lineitem_files(directory, args.scale, args.files, order_by="l_shipdate")
        _registered(directory, paths)
        _with_field_ids(conf, paths)
        for name in TABLES.values():
            build_index(load_config(conf), name)
        print(f"tables and indexes made in {time.perf_counter() - started:.0f} s under {directory}", flush=True)
    spark = bench_spark(connectors=True) if args.spark else None
    rows = measure(conf, args.runs, spark)
    engines = ["duckdb"] if spark is None else ["duckdb", "spark"]
    _print(rows, engines + (["spark connector"] if rows and "spark connector" in rows[0] else []))
    return rows


if __name__ == "__main__":
    main()
