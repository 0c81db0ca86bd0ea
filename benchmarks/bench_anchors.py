"""skipindex against the table formats' own skipping and Parquet Bloom filters, side by side in one run (issue 44).

The same rows written once per system, the same queries in the same engine (Spark SQL), per system and query the
files and bytes read, the rows and the wall time.

Data (both deterministic, so any two runs read the same rows):

- `lineitem`: bench_query.py's table (TPC-H lineitem at `--scale` sorted by `l_shipdate`, an ingestion pipeline's
  layout, cut into `--files` Parquet files by pyarrow, registered with `add_files` as the Iceberg table
  `bench.small` on a local SQLite catalog), its queries plus `LIKE '%x%'`;
- `events`: the demo's service-log table (indexlib/demo.py `_events_shard`: one file per hourly shard of 3 of 10
  services, random 32-hex trace ids), `--shards` files of `--shard-rows` rows, as `bench.events` in the same
  catalog, bench_query.py's events queries plus a regex on the service tag.

Systems, one Spark 4.1 session (`local[2]`, the project's jars, Iceberg's and Delta's SQL extensions):

- `iceberg`: the Iceberg table read through Iceberg's REST catalog at a real `skipindex serve`
  (`bench_serve.Server`) with `scan-planning-mode=client`: Spark's Iceberg runtime reads the manifests and prunes by
  their column bounds itself (bench_spark_sql.py's `own`);
- `skipindex`: the same table, the same catalog, with `scan-planning-mode=server`: every scan planned by the service
  from the index built by `skipindex build` in a fresh process (bench_spark_sql.py's `served`). Only what Spark
  pushes to Iceberg as a filter reaches the service: `LIKE '%x%'` and regexes are not pushed, so are planned unpruned;
- `skipindex scan API`: `handle.scan(where).to_spark(spark)` on a warm handle (lookup in the driver, then the kept
  files read by Spark; the WHERE goes to the index as SQL, so `LIKE '%x%'` and regexes are pruned too). Not Spark
  SQL text but the same engine. With `--files-reader`, also `skipindex scan API, Spark's reader`: the same with
  `reader="files"` (the jar-free reads: Spark's own Parquet reader over the kept files);
- `delta`: the rows written by delta-spark (one Spark write, one output file per input file: each input file is its
  own read partition), read as `delta.`path`` with Delta's data skipping (per-file min/max/null counts in the log,
  strings' bounds truncated to 32 characters);
- `parquet+bloom`: the rows written by Spark's Parquet writer with row-group Bloom filters on the key columns
  (`parquet.bloom.filter.enabled#col`, `parquet.bloom.filter.expected.ndv#col` = rows per file), read as
  `parquet.`path``: no file is skipped, Spark's Parquet reader drops row groups by statistics, dictionaries and
  Bloom filters inside each file;
- with `--layouts` (default on), the alternatives' own answer to a key the ingestion order scatters, each a
  maintenance job timed as such: `iceberg sorted`, the rows written by Spark's Iceberg writer into a table of a
  Hadoop catalog in the run's directory, range-partitioned by the key (`l_orderkey`, `trace_id`) into as many files
  as the source, each file sorted (what `rewrite_data_files` with the sort strategy leaves); `delta z-ordered`, a copy
  of the Delta table after `OPTIMIZE ... ZORDER BY (key, time)` (`l_shipdate`, `ts`) with
  `spark.databricks.delta.optimize.maxFileSize` set to the source's bytes per file.

skipindex indexes with its defaults (`skipindex build`: the automatic choice per column), except that with
`--key-index` (default on) the key columns (`l_orderkey`, `trace_id`) go into the global key index
(indexing/key_index.py; the automatic choice keys identifier columns of tables of 5,000+ files and gives these
Bloom filters at 200): exact files for `=` and IN, as Hudi's record index is on its key.

Measured, per query and system (after a warm-up of each; the timed runs rotate the systems' order):

- wall time of `spark.sql("SELECT * FROM <t> WHERE ...")` written to Spark's `noop` sink (every matching row of
  every column made, no collect), median of `--runs`; the scan API's time includes its lookup;
- files read: Iceberg scans (both Iceberg systems, and the scan API where it reads with Iceberg's reader, its
  default with Iceberg's runtime in the session): the data files of the scan's tasks in the physical plan
  (`bench_spark_sql.scanned`); Spark's file source (Delta, Parquet, Hudi, the scan API's jar-free reads): the
  `numFiles` metric of the `FileSourceScanExec` after the plan ran, i.e. the files left after the format's own
  skipping;
- MB of files: those files' sizes (an upper bound of what is read, the same way for every system);
- MB input, for the systems read by Spark's file source (Delta, Parquet, Hudi): Spark's task input metric
  (`inputBytes` of the job's stages, from Spark's status store) in one more, untimed run with parquet-mr's vectored
  reads off (they read on other threads, which the metric misses): the bytes the readers asked the file system for,
  re-reads included (so it can exceed the files' sizes); the one column where row groups dropped inside a file
  (Parquet's Bloom filters, dictionaries) show. Not for Iceberg's reader, which the metric under-counts;
- rows: count and an order-free checksum (`sum(xxhash64(all columns))`) per system, compared with brute force:
  the original Parquet files read by Spark with no filter pushed into its reader, then filtered (DuckDB's count
  over the same files as a second check). Any difference is printed loudly and marked WRONG in the tables; wrong
  rows from skipindex fail the run after the tables, an alternative's are the finding.

Per system: index bytes (Iceberg: the table's metadata files (manifests, manifest lists, metadata JSON); Delta: the
`_delta_log`; Parquet: the data bytes written with Bloom filters minus those written without by the same job;
skipindex: its index table's data files) and the write / index time against Spark's plain Parquet write of the
same rows (one job, median of `--write-runs`); skipindex's build runs after the data is committed.

Apache Hudi (`--hudi`, default on where `make hudi-env` made .venv-hudi and .jars-hudi) runs on Spark 3.5: no Hudi
bundle for Spark 4.x is served. benchmarks/bench_anchors_hudi.py in .venv-hudi (a subprocess) writes the same Parquet
files as a COW table with the metadata table's column stats, Bloom filters, record-level index and a secondary
index, runs the same queries with `hoodie.enable.data.skipping`, and answers in JSON; its rows are checked the same
way. Its timings come from another Spark version in another JVM: the table says so.

`--duckdb` (default on): bench_anchors_duckdb.py, the same queries in DuckDB over the source files, over a pyarrow
copy of them with row-group Bloom filters on the key columns, and through `handle.scan(where).to_duckdb()`.

`--commit` (default on), after every query: one more file (the rows of the first with new keys) committed to every
system's copy as its pipeline would (Spark appends to the plain, Bloom and Delta copies, pyiceberg `add_files` to the
Iceberg table then `skipindex build` in a fresh process, Hudi's `insert` with its indexes), timed, with the index
bytes it added; then a point query on one of its new keys on every system, against brute force.

`--adversarial` (default on): the correctness check of issue 44 item 2 (bench_anchors_adversarial.py): a small table
per system holding NaN, strings longer than Parquet's statistics keep, `_` and `%` in LIKE prefixes and a column
added after the first files, queried by every system and compared with Spark's read of the same rows with nothing
pushed into the reader (DuckDB as a second check).

    python benchmarks/bench_anchors.py            # SF 3 in 200 files, 200 shards of 30,000 rows, median of 3
    python benchmarks/bench_anchors.py --quick    # toy: SF 0.01 in 4 files, 8 shards, 1 run (each flag still wins)

Prints Markdown tables for docs/benchmarks.md and the load average before and after (the machine is shared);
`--json PATH` writes every figure, `--chart PATH` a PNG (per data set, each system's median wall time per query
and its files read), and `--replot PATH` prints the tables (and the chart) of a saved `--json` again, running
nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from bench_query import _build, _lineitem, events_files, median_of
from bench_serve import Server, _load, _short
from bench_spark_sql import catalog, configure, scanned

from indexlib.config import load_config
from indexlib.handle import open_handle

REPO = Path(__file__).resolve().parents[1]
HUDI_PYTHON = REPO / ".venv-hudi" / "bin" / "python"
HUDI_JARS = REPO / ".jars-hudi"
DATASETS = {"lineitem": "bench.small", "events": "bench.events"}
BLOOM_COLUMNS = {"lineitem": ["l_orderkey", "l_comment"], "events": ["trace_id", "service", "host"]}
SYSTEMS = ["iceberg", "delta", "parquet+bloom", "skipindex", "skipindex scan API"]
# the alternatives' other layouts (`--layouts`): Iceberg sorted by the key, Delta Z-ordered by the key and the time
LAYOUTS = ["iceberg sorted", "delta z-ordered"]
SORT_KEY = {"lineitem": "l_orderkey", "events": "trace_id"}
ZORDER = {"lineitem": ("l_orderkey", "l_shipdate"), "events": ("trace_id", "ts")}
LAYOUT_CATALOG = "bench_layouts"
# the scan API with the jar-free reads (`--files-reader`): the kept files read by Spark's own Parquet reader
FILES_READER = (
    "skipindex scan API, Spark's reader"  # a Hadoop Iceberg catalog in the run's directory, for the sorted copies
)
# read by Iceberg's reader in Spark (the scan API's default reader where Iceberg's runtime is in the session): Spark's
# task input metric under-counts it (0.7 MB for a LIKE '%x%' over every file of lineitem SF 1), so it is not shown
ICEBERG_READS = {"iceberg", "iceberg sorted", "skipindex", "skipindex scan API"}


def session(driver_memory: str) -> Any:
    """One local Spark 4.1 session with Iceberg's runtime and delta-spark (both SQL extensions, Delta's catalog as
    the session catalog, as tests/conftest.py makes it)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from indexlib.jars import has_connector, spark_jars

    jars = spark_jars()
    for connector in ("iceberg", "delta"):
        if not has_connector(connector, jars):
            raise SystemExit(f"no {connector} connector jars: run `make jars` (jvm/pom.xml)")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-anchors")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,io.delta.sql.DeltaSparkSessionExtension",
        )
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# --- data ------------------------------------------------------------------------------------------------------------


