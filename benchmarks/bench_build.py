"""Build cost per index kind: throughput (values/s) and bytes, on the demo's data (one TPC-H lineitem file of
~24k rows and one service-log shard of 25k rows), measured step by step as the build's per-file code runs them.
Then end to end on many small files (an Iceberg table of `--small-files` Parquet files registered with `add_files`),
side by side on the same files and the same SparkSession: `skipindex build` with tasks planned by bytes, the same
build with one task per file (the old default), and a plain PySpark job that reads the same columns and computes
per-file count, min, max and null counts with `groupBy(input_file_name())`.

    python benchmarks/bench_build.py [--small-files 2000] [--skip-kinds]

Issue 30 (docs/benchmarks.md "Issue 30: the automatic choice by cost"): `--lineitem-scale 3 --lineitem-files 200`
(lineitem sorted by l_shipdate, as bench_query.py lays it out; `--lineitem-order generated` for the generator's
order) and `--id-files 2000` (files of 150 random 32-hex ids) print the index bytes per column and kind, the build
against the plain job (`--runs N`: alternating, best of N) and held-out lookups, kept against true files;
`--cpu-files N` the CPU per file of the per-file indexing in one process; `--choice` the measurements behind the
automatic choice's thresholds.

Issue 46 (docs/benchmarks.md "The build on many small files, as whole processes"): `--processes` times
`skipindex build` and the plain PySpark job each as a whole process, as a user runs them (JVM start included;
`--runs N` alternating, best of N), on `--small-files` files of 150 rows (an id, a customer id string, a region
tag, an amount, a timestamp; registered with `add_files`) and with `--lineitem-scale` on lineitem, with the build's
phases read from its own log lines as they arrive, and the build as planned before (Spark's 4 MiB open cost). `--cache DIR` keeps the generated files for the next run (a before / after
comparison reads the same bytes).

Prints Markdown tables for docs/benchmarks.md. Times are the best of 3 on this machine; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from timing import best_of

from indexlib.demo import _events_shard
from indexlib.index_kinds.registry import build_order
from indexlib.index_kinds.settings import IndexSettings
from indexlib.statistics.canonical import distinct_keys
from indexlib.statistics.column_stats import compute_column_stats
from indexlib.statistics.sketches import sketch_keys

SETTINGS = IndexSettings()


def _lineitem_file() -> pa.Table:
    tpchgen = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([tpchgen, "parquet", "-s", "0.1", "--tables=lineitem", "-o", out], check=True)
        table = pq.read_table(Path(out) / "lineitem.parquet")
    fields = [pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in table.schema]
    return table.cast(pa.schema(fields)).slice(0, 24_000)


def _non_null(values: pa.Array) -> int:
    """Non-null, non-NaN values: what the automatic choice counts a column's rows as."""
    nans = pc.sum(pc.is_nan(values.drop_null())).as_py() or 0 if pa.types.is_floating(values.type) else 0
    return len(values) - values.null_count - nans


def _rows(name: str, table: pa.Table) -> list[str]:
    schema = _iceberg_schema(table)
    rows = []
    for field in schema.fields:
        values = table.column(field.name).combine_chunks()
        n = len(values)
        stats_s = best_of(3, lambda v=values, f=field: compute_column_stats(f.field_id, f.name, f.field_type, v))
        keys = distinct_keys(values, field.field_type)
        keys_s = best_of(3, lambda v=values, f=field: distinct_keys(v, f.field_type))
        if keys is None:
            continue
        ndv_s = best_of(3, lambda k=keys: sketch_keys(k))
        sketch = sketch_keys(keys)
        cells = {"automaton": "-", "bloom": "-"}
        built_so_far = []
        for kind in build_order():
            if not kind.chosen(SETTINGS, field.field_type, keys, _non_null(values), built_so_far):
                continue
            seconds = best_of(3, lambda k=keys, f=field, kd=kind: kd.build(k, f.field_type, SETTINGS))
            built = kind.build(keys, field.field_type, SETTINGS)
            if built is None:
                continue
            built_so_far.append(built)
            cells[kind.name] = f"{seconds * 1e3:.1f} ms, {len(built.payload):,} B" + (" exact" if built.exact else "")
            if kind.name == "bloom":
                cells[kind.name] += f" ({len(keys) / seconds / 1e3:.0f}k keys/s)"
        rows.append(
            f"| {name}.{field.name} | {field.field_type} | {n:,} | {len(keys):,} | {stats_s * 1e3:.1f} ms | "
            f"{keys_s * 1e3:.1f} ms | {ndv_s * 1e3:.1f} ms, {len(sketch):,} B | {cells['automaton']} | {cells['bloom']} |"
        )
    return rows


def _iceberg_schema(table: pa.Table) -> Schema:
    """The schema Iceberg gives the table (field ids, types), through a throw-away catalog."""
    with tempfile.TemporaryDirectory() as warehouse:
        catalog = SqlCatalog("bench", uri=f"sqlite:///{warehouse}/c.db", warehouse=f"file://{warehouse}")
        catalog.create_namespace("b")
        return catalog.create_table("b.t", schema=table.schema).schema()


