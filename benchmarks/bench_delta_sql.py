"""A Delta table in Spark SQL: planned through the service (Iceberg's runtime alone) against delta-spark's own read
with its own data skipping, side by side in one run.

The query benchmark's lineitem (`bench_query.py`: TPC-H lineitem at `--scale`, sorted by `l_shipdate`) written by
delta-spark as a Delta table of `--files` files (range-partitioned by `l_shipdate`, as the Iceberg benchmark's files
are cut), indexed by `skipindex build --table <path>` in a fresh process, and the seven queries of
`bench_spark_sql.py`. A real `skipindex serve` process on 127.0.0.1 serves it under `[serve.delta_tables]`.

One Spark session (`local[*]`, the project's jars, Delta's and Iceberg's SQL extensions) reads the table two ways:

- `delta`: `SELECT * FROM delta.`<path>` WHERE ...`: delta-spark's own planning, which skips files by the log's
  per-file statistics (min/max/null counts of the first 32 columns);
- `served`: `SELECT * FROM <catalog>.delta.lineitem WHERE ...`: an Iceberg REST catalog at the service, every scan
  planned by the index (`POST .../plan`), read by Iceberg's runtime.

Per query, per side (alternating, after a warm-up of each): wall time of the query run to Spark's `noop` sink
(every matching row of every column read and made), median of `--runs`; files read (delta-spark: the DataFrame's
`inputFiles()`, which lists the files left after its data skipping; through the service: the Iceberg scan's tasks
in the physical plan) and their bytes; rows, compared as multisets (`exceptAll` both ways): any difference fails
the run after the table is printed.

    python benchmarks/bench_delta_sql.py            # the issue's sizes: SF 3 in 200 files, median of 5
    python benchmarks/bench_delta_sql.py --quick    # toy: SF 0.01 in 4 files, 1 run

Prints a Markdown table for docs/benchmarks.md and the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from bench_query import _lineitem
from bench_serve import TOKEN, Server, _load, _short
from bench_spark_sql import plans, scanned

SIDES = ("delta", "served")


def session(driver_memory: str) -> tuple[Any, bool]:
    """The benchmark's SparkSession with both connectors (an active one is reused and left running)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from indexlib.jars import has_connector, spark_jars

    jars = spark_jars()
    missing = [name for name in ("iceberg", "delta") if not has_connector(name, jars)]
    if missing:
        raise SystemExit(f"no {' and '.join(missing)} connector jars: run `make jars` (jvm/pom.xml)")
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("bench-delta-sql")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,io.delta.sql.DeltaSparkSessionExtension",
        )
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def write_delta(spark: Any, paths: list[str], target: Path, files: int) -> None:
    """The lineitem files rewritten by delta-spark: `files` files, each a range of `l_shipdate`."""
    frame = spark.read.parquet(*paths).repartitionByRange(files, "l_shipdate").sortWithinPartitions("l_shipdate")
    frame.write.format("delta").save(str(target))