def _events(directory: Path, conf: Path, shards: int, rows: int) -> tuple[list[str], list[tuple[str, str]]]:
    """The service-log table `bench.events` in the lineitem table's catalog: one file per shard (bench_query's
    `_events` layout and queries, plus a regex on the service tag)."""
    paths, queries = events_files(directory / "events", shards, rows)
    table = load_config(conf).load_catalog().create_table(DATASETS["events"], schema=pq.read_schema(paths[0]))
    table.add_files(paths)
    queries = [("LIKE prefix" if label == "LIKE" else label, where) for label, where in queries]
    queries.insert(-2, ("regex on tags", "regexp_like(service, '^(meta|quota)')"))
    return paths, queries


def _lineitem_queries(queries: list[tuple[str, str]], paths: list[str]) -> list[tuple[str, str]]:
    """bench_query's lineitem queries (its `LIKE` is a prefix), plus `LIKE '%x%'` on a word of the comments."""
    renamed = [("LIKE prefix" if label == "LIKE" else label, where) for label, where in queries]
    at = [label for label, _ in renamed].index("LIKE prefix") + 1
    return [*renamed[:at], ("LIKE '%x%'", "l_comment LIKE '%Tiresias%'"), *renamed[at:]]


def _key_index(conf: Path) -> None:
    """The global key index (indexing/key_index.py) on each data set's key column (`SORT_KEY`: lineitem's
    `l_orderkey`, the log's `trace_id`), where the automatic choice would give them Bloom filters at this many files
    (it keys identifier columns of tables of 5,000+ files): exact files for `=` and IN, as Hudi's record index on
    its key."""
    with conf.open("a") as out:
        for dataset, name in DATASETS.items():
            out.write(f'\n[index.tables."{name}".columns.{SORT_KEY[dataset]}]\nkey_index = true\n')


def _build_table(conf: Path, name: str) -> float:
    """`skipindex build` of `name` in a fresh process, as a scheduler runs it (bench_query._build, which ran first,
    added the [spark] table): the first builds the index, later ones index what was committed since; seconds."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "indexlib.cli", "build", "--conf", str(conf), "--table", name],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _data_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.parquet"))


@dataclass
class Written:
    """One system's copy of a data set: where, its write (or build) seconds, its index bytes, its data bytes."""

    system: str
    path: str
    seconds: float
    index_bytes: int
    data_bytes: int
    note: str = ""


def _one_file_per_input(spark: Any, paths: list[str]) -> Any:
    """The files read so that each is one partition (so each write writes one file per input file, the layout
    the Iceberg table has): opening a file costs more than the largest split."""
    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 40))
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 40))
    frame = spark.read.parquet(*paths)
    assert frame.rdd.getNumPartitions() == len(paths), "one partition per input file"
    return frame


def _reset_splits(spark: Any) -> None:
    spark.conf.unset("spark.sql.files.openCostInBytes")
    spark.conf.unset("spark.sql.files.maxPartitionBytes")


