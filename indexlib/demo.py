"""`skipindex demo` / `make demo`: two multi-snapshot Iceberg tables, indexed incrementally, then queries comparing
files in the table, files Iceberg's planning keeps, files each index stage keeps, and files that truly hold a match
(Spark SQL over every live file's rows).

* demo.lineitem: TPC-H lineitem, appended in order-key order (sorted keys: min/max territory; comments and part keys
  unsorted: Bloom territory).
* demo.events: service logs, one file per ingest shard, each holding a few services (Husky's case: tags that sort
  inside a file's min/max range), random trace ids.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import NoSuchTableError

from indexlib.config import Config
from indexlib.errors import UserError
from indexlib.indexing.build import build_index
from indexlib.indexing.spark import get_spark
from indexlib.lookup import lookup
from indexlib.pruning.iceberg_filter import to_iceberg_filter
from indexlib.query.binding import bound_predicate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LINEITEM = "demo.lineitem"
EVENTS = "demo.events"
LINEITEM_QUERIES = [
    "l_orderkey = 300007",
    "l_partkey = 4242",
    "l_partkey IN (17, 4242, 19999)",
    "l_comment = {comment}",
    "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-07'",
    "l_shipmode = 'AIR'",
    "l_returnflag = 'X'",
    "l_quantity > 49 AND l_discount = 0.10",
    "l_orderkey < 20000 AND NOT l_linestatus = 'F'",
    "l_commitdate IS NULL OR l_orderkey IN (7, 599975)",
    "l_orderkey + 1 = 300008",
    "l_comment LIKE 'zzz%'",
    "year(l_shipdate) = 1992 AND month(l_shipdate) = 1",
]
EVENTS_QUERIES = [
    "service = 'metadata'",
    "service IN ('billing', 'search')",
    "service = 'no-such-service'",
    "service LIKE 'auth%'",
    "service RLIKE '^(api|web)-gateway$'",
    "service NOT IN ('api-gateway', 'web-gateway')",
    "host = 'reader-07.eu-west-1'",
    "host LIKE '%.ap-south-1'",
    "trace_id = {trace_id}",
    "trace_id IN ({trace_ids})",
    "status = 503 AND service = 'payments'",
    "level = 'FATAL'",
]
SERVICES = [
    "api-gateway", "auth", "auth-admin", "billing", "catalog", "checkout", "compactor", "inventory", "ledger",
    "mailer", "metadata", "notifier", "orders", "payments", "reader", "recommender", "search", "sessions",
    "shipping", "web-gateway", "writer",
]  # fmt: skip
REGIONS = ["us-east-1", "eu-west-1", "ap-south-1"]
STATUSES = np.array([200, 200, 200, 200, 201, 204, 301, 400, 404, 429, 500, 503])
LEVELS = np.array(["INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"])


def _step(number: int, total: int, text: str) -> float:
    print(f"[{number}/{total}] {text}", flush=True)
    return time.monotonic()


def _done(started: float, text: str = "") -> None:
    print(f"      done in {time.monotonic() - started:.1f}s {text}".rstrip(), flush=True)


def _generate_lineitem(scale: float) -> pa.Table:
    tpchgen = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    if not Path(tpchgen).exists():
        raise UserError("the demo needs tpchgen-cli: pip install 'skipindex[demo]'")
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([tpchgen, "parquet", "-s", str(scale), "--tables=lineitem", "-o", out], check=True)
        table = pq.read_table(Path(out) / "lineitem.parquet")
    # string_view -> string; drop the generator's field ids and NOT NULLs so Iceberg assigns its own
    fields = [pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in table.schema]
    return table.cast(pa.schema(fields))


def trace_id(shard: int, row: int) -> str:
    """Deterministic, random-looking trace ids, so the demo can query ones it knows exist."""
    return hashlib.md5(f"{shard}-{row}".encode()).hexdigest()


def _events_shard(shard: int, rows: int) -> pa.Table:
    """One ingest shard: an hour of logs from 3 services in one region."""
    rng = np.random.default_rng(shard)
    services = rng.choice(SERVICES, size=3, replace=False)
    region = REGIONS[shard % len(REGIONS)]
    service = rng.choice(services, size=rows)
    host_number = rng.integers(0, 12, size=rows)
    start = np.datetime64("2026-11-01T00:00:00", "us") + np.timedelta64(shard, "h")
    return pa.table(
        {
            "ts": pa.array(start + np.sort(rng.integers(0, 3_600_000_000, size=rows)).astype("timedelta64[us]")),
            "service": pa.array(service.tolist(), pa.string()),
            "host": pa.array([f"{s}-{n:02d}.{region}" for s, n in zip(service, host_number, strict=True)]),
            "level": pa.array(rng.choice(LEVELS, size=rows).tolist(), pa.string()),
            "status": pa.array(rng.choice(STATUSES, size=rows), pa.int32()),
            "trace_id": pa.array([trace_id(shard, row) for row in range(rows)], pa.string()),
            "duration_ms": pa.array(np.round(rng.lognormal(3, 1, size=rows), 3)),
        }
    )


def _create_events(config: Config, snapshots: int, files_per_snapshot: int, rows_per_file: int = 25_000) -> None:
    """One append (one data file) per shard, in `snapshots` x `files_per_snapshot` shards."""
    catalog = config.load_catalog()
    catalog.create_namespace_if_not_exists("demo")
    first = _events_shard(0, rows_per_file)
    table = catalog.create_table(EVENTS, schema=first.schema)
    for shard in range(snapshots * files_per_snapshot):
        table.append(first if shard == 0 else _events_shard(shard, rows_per_file))
    print(f"      {snapshots * files_per_snapshot} shards committed", flush=True)


def _create_lineitem(config: Config, scale: float, snapshots: int, files_per_snapshot: int) -> None:
    """Append lineitem in `snapshots` commits of consecutive order keys, `files_per_snapshot` files each."""
    catalog = config.load_catalog()
    catalog.create_namespace_if_not_exists("demo")
    data = _generate_lineitem(scale)
    rows_per_snapshot = -(-data.num_rows // snapshots)
    target = max(1, data.slice(0, rows_per_snapshot).nbytes // files_per_snapshot + 1)
    table = catalog.create_table(LINEITEM, schema=data.schema, properties={"write.target-file-size-bytes": str(target)})
    for i in range(snapshots):
        table.append(data.slice(i * rows_per_snapshot, rows_per_snapshot))
        print(f"      snapshot {i + 1}/{snapshots} committed", flush=True)


def _local_path(uri: str) -> str:
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme in ("", "file") else uri


def _compare(config: Config, spark: SparkSession, table_name: str, queries: list[str]) -> list[str]:
    """Print, per query, the files each method keeps; return the queries where the index lost a matching file."""
    source = config.load_catalog().load_table(table_name)
    live = [task.file.file_path for task in source.scan().plan_files()]
    frame = spark.read.parquet(*[_local_path(p) for p in live])
    header = f"{'query':<62}{'files':>6}{'iceberg':>8}{'minmax':>7}{'bloom':>6}{'autom.':>7}{'match':>6}"
    print(f"\n{table_name}\n{header}\n{'-' * len(header)}")
    unsound = []
    for where in queries:
        result = lookup(config, table_name, where)
        iceberg_filter = to_iceberg_filter(bound_predicate(where, source.schema(), table_name))
        iceberg_kept = len(list(source.scan(row_filter=iceberg_filter).plan_files()))
        matching = {_local_path(r[0]) for r in frame.where(where).select("_metadata.file_path").distinct().collect()}
        if not matching <= {_local_path(p) for p in result.files}:
            unsound.append(where)
        out = {stage.name: stage.files_out for stage in result.stages}
        shown = where if len(where) <= 60 else where[:57] + "..."
        print(
            f"{shown:<62}{len(live):>6}{iceberg_kept:>8}{out['minmax']:>7}{out['bloom']:>6}{out['automaton']:>7}"
            f"{len(matching):>6}",
            flush=True,
        )
    return unsound


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def run_demo(config: Config, scale: float = 0.1, snapshots: int = 4, files_per_snapshot: int = 6) -> None:
    steps = 5
    catalog = config.load_catalog()
    started = _step(1, steps, f"source tables {LINEITEM} (TPC-H scale {scale}) and {EVENTS} (service logs)")
    creators: list[tuple[str, Callable[[], object]]] = [
        (LINEITEM, lambda: _create_lineitem(config, scale, snapshots, files_per_snapshot)),
        (EVENTS, lambda: _create_events(config, snapshots, files_per_snapshot)),
    ]
    for name, create in creators:
        try:
            catalog.load_table(name)
            print(
                f"      {name} exists already (delete the catalog and warehouse of {config.path} to regenerate)",
                flush=True,
            )
        except NoSuchTableError:
            create()
    _done(started)

    started = _step(2, steps, "starting Spark")
    spark = get_spark(config.spark)
    _done(started)

    for number, text in ((3, "incremental index builds"), (4, "second build runs (nothing new: commit nothing)")):
        started = _step(number, steps, text)
        for name in (LINEITEM, EVENTS):
            began = time.monotonic()
            print("      " + build_index(config, name, spark).message(), flush=True)
            print(f"      ({time.monotonic() - began:.1f}s)", flush=True)
        _done(started)

    _step(5, steps, "queries: files kept by each method (match = Spark SQL over every file's rows)")
    first_file = next(iter(catalog.load_table(LINEITEM).scan().plan_files())).file.file_path
    comment = pq.read_table(_local_path(first_file), columns=["l_comment"]).column(0)[100].as_py()
    lineitem = [q.format(comment=_sql_string(comment)) for q in LINEITEM_QUERIES]
    traces = [trace_id(7, 1234), trace_id(15, 99), trace_id(22, 24_999)]
    events = [
        q.format(trace_id=_sql_string(traces[0]), trace_ids=", ".join(_sql_string(t) for t in traces))
        for q in EVENTS_QUERIES
    ]
    unsound = _compare(config, spark, LINEITEM, lineitem) + _compare(config, spark, EVENTS, events)
    print()
    print("files: live data files; iceberg: table.scan(row_filter).plan_files() (Iceberg's own min/max metrics);")
    print("minmax / bloom / autom.: files left after each index stage (cumulative); match: files with a matching row.")
    if unsound:
        raise RuntimeError(f"index skipped a file with a matching row for: {unsound}")
