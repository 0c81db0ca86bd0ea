"""Spark SQL planned through the service against Spark's own Iceberg planning, side by side in one run (issue 41).

The query benchmark's lineitem table (`bench_query.py`: TPC-H lineitem at `--scale` cut into `--files` Parquet
files after sorting by `l_shipdate`, registered with `add_files` in an Iceberg table on a local SQLite catalog,
indexed by `skipindex build` in a fresh process) and its seven queries, in Spark SQL. A real `skipindex serve`
process on a free port of 127.0.0.1 (`bench_serve.Server`: bearer token, stopped by its pid) serves that catalog.

One Spark session (`local[*]`, the project's jars as `spark.jars`, Iceberg's SQL extensions) with two Iceberg REST
catalogs at the same service, which differ only in `scan-planning-mode`:

- `own`: `client`. Spark's own Iceberg planning: the Iceberg runtime in Spark reads the manifest list and the
  manifests itself and prunes by partitions and column bounds; the service only answers the table's load.
- `served`: `server`. Every scan is planned through the service (`POST .../plan`, answered from the index).

The same catalog and the same table load for both, so both read the same snapshot (asserted) and the difference is
the planning alone. Per query, per side (alternating, after a warm-up of each):

- wall time of `spark.sql("SELECT * FROM <cat>.bench.small WHERE ...")` run to the end (default: written to
  Spark's `noop` sink, so every matching row of every column is read and made, without the driver's collect;
  `--collect`: `.collect()` to Python instead), median of `--runs`; every run a new DataFrame, so Spark and Iceberg
  plan it anew (Spark has no result cache);
- plan alone: the physical plan of a new DataFrame and the Iceberg scan's input partitions (Spark's analysis and
  optimisation, then Iceberg's planning: the manifests read by Spark, or the plan request and its batches), median
  of `--runs`;
- files read: the data files of the Iceberg scan's tasks in Spark's physical plan (`BatchScanExec`'s input
  partitions, as tests/test_spark_sql.py finds them); bytes read: those files' sizes (Iceberg's
  `file_size_in_bytes`; Parquet reads the footers and the kept row groups' column chunks of them, so an upper bound
  the same way for both sides);
- rows: counted both ways and compared as multisets in Spark (`exceptAll` both ways): any difference is printed
  loudly and fails the run after the table is printed.

The service's `/metrics` says which side planned: `own` must make no plan request, `served` index plans (asserted).

    python benchmarks/bench_spark_sql.py            # the issue's sizes: SF 3 in 200 files, median of 5
    python benchmarks/bench_spark_sql.py --quick    # toy: SF 0.01 in 4 files, 1 run (each flag still wins)

Prints a Markdown table for docs/benchmarks.md and the load average before and after (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_query import _build, _lineitem
from bench_serve import TOKEN, Server, _load, _short

TABLE = "bench.small"  # bench_query's lineitem table
SIDES = ("own", "served")
PLANNING = {"own": "client", "served": "server"}  # each catalog's scan-planning-mode


def session(driver_memory: str) -> tuple[Any, bool]:
    """The benchmark's SparkSession and whether this script made it (an active one, e.g. a test run's, is reused
    and left running). None when the Iceberg connector's jars are missing."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from indexlib.jars import has_connector, spark_jars

    jars = spark_jars()
    if not has_connector("iceberg", jars):
        raise SystemExit("no iceberg connector jars: run `make jars` (jvm/pom.xml)")
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("bench-spark-sql")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def catalog(side: str, server: Server) -> str:
    """The Spark catalog of `side` for this run's service: named by its port, because Spark keeps a catalog it has
    made for the session's life (a session shared with other code, as in a test run, would otherwise reuse a catalog
    `own` or `served` pointing at another service)."""
    return f"bench_{side}_{server.port}"


def configure(spark: Any, server: Server) -> None:
    """The catalogs of both sides (`catalog`): Iceberg's REST catalog at the service, the token, and the planning
    mode."""
    for side in SIDES:
        name = catalog(side, server)
        properties = {
            "": "org.apache.iceberg.spark.SparkCatalog",
            "type": "rest",
            "uri": server.url,
            "token": TOKEN,
            "scan-planning-mode": PLANNING[side],
        }
        for key, value in properties.items():
            spark.conf.set(f"spark.sql.catalog.{name}{'.' + key if key else ''}", value)


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