def _small_files_table(directory: Path, files: int, rows: int) -> tuple[Path, list[str]]:
    """An Iceberg table of `files` Parquet files of `rows` rows each (id, key, tag, note), and a conf for it."""
    data = directory / "data"
    data.mkdir()
    paths = []
    for n in range(files):
        ids = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
        table = pa.table(
            {
                "id": ids,
                "key": pa.array([(i * 7919) % 1_000_003 for i in range(n * rows, (n + 1) * rows)], pa.int64()),
                "tag": pa.array([("api", "db", "web", "cron")[i % 4] for i in range(rows)], pa.string()),
                "note": pa.array([None if i % 5 == 0 else f"note {i}" for i in range(rows)], pa.string()),
            }
        )
        path = data / f"part-{n:06d}.parquet"
        pq.write_table(table, path)
        paths.append(str(path))
    conf = _registered(directory, paths)
    return conf, paths


def _lineitem_table(
    directory: Path, scale: float, files: int, order_by: str | None = None, row_groups: int = 1
) -> tuple[Path, list[str]]:
    """TPC-H lineitem at `scale` as an Iceberg table of `files` Parquet files, and a conf for it. `order_by`: the
    column the rows are sorted by before they are cut into files (an ingestion pipeline's layout: by event date);
    default the generator's order-key order. `row_groups` > 1: that many Parquet row groups per file (of equal rows)."""
    paths = _lineitem_files(directory, scale, files, order_by, row_groups)
    return _registered(directory, paths), paths