def build(conf: Path, table: Path) -> float:
    """`skipindex build` of the Delta table in a fresh process; seconds."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "indexlib.cli", "build", "--conf", str(conf), "--table", str(table)],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


@dataclass
class Side:
    seconds: float = 0.0
    files: int = 0
    bytes: int = 0
    rows: int = -1
    plan_requests: dict[str, int] = field(default_factory=dict)


@dataclass
class Row:
    query: str
    where: str
    total_files: int
    sides: dict[str, Side] = field(default_factory=dict)
    differ: int = -1


def _local(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("", "file") else uri


def frame(spark: Any, side: str, table: Path, catalog: str, where: str) -> Any:
    name = f"delta.`{table}`" if side == "delta" else f"{catalog}.delta.lineitem"
    return spark.sql(f"SELECT * FROM {name} WHERE {where}")


def files_read(spark: Any, side: str, table: Path, catalog: str, where: str) -> dict[str, int]:
    made = frame(spark, side, table, catalog, where)
    if side == "served":
        return scanned(made)
    return {path: os.path.getsize(_local(path)) for path in made.inputFiles()}


def measure(
    spark: Any, server: Server, table: Path, catalog: str, queries: list[tuple[str, str]], total: int, runs: int
) -> list[Row]:
    out = []
    for label, where in queries:
        row = Row(label, where, total, {side: Side() for side in SIDES})
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for side in SIDES:  # warm-up, files read, and the plan requests one query makes
            before = plans(server)
            frame(spark, side, table, catalog, where).write.format("noop").mode("overwrite").save()
            after = plans(server)
            row.sides[side].plan_requests = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
            found = files_read(spark, side, table, catalog, where)
            row.sides[side].files, row.sides[side].bytes = len(found), sum(found.values())
        for run in range(runs):  # alternating, so both sides see the same moments of a shared machine
            for side in SIDES if run % 2 == 0 else SIDES[::-1]:
                started = time.perf_counter()
                frame(spark, side, table, catalog, where).write.format("noop").mode("overwrite").save()
                times[side].append(time.perf_counter() - started)
        for side in SIDES:
            row.sides[side].seconds = statistics.median(times[side])
        own, served = (frame(spark, side, table, catalog, where) for side in SIDES)
        row.sides["delta"].rows, row.sides["served"].rows = own.count(), served.count()
        row.differ = own.exceptAll(served).count() + served.exceptAll(own).count()
        if row.differ or row.sides["delta"].rows != row.sides["served"].rows:
            print(f"\n!!! ROWS DIFFER: {label} `{_short(where)}`: {row.differ}\n", file=sys.stderr, flush=True)
        out.append(row)
        print(f"  {label}: done (load {_load()})", file=sys.stderr, flush=True)
    return out


def target(row: Row) -> str:
    """The issue's targets: point queries >= 5x faster through the service; non-selective <= 1.1x slower."""
    own, served = row.sides["delta"].seconds, row.sides["served"].seconds
    if row.query == "point":
        return "5x met" if own >= 5 * served else "5x MISSED"
    if row.query == "non-selective":
        return "1.1x met" if served <= 1.1 * own else "1.1x MISSED"
    return ""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def print_table(rows: list[Row], title: str) -> None:
    print(
        f"\n### Spark SQL on a Delta table: delta-spark's own read against Iceberg's runtime through the service, {title}\n"
    )
    print(
        "| query | delta-spark ms | through the service ms | speed-up | files read: delta-spark / service | "
        "MB read: delta-spark / service | rows (differ) | target |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        own, served = r.sides["delta"], r.sides["served"]
        rows_cell = f"{served.rows:,} ({r.differ})"
        if r.differ or own.rows != served.rows:
            rows_cell = f"**{own.rows:,} / {served.rows:,} ({r.differ} DIFFER)**"
        print(
            f"| {r.query} | {_ms(own.seconds)} | {_ms(served.seconds)} | {own.seconds / served.seconds:,.1f}x | "
            f"{own.files:,} / {served.files:,} | {own.bytes / 1e6:,.1f} / {served.bytes / 1e6:,.1f} | {rows_cell} | "
            f"{target(r)} |"
        )
    print("\nQueries: " + "; ".join(f"{r.query}: `{_short(r.where)}`" for r in rows))


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes for a smoke run (each flag below still wins)")
    parser.add_argument("--scale", type=float, help="TPC-H scale factor of lineitem (3)")
    parser.add_argument("--files", type=int, help="files of the Delta table (200)")
    parser.add_argument("--runs", type=int, help="timed runs per query and side after a warm-up, the median shown (5)")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory of the local session (4g)")
    args = parser.parse_args(argv)
    sizes = {"scale": 0.01, "files": 4, "runs": 1} if args.quick else {"scale": 3.0, "files": 200, "runs": 5}
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    print(f"load average (1 / 5 / 15 min) at the start: {_load()} on {os.cpu_count()} cores", flush=True)
    spark, made = session(args.driver_memory)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            started = time.perf_counter()
            conf, paths, queries, _ = _lineitem(directory, args.scale, max(args.files // 10, 1))
            table = directory / "delta" / "lineitem"
            write_delta(spark, paths, table, args.files)
            made_s = time.perf_counter() - started
            with conf.open("a") as out:
                out.write(
                    '[spark]\nmaster = "local[2]"\n[spark.options]\n"spark.ui.enabled" = "false"\n'
                    f'[serve.delta_tables]\nlineitem = "{table}"\n'
                )
            build_s = build(conf, table)
            written = [p for p in table.rglob("*.parquet")]
            mb = sum(p.stat().st_size for p in written) / 1e6
            title = f"TPC-H lineitem SF {args.scale:g}, {len(written)} files by l_shipdate written by delta-spark"
            print(
                f"\n{title}: {mb:,.1f} MB of Parquet; made in {made_s:.0f} s, indexed in {build_s:.0f} s "
                f"(skipindex build, fresh process); median of {args.runs} after a warm-up; Spark {spark.version}, "
                f"{spark.sparkContext.master}",
                flush=True,
            )
            server = Server(conf)
            catalog = f"bench_delta_{server.port}"
            try:
                properties = {"": "org.apache.iceberg.spark.SparkCatalog", "type": "rest", "uri": server.url}
                for key, value in {**properties, "token": TOKEN}.items():
                    spark.conf.set(f"spark.sql.catalog.{catalog}{'.' + key if key else ''}", value)
                rows = measure(spark, server, table, catalog, queries, len(written), args.runs)
            finally:
                server.stop()
        print(f"\nload average at the end: {_load()}")
        print_table(rows, title)
    finally:
        if made:
            spark.stop()
    for row in rows:
        assert not row.sides["delta"].plan_requests, f"{row.query}: delta-spark's own read asked the service to plan"
        assert row.sides["served"].plan_requests.get("index", 0) >= 1, f"{row.query}: the index planned the scan"
    differ = [r.query for r in rows if r.differ or r.sides["delta"].rows != r.sides["served"].rows]
    assert not differ, f"rows differ between delta-spark's read and the service: {differ}"
    return rows


if __name__ == "__main__":
    main()