def scanned(df: Any) -> dict[str, int]:
    """The data files the Iceberg scan in the DataFrame's physical plan reads, with their sizes in bytes (building
    the input partitions is Iceberg's planning: the plan request through the service, the manifests without)."""
    spark = df.sparkSession
    files: dict[str, int] = {}
    scans = 0
    leaves = df._jdf.queryExecution().executedPlan().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() == "LocalTableScanExec":  # Spark proved the filter FALSE
            continue
        assert leaf.getClass().getSimpleName() == "BatchScanExec", leaf.toString()
        scans += 1
        partitions = leaf.inputPartitions().iterator()
        while partitions.hasNext():
            tasks = _call_hidden(spark, partitions.next(), "taskGroup").tasks().iterator()
            while tasks.hasNext():
                data = tasks.next().file()
                files[data.location()] = data.fileSizeInBytes()
    assert scans <= 1, "one Iceberg scan"
    return files


def plans(server: Server) -> dict[str, int]:
    """The service's `skipindex_plans_total` per route (`index`, `upstream`)."""
    request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith("skipindex_plans_total{"):
            found[line.split('"')[1]] = int(float(line.rsplit(" ", 1)[1]))
    return found


def snapshot(spark: Any, catalog: str) -> int:
    """The snapshot a catalog's table is read at (its current one, as Spark's catalog loaded it)."""
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{catalog}.{TABLE}")
    return int(table.currentSnapshot().snapshotId())


@dataclass
class Side:
    seconds: float = 0.0
    plan_seconds: float = 0.0
    files: int = 0
    bytes: int = 0
    rows: int = -1
    plan_requests: dict[str, int] = field(default_factory=dict)  # the service's plans made by this side's runs


@dataclass
class Row:
    query: str
    where: str
    total_files: int
    sides: dict[str, Side] = field(default_factory=dict)
    differ: int = -1  # rows in one side's answer and not the other's (multisets)


def _sql(catalog: str, where: str) -> str:
    return f"SELECT * FROM {catalog}.{TABLE} WHERE {where}"


def _run(spark: Any, catalog: str, where: str, collect: bool) -> None:
    frame = spark.sql(_sql(catalog, where))
    if collect:
        frame.collect()
    else:
        frame.write.format("noop").mode("overwrite").save()


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def measure(
    spark: Any, server: Server, queries: list[tuple[str, str]], total: int, runs: int, collect: bool
) -> list[Row]:
    out = []
    for label, where in queries:
        row = Row(label, where, total, {side: Side() for side in SIDES})
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        plan_times: dict[str, list[float]] = {side: [] for side in SIDES}
        for side in SIDES:  # warm-up, the files of the plan, and the plan requests one query makes
            before = plans(server)
            _run(spark, catalog(side, server), where, collect)
            row.sides[side].plan_requests = _delta(plans(server), before)
            files = scanned(spark.sql(_sql(catalog(side, server), where)))
            row.sides[side].files, row.sides[side].bytes = len(files), sum(files.values())
        for run in range(runs):  # alternating, so both sides see the same moments of a shared machine
            for side in SIDES if run % 2 == 0 else SIDES[::-1]:
                started = time.perf_counter()
                _run(spark, catalog(side, server), where, collect)
                times[side].append(time.perf_counter() - started)
                started = time.perf_counter()
                scanned(spark.sql(_sql(catalog(side, server), where)))
                plan_times[side].append(time.perf_counter() - started)
        for side in SIDES:
            row.sides[side].seconds = statistics.median(times[side])
            row.sides[side].plan_seconds = statistics.median(plan_times[side])
        own, served = (spark.sql(_sql(catalog(side, server), where)) for side in SIDES)
        row.sides["own"].rows, row.sides["served"].rows = own.count(), served.count()
        row.differ = own.exceptAll(served).count() + served.exceptAll(own).count()
        if row.differ or row.sides["own"].rows != row.sides["served"].rows:
            print(
                f"\n!!! ROWS DIFFER: {label} `{_short(where)}`: {row.differ} rows in one answer and not the other "
                f"(own {row.sides['own'].rows:,} rows, through the service {row.sides['served'].rows:,})\n",
                file=sys.stderr,
                flush=True,
            )
        out.append(row)
        print(f"  {label}: done (load {_load()})", file=sys.stderr, flush=True)
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f}" if size >= 1e5 else f"{size / 1e6:,.3f}"