def _bloom_options(dataset: str, rows: int) -> dict[str, str]:
    """parquet-mr's options for row-group Bloom filters on the data set's key columns, sized for `rows` values."""
    blooms: dict[str, str] = {}
    for column in BLOOM_COLUMNS[dataset]:
        blooms[f"parquet.bloom.filter.enabled#{column}"] = "true"
        blooms[f"parquet.bloom.filter.expected.ndv#{column}"] = str(rows)
    return blooms


def write_copies(spark: Any, dataset: str, paths: list[str], root: Path, runs: int) -> dict[str, Written]:
    """Spark's plain Parquet write (the baseline), Parquet with Bloom filters and Delta of the same rows, each
    median of `runs` (a fresh directory each run, the last kept)."""
    blooms = _bloom_options(dataset, pq.ParquetFile(paths[0]).metadata.num_rows)
    out: dict[str, Written] = {}

    def write(kind: str) -> Callable[[], None]:
        target = root / f"{dataset}-{kind}"

        def action() -> None:
            shutil.rmtree(target, ignore_errors=True)
            frame = _one_file_per_input(spark, paths)
            if kind == "delta":
                frame.write.format("delta").save(str(target))
            elif kind == "bloom":
                frame.write.options(**blooms).parquet(str(target))
            else:
                frame.write.parquet(str(target))

        return action

    try:
        write("plain")()  # warm-up: the session's first write pays for loading and compiling the writers
        seconds = {kind: median_of(runs, write(kind)) for kind in ("plain", "bloom", "delta")}
    finally:
        _reset_splits(spark)
    plain, bloom, delta = (root / f"{dataset}-{kind}" for kind in ("plain", "bloom", "delta"))
    for directory in (plain, bloom, delta):
        assert len(list(directory.glob("*.parquet"))) == len(paths), f"{directory}: one file per input file"
    out["plain"] = Written("plain Parquet (Spark)", str(plain), seconds["plain"], 0, _data_bytes(plain))
    out["parquet+bloom"] = Written(
        "parquet+bloom",
        str(bloom),
        seconds["bloom"],
        _data_bytes(bloom) - _data_bytes(plain),
        _data_bytes(bloom),
        f"Bloom filters on {', '.join(BLOOM_COLUMNS[dataset])}",
    )
    out["delta"] = Written(
        "delta", str(delta), seconds["delta"], _tree_bytes(delta / "_delta_log"), _data_bytes(delta), "_delta_log"
    )
    return out


def iceberg_bytes(conf: Path, name: str) -> tuple[int, int]:
    """The Iceberg table's metadata bytes (its metadata directory: metadata JSON, manifest lists, manifests) and its
    index table's data file bytes."""
    config = load_config(conf)
    table = config.load_catalog().load_table(name)
    metadata = Path(table.metadata_location.removeprefix("file://")).parent
    index = config.load_catalog().load_table(f"skipindex.{name.replace('.', '__')}")
    return _tree_bytes(metadata), sum(index.inspect.files().column("file_size_in_bytes").to_pylist())


