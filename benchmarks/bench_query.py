"""From a lookup to rows: what the index buys a query, end to end, side by side in one run.

Two Iceberg tables (SQLite catalog, files registered with `add_files`): TPC-H lineitem at `--scale` cut into
`--files` Parquet files after sorting by `l_shipdate` (an ingestion pipeline's layout: keys and comments spread over
the files), and the demo's service-log table of `--shards` shards (indexlib/demo.py). The index is built by
`skipindex build` in a fresh process (in the driver or on Spark `local[2]`, as the config's `[build]` limits decide).
Per query, the wall time of:

- pyiceberg's own `table.scan(row_filter=...).to_arrow()` (its manifest pruning, then every planned file);
- DuckDB's own `read_parquet` over every file with the WHERE (its footer / row-group statistics pruning);
- each through the index: a warm `IndexHandle` (lookup + read), and a cold process (a subprocess that imports,
  opens the catalog, looks up and reads: its whole wall time, and the lookup + read part after the imports);
- the limit of file pruning: the same engine reading exactly the files that truly hold a match (DuckDB over every
  file's rows says which), with its tasks made before the clock starts.

Files and bytes each way reads, and the rows returned, which must be equal across all ways (asserted).

Through the index, each engine runs what a user runs: pyiceberg `handle.scan(where).to_arrow()`, DuckDB
`handle.scan(where).to_duckdb()` (lookup, then the DuckDB scan over the kept files); DuckDB's
own read and its limit are `read_parquet` over the paths with the WHERE.

The lineitem point query is a key held by exactly one file, the one nearest the middle of the key range: lineitem
sorted by ship date leaves every file's `l_orderkey` min/max spanning nearly the whole range, so the engines' own
min/max pruning cannot skip the files around a mid-range key (the smallest key sat below most files' minimum).

    python benchmarks/bench_query.py                                       # SF 3, 200 files, 200 shards
    python benchmarks/bench_query.py --scale 0.01 --files 4 --shards 8 --shard-rows 2000 --runs 1  # toy, ~40 s

Row groups (`--row-groups N`, instead of the above): lineitem (`--scale`, default 1) sorted by `l_shipdate` in
`--files` (default 6) large files of N row groups each, indexed by the build twice, without and with row-group
entries (`[index] row_groups`), side by side with the plain Spark scan of bench_build.py (build seconds, index
bytes); per query the row groups holding a match (brute force), what Parquet's own statistics keep, and the row
groups and bytes read with file-level and with row-group-level pruning. The scans are not run: what a reader reads
comes from the lookup's answer and the footers, and the query time is a pyarrow read of exactly the kept row groups
against the whole kept files (each + the filter).

    python benchmarks/bench_query.py --row-groups 16 --build-runs 3        # SF 1 in 6 files of 16 row groups

Prints Markdown tables for docs/benchmarks.md; `--chart PATH` writes a PNG.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from bench_build import _lineitem_table, _registered
from pyiceberg.io.pyarrow import ArrowScan

from indexlib.config import load_config
from indexlib.demo import _events_shard, trace_id
from indexlib.handle import open_handle
from indexlib.query.sql import Clock
from indexlib.scans.duckdb import relation_of
from indexlib.scans.pyiceberg import row_filter
from indexlib.scans.scan import Scan

TABLE = "bench.small"  # the name bench_build._registered gives
WAYS = ["own", "index warm", "index cold", "limit"]
ENGINES = ["pyiceberg", "duckdb"]


def median_of(runs: int, action: Callable[[], object]) -> float:
    """Seconds of the median of `runs` calls (the machine is shared with other jobs: the median resists their
    bursts better than one run, and unlike the best it is what a user sees)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _sql(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _in(column: str, values: list[Any]) -> str:
    return f"{column} IN ({', '.join(_sql(v) if isinstance(v, str) else str(v) for v in values)})"


def duckdb_read(con: duckdb.DuckDBPyConnection, paths: list[str], where: str, schema_file: str) -> pa.Table:
    """DuckDB's own read: rows of `paths` matching `where`; no paths reads `schema_file` for an empty answer
    (read_parquet([]) raises)."""
    if not paths:
        return con.sql(f"SELECT * FROM read_parquet(?) WHERE {where} LIMIT 0", params=[schema_file]).to_arrow_table()
    return con.sql(f"SELECT * FROM read_parquet(?) WHERE {where}", params=[paths]).to_arrow_table()


def _files_of(con: duckdb.DuckDBPyConnection, paths: list[str], where: str) -> list[str]:
    """The files that truly hold a matching row (DuckDB over every file's rows)."""
    sql = f"SELECT DISTINCT filename FROM read_parquet(?, filename = true) WHERE {where}"
    return sorted(row[0] for row in con.sql(sql, params=[paths]).fetchall())


def _lineitem(directory: Path, scale: float, files: int) -> tuple[Path, list[str], list[tuple[str, str]], str]:
    conf, paths = _lineitem_table(directory, scale, files, order_by="l_shipdate")
    con = duckdb.connect()
    # a key held by exactly one file, the nearest the middle of the key range (ties: the smaller key)
    one_file = con.sql(
        "WITH one AS (SELECT l_orderkey AS k FROM read_parquet(?, filename = true) GROUP BY l_orderkey "
        "HAVING count(DISTINCT filename) = 1), mid AS (SELECT (min(k) + max(k)) / 2 AS m FROM one) "
        "SELECT k FROM one, mid ORDER BY abs(k - m), k LIMIT 1",
        params=[paths],
    ).fetchall()[0][0]
    keys = (
        con.sql("SELECT DISTINCT l_orderkey FROM read_parquet(?)", params=[paths]).to_arrow_table().column(0).to_numpy()
    )
    sample = sorted(int(k) for k in np.random.default_rng(27).choice(keys, 1_000, replace=False))
    comment = con.sql("SELECT l_comment FROM read_parquet(?) LIMIT 1 OFFSET 777", params=[paths[len(paths) // 2]])
    prefix = comment.fetchall()[0][0][:18]
    queries = [
        ("point", f"l_orderkey = {one_file}"),
        ("IN 10", _in("l_orderkey", sample[::100])),
        ("IN 1,000", _in("l_orderkey", sample)),
        ("tag", "l_returnflag = 'N' AND l_linestatus = 'F'"),
        ("LIKE", f"l_comment LIKE {_sql(prefix + '%')}"),
        ("date range", "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-07'"),
        ("non-selective", "l_shipmode = 'AIR'"),
    ]
    return conf, paths, queries, "l_shipdate BETWEEN DATE '1993-01-01' AND DATE '1996-12-31'"


def _events(directory: Path, shards: int, rows: int) -> tuple[Path, list[str], list[tuple[str, str]], str]:
    paths, queries = events_files(directory / "data", shards, rows)
    wide_start, wide_end = (
        np.datetime64("2026-11-01T00:00:00") + np.timedelta64(h, "h") for h in (shards // 4, shards)
    )
    wide = (
        f"ts >= TIMESTAMP '{str(wide_start).replace('T', ' ')}' AND ts < TIMESTAMP '{str(wide_end).replace('T', ' ')}'"
    )
    return _registered(directory, paths), paths, queries, wide


def events_files(data: Path, shards: int, rows: int) -> tuple[list[str], list[tuple[str, str]]]:
    """The service-log files (one per hourly shard, in the new folder `data`) and their queries."""
    data.mkdir()
    paths = []
    for shard in range(shards):
        path = data / f"shard-{shard:05d}.parquet"
        pq.write_table(_events_shard(shard, rows), path)
        paths.append(str(path))
    rng = np.random.default_rng(27)
    shard_of, row_of = rng.integers(0, shards, 1_000), rng.integers(0, rows, 1_000)
    ids = [trace_id(int(s), int(r)) for s, r in zip(shard_of, row_of, strict=True)]
    start, end = (np.datetime64("2026-11-01T00:00:00") + np.timedelta64(shards // 2 + h, "h") for h in (0, 6))
    start, end = (str(t).replace("T", " ") for t in (start, end))  # six hours of shards, mid-table
    queries = [
        ("point", f"trace_id = {_sql(trace_id(shards // 2, rows // 3))}"),
        ("IN 10", _in("trace_id", ids[:10])),
        ("IN 1,000", _in("trace_id", ids)),
        ("tag", "service = 'metadata'"),
        ("LIKE", "service LIKE 'auth%'"),
        ("date range", f"ts >= TIMESTAMP '{start}' AND ts < TIMESTAMP '{end}'"),
        ("non-selective", "duration_ms > 1"),
    ]
    return paths, queries


COLD = """
import json, sys, time
started = time.perf_counter()
from indexlib.config import load_config
from indexlib.handle import open_handle
from indexlib.query.sql import Clock
config = load_config(sys.argv[1])
handle = open_handle(config, sys.argv[2])
where = sys.stdin.read()
imported = time.perf_counter()
scan = handle.scan(where)
if sys.argv[3] == "pyiceberg":
    rows = scan.to_arrow().num_rows
else:
    rows = scan.to_duckdb().to_arrow_table().num_rows
done = time.perf_counter()
print(json.dumps({"total_s": done - started, "read_s": done - imported, "rows": rows}))
"""


@dataclass
class Cell:
    seconds: float
    files: int
    bytes: int
    rows: int
    note: str = ""


@dataclass
class Row:
    table: str
    label: str
    where: str
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    truth_files: int = 0


def _measure(name: str, conf: Path, paths: list[str], queries: list[tuple[str, str]], runs: int) -> list[Row]:
    config = load_config(conf)
    table = config.load_catalog().load_table(TABLE)
    handle = open_handle(config, TABLE)
    size = {p: Path(p).stat().st_size for p in paths}
    all_tasks = {task.file.file_path: task for task in table.scan().plan_files()}
    con = duckdb.connect()
    first = paths[0]
    rows = []
    for label, where in queries:
        row = Row(name, label, where)
        result = handle.lookup(where)
        ice_filter = row_filter(result)
        truth = _files_of(con, paths, where)
        row.truth_files = len(truth)
        kept = [k.file.path for k in result.kept_files]
        assert set(truth) <= set(kept), f"{name} {where}: the index skipped a file holding a match"
        planned = [t.file.file_path for t in table.scan(row_filter=ice_filter).plan_files()]
        limit_tasks = [all_tasks[p] for p in truth]

        def limit_pyiceberg(tasks=limit_tasks, f=ice_filter) -> pa.Table:
            return ArrowScan(table.metadata, table.io, table.schema(), f).to_table(tasks)

        ways: dict[tuple[str, str], tuple[Callable[[], pa.Table], list[str]]] = {
            ("pyiceberg", "own"): (lambda f=ice_filter: table.scan(row_filter=f).to_arrow(), planned),
            ("pyiceberg", "index warm"): (lambda w=where: handle.scan(w).to_arrow(), kept),
            ("pyiceberg", "limit"): (limit_pyiceberg, truth),
            ("duckdb", "own"): (lambda w=where: duckdb_read(con, paths, w, first), paths),
            ("duckdb", "index warm"): (
                lambda w=where: handle.scan(w).to_duckdb(con).to_arrow_table(),
                kept,
            ),
            ("duckdb", "limit"): (lambda t=truth, w=where: duckdb_read(con, t, w, first), truth),
        }
        for key, (action, read) in ways.items():
            started = time.perf_counter()
            answer = action()  # warm-up, and the rows
            slow = time.perf_counter() - started > 1.0
            seconds = median_of(min(runs, 3) if slow else runs, action)
            row.cells[key] = Cell(seconds, len(read), sum(size[p] for p in read), answer.num_rows)
        for engine in ENGINES:
            started = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", COLD, str(conf), TABLE, engine],
                input=where,
                capture_output=True,
                text=True,
                check=True,
            )
            wall = time.perf_counter() - started
            cold = json.loads(out.stdout.splitlines()[-1])  # the last line: a library may print before it
            row.cells[(engine, "index cold")] = Cell(
                wall, len(kept), sum(size[p] for p in kept), cold["rows"], _ms(cold["read_s"])
            )
        counts = {f"{e} {w}": c.rows for (e, w), c in row.cells.items()}
        assert len(set(counts.values())) == 1, f"{name} {where}: rows differ across ways: {counts}"
        rows.append(row)
        print(f"  {name} {label}: done", file=sys.stderr, flush=True)
    return rows


def _all_match(conf: Path, where: str, runs: int) -> dict[str, tuple[int, int, float, float]]:
    """What reading the all-match files without the filter saves: per engine, files kept, files all-match, and the
    warm read with the lookup's all-match list against the same read with the filter on every file."""
    handle = open_handle(load_config(conf), TABLE)
    result = handle.lookup(where)
    filtered = replace(result, all_match=[])
    con = duckdb.connect()
    reads = {
        "pyiceberg": lambda r: Scan(r, handle.dialect, Clock.system(handle.time_zone)).to_arrow(),
        "duckdb": lambda r: relation_of(r, dialect=handle.dialect, connection=con).to_arrow_table(),
    }
    measured = {}
    for engine, read in reads.items():
        assert read(result).num_rows == read(filtered).num_rows, f"{where}: all-match files hold only matching rows"
        with_all_match = median_of(runs, lambda read=read: read(result))
        without = median_of(runs, lambda read=read: read(filtered))
        measured[engine] = (len(result.files), len(result.all_match), with_all_match, without)
    return measured


def _print_all_match(name: str, where: str, measured: dict[str, tuple[int, int, float, float]]) -> None:
    print(f"\nAll-match files read without the filter, {name}: `{where}` (warm handle)\n")
    print(
        "| engine | files kept | of them all-match | all-match read unfiltered ms | every file filtered ms | saving |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for engine, (kept, all_match, with_all_match, without) in measured.items():
        print(
            f"| {engine} | {kept:,} | {all_match:,} | {_ms(with_all_match)} | {_ms(without)} | "
            f"{1 - with_all_match / without:.0%} |"
        )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def _target(row: Row, engine: str) -> str:
    """Through the index (warm) against the targets of issue 27: <= 1.5x (+10 ms) of the limit; one-file point
    queries >= 50x (pyiceberg) / 10x (DuckDB) faster than the engine's own read; non-selective <= 1.1x slower."""
    warm, limit, own = (row.cells[(engine, w)].seconds for w in ("index warm", "limit", "own"))
    checks = [("limit", warm <= 1.5 * limit + 0.010)]
    if row.label == "point" and row.truth_files == 1:
        checks.append((f"{50 if engine == 'pyiceberg' else 10}x", own / warm >= (50 if engine == "pyiceberg" else 10)))
    if row.label == "non-selective":
        checks.append(("1.1x", warm <= 1.1 * own))
    return ", ".join(f"{name} {'met' if ok else 'MISSED'}" for name, ok in checks)


def _print(rows: list[Row], title: str) -> None:
    print(f"\n### {title}\n")
    print(
        "| query | engine | own ms | through the index, warm ms | cold process ms (lookup + read) | limit ms | "
        "own / warm | warm / limit | files read: own / index / limit | MB read: own / index / limit | rows | "
        "targets |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        for engine in ENGINES:
            own, warm, cold, limit = (row.cells[(engine, w)] for w in WAYS)
            print(
                f"| {row.label} | {engine} | {_ms(own.seconds)} | {_ms(warm.seconds)} | {_ms(cold.seconds)} "
                f"({cold.note}) | {_ms(limit.seconds)} | {own.seconds / warm.seconds:,.1f}x | "
                f"{warm.seconds / limit.seconds:,.2f}x | {own.files:,} / {warm.files:,} / {limit.files:,} | "
                f"{own.bytes / 1e6:,.1f} / {warm.bytes / 1e6:,.1f} / {limit.bytes / 1e6:,.1f} | {own.rows:,} | "
                f"{_target(row, engine)} |"
            )
    print("\nQueries: " + "; ".join(f"{row.label}: `{_short(row.where)}`" for row in rows))


def _short(where: str) -> str:
    return where if len(where) < 90 else where[:60] + f"... ({len(where):,} chars)"


def _chart(rows: list[Row], path: str) -> None:
    """Per table, query and engine, grouped bars on a log scale: own read, through the index (warm), the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tables = list(dict.fromkeys(r.table for r in rows))
    figure, axes = plt.subplots(len(tables), 1, figsize=(12, 4 * len(tables)), squeeze=False)
    series = [("own", "engine's own read"), ("index warm", "through the index (warm)"), ("limit", "pruning limit")]
    for ax, name in zip(axes[:, 0], tables, strict=True):
        mine = [r for r in rows if r.table == name]
        keys = [(r, e) for r in mine for e in ENGINES]
        width = 0.8 / len(series)
        for n, (way, label) in enumerate(series):
            ax.bar(
                [k + (n - 1) * width for k in range(len(keys))],
                [r.cells[(e, way)].seconds * 1e3 for r, e in keys],
                width,
                label=label,
            )
        ax.set_yscale("log")
        ax.set_ylabel("ms (log scale)")
        ax.set_xticks(range(len(keys)), [f"{r.label}\n{e}" for r, e in keys], fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _build(conf: Path) -> float:
    """`skipindex build` in a fresh process, as a scheduler runs it; seconds."""
    with conf.open("a") as out:
        out.write('[spark]\nmaster = "local[2]"\n[spark.options]\n"spark.ui.enabled" = "false"\n')
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "indexlib.cli", "build", "--conf", str(conf), "--table", TABLE],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


# --- Row groups: file-level against row-group-level pruning (`--row-groups N`) ---------------------------------------


@dataclass
class GroupRead:
    """What one way of pruning makes a reader read: files, row groups, their compressed bytes (the footers'
    `total_compressed_size`), the warm lookup, and the pyarrow read of exactly those row groups + filter."""

    files: int
    groups: int
    bytes: int
    lookup_s: float = 0.0
    read_s: float = 0.0
    rows: int = 0


@dataclass
class GroupRow:
    label: str
    where: str
    true_files: int
    true_groups: int
    statistics_groups: int  # row groups Parquet's own min/max statistics keep, over every file
    file_level: GroupRead
    group_level: GroupRead


def _footer_sizes(paths: list[str]) -> dict[str, list[int]]:
    """Compressed bytes of every row group of every file, from the footers."""
    sizes = {}
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        sizes[path] = [
            sum(meta.row_group(g).column(c).total_compressed_size for c in range(meta.num_columns))
            for g in range(meta.num_row_groups)
        ]
    return sizes


def _matching_groups(con: duckdb.DuckDBPyConnection, paths: list[str], where: str, key: str | None = None) -> Any:
    """The (file, row group) pairs holding a matching row, brute force (DuckDB over every row; a row's group from
    the footers' row counts); with `key`, per value of that column: {value: pairs}."""
    starts = {}
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        starts[path] = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
    extra = f", {key}" if key else ""
    found = con.sql(
        f"SELECT filename, file_row_number{extra} FROM read_parquet(?, filename = true, file_row_number = true) "
        f"WHERE {where}",
        params=[paths],
    ).fetchall()
    pairs: dict[Any, set[tuple[str, int]]] = {}
    for hit in found:
        group = int(np.searchsorted(starts[hit[0]], hit[1], side="right") - 1)
        pairs.setdefault(hit[2] if key else None, set()).add((hit[0], group))
    return pairs if key else pairs.get(None, set())


def _statistics_groups(paths: list[str], expression: Any) -> int:
    """Row groups a reader's own min/max pruning keeps (pyarrow, the footers' statistics), over every file."""
    import pyarrow.dataset as ds

    return sum(len(f.split_by_row_group(filter=expression)) for f in ds.dataset(paths).get_fragments())


def _read(kept: dict[str, tuple[int, ...] | None], expression: Any) -> int:
    """Rows of a pyarrow read of the kept row groups (None: the whole file), filtered."""
    rows = 0
    for path, groups in kept.items():
        parquet = pq.ParquetFile(path)
        table = parquet.read() if groups is None else parquet.read_row_groups(list(groups))
        rows += table.filter(expression).num_rows
    return rows


def _kept_groups(result: Any, sizes: dict[str, list[int]]) -> dict[str, tuple[int, ...]]:
    """Per kept file, the row groups a reader reads (all of them where the lookup gave none)."""
    return {
        path: groups if (groups := result.needed_row_groups(path)) is not None else tuple(range(len(sizes[path])))
        for path in result.files
    }


def _group_queries(con: duckdb.DuckDBPyConnection, paths: list[str]) -> tuple[list[tuple[str, str, Any]], list[int]]:
    """(label, SQL, pyarrow expression) per query, and 50 order keys for the point summary; literals that exist."""
    import datetime

    rng = np.random.default_rng(28)
    orders = con.sql("SELECT DISTINCT l_orderkey FROM read_parquet(?) ORDER BY 1", params=[paths]).fetchnumpy()
    order_keys = sorted(int(k) for k in rng.choice(orders["l_orderkey"], 51, replace=False))
    parts = con.sql(
        "SELECT DISTINCT l_partkey FROM read_parquet(?) WHERE l_shipdate BETWEEN DATE '1995-01-01' AND DATE "
        "'1995-06-30' ORDER BY 1",
        params=[paths],
    ).fetchnumpy()
    part_key = int(rng.choice(parts["l_partkey"]))
    day = lambda text: pa.scalar(datetime.date.fromisoformat(text), pa.date32())  # noqa: E731
    ship, order, part = pc.field("l_shipdate"), pc.field("l_orderkey"), pc.field("l_partkey")
    half_year = (ship >= day("1995-01-01")) & (ship <= day("1995-06-30"))
    queries = [
        ("point: order key", f"l_orderkey = {order_keys[25]}", order == order_keys[25]),
        ("point: part key", f"l_partkey = {part_key}", part == part_key),
        (
            "date range",
            "l_shipdate BETWEEN DATE '1995-03-01' AND DATE '1995-03-07'",
            (ship >= day("1995-03-01")) & (ship <= day("1995-03-07")),
        ),
        (
            "date range AND part key",
            f"l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1995-06-30' AND l_partkey = {part_key}",
            half_year & (part == part_key),
        ),
    ]
    return queries, order_keys[:25] + order_keys[26:]


def _group_builds(conf: Path, paths: list[str], runs: int, spark: bool) -> tuple[dict[str, float], dict[str, Path]]:
    """Build seconds (best of `runs`, alternating) of the index without and with row-group entries and of the plain
    Spark scan; and a conf per index (namespaces `idx_false`, `idx_true`: the first build of each)."""
    from bench_build import bench_spark, plain_scan

    from indexlib.indexing.build import build_index

    session = bench_spark() if spark else None
    columns = pq.read_schema(paths[0]).names

    def variant(name: str, row_groups: str) -> Path:
        path = conf.with_name(f"{name}.toml")
        path.write_text(conf.read_text() + f'[index]\nnamespace = "{name}"\nrow_groups = {row_groups}\n')
        return path

    if session is not None:  # warm-up: the JVM and the Python workers' imports
        build_index(load_config(variant("idx_warmup", "false")), TABLE, session)
        plain_scan(session, paths, columns)
    confs = {"false": variant("idx_false", "false"), "true": variant("idx_true", "true")}
    seconds: dict[str, float] = {}
    for run in range(runs):
        for mode in ("false", "true"):
            target = confs[mode] if run == 0 else variant(f"idx_{mode}_{run}", mode)
            started = time.perf_counter()
            build_index(load_config(target), TABLE, session)
            seconds[mode] = min(seconds.get(mode, float("inf")), time.perf_counter() - started)
        if session is not None:
            started = time.perf_counter()
            plain_scan(session, paths, columns)
            seconds["plain"] = min(seconds.get("plain", float("inf")), time.perf_counter() - started)
    return seconds, confs


def _index_bytes(conf: Path) -> int:
    config = load_config(conf)
    index = config.load_catalog().load_table(f"{config.index_namespace}.bench__small")
    return sum(index.inspect.files().column("file_size_in_bytes").to_pylist())


def row_groups_main(args: argparse.Namespace) -> list[GroupRow]:
    """Lineitem as large files of `args.row_groups` row groups each, clustered by ship date; indexed without and
    with row-group entries; per query what each makes a reader read, and the build and index bytes of each."""
    scale, files = args.scale or 1, args.files or 6
    rows: list[GroupRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        started = time.perf_counter()
        conf, paths = _lineitem_table(directory, scale, files, order_by="l_shipdate", row_groups=args.row_groups)
        made = time.perf_counter() - started
        sizes = _footer_sizes(paths)
        data_mb = sum(Path(p).stat().st_size for p in paths) / 1e6
        print(
            f"\nTPC-H lineitem SF {scale:g} by l_shipdate: {len(paths)} files ({data_mb / len(paths):,.1f} MB each), "
            f"{sum(map(len, sizes.values()))} row groups ({min(map(len, sizes.values()))}-"
            f"{max(map(len, sizes.values()))} per file), {data_mb:,.1f} MB; made in {made:.0f} s",
            flush=True,
        )
        seconds, confs = _group_builds(conf, paths, args.build_runs, not args.no_spark)
        index_bytes = {mode: _index_bytes(c) for mode, c in confs.items()}
        _print_group_builds(seconds, index_bytes, data_mb, not args.no_spark)
        handles = {mode: open_handle(load_config(c), TABLE) for mode, c in confs.items()}
        con = duckdb.connect()
        queries, point_keys = _group_queries(con, paths)
        for label, where, expression in queries:
            truth = _matching_groups(con, paths, where)
            reads = {}
            for mode, handle in handles.items():
                result = handle.lookup(where)
                kept = _kept_groups(result, sizes)
                reads[mode] = GroupRead(
                    len(kept),
                    sum(map(len, kept.values())),
                    sum(sizes[p][g] for p, groups in kept.items() for g in groups),
                )
                reads[mode].rows = _read(kept if mode == "true" else dict.fromkeys(kept), expression)
            for _ in range(args.runs):  # alternating, so both see the same moments of a shared machine
                for mode, handle in handles.items():
                    started = time.perf_counter()
                    result = handle.lookup(where)
                    looked = time.perf_counter()
                    kept = _kept_groups(result, sizes)
                    _read(kept if mode == "true" else dict.fromkeys(kept), expression)
                    done = time.perf_counter()
                    reads[mode].lookup_s = min(reads[mode].lookup_s or float("inf"), looked - started)
                    reads[mode].read_s = min(reads[mode].read_s or float("inf"), done - looked)
            true_rows = con.sql(f"SELECT count(*) FROM read_parquet(?) WHERE {where}", params=[paths]).fetchall()[0][0]
            assert reads["false"].rows == reads["true"].rows == true_rows, f"{where}: rows differ"
            rows.append(
                GroupRow(
                    label,
                    where,
                    len({p for p, _ in truth}),
                    len(truth),
                    _statistics_groups(paths, expression),
                    reads["false"],
                    reads["true"],
                )
            )
            print(f"  row groups {label}: done", file=sys.stderr, flush=True)
        _print_group_rows(rows)
        _print_point_keys(con, paths, sizes, handles, point_keys)
    return rows


def _print_group_builds(seconds: dict[str, float], index_bytes: dict[str, int], data_mb: float, spark: bool) -> None:
    where = "Spark local[2], one session, after a warm-up" if spark else "in this process (no Spark)"
    print(f"\nBuild ({where}; best of the runs, alternating) and index bytes\n")
    print("| job | seconds | vs plain Spark | vs without row groups | index MB | % of the data | vs without |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    plain = seconds.get("plain")
    for mode, label in (
        ("false", "skipindex build, row_groups = false"),
        ("true", "skipindex build, row_groups = true"),
    ):
        versus = f"{seconds[mode] / plain:.2f}x" if plain else "-"
        print(
            f"| {label} | {seconds[mode]:.1f} | {versus} | {seconds[mode] / seconds['false']:.2f}x | "
            f"{index_bytes[mode] / 1e6:,.2f} | {100 * index_bytes[mode] / 1e6 / data_mb:.1f} % | "
            f"{index_bytes[mode] / index_bytes['false']:.2f}x |"
        )
    if plain:
        print(f"| plain PySpark per-file count/min/max/nulls | {plain:.1f} | 1.00x | | | | |")


def _print_group_rows(rows: list[GroupRow]) -> None:
    print("\nPer query: file-level pruning (index without row-group entries: whole kept files) against row-level\n")
    print(
        "| query | true: files / row groups | Parquet statistics keep (row groups) | row groups read: file level / "
        "row-group level | vs true: file level / row-group level | MB read: file level / row-group level | "
        "warm lookup ms: file level / row-group level | pyarrow read + filter ms: whole files / kept row groups | "
        "read speed-up | rows | target |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        f, g = row.file_level, row.group_level
        ratio = lambda n, t=row.true_groups: f"{n / t:.2f}x" if t else "-"  # noqa: E731
        target = ""
        if row.label.startswith("point"):
            target = f"1.2x {'met' if g.groups <= 1.2 * row.true_groups else 'MISSED'}"
        print(
            f"| {row.label} | {row.true_files} / {row.true_groups} | {row.statistics_groups} | {f.groups} / {g.groups} "
            f"| {ratio(f.groups)} / {ratio(g.groups)} | {f.bytes / 1e6:,.1f} / {g.bytes / 1e6:,.1f} | "
            f"{_ms(f.lookup_s)} / {_ms(g.lookup_s)} | {_ms(f.read_s)} / {_ms(g.read_s)} | "
            f"{f.read_s / g.read_s:.1f}x | {g.rows:,} | {target} |"
        )
    print("\nQueries: " + "; ".join(f"{row.label}: `{_short(row.where)}`" for row in rows))


def _print_point_keys(
    con: duckdb.DuckDBPyConnection,
    paths: list[str],
    sizes: dict[str, list[int]],
    handles: dict[str, Any],
    keys: list[int],
) -> None:
    """Point queries on many order keys (lookups only): row groups read against the row groups holding the key."""
    truth = _matching_groups(con, paths, _in("l_orderkey", keys), key="l_orderkey")
    true_total = read_files = read_groups = over = 0
    worst = 0.0
    for key in keys:
        true = len(truth[key])
        result = {mode: _kept_groups(h.lookup(f"l_orderkey = {key}"), sizes) for mode, h in handles.items()}
        file_level = sum(len(sizes[p]) for p in result["false"])
        group_level = sum(map(len, result["true"].values()))
        true_total, read_files, read_groups = true_total + true, read_files + file_level, read_groups + group_level
        over += group_level > 1.2 * true
        worst = max(worst, group_level / true)
    print(
        f"\nPoint queries `l_orderkey = k` for {len(keys)} order keys (lookups only): row groups holding the key "
        f"{true_total} in all; read at file level {read_files} ({read_files / true_total:.2f}x), at row-group level "
        f"{read_groups} ({read_groups / true_total:.2f}x); keys over 1.2x: {over} of {len(keys)}, worst "
        f"{worst:.2f}x"
    )


def main(argv: list[str] | None = None) -> list[Row] | list[GroupRow]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, help="TPC-H scale factor of lineitem (default 3; with --row-groups 1)")
    parser.add_argument("--files", type=int, help="files of the lineitem table (default 200; with --row-groups 6)")
    parser.add_argument("--shards", type=int, default=200, help="shards (files) of the service-log table")
    parser.add_argument("--shard-rows", type=int, default=25_000, help="rows per service-log shard")
    parser.add_argument("--runs", type=int, default=5, help="repetitions per cell (3 when one takes over 1 s)")
    parser.add_argument("--chart", help="write a PNG here")
    parser.add_argument(
        "--row-groups",
        type=int,
        default=0,
        help="instead: lineitem in large files of this many row groups, file-level against row-group-level pruning",
    )
    parser.add_argument("--build-runs", type=int, default=2, help="--row-groups: builds of each index (best shown)")
    parser.add_argument("--no-spark", action="store_true", help="--row-groups: build in this process, no Spark")
    args = parser.parse_args(argv)
    if args.row_groups:
        return row_groups_main(args)
    args.scale, args.files = args.scale or 3, args.files or 200
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (
            (
                f"TPC-H lineitem SF {args.scale:g}, {args.files} files by l_shipdate",
                lambda d: _lineitem(d, args.scale, args.files),
            ),
            (
                f"service logs, {args.shards} shards of {args.shard_rows:,} rows",
                lambda d: _events(d, args.shards, args.shard_rows),
            ),
        ):
            directory = Path(tmp) / str(len(rows))
            directory.mkdir()
            started = time.perf_counter()
            conf, paths, queries, wide = make(directory)
            made = time.perf_counter() - started
            build_s = _build(conf)
            mb = sum(Path(p).stat().st_size for p in paths) / 1e6
            print(
                f"\n{name}: {len(paths)} files, {mb:,.1f} MB of Parquet; made in {made:.0f} s, "
                f"indexed in {build_s:.0f} s (skipindex build, fresh process)",
                flush=True,
            )
            mine = _measure(name, conf, paths, queries, args.runs)
            _print(mine, name)
            rows += mine
            _print_all_match(name, wide, _all_match(conf, wide, args.runs))
    if args.chart:
        _chart(rows, args.chart)
    return rows


if __name__ == "__main__":
    main()