def target(row: Row) -> str:
    """Issue 41: point queries >= 5x faster through the service; the non-selective query <= 1.1x slower."""
    own, served = row.sides["own"].seconds, row.sides["served"].seconds
    if row.query == "point":
        return "5x met" if own >= 5 * served else "5x MISSED"
    if row.query == "non-selective":
        return "1.1x met" if served <= 1.1 * own else "1.1x MISSED"
    return ""


def print_table(rows: list[Row], title: str, action: str) -> None:
    print(f"\n### Spark SQL `{action}`: Spark's own Iceberg planning against planning through the service, {title}\n")
    print(
        "| query | own planning ms | through the service ms | speed-up | plan only: own / service ms | "
        "files read: own / service | MB read: own / service | rows (differ) | target |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        own, served = r.sides["own"], r.sides["served"]
        rows_cell = f"{served.rows:,} ({r.differ})"
        if r.differ or own.rows != served.rows:
            rows_cell = f"**{own.rows:,} / {served.rows:,} ({r.differ} DIFFER)**"
        print(
            f"| {r.query} | {_ms(own.seconds)} | {_ms(served.seconds)} | {own.seconds / served.seconds:,.1f}x | "
            f"{_ms(own.plan_seconds)} / {_ms(served.plan_seconds)} | {own.files:,} / {served.files:,} | "
            f"{_mb(own.bytes)} / {_mb(served.bytes)} | {rows_cell} | {target(r)} |"
        )
    print("\nQueries: " + "; ".join(f"{r.query}: `{_short(r.where)}`" for r in rows))


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes for a smoke run (each flag below still wins)")
    parser.add_argument("--scale", type=float, help="TPC-H scale factor of lineitem (3)")
    parser.add_argument("--files", type=int, help="files of the lineitem table (200)")
    parser.add_argument("--runs", type=int, help="timed runs per query and side after a warm-up, the median shown (5)")
    parser.add_argument("--collect", action="store_true", help="time `.collect()` instead of the noop sink")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory of the local session (4g)")
    args = parser.parse_args(argv)
    sizes = {"scale": 0.01, "files": 4, "runs": 1} if args.quick else {"scale": 3.0, "files": 200, "runs": 5}
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    action = ".collect()" if args.collect else 'write.format("noop")'
    print(f"load average (1 / 5 / 15 min) at the start: {_load()} on {os.cpu_count()} cores", flush=True)
    spark, made = session(args.driver_memory)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            started = time.perf_counter()
            conf, paths, queries, _ = _lineitem(directory, args.scale, args.files)
            made_s = time.perf_counter() - started
            build_s = _build(conf)
            mb = sum(Path(p).stat().st_size for p in paths) / 1e6
            title = f"TPC-H lineitem SF {args.scale:g}, {len(paths)} files by l_shipdate"
            print(
                f"\n{title}: {mb:,.1f} MB of Parquet; made in {made_s:.0f} s, indexed in {build_s:.0f} s "
                f"(skipindex build, fresh process); median of {args.runs} after a warm-up; Spark "
                f"{spark.version}, {spark.sparkContext.master}",
                flush=True,
            )
            server = Server(conf)
            try:
                configure(spark, server)
                snapshots = {side: snapshot(spark, catalog(side, server)) for side in SIDES}
                assert len(set(snapshots.values())) == 1, f"both catalogs read the same snapshot: {snapshots}"
                rows = measure(spark, server, queries, len(paths), args.runs, args.collect)
            finally:
                server.stop()
        print(f"\nload average at the end: {_load()}")
        print_table(rows, title, action)
    finally:
        if made:
            spark.stop()
    for row in rows:
        assert not row.sides["own"].plan_requests, f"{row.query}: Spark's own planning asked the service to plan"
        assert row.sides["served"].plan_requests.get("index", 0) >= 1, f"{row.query}: the index planned the scan"
    differ = [r.query for r in rows if r.differ or r.sides["own"].rows != r.sides["served"].rows]
    assert not differ, f"rows differ between Spark's own planning and the service: {differ}"
    return rows


if __name__ == "__main__":
    main()