def _delta_detail(spark: Any, path: str) -> tuple[int, int]:
    """A Delta table's live files and their bytes (`DESCRIBE DETAIL`: the directory also holds removed files)."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    return int(detail["numFiles"]), int(detail["sizeInBytes"])


def write_layouts(spark: Any, dataset: str, paths: list[str], root: Path, delta: Written) -> dict[str, Written]:
    """The alternatives' own answer to an unsorted key, each timed as the maintenance job it is:

    - `iceberg sorted`: the rows written by Spark's Iceberg writer into a table of the Hadoop catalog
      `LAYOUT_CATALOG`, range-partitioned by the key into as many files as the source has, each sorted by it (what
      `rewrite_data_files` with the sort strategy leaves), the sort order declared on the table;
    - `delta z-ordered`: a copy of the Delta table, `OPTIMIZE ... ZORDER BY (key, time)` with
      `spark.databricks.delta.optimize.maxFileSize` set to the source's bytes per file (so about as many files)."""
    out: dict[str, Written] = {}
    key = SORT_KEY[dataset]
    warehouse = root / "iceberg-layouts"
    for name, value in {
        "": "org.apache.iceberg.spark.SparkCatalog",
        "type": "hadoop",
        "warehouse": str(warehouse),
    }.items():
        spark.conf.set(f"spark.sql.catalog.{LAYOUT_CATALOG}{'.' + name if name else ''}", value)
    table = f"{LAYOUT_CATALOG}.bench.{dataset}_sorted"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    started = time.perf_counter()
    frame = spark.read.parquet(*paths).repartitionByRange(len(paths), key).sortWithinPartitions(key)
    frame.writeTo(table).tableProperty("write.distribution-mode", "none").create()
    seconds = time.perf_counter() - started
    spark.sql(f"ALTER TABLE {table} WRITE LOCALLY ORDERED BY {key}")
    files = spark.sql(f"SELECT count(*), sum(file_size_in_bytes) FROM {table}.files").collect()[0]
    metadata = warehouse / "bench" / f"{dataset}_sorted" / "metadata"
    out["iceberg sorted"] = Written(
        "iceberg sorted",
        table,
        seconds,
        _tree_bytes(metadata),
        int(files[1]),
        f"Spark's Iceberg write, range-partitioned and sorted by {key}: {files[0]} files",
    )
    target = root / f"{dataset}-delta-zorder"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(delta.path, target)
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(max(delta.data_bytes // len(paths), 1 << 20)))
    try:
        started = time.perf_counter()
        spark.sql(f"OPTIMIZE delta.`{target}` ZORDER BY ({', '.join(ZORDER[dataset])})")
        seconds = time.perf_counter() - started
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    count, size = _delta_detail(spark, str(target))
    out["delta z-ordered"] = Written(
        "delta z-ordered",
        str(target),
        seconds,
        _tree_bytes(target / "_delta_log"),
        size,
        f"OPTIMIZE ZORDER BY ({', '.join(ZORDER[dataset])}) of the Delta copy: {count} files; _delta_log",
    )
    return out


# --- one new commit: what indexing it costs each system --------------------------------------------------------------


def new_commit(dataset: str, paths: list[str], directory: Path) -> tuple[str, str]:
    """One more file of the data set's size, as the next commit of the pipeline brings it: the rows of its first file
    with new keys (lineitem: `l_orderkey` + 10^10; the log: trace ids starting with `g`, no hex digit), written by
    pyarrow as the source files were; and a point query on one of its new keys."""
    table = pq.read_table(paths[0])
    key = SORT_KEY[dataset]
    column = table.column(key)
    if dataset == "lineitem":
        fresh = pc.add(column, pa.scalar(10**10, column.type))
    else:
        fresh = pc.binary_join_element_wise("g", pc.utf8_slice_codeunits(column, 1), "")
    table = table.set_column(table.schema.get_field_index(key), key, fresh)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dataset}-commit.parquet"
    metadata = pq.ParquetFile(paths[0]).metadata
    pq.write_table(table, path, row_group_size=max(metadata.row_group(0).num_rows, 1))
    value = fresh[len(fresh) // 2].as_py()
    return str(path), f"{key} = {value!r}" if isinstance(value, str) else f"{key} = {value}"


@dataclass
class CommitCost:
    """What one system's commit of the new file cost: seconds, the index bytes it added, the data bytes written,
    and whether the system then returns the new rows (a point query on a new key, against brute force)."""

    system: str
    seconds: float
    index_bytes: int
    data_bytes: int
    rows: int = -1
    expected_rows: int = -1
    note: str = ""


def commit_costs(
    systems: Systems, conf: Path, dataset: str, paths: list[str], new: str, check: str
) -> list[CommitCost]:
    """Append `new` to every system's copy as one commit, timed, and index it where that is a separate job
    (skipindex: `skipindex build` in a fresh process, incremental); then the point query `check` on every system."""
    spark, copies = systems.spark, systems.copies[dataset]
    rows = pq.ParquetFile(new).metadata.num_rows
    blooms = _bloom_options(dataset, rows)
    out: list[CommitCost] = []

    def append(kind: str, target: str) -> float:
        frame = _one_file_per_input(spark, [new])
        started = time.perf_counter()
        if kind == "delta":
            frame.write.format("delta").mode("append").save(target)
        elif kind == "bloom":
            frame.write.options(**blooms).mode("append").parquet(target)
        else:
            frame.write.mode("append").parquet(target)
        return time.perf_counter() - started

    try:
        plain, bloom = _data_bytes(Path(copies["plain"].path)), _data_bytes(Path(copies["parquet+bloom"].path))
        seconds = append("plain", copies["plain"].path)
        plain_added = _data_bytes(Path(copies["plain"].path)) - plain
        out.append(CommitCost("plain Parquet (Spark)", seconds, 0, plain_added, note="Spark's append of the rows"))
        seconds = append("bloom", copies["parquet+bloom"].path)
        bloom_added = _data_bytes(Path(copies["parquet+bloom"].path)) - bloom
        out.append(
            CommitCost(
                "parquet+bloom", seconds, bloom_added - plain_added, bloom_added, note="the Bloom filters in the file"
            )
        )
        log = Path(copies["delta"].path) / "_delta_log"
        before, (_, size) = _tree_bytes(log), _delta_detail(spark, copies["delta"].path)
        seconds = append("delta", copies["delta"].path)
        out.append(
            CommitCost(
                "delta",
                seconds,
                _tree_bytes(log) - before,
                _delta_detail(spark, copies["delta"].path)[1] - size,
                note="append; its statistics go into the commit's log entry",
            )
        )
    finally:
        _reset_splits(spark)
    name = DATASETS[dataset]
    metadata, index = iceberg_bytes(conf, name)
    started = time.perf_counter()
    load_config(conf).load_catalog().load_table(name).add_files([new])
    seconds = time.perf_counter() - started
    metadata_after, _ = iceberg_bytes(conf, name)
    size = Path(new).stat().st_size
    out.append(
        CommitCost("iceberg", seconds, metadata_after - metadata, size, note="pyiceberg add_files (new manifest)")
    )
    seconds = _build_table(conf, name)
    out.append(
        CommitCost(
            "skipindex",
            seconds,
            iceberg_bytes(conf, name)[1] - index,
            0,
            note="skipindex build (fresh process) after the commit: the new file only",
        )
    )
    for system in ("iceberg", "skipindex"):  # Spark's Iceberg catalogs cache the tables they load: the new snapshot
        spark.sql(f"REFRESH TABLE {systems.table(system, dataset)}")
    expected, _ = truth(spark, [*paths, new], pq.read_schema(new).names, check)
    for cost in out:
        system = {"plain Parquet (Spark)": None, "iceberg": "iceberg"}.get(cost.system, cost.system)
        if system is not None:
            cost.rows, cost.expected_rows = systems.frame(system, dataset, check).count(), expected
    scan_api = systems.frame("skipindex scan API", dataset, check).count()
    out.append(CommitCost("skipindex scan API", 0.0, 0, 0, scan_api, expected, "the warm handle, after the build"))
    return out


# --- measuring -------------------------------------------------------------------------------------------------------


@dataclass
class Cell:
    seconds: float = 0.0
    files: int = 0
    bytes: int = 0
    input_bytes: int = -1
    rows: int = -1
    checksum: int = 0
    runs: list[float] = field(default_factory=list)
    error: str = ""  # the query failed on this system (Hudi: its exception's line)


@dataclass
class QueryRow:
    dataset: str
    query: str
    where: str
    total_files: int
    expected_rows: int
    expected_checksum: int
    cells: dict[str, Cell] = field(default_factory=dict)

    def wrong(self) -> list[str]:
        return [
            system
            for system, c in self.cells.items()
            if not c.error and (c.rows != self.expected_rows or c.checksum != self.expected_checksum)
        ]


class Systems:
    """How each system names a data set in SQL, and how to make its DataFrame for a WHERE."""

    def __init__(self, spark: Any, server: Server, conf: Path, copies: dict[str, dict[str, Written]]) -> None:
        self.spark, self.server, self.copies = spark, server, copies
        config = load_config(conf)
        self.handles = {dataset: open_handle(config, name) for dataset, name in DATASETS.items()}

    def table(self, system: str, dataset: str) -> str:
        if system == "iceberg":
            return f"{catalog('own', self.server)}.{DATASETS[dataset]}"
        if system == "skipindex":
            return f"{catalog('served', self.server)}.{DATASETS[dataset]}"
        if system == "delta":
            return f"delta.`{self.copies[dataset]['delta'].path}`"
        if system == "parquet+bloom":
            return f"parquet.`{self.copies[dataset]['parquet+bloom'].path}`"
        if system == "iceberg sorted":
            return self.copies[dataset][system].path
        if system == "delta z-ordered":
            return f"delta.`{self.copies[dataset][system].path}`"
        raise ValueError(system)

    def frame(self, system: str, dataset: str, where: str) -> Any:
        if system == "skipindex scan API":
            return self.handles[dataset].scan(where).to_spark(self.spark)
        if system == FILES_READER:
            return self.handles[dataset].scan(where).to_spark(self.spark, reader="files")
        return self.spark.sql(f"SELECT * FROM {self.table(system, dataset)} WHERE {where}")


def _columns(frame: Any, names: list[str]) -> Any:
    """The data set's columns in one order (a reader may add or reorder none, but say so if it did)."""
    return frame.select(*names)


def checksum(frame: Any, names: list[str]) -> tuple[int, int]:
    """Rows and an order-free checksum of them: the sum of `xxhash64` over every column (as decimal, no overflow)."""
    from pyspark.sql import functions as F

    out = _columns(frame, names).agg(F.count(F.lit(1)), F.sum(F.xxhash64(*names).cast("decimal(38,0)"))).collect()[0]
    return int(out[0]), int(out[1] or 0)


def _file_scans(plan: Any) -> list[Any]:
    """The leaves of an executed plan, looking through adaptive execution's wrapper."""
    out = []
    leaves = plan.collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            out += _file_scans(leaf.executedPlan())
        else:
            out.append(leaf)
    return out


def files_read(frame: Any) -> tuple[int, int]:
    """Files (and their bytes) the DataFrame's scan reads. Iceberg: its tasks' files (bench_spark_sql.scanned).
    Spark's file source (Delta, Parquet, the scan API's reads): the scan's `numFiles` / `filesSize` metrics, set
    when the plan runs, so the plan is run here (to a row count, on the executors)."""
    plan = frame._jdf.queryExecution().executedPlan()
    leaves = _file_scans(plan)
    names = {leaf.getClass().getSimpleName() for leaf in leaves}
    if "BatchScanExec" in names and "FileSourceScanExec" not in names:
        found = scanned(frame)
        return len(found), sum(found.values())
    plan.execute().count()
    files = size = 0
    for leaf in _file_scans(plan):
        if leaf.getClass().getSimpleName() == "FileSourceScanExec":
            metrics = leaf.metrics()
            files += int(metrics.apply("numFiles").value())
            size += int(metrics.apply("filesSize").value())
    return files, size


class InputBytes:
    """Spark's task input metric (bytes read from the file system) of the jobs run under one job group, from the
    application's status store (kept with the UI off)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.count = 0

    def measure(self, action: Callable[[], object]) -> int:
        self.count += 1
        group = f"bench-anchors-{self.count}"
        context = self.spark.sparkContext
        context.setJobGroup(group, group)
        # parquet-mr's vectored reads run on other threads, which Spark's per-thread file system statistics miss
        # (a full scan then counts ~0 bytes): off for this untimed run only
        self.spark.conf.set("parquet.hadoop.vectored.io.enabled", "false")
        try:
            action()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
            self.spark.conf.unset("parquet.hadoop.vectored.io.enabled")
        store = context._jsc.sc().statusStore()
        deadline = time.monotonic() + 10
        while True:  # the status store is fed by the listener bus: wait for the jobs' stages to be complete
            stages = []
            jobs = store.jobsList(None).iterator()
            done = True
            while jobs.hasNext():
                job = jobs.next()
                if job.jobGroup().isDefined() and job.jobGroup().get() == group:
                    done = done and job.status().toString() != "RUNNING"
                    ids = job.stageIds().iterator()
                    while ids.hasNext():
                        stages.append(int(ids.next()))
            total = 0
            for stage in stages:
                attempts = store.stageData(stage, False, None, False, None).iterator()
                while attempts.hasNext():
                    total += int(attempts.next().inputBytes())
            if done or time.monotonic() > deadline:
                return total
            time.sleep(0.2)


def _noop(frame: Any) -> None:
    frame.write.format("noop").mode("overwrite").save()


def duckdb_rows(con: duckdb.DuckDBPyConnection, paths: list[str], where: str) -> int | None:
    """A second brute force: DuckDB's count of the Parquet files' rows matching `where`; None where DuckDB's
    dialect has no such function (`regexp_like` is `regexp_matches` there)."""
    try:
        return con.sql(f"SELECT count(*) FROM read_parquet(?) WHERE {where}", params=[paths]).fetchall()[0][0]
    except duckdb.Error:
        return None


def truth(spark: Any, paths: list[str], names: list[str], where: str) -> tuple[int, int]:
    """The expected rows and checksum: every row of the original Parquet files read by Spark with no filter pushed
    into the reader (pushdown off, so no statistics or Bloom filter can drop a row), then filtered."""
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        frame = spark.read.parquet(*paths)
        frame.createOrReplaceTempView("bench_anchors_truth")
        return checksum(spark.sql(f"SELECT * FROM bench_anchors_truth WHERE {where}"), names)
    finally:
        spark.conf.unset("spark.sql.parquet.filterPushdown")


def measure(
    systems: Systems,
    dataset: str,
    paths: list[str],
    queries: list[tuple[str, str]],
    runs: int,
    only: list[str],
) -> list[QueryRow]:
    spark = systems.spark
    names = pq.read_schema(paths[0]).names
    con = duckdb.connect()
    inputs = InputBytes(spark)
    out = []
    for label, where in queries:
        rows, check = truth(spark, paths, names, where)
        duck = duckdb_rows(con, paths, where)
        if duck is not None and duck != rows:
            print(
                f"\n!!! BRUTE FORCE DIFFERS: DuckDB {duck:,} rows, Spark unfiltered {rows:,}: {where}", file=sys.stderr
            )
        row = QueryRow(dataset, label, where, len(paths), rows, check)
        for system in only:  # warm-up, files, input bytes, rows
            cell = row.cells.setdefault(system, Cell())
            cell.files, cell.bytes = files_read(systems.frame(system, dataset, where))
            if system not in ICEBERG_READS:
                cell.input_bytes = inputs.measure(lambda s=system, w=where: _noop(systems.frame(s, dataset, w)))
            cell.rows, cell.checksum = checksum(systems.frame(system, dataset, where), names)
        for run in range(runs):  # the order rotates, so each system meets the shared machine's moments alike
            for system in only[run % len(only) :] + only[: run % len(only)]:
                started = time.perf_counter()
                _noop(systems.frame(system, dataset, where))
                row.cells[system].runs.append(time.perf_counter() - started)
        for cell in row.cells.values():
            cell.seconds = statistics.median(cell.runs)
        for system in row.wrong():
            cell = row.cells[system]
            print(
                f"\n!!! WRONG ROWS: {dataset} {label} on {system}: {cell.rows:,} rows (checksum {cell.checksum}), "
                f"brute force {row.expected_rows:,} (checksum {row.expected_checksum}): "
                f"SELECT * FROM {systems.table(system, dataset) if not system.startswith('skipindex scan API') else dataset} "
                f"WHERE {_short(where)}\n",
                file=sys.stderr,
                flush=True,
            )
        out.append(row)
        print(f"  {dataset} {label}: done (load {_load()})", file=sys.stderr, flush=True)
    return out


# --- Hudi (Spark 3.5, another process) -------------------------------------------------------------------------------


def hudi_available() -> str:
    """Empty when the Hudi environment is there, else why not."""
    if not HUDI_PYTHON.exists():
        return f"no {HUDI_PYTHON.relative_to(REPO)}: run `make hudi-env`"
    if not list(HUDI_JARS.glob("hudi-spark*-bundle*.jar")):
        return f"no Hudi bundle in {HUDI_JARS.relative_to(REPO)}: run `make hudi-env`"
    return ""


def run_hudi(
    directory: Path,
    datasets: dict[str, tuple[list[str], list[tuple[str, str]]]],
    runs: int,
    keep_log: Path | None = None,
    commits: dict[str, tuple[str, str]] | None = None,
) -> dict:
    """benchmarks/bench_anchors_hudi.py in .venv-hudi: its JSON answer (or {"error": ...}); `commits`: per data set
    the new file and its point query (`new_commit`), committed after the queries."""
    commits = commits or {}
    request = directory / "hudi-request.json"
    answer = directory / "hudi-answer.json"
    request.write_text(
        json.dumps(
            {
                "root": str(directory / "hudi"),
                "runs": runs,
                "datasets": {
                    name: {
                        "paths": p,
                        "queries": q,
                        "commit": {"path": commits[name][0], "check": commits[name][1]} if name in commits else None,
                    }
                    for name, (p, q) in datasets.items()
                },
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_HOME", "PYTHONPATH"))}
    log = directory / "hudi.log"
    with log.open("w") as out:
        done = subprocess.run(
            [str(HUDI_PYTHON), str(REPO / "benchmarks" / "bench_anchors_hudi.py"), str(request), str(answer)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
        )
    if keep_log is not None:
        shutil.copy(log, keep_log)
    if done.returncode != 0 or not answer.exists():
        tail = log.read_text()[-4000:]
        return {"error": f"exit {done.returncode}", "log": tail}
    return json.loads(answer.read_text())


def hudi_cells(rows: list[QueryRow], answer: dict) -> None:
    """Hudi's answers into the rows (as the system `hudi (Spark 3.5)`)."""
    for row in rows:
        got = answer["datasets"][row.dataset]["queries"].get(row.query)
        if got is None:
            continue
        if "error" in got:
            row.cells["hudi (Spark 3.5)"] = Cell(error=got["error"])
            print(f"\n!!! Hudi failed on {row.dataset} {row.query}: {got['error']}\n", file=sys.stderr, flush=True)
            continue
        cell = Cell(
            seconds=got["seconds"],
            files=got["files"],
            bytes=got["bytes"],
            input_bytes=got.get("input_bytes", -1),
            rows=got["rows"],
            checksum=got["checksum"],
            runs=got["runs"],
        )
        row.cells["hudi (Spark 3.5)"] = cell
        if "hudi (Spark 3.5)" in row.wrong():
            print(
                f"\n!!! WRONG ROWS: {row.dataset} {row.query} on Hudi: {cell.rows:,} rows, brute force "
                f"{row.expected_rows:,} (checksums {cell.checksum} / {row.expected_checksum}): WHERE {_short(row.where)}\n",
                file=sys.stderr,
                flush=True,
            )


def hudi_commit(answer: dict, ours: list[CommitCost]) -> CommitCost:
    """Hudi's commit of the new file, its rows checked against the brute force the others were checked against."""
    expected = next(c.expected_rows for c in ours if c.system == "skipindex")
    got = answer.get("commit") or {"error": "no commit in Hudi's answer"}
    if "error" in got:
        return CommitCost("hudi (Spark 3.5)", 0.0, 0, 0, -2, expected, f"failed: {got['error']}")
    return CommitCost(
        "hudi (Spark 3.5)", got["seconds"], got["index_bytes"], got["data_bytes"], got["rows"], expected, got["note"]
    )


# --- printing --------------------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def _mb(size: int) -> str:
    if size < 0:
        return "-"
    return f"{size / 1e6:,.1f}" if size >= 1e5 else f"{size / 1e6:,.3f}"


def print_queries(rows: list[QueryRow], title: str) -> None:
    systems = list(rows[0].cells)
    print(f"\n#### {title}: wall time ms (median), files read / {rows[0].total_files}\n")
    print("| query | " + " | ".join(systems) + " | rows |")
    print("|---|" + "---:|" * len(systems) + "---:|")
    for r in rows:
        cells = []
        for system in systems:
            c = r.cells.get(system)
            if c is None:
                cells.append("-")
                continue
            if c.error:
                cells.append("failed")
                continue
            mark = " **WRONG**" if system in r.wrong() else ""
            cells.append(f"{_ms(c.seconds)} ({c.files:,}){mark}")
        print(f"| {r.query} | " + " | ".join(cells) + f" | {r.expected_rows:,} |")
    print(f"\n#### {title}: MB of the files read / MB input (Spark's task input metric)\n")
    print("| query | " + " | ".join(systems) + " |")
    print("|---|" + "---:|" * len(systems))
    for r in rows:
        cells = []
        for system in systems:
            c = r.cells.get(system)
            cells.append("-" if c is None or c.error else f"{_mb(c.bytes)} / {_mb(c.input_bytes)}")
        print(f"| {r.query} | " + " | ".join(cells) + " |")
    for r in rows:
        for system, c in r.cells.items():
            if c.error:
                print(f"\n{system} failed on {r.query}: `{c.error}`")
    wrong = [(r.query, s, r.cells[s].rows) for r in rows for s in r.wrong()]
    if wrong:
        print("\n**WRONG ROWS** (query, system, rows; brute force in the last column above): " + repr(wrong))
    print("\nQueries: " + "; ".join(f"{r.query}: `{_short(r.where)}`" for r in rows))


def print_costs(written: list[Written], title: str) -> None:
    print(f"\n#### {title}: write / index time and index bytes\n")
    print("| system | seconds | index MB | data MB | index / data | what |")
    print("|---|---:|---:|---:|---:|---|")
    for w in written:
        share = f"{100 * w.index_bytes / w.data_bytes:.2f} %" if w.data_bytes else "-"
        seconds = f"{w.seconds:,.1f}" if not math.isnan(w.seconds) else "-"
        print(f"| {w.system} | {seconds} | {_mb(w.index_bytes)} | {_mb(w.data_bytes)} | {share} | {w.note} |")


def print_commits(commits: list[CommitCost], title: str, check: str) -> None:
    print(f"\n#### {title}: one new commit of one more file, and its point query after\n")
    print("| system | seconds | index bytes added | data MB | rows of the point query / expected | what |")
    print("|---|---:|---:|---:|---:|---|")
    for c in commits:
        seconds = f"{c.seconds:,.1f}" if c.seconds else "-"
        rows = (
            "-"
            if c.rows < 0
            else f"{c.rows:,} / {c.expected_rows:,}" + (" **WRONG**" if c.rows != c.expected_rows else "")
        )
        data = _mb(c.data_bytes) if c.data_bytes else "-"
        print(f"| {c.system} | {seconds} | {c.index_bytes:,} | {data} | {rows} | {c.note} |")
    print(f"\nPoint query on a key of the new file: `{_short(check)}`")


def chart(results: dict[str, list[QueryRow]], titles: dict[str, str], path: Path) -> None:
    """Per data set, grouped bars (log scale) of each system's median wall time per query, its files read on top;
    a wrong answer's bar is hatched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(results), 1, figsize=(13, 4.5 * len(results)), squeeze=False)
    for ax, (dataset, rows) in zip(axes[:, 0], results.items(), strict=True):
        systems = list(dict.fromkeys(s for r in rows for s in r.cells))
        width = 0.85 / len(systems)
        for n, system in enumerate(systems):
            xs, heights, labels, hatches = [], [], [], []
            for q, row in enumerate(rows):
                cell = row.cells.get(system)
                if cell is None or cell.error:
                    continue
                xs.append(q + (n - (len(systems) - 1) / 2) * width)
                heights.append(cell.seconds * 1e3)
                labels.append(str(cell.files))
                hatches.append("xx" if system in row.wrong() else "")
            bars = ax.bar(xs, heights, width, label=system)
            for bar, hatch in zip(bars, hatches, strict=True):
                bar.set_hatch(hatch)
            ax.bar_label(bars, labels=labels, fontsize=5, padding=1)
        ax.set_yscale("log")
        ax.set_ylabel("ms, median (log scale); files read on top")
        ax.set_xticks(range(len(rows)), [r.query for r in rows], fontsize=8)
        ax.set_title(titles.get(dataset, dataset) + " (hatched: wrong rows)", fontsize=9)
        ax.legend(fontsize=7, ncols=3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def replot(saved: Path, chart_path: Path | None) -> None:
    """The tables (and `--chart`) of a run saved with `--json`, without running anything."""
    report = json.loads(saved.read_text())
    results: dict[str, list[QueryRow]] = {}
    for dataset, rows in report["queries"].items():
        results[dataset] = []
        for data in rows:
            cells = {system: Cell(**cell) for system, cell in data.pop("cells").items()}
            for system, cell in cells.items():
                if system in ICEBERG_READS:  # runs saved before the metric was dropped for Iceberg's reader
                    cell.input_bytes = -1
            results[dataset].append(QueryRow(**data, cells=cells))
    args = report["args"]
    titles = _titles(float(args["scale"]), int(args["files"]), int(args["shards"]), int(args["shard_rows"]))
    print(f"load average: {report['load_start']} at the start, {report.get('load_end')} at the end")
    print(f"Spark {report['spark']} for all but Hudi; Hudi: {report['hudi'].get('spark', report['hudi'].get('error'))}")
    for dataset, rows in results.items():
        print_queries(rows, titles[dataset])
        print_costs([Written(**w) for w in report["costs"][dataset]], titles[dataset])
        if dataset in report.get("duckdb", {}):
            from bench_anchors_duckdb import print_duckdb, rows_of

            print_duckdb(rows_of(report["duckdb"][dataset]), titles[dataset])
        if dataset in report.get("commits", {}):
            commit = report["commits"][dataset]
            print_commits([CommitCost(**c) for c in commit["costs"]], titles[dataset], commit["check"])
    if report.get("adversarial"):
        from bench_anchors_adversarial import print_adversarial

        print_adversarial(report["adversarial"])
    if chart_path is not None:
        chart(results, titles, chart_path)


def _titles(scale: float, files: int, shards: int, shard_rows: int) -> dict[str, str]:
    return {
        "lineitem": f"TPC-H lineitem SF {scale:g}, {files} files by l_shipdate",
        "events": f"service log, {shards} hourly shards of {shard_rows:,} rows",
    }


# --- main ------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes for a smoke run (each flag below still wins)")
    parser.add_argument("--scale", type=float, help="TPC-H scale factor of lineitem (3)")
    parser.add_argument("--files", type=int, help="files of the lineitem table (200)")
    parser.add_argument("--shards", type=int, help="files of the events table (200)")
    parser.add_argument("--shard-rows", type=int, help="rows per events file (30000)")
    parser.add_argument("--runs", type=int, help="timed runs per query and system after a warm-up (3)")
    parser.add_argument("--write-runs", type=int, help="runs of each write, the median shown (1)")
    parser.add_argument("--hudi", action=argparse.BooleanOptionalAction, default=True, help="Hudi on Spark 3.5")
    parser.add_argument("--adversarial", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--layouts", action=argparse.BooleanOptionalAction, default=True, help="Iceberg sorted, Delta Z-ordered"
    )
    parser.add_argument(
        "--key-index",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="skipindex's global key index on the key columns (else the automatic choice: Bloom filters)",
    )
    parser.add_argument(
        "--files-reader",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also the scan API with the jar-free reads (Spark's Parquet reader over the kept files)",
    )
    parser.add_argument(
        "--duckdb", action=argparse.BooleanOptionalAction, default=True, help="DuckDB, pyarrow's Bloom filters"
    )
    parser.add_argument(
        "--commit", action=argparse.BooleanOptionalAction, default=True, help="what one new commit costs to index"
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--driver-memory", default="6g", help="spark.driver.memory of the local session (6g)")
    parser.add_argument("--json", type=Path, help="write every figure there")
    parser.add_argument("--chart", type=Path, help="write a PNG of the wall times and files read there")
    parser.add_argument("--replot", type=Path, help="print the tables (and --chart) of a --json file; run nothing")
    args = parser.parse_args(argv)
    if args.replot is not None:
        replot(args.replot, args.chart)
        return json.loads(args.replot.read_text())
    sizes = (
        {"scale": 0.01, "files": 4, "shards": 8, "shard_rows": 2_000, "runs": 1, "write_runs": 1}
        if args.quick
        else {"scale": 3.0, "files": 200, "shards": 200, "shard_rows": 30_000, "runs": 3, "write_runs": 1}
    )
    for name, value in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    print(f"load average (1 / 5 / 15 min) at the start: {_load()} on {os.cpu_count()} cores", flush=True)
    hudi_missing = hudi_available() if args.hudi else "--no-hudi"
    spark = session(args.driver_memory)
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "load_start": _load()}
    failures: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-anchors-") as tmp:
            directory = Path(tmp)
            started = time.perf_counter()
            conf, line_paths, line_queries, _ = _lineitem(directory, args.scale, args.files)
            data: dict[str, tuple[list[str], list[tuple[str, str]]]] = {
                "lineitem": (line_paths, _lineitem_queries(line_queries, line_paths))
            }
            data["events"] = _events(directory, conf, args.shards, args.shard_rows)
            data = {k: v for k, v in data.items() if k in args.datasets}
            print(f"data made in {time.perf_counter() - started:.0f} s", flush=True)
            if args.key_index:
                _key_index(conf)
            builds = {"lineitem": _build(conf)}
            if "events" in data:
                builds["events"] = _build_table(conf, DATASETS["events"])
            copies: dict[str, dict[str, Written]] = {}
            costs: dict[str, list[Written]] = {}
            for dataset, (paths, _) in data.items():
                copies[dataset] = write_copies(spark, dataset, paths, directory / "copies", args.write_runs)
                metadata, index = iceberg_bytes(conf, DATASETS[dataset])
                source_bytes = sum(Path(p).stat().st_size for p in paths)
                if args.layouts:
                    copies[dataset] |= write_layouts(
                        spark, dataset, paths, directory / "copies", copies[dataset]["delta"]
                    )
                costs[dataset] = [
                    copies[dataset]["plain"],
                    Written("iceberg", "", float("nan"), metadata, source_bytes, "metadata dir; add_files, no write"),
                    copies[dataset]["delta"],
                    copies[dataset]["parquet+bloom"],
                    Written(
                        "skipindex",
                        "",
                        builds[dataset],
                        index,
                        source_bytes,
                        "skipindex build (fresh process) after the commit; + Iceberg's metadata",
                    ),
                    *(copies[dataset][layout] for layout in LAYOUTS if args.layouts),
                ]
            server = Server(conf)
            results: dict[str, list[QueryRow]] = {}
            commits: dict[str, tuple[str, str]] = {}
            commit_results: dict[str, list[CommitCost]] = {}
            duck: dict[str, list[Any]] = {}
            try:
                configure(spark, server)
                systems = Systems(spark, server, conf, copies)
                only = SYSTEMS + (LAYOUTS if args.layouts else []) + ([FILES_READER] if args.files_reader else [])
                for dataset, (paths, queries) in data.items():
                    results[dataset] = measure(systems, dataset, paths, queries, args.runs, only)
                if args.duckdb:
                    from bench_anchors_duckdb import run_duckdb

                    for dataset, (paths, queries) in data.items():
                        duck[dataset] = run_duckdb(
                            systems.handles[dataset],
                            dataset,
                            paths,
                            queries,
                            BLOOM_COLUMNS[dataset],
                            directory / "duckdb" / dataset,
                            args.runs,
                        )
                if args.commit:  # after every query: the new file changes the tables
                    for dataset, (paths, _) in data.items():
                        commits[dataset] = new_commit(dataset, paths, directory / "commits")
                        commit_results[dataset] = commit_costs(systems, conf, dataset, paths, *commits[dataset])
            finally:
                server.stop()
            hudi: dict[str, Any] = (
                {"error": hudi_missing}
                if hudi_missing
                else run_hudi(
                    directory, data, args.runs, args.json.with_suffix(".hudi.log") if args.json else None, commits
                )
            )
            if "error" not in hudi:
                for dataset, rows in results.items():
                    hudi_cells(rows, hudi)
                    w = hudi["datasets"][dataset]["written"]
                    costs[dataset].append(
                        Written("hudi (Spark 3.5)", "", w["seconds"], w["index_bytes"], w["data_bytes"], w["note"])
                    )
                    if dataset in commit_results:
                        commit_results[dataset].append(hudi_commit(hudi["datasets"][dataset], commit_results[dataset]))
            adversarial: list[dict[str, Any]] = []
            if args.adversarial:
                from bench_anchors_adversarial import run_adversarial

                try:
                    adversarial = run_adversarial(spark, directory / "adversarial", hudi_missing)
                except Exception as error:  # noqa: BLE001 - the tables above are still printed
                    failures.append(f"adversarial run failed: {error}")
                    print(f"\n!!! the adversarial run failed: {error}", file=sys.stderr, flush=True)
        report["load_end"] = _load()
        print(f"\nload average at the end: {_load()}")
        titles = _titles(args.scale, args.files, args.shards, args.shard_rows)
        print(f"\nSpark {spark.version} local[2] for all but Hudi; Hudi: {hudi.get('spark', hudi.get('error'))}")
        for dataset, rows in results.items():
            print_queries(rows, titles[dataset])
            print_costs(costs[dataset], titles[dataset])
            failures += [f"{dataset} {r.query} on {s}" for r in rows for s in r.wrong()]
            if dataset in duck:
                from bench_anchors_duckdb import print_duckdb

                print_duckdb(duck[dataset], titles[dataset])
                failures += [f"{dataset} {r.query} on {v} (DuckDB)" for r in duck[dataset] for v in r.wrong()]
            if dataset in commit_results:
                print_commits(commit_results[dataset], titles[dataset], commits[dataset][1])
                failures += [
                    f"{dataset} new commit's point query on {c.system}"
                    for c in commit_results[dataset]
                    if c.rows != c.expected_rows
                ]
        if "error" in hudi:
            print(f"\nHudi not measured: {hudi['error']}\n{hudi.get('log', '')}")
        if adversarial:
            from bench_anchors_adversarial import print_adversarial

            print_adversarial(adversarial)
            failures += [f"adversarial {a['case']} on skipindex" for a in adversarial if a["wrong_skipindex"]]
        report |= {
            "spark": spark.version,
            "hudi": hudi,
            "queries": {d: [asdict(r) for r in rows] for d, rows in results.items()},
            "costs": {d: [asdict(w) for w in ws] for d, ws in costs.items()},
            "duckdb": {d: [asdict(r) for r in rows] for d, rows in duck.items()},
            "commits": {
                d: {"check": commits[d][1], "costs": [asdict(c) for c in cs]} for d, cs in commit_results.items()
            },
            "adversarial": adversarial,
        }
        if args.chart:
            chart(results, titles, args.chart)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1, default=str))
    finally:
        spark.stop()
    skipindex_wrong = [f for f in failures if "skipindex" in f]
    if failures:
        print(f"\n!!! WRONG ROWS: {failures}", file=sys.stderr)
    assert not skipindex_wrong, f"skipindex returned wrong rows: {skipindex_wrong}"
    return report


if __name__ == "__main__":
    main()