def _lineitem_files(
    directory: Path, scale: float, files: int, order_by: str | None = None, row_groups: int = 1
) -> list[str]:
    """The Parquet files of `_lineitem_table`, written to `directory`/data."""
    tpchgen = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    generated = directory / "generated"
    subprocess.run([tpchgen, "parquet", "-s", str(scale), "--tables=lineitem", "-o", str(generated)], check=True)
    table = pq.read_table(generated / "lineitem.parquet")
    fields = [pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in table.schema]
    table = table.cast(pa.schema(fields))
    if order_by is not None:
        table = table.sort_by(order_by)
    shutil.rmtree(generated)
    data = directory / "data"
    data.mkdir()
    per_file = -(-table.num_rows // files)
    paths = []
    for n in range(files):
        path = data / f"part-{n:04d}.parquet"
        part = table.slice(n * per_file, per_file)
        size = max(1, -(-part.num_rows // row_groups)) if row_groups > 1 else None  # None: pyarrow's default
        pq.write_table(part, path, row_group_size=size)
        paths.append(str(path))
    return paths


def _lineitem_by_date(directory: Path, scale: float, files: int, cache: Path | None) -> tuple[Path, list[str]]:
    """lineitem sorted by l_shipdate and cut into `files` files, as bench_query.py lays it out; with `cache`, the
    files are written there once and reused by later runs (a before / after comparison reads the same bytes)."""
    if cache is None:
        return _lineitem_table(directory, scale, files, order_by="l_shipdate")
    home = cache / f"lineitem-sf{scale:g}-{files}-by-shipdate"
    paths = sorted(str(p) for p in (home / "data").glob("*.parquet"))
    if len(paths) != files:
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        paths = _lineitem_files(home, scale, files, order_by="l_shipdate")
    return _registered(directory, paths), paths


def _id_files_table(directory: Path, files: int, rows: int, cache: Path | None) -> tuple[Path, list[str]]:
    """Small files of random identifiers: `files` files of `rows` rows, with `id` (32 random hex digits, all
    distinct), `tag` (4 values), `key` (a random long) and `amount` (a double)."""
    home = (cache / f"ids-{files}x{rows}") if cache is not None else directory
    data = home / "data"
    paths = sorted(str(p) for p in data.glob("*.parquet")) if data.exists() else []
    if len(paths) != files:
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        rng = np.random.default_rng(30)
        paths = []
        for n in range(files):
            ids = rng.integers(0, 256, size=(rows, 16), dtype=np.uint8)
            table = pa.table(
                {
                    "id": pa.array([bytes(row).hex() for row in ids], pa.string()),
                    "tag": pa.array(np.array(["api", "db", "web", "cron"])[rng.integers(0, 4, rows)]),
                    "key": pa.array(rng.integers(0, 2**62, rows), pa.int64()),
                    "amount": pa.array(rng.random(rows) * 1000, pa.float64()),
                }
            )
            path = data / f"part-{n:06d}.parquet"
            pq.write_table(table, path)
            paths.append(str(path))
    return _registered(directory, paths), paths


def _registered(directory: Path, paths: list[str]) -> Path:
    """`paths` registered with `add_files` as the Iceberg table bench.small; returns a conf for its catalog."""
    conf = directory / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "bench"\ntype = "sql"\nuri = "sqlite:///{directory}/catalog.db"\n'
        f'warehouse = "{directory}/warehouse"\n'
    )
    catalog = SqlCatalog("bench", uri=f"sqlite:///{directory}/catalog.db", warehouse=str(directory / "warehouse"))
    catalog.create_namespace("bench")
    iceberg = catalog.create_table("bench.small", schema=pq.read_schema(paths[0]))
    iceberg.add_files(paths)
    return conf


def bench_spark(connectors: bool = False):
    """The benchmarks' SparkSession: local[2], no UI, no console progress, Spark's log at ERROR; with
    `connectors`, the jars `make jars` fetched (Iceberg's runtime, delta-spark) when there are any."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from indexlib.jars import spark_jars

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    jars = spark_jars() if connectors else []
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def plain_scan(spark, paths: list[str], columns: list[str]) -> None:
    """The plain PySpark job a build is compared with: the same files and columns, per-file count, min, max and
    null counts with `groupBy(input_file_name())`."""
    from pyspark.sql import functions as F

    frame = spark.read.parquet(*paths).withColumn("file", F.input_file_name())
    aggregates = [F.count(F.lit(1)).alias("rows")]
    for column in columns:
        aggregates += [F.min(column), F.max(column), F.count(F.when(F.col(column).isNull(), 1))]
    frame.groupBy("file").agg(*aggregates).collect()


def end_to_end(make_table, title: str, per_file: bool = True, queries=None, runs: int = 1) -> dict:
    """`make_table(directory) -> (conf, paths)`; prints the side-by-side table for it. `queries(paths) -> [(label,
    [where, ...])]`: lookups whose kept files are compared with the files truly holding a match. `runs`: builds and
    plain jobs measured alternately this many times, the best of each kept (one run: the plain job best of 2)."""
    from indexlib.config import load_config
    from indexlib.indexing.build import build_index

    spark = bench_spark()
    with tempfile.TemporaryDirectory() as tmp:
        conf, paths = make_table(Path(tmp))
        data_bytes = sum(Path(p).stat().st_size for p in paths)
        columns = pq.read_schema(paths[0]).names
        config = load_config(conf)
        build_index(config, "bench.small", spark)  # warm-up: the JVM and the Python workers' imports
        plain_label = "plain PySpark: per-file count/min/max/nulls (groupBy(input_file_name()))"

        def plain() -> None:
            plain_scan(spark, paths, columns)

        plain()  # warm-up
        timings = {}
        index_bytes = 0
        variants = [("skipindex build, tasks planned by bytes", "")]
        if per_file:
            variants.append(
                ("skipindex build, one task per file (before)", "[build]\nsplit_bytes = 1\nopen_cost_bytes = 0\n")
            )
        plain_runs = []
        for run in range(runs):  # builds and plain jobs alternate, so a burst of load hits both alike
            for number, (label, extra) in enumerate(variants):
                namespace = f"idx{run}_{number}"
                variant = Path(tmp) / f"{namespace}.toml"
                variant.write_text(conf.read_text() + f'[index]\nnamespace = "{namespace}"\n' + extra)
                started = time.perf_counter()
                build_index(load_config(variant), "bench.small", spark)
                timings[label] = min(timings.get(label, float("inf")), time.perf_counter() - started)
                if not index_bytes:
                    variant_config = load_config(variant)
                    index = variant_config.load_catalog().load_table(f"{namespace}.bench__small")
                    index_bytes = sum(index.inspect.files().column("file_size_in_bytes").to_pylist())
                    by_kind, by_column = _bytes_by_kind(variant_config)
                    precision = _precision(variant_config, paths, queries(paths)) if queries else []
            plain_runs.append(best_of(1 if runs > 1 else 2, plain))
        timings[plain_label] = min(plain_runs)
    base = timings[plain_label]
    print(
        f"\n{title}: {len(paths):,} files, {data_bytes / 1e6:,.1f} MB of Parquet; Spark local[2], after a warm-up; "
        f"best of {runs} alternating run(s)"
    )
    print(f"load average before / after: {_load_before} / {os.getloadavg()[0]:.2f}")
    print(f"index: {index_bytes / 1e6:,.2f} MB = {100 * index_bytes / data_bytes:.1f} % of the data bytes")
    print(
        "uncompressed, per part: " + ", ".join(f"{k} {100 * b / data_bytes:.2f} %" for k, b in by_kind.items()) + "\n"
    )
    print("| job | seconds | files/s | MB/s | vs plain Spark |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds in timings.items():
        rate = data_bytes / 1e6 / seconds
        print(f"| {label} | {seconds:.1f} | {len(paths) / seconds:,.0f} | {rate:,.1f} | {seconds / base:.2f}x |")
    print("\nPayload bytes per column and kind (uncompressed; files: how many files have one)\n")
    print("| column | kind | MB | % of the data bytes | files |")
    print("|---|---|---:|---:|---:|")
    for (column, kind), (size, count) in sorted(by_column.items(), key=lambda item: -item[1][0]):
        print(f"| {column} | {kind} | {size / 1e6:,.2f} | {100 * size / data_bytes:.2f} | {count:,} |")
    if queries is _lineitem_queries:
        _densities(paths)
    if precision:
        print("\nHeld-out lookups: files kept against files holding a match (sums over the lookups)\n")
        print("| query | lookups | files kept | files holding a match | kept / true |")
        print("|---|---:|---:|---:|---:|")
        for label, lookups, kept, true in precision:
            print(f"| {label} | {lookups} | {kept:,} | {true:,} | {kept / max(true, 1):.2f}x |")
    return {"title": title, "timings": timings, "plain": plain_label, "data_bytes": data_bytes, "by_kind": by_kind}


_load_before = f"{os.getloadavg()[0]:.2f}"


def _customers_table(directory: Path, files: int, rows: int) -> tuple[Path, list[str]]:
    """Issue 46's table: `files` Parquet files of `rows` rows (id, customer, region, amount, ts), and a conf."""
    import datetime as dt
    import random

    rng = random.Random(46)
    data = directory / "data"
    data.mkdir()
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    paths = []
    for n in range(files):
        table = pa.table(
            {
                "id": pa.array(range(n * rows, (n + 1) * rows), pa.int64()),
                "customer": pa.array([f"c{rng.randrange(100_000):06d}" for _ in range(rows)], pa.string()),
                "region": pa.array([rng.choice(("eu", "us", "ap", "sa")) for _ in range(rows)], pa.string()),
                "amount": pa.array([round(rng.uniform(0, 1_000), 2) for _ in range(rows)], pa.float64()),
                "ts": pa.array(
                    [start + dt.timedelta(seconds=600 * n + i) for i in range(rows)], pa.timestamp("us", tz="UTC")
                ),
            }
        )
        path = data / f"part-{n:06d}.parquet"
        pq.write_table(table, path)
        paths.append(str(path))
    return _registered(directory, paths), paths


_PLAIN_PROCESS = """
import json, sys, time
started = time.perf_counter()
from bench_build import bench_spark, plain_scan
import pyarrow.parquet as pq
paths = json.loads(open(sys.argv[1]).read())
spark = bench_spark()
session = time.perf_counter()
plain_scan(spark, paths, pq.read_schema(paths[0]).names)
print(json.dumps({"session": session - started, "job": time.perf_counter() - session}))
"""

# The build's log lines that end its phases, in order (indexing/build.py, indexing/progress.py)
_BUILD_PHASES = [
    ("imports, catalog, source planning", re.compile(r" live data files without an index row")),
    ("Spark session start, task planning", re.compile(r": indexing \d+ files \(.*\) in ")),
    ("the tasks (indexing)", re.compile(r": indexed [\d,]+ files \(.*files/s")),
    ("entries, commit, exit", None),
]


def _timed_build(conf: Path) -> tuple[float, list[float], str]:
    """`skipindex build` as a process: its seconds, the seconds of each of `_BUILD_PHASES` (when the line ending
    it arrived on stderr), and where it ran (its tasks)."""
    skipindex = str(Path(sys.executable).with_name("skipindex"))
    started = time.perf_counter()
    command = [skipindex, "build", "--conf", str(conf), "--table", "bench.small"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    ends, where = [], ""
    for line in process.stderr:
        marker = _BUILD_PHASES[len(ends)][1]
        if marker is not None and marker.search(line):
            where = line.strip().rsplit(") ", 1)[-1] if len(ends) == 1 else where
            ends.append(time.perf_counter() - started)
    if process.wait() != 0 or len(ends) != len(_BUILD_PHASES) - 1:
        raise SystemExit(f"{' '.join(command)} failed or logged other lines than bench_build expects")
    total = time.perf_counter() - started
    ends.append(total)
    return total, [b - a for a, b in zip([0.0, *ends], ends, strict=False)], where


def whole_processes(make_table, title: str, runs: int) -> None:
    """Issue 46: `skipindex build` and the plain PySpark job, each a fresh process, alternately `runs` times, on
    the table `make_table(directory) -> (conf, paths)` makes; Spark `local[2]` for both."""
    import json

    with tempfile.TemporaryDirectory() as tmp:
        conf, paths = make_table(Path(tmp))
        conf.write_text(conf.read_text() + '[spark]\nmaster = "local[2]"\n')
        listing = Path(tmp) / "paths.json"
        listing.write_text(json.dumps(paths))
        data_bytes = sum(Path(p).stat().st_size for p in paths)
        builds, befores, plains = [], [], []
        for run in range(runs):
            for timings, build in ((builds, ""), (befores, "[build]\nopen_cost_bytes = 4194304\n")):
                variant = Path(tmp) / f"run{run}_{len(build)}.toml"
                variant.write_text(conf.read_text() + f'[index]\nnamespace = "idx{run}_{len(build)}"\n' + build)
                timings.append(_timed_build(variant))
            started = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", _PLAIN_PROCESS, str(listing)],
                capture_output=True,
                text=True,
                check=True,
                cwd=Path(__file__).parent,
            )
            plains.append((time.perf_counter() - started, json.loads(out.stdout.strip().splitlines()[-1])))
    build, phases, tasks = min(builds)
    before, _, before_tasks = min(befores)
    plain, parts = min(plains, key=lambda p: p[0])
    print(
        f"\n{title}: {len(paths):,} files ({data_bytes / 1e6:,.1f} MB), whole processes, Spark local[2], "
        f"best of {runs} alternating; load average before / after: {_load_before} / {os.getloadavg()[0]:.2f}\n"
    )
    print("| job (a fresh process) | seconds | vs plain Spark | runs |")
    print("|---|---:|---:|---|")
    print(
        f"| skipindex build ({tasks}) | {build:.1f} | {build / plain:.2f}x | {', '.join(f'{b[0]:.1f}' for b in builds)} |"
    )
    print(
        f"| *before: Spark's 4 MiB open cost per file ({before_tasks})* | {before:.1f} | {before / plain:.2f}x | "
        f"{', '.join(f'{b[0]:.1f}' for b in befores)} |"
    )
    print(f"| plain PySpark per-file statistics | {plain:.1f} | 1.00x | {', '.join(f'{p[0]:.1f}' for p in plains)} |")
    print("\n| phase of the best build | seconds |\n|---|---:|")
    for (label, _), seconds in zip(_BUILD_PHASES, phases, strict=True):
        print(f"| {label} | {seconds:.1f} |")
    print(f"| *plain job: Spark session start / the job* | {parts['session']:.1f} / {parts['job']:.1f} |")


def _precision(config, paths: list[str], queries: list[tuple[str, list[str]]]) -> list[tuple[str, int, int, int]]:
    """Per query label: (label, lookups, files the lookup keeps, files holding a matching row), summed over the
    label's WHERE clauses. The truth is DuckDB over every file's rows."""
    import duckdb

    from indexlib.lookup import lookup

    con = duckdb.connect()
    rows = []
    for label, wheres in queries:
        kept = true = 0
        for where in wheres:
            kept += len(lookup(config, "bench.small", where).files)
            sql = f"SELECT count(DISTINCT filename) FROM read_parquet(?, filename = true) WHERE {where}"
            true += con.sql(sql, params=[paths]).fetchall()[0][0]
        rows.append((label, len(wheres), kept, true))
    return rows


def _densities(paths: list[str]) -> None:
    """Per integral column: how much of its [min, max] span a file's distinct values fill (the Bloom rule's
    density), the median and range over the files."""
    import duckdb

    schema = pq.read_schema(paths[0])
    integral = [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_date(f.type)]
    integral += [f.name for f in schema if pa.types.is_decimal(f.type) and f.type.scale == 0]
    if not integral:
        return
    con = duckdb.connect()
    print("\nDistinct values / [min, max] span per file (integral columns)\n")
    print("| column | median | min | max |")
    print("|---|---:|---:|---:|")
    for column in integral:
        span = (
            f"(max({column}) - min({column}))"
            if "date" not in column
            else f"date_diff('day', min({column}), max({column}))"
        )
        sql = (
            f"SELECT median(d), min(d), max(d) FROM (SELECT count(DISTINCT {column}) / ({span} + 1) AS d "
            "FROM read_parquet(?, filename = true) GROUP BY filename)"
        )
        median, low, high = con.sql(sql, params=[paths]).fetchall()[0]
        print(f"| {column} | {median:.3f} | {low:.3f} | {high:.3f} |")


def _lineitem_queries(paths: list[str]) -> list[tuple[str, list[str]]]:
    """Held-out lookups on lineitem: keys drawn at random (fixed seed) from the data, none used to pick the rules."""
    import duckdb

    con = duckdb.connect()
    rng = np.random.default_rng(3030)

    def sample(column: str, count: int) -> list:
        sql = f"SELECT DISTINCT {column} FROM read_parquet(?) ORDER BY 1"
        values = [row[0] for row in con.sql(sql, params=[paths]).fetchall()]
        return [values[i] for i in rng.choice(len(values), count, replace=False)]

    def quoted(value) -> str:
        return "'" + str(value).replace("'", "''") + "'"

    orders = sample("l_orderkey", 70)
    return [
        ("`l_orderkey = k` (20 keys)", [f"l_orderkey = {k}" for k in orders[:20]]),
        (
            "`l_orderkey IN (10 keys)` (5 lists)",
            ["l_orderkey IN (" + ", ".join(map(str, orders[20 + 10 * i : 30 + 10 * i])) + ")" for i in range(5)],
        ),
        ("`l_partkey = k` (20 keys)", [f"l_partkey = {k}" for k in sample("l_partkey", 20)]),
        ("`l_returnflag = 'N' AND l_linestatus = 'F'`", ["l_returnflag = 'N' AND l_linestatus = 'F'"]),
        ("`l_suppkey = k` (5 keys; dense: no filter now)", [f"l_suppkey = {k}" for k in sample("l_suppkey", 5)]),
        (
            "`l_extendedprice = x` (5 values; a measure: no filter now)",
            [f"l_extendedprice = {x}" for x in sample("l_extendedprice", 5)],
        ),
        (
            "`l_comment = c` (5 values; free text: no filter now)",
            [f"l_comment = {quoted(c)}" for c in sample("l_comment", 5)],
        ),
    ]


def _id_queries(paths: list[str]) -> list[tuple[str, list[str]]]:
    import duckdb

    con = duckdb.connect()
    rng = np.random.default_rng(3030)
    picked = [paths[i] for i in rng.choice(len(paths), 20, replace=False)]
    ids = [con.sql("SELECT id FROM read_parquet(?) LIMIT 1 OFFSET 77", params=[p]).fetchall()[0][0] for p in picked]
    return [
        ("`id = x` (20 ids)", [f"id = '{i}'" for i in ids]),
        (
            "`id IN (10 ids)` (2 lists)",
            ["id IN (" + ", ".join(f"'{i}'" for i in ids[n : n + 10]) + ")" for n in (0, 10)],
        ),
        ("`tag = 'db'`", ["tag = 'db'"]),
    ]


def cpu_per_file(make_table, title: str, count: int) -> None:
    """CPU seconds (this process, one core: `time.process_time`, which other jobs' load does not inflate) of
    indexing `count` of the table's files, evenly spaced, with the per-file code Spark tasks run and the automatic
    choice; and of reading the same files' columns with pyarrow and computing count/min/max/nulls, the plain job's
    work without Spark."""
    from pyiceberg.schema import Schema as IcebergSchema

    from indexlib.indexing.file_indexer import IndexTask, index_file

    with tempfile.TemporaryDirectory() as tmp:
        conf, paths = make_table(Path(tmp))
        from indexlib.config import load_config

        table = load_config(conf).load_catalog().load_table("bench.small")
        schema: IcebergSchema = table.schema()
        mapping = table.name_mapping().model_dump_json() if table.name_mapping() else None
        picked = [paths[int(i)] for i in np.linspace(0, len(paths) - 1, min(count, len(paths)))]
        task = IndexTask(schema, {}, mapping, 1)
        index_file(picked[0], "PARQUET", task)  # warm-up: imports, caches
        started = time.process_time()
        for path in picked:
            index_file(path, "PARQUET", task)
        indexing = (time.process_time() - started) / len(picked)
        started = time.process_time()
        for path in picked:
            data = pq.read_table(path)
            for column in data.columns:
                pc.min_max(column), pc.count(column, mode="only_null")
        plain = (time.process_time() - started) / len(picked)
    print(f"\n{title}: CPU per file over {len(picked)} of {len(paths):,} files, one process")
    print(f"load average: {os.getloadavg()[0]:.2f}\n")
    print("| work | CPU ms per file |")
    print("|---|---:|")
    print(f"| index_file (entry: counts, bounds, keys, NDV sketch, chosen payloads) | {indexing * 1e3:.1f} |")
    print(f"| pyarrow read + count/min/max/nulls of every column | {plain * 1e3:.1f} |")


def _bytes_by_kind(config) -> tuple[dict[str, int], dict[tuple[str, str], tuple[int, int]]]:
    """Bytes of what the index stores per (file, column), before Parquet's compression: bounds, NDV sketches, and
    each kind's payloads; and per (column, kind) the payload bytes and the number of files that have one."""
    from indexlib.store.table import IndexTable

    totals = {"min/max": 0, "NDV sketch": 0}
    by_column: dict[tuple[str, str], tuple[int, int]] = {}
    entries = IndexTable(config.load_catalog(), config.index_namespace, "bench.small").entries()
    for entry in entries.to_pylist():
        for column in entry["columns"]:
            totals["min/max"] += len(column["lower"] or b"") + len(column["upper"] or b"")
            totals["NDV sketch"] += len(column["ndv_sketch"] or b"")
            for index in column["indexes"] or ():
                totals[index["kind"]] = totals.get(index["kind"], 0) + len(index["payload"])
                size, count = by_column.get((column["name"], index["kind"]), (0, 0))
                by_column[(column["name"], index["kind"])] = (size + len(index["payload"]), count + 1)
    return totals, by_column


def _chart(results: list[dict], path: str) -> None:
    """Build seconds against plain Spark, and index bytes per part as a share of the data, per data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (times, sizes) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [r["title"] for r in results]
    positions = range(len(results))
    build = [next(v for k, v in r["timings"].items() if k.startswith("skipindex build, tasks")) for r in results]
    plain = [r["timings"][r["plain"]] for r in results]
    times.bar([p - 0.2 for p in positions], build, 0.4, label="skipindex build")
    times.bar([p + 0.2 for p in positions], plain, 0.4, label="plain PySpark count/min/max/nulls")
    times.set_xticks(list(positions), labels, fontsize=8)
    times.set_ylabel("seconds (local[2])")
    times.legend(fontsize=8)
    bottom = [0.0] * len(results)
    for part in sorted({k for r in results for k in r["by_kind"]}):
        shares = [100 * r["by_kind"].get(part, 0) / r["data_bytes"] for r in results]
        sizes.bar(list(positions), shares, 0.5, bottom=bottom, label=part)
        bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
    sizes.set_xticks(list(positions), labels, fontsize=8)
    sizes.set_ylabel("% of the data bytes (uncompressed payloads)")
    sizes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small-files", type=int, default=2_000, help="files of the end-to-end run (0: skip it)")
    parser.add_argument("--skip-kinds", action="store_true", help="skip the per-kind table")
    parser.add_argument(
        "--no-per-file", action="store_true", help="leave out the one-task-per-file build (~16 files/s)"
    )
    parser.add_argument("--lineitem-scale", type=float, default=0, help="also TPC-H lineitem at this scale (e.g. 1)")
    parser.add_argument("--lineitem-files", type=int, default=50, help="files of the lineitem table")
    parser.add_argument(
        "--lineitem-order",
        choices=("shipdate", "generated"),
        default="shipdate",
        help="lineitem sorted by l_shipdate before it is cut (bench_query.py's layout), or the generator's order",
    )
    parser.add_argument("--id-files", type=int, default=0, help="also this many files of 150 random 32-hex ids")
    parser.add_argument("--cache", type=Path, help="keep the generated data files here and reuse them")
    parser.add_argument("--label", default="", help="added to the titles (e.g. which choice of index kinds ran)")
    parser.add_argument("--runs", type=int, default=1, help="end to end: builds and plain jobs alternately, best of")
    parser.add_argument("--chart", help="write a PNG of the end-to-end runs here")
    parser.add_argument("--memory-rows", type=int, default=0, help="also peak memory for one file of this many rows")
    parser.add_argument("--cpu-files", type=int, default=0, help="only CPU per file, in this process, over N files")
    parser.add_argument("--choice", action="store_true", help="the measurements behind the automatic choice's rules")
    parser.add_argument(
        "--processes",
        action="store_true",
        help="only issue 46: build and plain job as whole processes, on --small-files files of 150 rows (id, "
        "customer, region, amount, ts) and on lineitem if --lineitem-scale is given",
    )
    args = parser.parse_args()
    if args.processes:
        if args.small_files:
            make = lambda d: _customers_table(d, args.small_files, 150)  # noqa: E731
            whole_processes(make, f"{args.small_files:,} files of 150 rows", args.runs)
        if args.lineitem_scale:
            make = lambda d: _lineitem_by_date(d, args.lineitem_scale, args.lineitem_files, args.cache)  # noqa: E731
            whole_processes(make, f"TPC-H lineitem, scale factor {args.lineitem_scale:g}, by shipdate", args.runs)
        return
    if args.choice:
        choice_rules()
    if not args.skip_kinds:
        kinds()
    if args.memory_rows:
        memory(args.memory_rows)
    results = []
    if args.small_files:
        results.append(
            end_to_end(
                lambda d: _small_files_table(d, args.small_files, 200),
                f"{args.small_files:,} small files of 200 rows",
                per_file=not args.no_per_file,
            )
        )
    label = f" ({args.label})" if args.label else ""
    if args.cpu_files:
        if args.id_files:
            cpu_per_file(
                lambda d: _id_files_table(d, args.id_files, 150, args.cache),
                f"{args.id_files:,} small files of 150 random ids{label}",
                args.cpu_files,
            )
        if args.lineitem_scale:
            cpu_per_file(
                lambda d: _lineitem_by_date(d, args.lineitem_scale, args.lineitem_files, args.cache),
                f"TPC-H lineitem, scale factor {args.lineitem_scale:g}, by shipdate{label}",
                args.cpu_files,
            )
        return
    if args.id_files:
        results.append(
            end_to_end(
                lambda d: _id_files_table(d, args.id_files, 150, args.cache),
                f"{args.id_files:,} small files of 150 random ids{label}",
                per_file=not args.no_per_file,
                queries=_id_queries,
                runs=args.runs,
            )
        )
    if args.lineitem_scale:
        if args.lineitem_order == "shipdate":
            make = lambda d: _lineitem_by_date(d, args.lineitem_scale, args.lineitem_files, args.cache)  # noqa: E731
        else:
            make = lambda d: _lineitem_table(d, args.lineitem_scale, args.lineitem_files)  # noqa: E731
        results.append(
            end_to_end(
                make,
                f"TPC-H lineitem, scale factor {args.lineitem_scale:g}, by {args.lineitem_order}{label}",
                per_file=not args.no_per_file,
                queries=_lineitem_queries,
                runs=args.runs,
            )
        )
    if args.chart and results:
        _chart(results, args.chart)


_MEMORY_CHILD = """
import sys
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType
from indexlib.indexing.file_indexer import IndexTask, index_file
fields = [NestedField(1, "a", LongType()), NestedField(2, "b", StringType())]
if sys.argv[2] == "1":
    fields.append(NestedField(3, "d", DoubleType()))
mapping = '[{"field-id": 1, "names": ["a"]}, {"field-id": 2, "names": ["b"]}, {"field-id": 3, "names": ["d"]}]'
index_file(sys.argv[1], "PARQUET", IndexTask(Schema(*fields), {}, mapping, 1))
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")))
"""


def memory(rows: int) -> None:
    """Peak RSS of indexing one file of `rows` rows in a fresh process: two low-cardinality columns, then with a
    column of `rows` distinct doubles too."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/big.parquet"
        n = np.arange(rows)
        table = pa.table(
            {"a": n % 1_000, "b": pa.array(np.array(["api", "db", "web", "cron"])[n % 4]), "d": n * 1.000001}
        )
        pq.write_table(table, path, row_group_size=1_000_000)
        size = Path(path).stat().st_size
        del table, n
        print(f"\nMemory: one file of {rows:,} rows, {size / 1e6:.0f} MB of Parquet, indexed in a fresh process\n")
        print("| columns indexed | peak RSS |")
        print("|---|---:|")
        for label, with_doubles in (
            ("a (1,000 values), b (4 values)", "0"),
            (f"... and d ({rows:,} distinct doubles)", "1"),
        ):
            out = subprocess.run(
                [sys.executable, "-c", _MEMORY_CHILD, path, with_doubles], check=True, capture_output=True, text=True
            )
            print(f"| {label} | {int(out.stdout.split()[-1]) / 1024:,.0f} MB |")


def choice_rules() -> None:
    """The measurements behind the automatic choice's thresholds (docs/index-kinds.md "The automatic choice"): how
    much of each column reads as prose (the Bloom filter's free-text rule), and what an automaton costs to build,
    exact or trimmed, for sets of tags and of identifiers."""
    import random
    import string
    import uuid

    from indexlib.automaton import build_tag_regex
    from indexlib.index_kinds.bloom import FREE_TEXT_CHARS, FREE_TEXT_WORDS

    tpchgen = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    columns: dict[str, pa.Array] = {}
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([tpchgen, "parquet", "-s", "0.1", "-o", out], check=True)
        for table, column in [
            ("lineitem", "l_comment"),
            ("orders", "o_comment"),
            ("part", "p_name"),
            ("part", "p_comment"),
            ("customer", "c_comment"),
            ("customer", "c_address"),
            ("customer", "c_name"),
            ("customer", "c_phone"),
            ("orders", "o_clerk"),
        ]:
            read = pq.read_table(Path(out) / f"{table}.parquet", columns=[column]).column(0)
            columns[f"TPC-H {column}"] = pc.unique(read.combine_chunks().cast(pa.string()))
    rng = random.Random(30)
    first, last = ["John", "Mary", "Wei", "Ana", "Olu", "Priya", "Jose"], ["Smith", "Garcia", "Chen", "Okafor", "Kumar"]
    cities = ["New York", "Los Angeles", "San Francisco", "Rio de Janeiro", "Paris"]
    made_up = {
        "names (`Wei Chen-17`)": [f"{rng.choice(first)} {rng.choice(last)}-{i}" for i in range(5000)],
        "names (`Wei B. Chen17`)": [
            f"{rng.choice(first)} {rng.choice('ABCDE')}. {rng.choice(last)}{i}" for i in range(5000)
        ],
        "cities (`Rio de Janeiro 17`)": [f"{rng.choice(cities)} {i}" for i in range(5000)],
        "uuids": [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(5000)],
        "e-mail addresses": [f"user{i}@example.com" for i in range(5000)],
        "URLs": [f"https://example.com/api/v2/items/{i}?page={i % 7}" for i in range(5000)],
        "log messages": [f"connection from 10.0.{i % 256}.{i % 7} closed after {i} ms" for i in range(5000)],
        "user agents": [f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/{i} (KHTML, like Gecko)" for i in range(5000)],
    }
    columns.update({name: pa.array(values) for name, values in made_up.items()})
    print(f"\nShare of distinct values with >= {FREE_TEXT_WORDS} words and >= {FREE_TEXT_CHARS} characters\n")
    print("| column | distinct | mean characters | share |")
    print("|---|---:|---:|---:|")
    for name, values in columns.items():
        words = pc.list_value_length(pc.utf8_split_whitespace(values))
        lengths = pc.utf8_length(values)
        prose = pc.and_(pc.greater_equal(words, FREE_TEXT_WORDS), pc.greater_equal(lengths, FREE_TEXT_CHARS))
        share = pc.mean(prose.cast(pa.int8())).as_py()
        print(f"| {name} | {len(values):,} | {pc.mean(lengths).as_py():.1f} | {100 * share:.0f} % |")

    words = ["auth", "billing", "search", "metadata", "ingest", "query"]
    sets = {}
    for n in (16, 64, 150, 256):
        sets[f"{n} random 32-hex ids"] = ["".join(rng.choice("0123456789abcdef") for _ in range(32)) for _ in range(n)]
        sets[f"{n} host names `host-0042.eu-west-1`"] = [f"host-{i:04d}.eu-west-1" for i in range(n)]
        sets[f"{n} service names `search-api-42`"] = [
            f"{rng.choice(words)}-{rng.choice(['api', 'worker', 'cron'])}-{i}" for i in range(n)
        ]
        sets[f"{n} random words"] = [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 10))) for _ in range(n)
        ]
    print("\nAutomaton build per file and column: the exact attempt alone (the automatic choice) against the search")
    print("for a trimmed superset (configured `kinds`); best of 3\n")
    print("| values | UTF-8 bytes | exact attempt | exact? | with trimming |")
    print("|---|---:|---:|---|---:|")
    for name, values in sets.items():
        exact_s = best_of(3, lambda v=values: build_tag_regex(v, trim=False))
        exact = build_tag_regex(values, trim=False).exact
        trimmed_s = best_of(3, lambda v=values: build_tag_regex(v)) if not exact else exact_s
        size = sum(len(v.encode()) for v in set(values))
        shown = f"{trimmed_s * 1e3:.1f} ms" if not exact else "(not needed)"
        print(f"| {name} | {size:,} | {exact_s * 1e3:.1f} ms | {'yes' if exact else 'no'} | {shown} |")


def kinds() -> None:
    lineitem = _lineitem_file()
    events = _events_shard(3, 25_000)
    print(
        "| column | type | rows | distinct | min/max + counts | canonical keys | NDV sketch | automaton | Bloom (1 %) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    for row in _rows("lineitem", lineitem) + _rows("events", events):
        print(row)


if __name__ == "__main__":
    main()
