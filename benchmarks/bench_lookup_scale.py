"""Lookup at lake scale, end to end from a real table: an Iceberg table (SQLite catalog) of N small Parquet files
registered with `add_files`, indexed with the build's own per-file indexer and index writer (no Spark: building the
index of 10,000+ files with one Spark task per file takes too long on this machine; issue 15 plans tasks by bytes).

Side by side, per query: pyiceberg `plan_files(row_filter)` (Iceberg's own pruning), our one-off lookup in a fresh
process (what `skipindex explain` does after its imports: the live files from the index's file rows, then the index
rows the predicate needs), and a warm `IndexHandle` (what planner code keeps), with the handle's warm time broken
down by step; the files each keeps and the files that truly hold a match; peak RSS of the fresh process; and what
the fresh process read of the index (Arrow bytes), next to the size of the whole index.

With `--row-groups N` the files are written with N Parquet row groups each and indexed twice, side by side: with
row-group entries (`row_groups = "true"`, row-group payloads at the declared settings as the build makes them) and
without (the same entries with their row-group lists left out: the file-level part of an entry does not depend on
them, checked on the first files against a plain `index_file`). Per query: the warm handle and the cold lookup on
each index, the files and row groups each keeps, and the files and row groups that truly hold a match.
pyiceberg's `plan_files` is left out of that table (it is the same as above).

With `--key-index` the table is indexed twice, side by side: with the automatic choice (at 5,000+ files part_key,
random per file, goes into the global key index and gets no Bloom filter; order_key, a dense sorted run, does not)
and with the old choice (`key_index = false`: Bloom filters sized for the table). Per query (`=` on order_key and
part_key, part_key IN 3 / 1,000 / 10,000 / 100,000 keys of which 2 % are drawn from the table, tag equality, a
3-leaf AND): warm handle times with SQL text, with a `query.model` tree (no parsing) and with a fresh key list per
run; the SQL's parse+bind; cold lookups in a fresh process; files kept and true; what was read (index Arrow bytes,
key-index row groups / rows / compressed bytes); then the index's Parquet bytes per partition and payload bytes per
column and kind, and part_key's bytes against precision (a 1 % Bloom filter per file built here, the table-sized
filters, the key index; false files per absent key over 1,000 absent keys). `--keep DIR` keeps the tables,
`--profile PATH` writes cProfile reports of the key-index side.

With `--cold-start` (issue 40), whole fresh processes as a user starts them, on the table at each `--files`: `skipindex
explain` of `=` and of IN 3 keys (`python -m indexlib.cli`), a fresh planner process (`from indexlib import
IndexHandle`, the catalog, `IndexHandle.for_iceberg(...)` and its first lookup, with its own split into imports,
catalog and table, first lookup), and as yardsticks the imports of the dependencies alone (pyiceberg with its SQL
catalog and pyarrow file IO, sqlglot) and an empty interpreter. Median (min-max) of `--runs` runs after one warm-up
run each (which also writes bytecode caches where Python may); `--before DIR` runs every command on the checkout in
DIR too (PYTHONPATH=DIR), alternating with this one run by run, so both see the same moments of a shared machine.

    .venv/bin/python benchmarks/bench_lookup_scale.py [--files 10000] [--rows 16] [--row-groups 8]
    .venv/bin/python benchmarks/bench_lookup_scale.py --key-index --files 10000 100000 --runs 3
    .venv/bin/python benchmarks/bench_lookup_scale.py --cold-start --files 5000 --runs 7 [--before /tmp/before]
    .venv/bin/python benchmarks/bench_lookup_scale.py --warm-ab [--against REV ...] [--keep DIR] [--profile PATH]

With `--warm-ab` (issue 63), what a planner pays on every query once its handle is warm, on this checkout and on
older revisions side by side: tables of a unique random int64 `id` (200 files of 5,000 and of 90,000 rows: Bloom
filters; 10,000 files of 100 rows: the global key index), and per table the warm `IndexHandle.lookup` of a key held by
one file and of a key held by none, `handle.scan(absent).to_arrow()`, and a plan of each key through `skipindex serve`
(the body pyiceberg sends, on a keep-alive connection). Each revision is a `git worktree` under /tmp (made once) run
with PYTHONPATH pointing at it, in its own processes, the revisions taking turns round by round. The figures are
compared as ratios to the first of `--against` (default: indexlib/ before its last change), never as absolute
times, and a warm lookup or a plan that grew by more than 20 % is printed loudly (`make bench` runs it).
`--profile PATH` appends cProfile reports of this checkout's warm path to PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, GreaterThan
from pyiceberg.types import LongType
from timing import best_of

from indexlib.config import load_config
from indexlib.handle import IndexHandle, open_handle
from indexlib.index_kinds import split_block
from indexlib.index_kinds.registry import sized_settings
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.file_indexer import IndexTask, index_file
from indexlib.pruning.iceberg_filter import to_iceberg_filter
from indexlib.pruning.index_evidence import prune_aligned
from indexlib.pruning.partitions import prune_partitions
from indexlib.query.binding import bind
from indexlib.query.model import In
from indexlib.query.normalize import normalize
from indexlib.query.sql import parse_where
from indexlib.statistics.canonical import distinct_keys, literal_hashes
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, entry_row
from indexlib.store.table import IndexTable, LiveSet

MODES = np.array(["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"])
TABLE = "bench.events"
FILES_ONLY = "skipindex_files_only"  # --row-groups: the second index, without row-group entries
BLOOM_ONLY = "skipindex_bloom_only"  # --key-index: the second index, with the old choice (key_index = false)


def _queries(rng: np.random.Generator, files: int, rows: int) -> list[tuple[str, str]]:
    keys = rng.integers(0, files * rows * 50, 10_000)
    return [
        ("=", f"order_key = {files * rows // 2 + 3}"),
        ("IN 3 keys", "part_key IN (7, 4242, 999999)"),
        ("tag =", "mode = 'REG AIR'"),
        ("3-leaf AND", f"order_key < {files * rows // 4} AND mode = 'AIR' AND part_key > 100"),
        ("IN 10,000 keys", f"part_key IN ({', '.join(map(str, keys))})"),
    ]


def _make_table(
    root: Path,
    files: int,
    rows: int,
    rng: np.random.Generator,
    false_files: float | None,
    row_groups: int = 0,
    bloom_only: bool = False,
) -> tuple[Path, dict[str, pa.Table], Path | None]:
    """The table, its index, and each data file's rows (for the truth). With `row_groups`, files of that many row
    groups, indexed with row-group entries, and a second index of the same entries without them (in namespace
    `FILES_ONLY`); with `bloom_only`, a second index made with the old choice (`key_index = false`: Bloom filters
    sized for the table, no key rows; namespace `BLOOM_ONLY`). The conf of that second index is the third value."""
    warehouse = root / "warehouse"
    warehouse.mkdir()
    conf = root / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "bench"\ntype = "sql"\nuri = "sqlite:///{root}/catalog.db"\nwarehouse = "{warehouse}"\n'
    )
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=str(warehouse))
    catalog.create_namespace("bench")
    schema = pa.schema([("order_key", pa.int64()), ("part_key", pa.int64()), ("mode", pa.string())])
    table = catalog.create_table(TABLE, schema=schema)
    data, paths = {}, []
    for n in range(files):
        mode = MODES[rng.integers(0, len(MODES), 2)]  # two tags per file: Husky's case
        rows_of = pa.table(
            {
                "order_key": pa.array(np.arange(n * rows, (n + 1) * rows), pa.int64()),
                "part_key": pa.array(rng.integers(0, files * rows * 50, rows), pa.int64()),
                "mode": pa.array(mode[rng.integers(0, 2, rows)]),
            }
        )
        path = str(warehouse / f"file-{n:07d}.parquet")
        pq.write_table(rows_of, path, row_group_size=-(-rows // row_groups) if row_groups else None)
        data[path], _ = rows_of, paths.append(path)
    table.add_files(paths)
    table = catalog.load_table(TABLE)
    iceberg_schema, name_mapping = table.schema(), table.properties.get("schema.name-mapping.default")
    declared = IndexSettings() if false_files is None else IndexSettings(bloom_false_files=false_files)
    settings = {f.field_id: sized_settings(declared, files) for f in iceberg_schema.fields}  # as the build sizes
    # row-group payloads at the declared settings, as the build makes them (indexing/build.py)
    group_settings = {f.field_id: declared for f in iceberg_schema.fields} if row_groups else None
    # files written without field ids: matched by the name mapping add_files records; one process per core
    with ProcessPoolExecutor() as pool:
        entries = list(
            pool.map(
                _entry,
                paths,
                repeat(iceberg_schema),
                repeat(name_mapping),
                repeat(settings),
                repeat(group_settings),
                repeat(files),
                chunksize=256,
            )
        )
    config = load_config(conf)
    version = table.current_snapshot().snapshot_id
    live = LiveSet(version, frozenset(paths))
    IndexTable(catalog, config.index_namespace, TABLE).commit(  # as a build commits: rows of exactly the live files
        pa.Table.from_pylist([with_groups for with_groups, _ in entries], schema=ENTRY_ARROW_SCHEMA),
        live=live,
        watermark=version,
    )
    if bloom_only:
        old = declared.updated(key_index=False)
        old_settings = {f.field_id: sized_settings(old, files) for f in iceberg_schema.fields}
        with ProcessPoolExecutor() as pool:
            old_entries = list(
                pool.map(
                    _entry,
                    paths,
                    repeat(iceberg_schema),
                    repeat(name_mapping),
                    repeat(old_settings),
                    repeat(None),
                    repeat(files),
                    chunksize=256,
                )
            )
        second = _second_index(root, conf, catalog, BLOOM_ONLY, [entry for entry, _ in old_entries], live, version)
        return conf, data, second
    if not row_groups:
        return conf, data, None
    for path in paths[:20]:  # the entry without row-group entries is what a build without them writes
        plain = _entry(path, iceberg_schema, name_mapping, settings, None, files)[0]
        assert plain == _entry(path, iceberg_schema, name_mapping, settings, group_settings, files)[1], path
    return (
        conf,
        data,
        _second_index(root, conf, catalog, FILES_ONLY, [without for _, without in entries], live, version),
    )


def _second_index(
    root: Path, conf: Path, catalog: Any, namespace: str, entries: list[dict], live: LiveSet, version: int
) -> Path:
    """`entries` committed as the index of the same table in `namespace`, and the conf that reads it."""
    second = root / f"{namespace}.toml"
    second.write_text(conf.read_text() + f'[index]\nnamespace = "{namespace}"\n')
    IndexTable(catalog, namespace, TABLE).commit(
        pa.Table.from_pylist(entries, schema=ENTRY_ARROW_SCHEMA), live=live, watermark=version
    )
    return second


def _entry(
    path: str,
    schema: Any,
    name_mapping: str | None,
    settings: dict,
    group_settings: dict | None,
    table_files: int = 1,
) -> tuple[dict, dict]:
    """The file's entry (with row-group entries when `group_settings` is given), and the same entry without them;
    `table_files`: the table's live files, which the build passes (the key index's automatic choice needs it)."""
    mode = "true" if group_settings is not None else "false"
    task = IndexTask(
        schema,
        {},
        name_mapping,
        1,
        settings,
        row_groups=mode,
        row_group_settings=group_settings or {},
        table_files=table_files,
    )
    count, stats = index_file(path, "PARQUET", task)
    size = Path(path).stat().st_size

    def row(of: list) -> dict:
        return entry_row(path, size, count, 1, of, file_format="PARQUET", spec_id=0, partition=[])

    return row(stats), row([replace(column, row_groups=None) for column in stats])


def _truth(data: dict[str, pa.Table], where: str, row_groups: int = 0) -> int | tuple[int, int]:
    """Files holding a matching row, by DuckDB over every file's rows; with `row_groups` (the files' row groups,
    written as `_make_table` writes them), also the row groups holding one."""
    import duckdb

    def labelled(n: int, t: pa.Table) -> pa.Table:
        t = t.append_column("file", pa.array([n] * t.num_rows))
        if row_groups:  # pyarrow fills row groups of row_group_size rows in order
            t = t.append_column("rg", pa.array(np.arange(t.num_rows) // -(-t.num_rows // row_groups)))
        return t

    rows = pa.concat_tables(labelled(n, t) for n, t in enumerate(data.values()))
    con = duckdb.connect()
    con.register("t", rows)
    files = con.execute(f"SELECT count(DISTINCT file) FROM t WHERE {where}").fetchone()[0]
    if not row_groups:
        return files
    return files, con.execute(f"SELECT count(*) FROM (SELECT DISTINCT file, rg FROM t WHERE {where})").fetchone()[0]


COLD = """
import json, sys, time
started = time.perf_counter()
from indexlib import load_config
from indexlib.lookup import lookup_in, read_state
from indexlib.query.sql import Clock
config = load_config(sys.argv[1])
config.load_catalog()  # imports the catalog's client (SQLAlchemy for the SQL catalog)
imported = time.perf_counter()
state = read_state(config, sys.argv[2])
live = time.perf_counter()
result = lookup_in(state, sys.argv[2], sys.stdin.read(), Clock.system())
done = time.perf_counter()
# this process's peak RSS: VmHWM starts afresh at exec (ru_maxrss would carry the benchmark's own peak over)
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"import_s": imported - started, "live_s": live - imported, "lookup_s": done - imported,
                  "kept": len(result.files), "read_mb": state.rows.bytes_read / 1e6, "rss_mb": peak_kb / 1024}))
"""


def _row(
    files: int, label: str, where: str, conf: Path, table: Any, handle: IndexHandle, data: dict, runs: int
) -> tuple[str, dict[str, float]]:
    predicate = bind(normalize(parse_where(where)), table.schema(), TABLE)
    row_filter = to_iceberg_filter(predicate)
    iceberg_kept = len(list(table.scan(row_filter=row_filter).plan_files()))
    plan_s = best_of(min(2, runs), lambda: list(table.scan(row_filter=row_filter).plan_files()))
    cold = json.loads(
        subprocess.run(
            [sys.executable, "-c", COLD, str(conf), TABLE], input=where, capture_output=True, text=True, check=True
        ).stdout
    )
    handle.lookup(where)
    warm_s = best_of(runs, lambda: handle.lookup(where))
    state = handle.current()
    bind_s = best_of(runs, lambda: bind(normalize(parse_where(where)), state.source.schema, TABLE))
    partition_s = best_of(runs, lambda: prune_partitions(state.source, state.live, predicate))
    stages_s = best_of(runs, lambda: prune_aligned(predicate, state.aligned))
    kept = len(handle.lookup(where).files)
    times = {"plan_files": plan_s, "cold lookup": cold["lookup_s"], "warm handle": warm_s}
    return (
        f"| {files:,} | {label} | {plan_s * 1e3:,.0f} | {iceberg_kept:,} | {cold['lookup_s'] * 1e3:,.0f} "
        f"({cold['live_s'] * 1e3:,.0f} live files; +{cold['import_s'] * 1e3:,.0f} imports and catalog) | {cold['read_mb']:,.1f} | "
        f"{warm_s * 1e3:,.1f} | {bind_s * 1e3:,.1f} / {partition_s * 1e3:,.1f} / "
        f"{stages_s * 1e3:,.1f} | {kept:,} | {_truth(data, where):,} | {cold['rss_mb']:,.0f} |",
        times,
    )


def _cold(conf: Path, where: str) -> dict:
    return json.loads(
        subprocess.run(
            [sys.executable, "-c", COLD, str(conf), TABLE], input=where, capture_output=True, text=True, check=True
        ).stdout
    )


def _row_groups_row(
    files: int,
    label: str,
    where: str,
    confs: tuple[Path, Path],
    handles: tuple[IndexHandle, IndexHandle],
    data: dict,
    runs: int,
    row_groups: int,
) -> tuple[str, dict[str, float]]:
    """One query on the index without row-group entries and the one with them, side by side (alternating runs)."""
    for handle in handles:
        handle.lookup(where)
    warm = [float("inf"), float("inf")]
    for _ in range(runs):  # alternate, so both see the same moments of a shared machine
        for n, handle in enumerate(handles):
            warm[n] = min(warm[n], best_of(1, lambda h=handle: h.lookup(where)))
    cold = [_cold(conf, where) for conf in confs]
    plain, grouped = (handle.lookup(where) for handle in handles)
    read_groups = sum(len(g) for g in grouped.row_groups.values()) + row_groups * sum(
        1 for path in grouped.files if path not in grouped.row_groups
    )
    true_files, true_groups = _truth(data, where, row_groups)
    index_stages = [s for s in grouped.stages if s.name.startswith("row groups: ")]
    return (
        f"| {files:,} | {label} | {warm[0] * 1e3:,.1f} | {warm[1] * 1e3:,.1f} | {warm[1] / warm[0]:,.2f}x | "
        f"{cold[0]['lookup_s'] * 1e3:,.0f} / {cold[1]['lookup_s'] * 1e3:,.0f} | "
        f"{cold[0]['read_mb']:,.1f} / {cold[1]['read_mb']:,.1f} | {len(plain.files):,} / {len(grouped.files):,} | "
        f"{true_files:,} | {len(plain.files) * row_groups:,} / {read_groups:,} | {true_groups:,} | "
        f"{index_stages[0].parts_in if index_stages else 0:,} |",
        {"without row groups": warm[0], "with row groups": warm[1]},
    )


def _chart(
    results: dict[tuple[int, str], dict[str, float]],
    path: str,
    title: str = "Lookup at lake scale: pyiceberg plan_files vs skipindex (bench_lookup_scale.py)",
) -> None:
    """Grouped bars, log scale: per file count and query, plan_files against our cold and warm lookups."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(results)
    series = list(next(iter(results.values())))
    figure, axes = plt.subplots(figsize=(max(6, 1.1 * len(keys)), 4))
    width = 0.8 / len(series)
    for n, name in enumerate(series):
        axes.bar(
            [k + (n - 1) * width for k in range(len(keys))],
            [results[key][name] * 1e3 for key in keys],
            width,
            label=name,
        )
    axes.set_yscale("log")
    axes.set_ylabel("ms (log scale)")
    axes.set_xticks(range(len(keys)), [f"{label}\n{files:,} files" for files, label in keys], fontsize=7)
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", help="files per table (default: 10,000; --warm-ab: its sizes)")
    parser.add_argument("--rows", type=int, default=16, help="rows per data file")
    parser.add_argument("--only", nargs="+", help="run only the queries with these labels (e.g. 'IN 3 keys')")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per measurement (the best is shown)")
    parser.add_argument(
        "--bloom-false-files", type=float, default=None, help="[index] bloom_false_files (default: its default)"
    )
    parser.add_argument("--chart", help="also draw the times as a PNG chart at this path")
    parser.add_argument(
        "--row-groups",
        type=int,
        default=0,
        help="write files of this many row groups and compare the index with row-group entries to the one without",
    )
    parser.add_argument(
        "--key-index",
        action="store_true",
        help="index the table twice, with the automatic choice (global key index) and with key_index = false "
        "(Bloom filters sized for the table), and compare = and IN of 3 to 100,000 keys on both",
    )
    parser.add_argument("--keep", help="--key-index, --cold-start: keep the table and indexes under this directory")
    parser.add_argument(
        "--profile", help="--key-index: write cProfile reports of the key index side to PATH-<files>.txt"
    )
    parser.add_argument(
        "--cold-start",
        action="store_true",
        help="time whole fresh processes: skipindex explain (= and IN) and a planner's first IndexHandle lookup",
    )
    parser.add_argument("--before", help="--cold-start: also run every command on the checkout in this directory")
    parser.add_argument(
        "--warm-ab",
        action="store_true",
        help="the warm lookup, the scan of an absent key and the service's plan (200 files of 5,000 and 90,000 rows, "
        "10,000 files) on this checkout and on git worktrees of --against, side by side",
    )
    parser.add_argument(
        "--against",
        nargs="+",
        help="--warm-ab: revisions to compare with (default: indexlib/ before its last change); the first is the "
        "one the ratios and the regression check compare with",
    )
    args = parser.parse_args()
    if args.warm_ab:  # its own sizes, of which --files picks some
        warm_ab_main(args)
        return
    args.files = args.files or [10_000]
    if args.cold_start:
        cold_start_main(args)
        return
    if args.key_index:
        key_index_main(args)
        return
    if args.row_groups:
        row_groups_main(args)
        return
    print(
        "| files | query | plan_files ms | kept | cold lookup ms | cold: index MB read | warm ms | warm: parse+bind / "
        "partition / index stages ms | kept | true | cold peak RSS MB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    results: dict[tuple[int, str], dict[str, float]] = {}
    for files in args.files:
        rng = np.random.default_rng(7)
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            conf, data, _ = _make_table(Path(tmp), files, args.rows, rng, args.bloom_false_files)
            setup_s = time.perf_counter() - started
            config = load_config(conf)
            catalog = config.load_catalog()
            table = catalog.load_table(TABLE)
            index = IndexTable(catalog, config.index_namespace, TABLE).load()
            index_bytes = sum(task.file.file_size_in_bytes for task in index.scan().plan_files())
            handle = open_handle(config, TABLE)
            for label, where in _queries(rng, files, args.rows):
                if args.only and label not in args.only:
                    continue
                line, results[files, label] = _row(files, label, where, conf, table, handle, data, args.runs)
                print(line, flush=True)
            print(
                f"\n{files:,} files, bloom_false_files {args.bloom_false_files or 'default'}: setup {setup_s:,.0f} s; "
                f"the whole index: {index_bytes / 1e6:,.1f} MB of Parquet in {len(index.scan().plan_files())} data files\n"
            )

    if args.chart:
        _chart(results, args.chart)


def row_groups_main(args: argparse.Namespace) -> None:
    """`--row-groups N`: the warm and cold lookups with and without row-group entries, side by side."""
    print(
        "| files | query | warm ms without row-group entries | warm ms with them | with / without | "
        "cold lookup ms: without / with | "
        "cold: index MB read, without / with | files kept: without / with | true files | row groups kept: "
        "without (all of the kept files') / with | true row groups | row groups judged |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    results: dict[tuple[int, str], dict[str, float]] = {}
    for files in args.files:
        rng = np.random.default_rng(7)
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            conf, data, files_only = _make_table(
                Path(tmp), files, args.rows, rng, args.bloom_false_files, args.row_groups
            )
            setup_s = time.perf_counter() - started
            confs = (files_only, conf)
            handles = tuple(open_handle(load_config(c), TABLE) for c in confs)
            sizes = []
            for c in confs:
                config = load_config(c)
                index = IndexTable(config.load_catalog(), config.index_namespace, TABLE).load()
                sizes.append(sum(task.file.file_size_in_bytes for task in index.scan().plan_files()))
            for label, where in _queries(rng, files, args.rows):
                if args.only and label not in args.only:
                    continue
                line, results[files, label] = _row_groups_row(
                    files, label, where, confs, handles, data, args.runs, args.row_groups
                )
                print(line, flush=True)
            print(
                f"\n{files:,} files of {args.rows} rows in {args.row_groups} row groups: setup {setup_s:,.0f} s (both "
                f"indexes); the whole index: {sizes[0] / 1e6:,.1f} MB of Parquet without row-group entries, "
                f"{sizes[1] / 1e6:,.1f} MB with them\n"
            )
    if args.chart:
        _chart(results, args.chart)


# --key-index: the global key index (new automatic choice) against the old choice (Bloom filters sized for the
# table), side by side on the same table.
KEY_LISTS = (3, 1_000, 10_000, 100_000)  # part_key IN lists
PRESENT_SHARE = 0.02  # of each list drawn from the table's keys (at least one), the rest random in the key range
ABSENT_KEYS = 1_000  # keys absent from the table, probed to measure false files per absent key
SIDES = ("Bloom", "key index")  # the old choice, the new one
NAMES = {1: "order_key", 2: "part_key", 3: "mode"}  # the table's field ids (checked in key_index_main)
PART_KEY = 2

COLD_KEYS = """
import json, sys, time
from dataclasses import asdict
started = time.perf_counter()
from indexlib import load_config
from indexlib.lookup import lookup_in, read_state
from indexlib.query.model import In
from indexlib.query.sql import Clock
config = load_config(sys.argv[1])
config.load_catalog()  # imports the catalog's client (SQLAlchemy for the SQL catalog)
asked = json.loads(sys.stdin.read())
imported = time.perf_counter()
where = asked["sql"] if "sql" in asked else In(asked["column"], tuple(asked["keys"]))
state = read_state(config, sys.argv[2])
live = time.perf_counter()
result = lookup_in(state, sys.argv[2], where, Clock.system())
done = time.perf_counter()
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"import_s": imported - started, "live_s": live - imported, "lookup_s": done - imported,
                  "kept": len(result.files), "read_mb": state.rows.bytes_read / 1e6, "rss_mb": peak_kb / 1024,
                  "key_reads": asdict(result.key_reads) if result.key_reads else None}))
"""


def _key_list(rng: np.random.Generator, n: int, key_range: int, present: np.ndarray) -> np.ndarray:
    """`n` keys: PRESENT_SHARE of them (at least one) drawn from the table, the rest random in [0, key_range) (of
    which ~2 % are in the table too: it holds one key per 50 of the range)."""
    drawn = max(1, round(PRESENT_SHARE * n))
    keys = np.concatenate([rng.choice(present, drawn, replace=False), rng.integers(0, key_range, n - drawn)])
    return rng.permutation(keys)


def _key_queries(rng: np.random.Generator, files: int, rows: int, present: np.ndarray) -> list[tuple[str, str, Any]]:
    """(label, SQL, how to draw a fresh key list of the same size, or None for the queries without one)."""
    key_range = files * rows * 50
    queries: list[tuple[str, str, Any]] = [("order_key =", f"order_key = {files * rows // 2 + 3}", None)]
    key = int(rng.choice(present))
    queries.append(("part_key =", f"part_key = {key}", lambda: rng.choice(present, 1)))
    for n in KEY_LISTS:
        keys = _key_list(rng, n, key_range, present)
        queries.append(
            (
                f"part_key IN {n:,} keys",
                f"part_key IN ({', '.join(map(str, keys))})",
                lambda n=n: _key_list(rng, n, key_range, present),
            )
        )
    queries += [
        ("tag =", "mode = 'REG AIR'", None),
        ("3-leaf AND", f"order_key < {files * rows // 4} AND mode = 'AIR' AND part_key > 100", None),
    ]
    return queries


def _sql_keys(where: str) -> np.ndarray | None:
    """The literals of a `part_key =` / `part_key IN (...)` query."""
    if not where.startswith("part_key =") and not where.startswith("part_key IN"):
        return None
    return np.array([int(k) for k in where.split("(", 1)[-1].rstrip(")").replace("part_key =", "").split(",")])


def _tree(keys: np.ndarray) -> Any:
    return In("part_key", tuple(int(k) for k in keys))


def _cold_keys(conf: Path, asked: dict) -> dict:
    return json.loads(
        subprocess.run(
            [sys.executable, "-c", COLD_KEYS, str(conf), TABLE],
            input=json.dumps(asked),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


def _reads_of(results: list[Any]) -> tuple[float, float]:
    """Median key-index row groups and KB (compressed) read per lookup."""
    groups = [r.key_reads.row_groups if r.key_reads else 0 for r in results]
    kb = [r.key_reads.bytes / 1e3 if r.key_reads else 0 for r in results]
    return float(np.median(groups)), float(np.median(kb))


def _stage_chain(result: Any) -> str:
    shown = [f"{result.files_total:,}"]
    shown += [f"{s.name} {s.files_out:,}" for s in result.stages if s.files_out != s.files_in]
    return " → ".join(shown)


def _key_index_row(
    files: int,
    label: str,
    where: str,
    fresh: Any,
    confs: tuple[Path, Path],
    handles: tuple[IndexHandle, IndexHandle],
    schema: Any,
    truth: Any,
    runs: int,
) -> tuple[str, str, dict[str, float]]:
    """One query on both indexes (alternating, so both see the same moments of a shared machine): the timing row,
    the reads row, and the warm times for the chart."""
    keys = _sql_keys(where)
    for handle in handles:
        handle.lookup(where)  # reads what the predicate needs of the index: the warm times below read nothing
    warm_sql, warm_tree, warm_fresh = [float("inf")] * 2, [float("inf")] * 2, [float("inf")] * 2
    fresh_results: list[list[Any]] = [[], []]
    tree = _tree(keys) if keys is not None else None
    for _ in range(runs):
        lists = fresh() if fresh is not None else None
        fresh_tree = _tree(lists) if lists is not None else None
        for n, handle in enumerate(handles):
            warm_sql[n] = min(warm_sql[n], best_of(1, lambda h=handle: h.lookup(where)))
            if tree is not None:
                warm_tree[n] = min(warm_tree[n], best_of(1, lambda h=handle: h.lookup(tree)))
            if fresh_tree is not None:  # keys this handle never looked up: what a planner's new list costs
                started = time.perf_counter()
                fresh_results[n].append(handle.lookup(fresh_tree))
                warm_fresh[n] = min(warm_fresh[n], time.perf_counter() - started)
    parse_s = best_of(min(runs, 2), lambda: bind(normalize(parse_where(where)), schema, TABLE))
    cold_sql = [_cold_keys(conf, {"sql": where}) for conf in confs]
    cold_tree = (
        [_cold_keys(conf, {"column": "part_key", "keys": keys.tolist()}) for conf in confs]
        if keys is not None
        else None
    )
    answers = [handle.lookup(where) for handle in handles]
    true = truth(where, keys)

    def pair(values: list[float], scale: float = 1e3, digits: int = 1) -> str:
        return " / ".join("–" if v == float("inf") else f"{v * scale:,.{digits}f}" for v in values)

    cold_tree_text = pair([c["lookup_s"] for c in cold_tree], digits=0) if cold_tree else "–"
    timing = (
        f"| {files:,} | {label} | {pair(warm_sql)} | {pair(warm_tree)} | {pair(warm_fresh)} | {parse_s * 1e3:,.1f} | "
        f"{pair([c['lookup_s'] for c in cold_sql], digits=0)} | {cold_tree_text} | "
        f"{len(answers[0].files):,} / {len(answers[1].files):,} | {true:,} |"
    )
    cold_new = (cold_tree or cold_sql)[1]
    key_cold = cold_new["key_reads"]
    fresh_reads = _reads_of(fresh_results[1]) if fresh_results[1] else None
    reads = (
        f"| {files:,} | {label} | {cold_sql[0]['read_mb']:,.1f} / {cold_sql[1]['read_mb']:,.1f} | "
        + (
            f"{key_cold['row_groups']:,} / {key_cold['rows']:,} / {key_cold['bytes'] / 1e3:,.0f} | "
            if key_cold
            else "– | "
        )
        + (f"{fresh_reads[0]:,.0f} / {fresh_reads[1]:,.0f} | " if fresh_reads else "– | ")
        + f"{cold_sql[0]['rss_mb']:,.0f} / {cold_sql[1]['rss_mb']:,.0f} | "
        f"{_stage_chain(answers[0])} | {_stage_chain(answers[1])} |"
    )
    return timing, reads, {f"warm, {side}": warm_sql[n] for n, side in enumerate(SIDES)}


def _index_parts(config: Any, names: dict[int, str]) -> list[tuple[str, int, int, int]]:
    """Per partition of the index table: (what, data files, rows, Parquet bytes)."""
    index = IndexTable(config.load_catalog(), config.index_namespace, TABLE).load()
    parts: dict[int, list[int]] = {}
    for task in index.scan().plan_files():
        field_id = task.file.partition[0]
        part = parts.setdefault(field_id, [0, 0, 0])
        part[0] += 1
        part[1] += task.file.record_count
        part[2] += task.file.file_size_in_bytes

    def what(field_id: int) -> str:
        if field_id == 0:
            return "file rows"
        return f"{names[abs(field_id)]} key rows" if field_id < 0 else f"{names[field_id]} rows"

    return [(what(f), *parts[f]) for f in sorted(parts, key=lambda f: (f < 0, abs(f)))]


def _key_rows_columns(config: Any, field_id: int) -> dict[str, int]:
    """Compressed bytes per Parquet column of the key rows of column `field_id` (from the data files' footers)."""
    index = IndexTable(config.load_catalog(), config.index_namespace, TABLE).load()
    sizes: dict[str, int] = {}
    for task in index.scan().plan_files():
        if task.file.partition[0] != -field_id:
            continue
        metadata = pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata
        for group in range(metadata.num_row_groups):
            for c in range(metadata.num_columns):
                column = metadata.row_group(group).column(c)
                sizes[column.path_in_schema] = sizes.get(column.path_in_schema, 0) + column.total_compressed_size
    return sizes


def _payloads(config: Any, field_id: int | None = None) -> pa.Table:
    """(file_path, field_id, kind, bytes) of every payload of the index (of one column when `field_id` is given)."""
    index = IndexTable(config.load_catalog(), config.index_namespace, TABLE).load()
    row_filter = GreaterThan("field_id", 0) if field_id is None else EqualTo("field_id", field_id)
    rows = index.scan(row_filter=row_filter, selected_fields=("file_path", "field_id", "indexes")).to_arrow()
    listed = rows.column("indexes").combine_chunks()
    parents = pc.list_parent_indices(listed)
    flat = pc.list_flatten(listed)
    return pa.table(
        {
            "file_path": rows.column("file_path").combine_chunks().take(parents),
            "field_id": rows.column("field_id").combine_chunks().take(parents),
            "kind": pc.struct_field(flat, "kind"),
            "payload": pc.struct_field(flat, "payload"),
            "bytes": pc.binary_length(pc.struct_field(flat, "payload")),
        }
    )


def _false_files(
    payloads: list[bytes], absent: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]
) -> tuple[float, float]:
    """Per absent key (canonical hashes `absent` of values `bounds`' keys), the files whose filter says "maybe":
    over all the filters, and over those whose [min, max] holds the key (what a lookup probes after min/max)."""

    hashes = literal_hashes(LongType(), absent.tolist())
    lower, upper = bounds
    alone = after_bounds = 0
    step = max(1, (1 << 21) // len(hashes))  # files probed at a time: bounds the (files, keys) temporaries
    for start in range(0, len(payloads), step):
        maybe = split_block.contains_matrix(payloads[start : start + step], hashes)  # (files, keys)
        low, high = lower[start : start + step, None], upper[start : start + step, None]
        inside = (low <= absent[None, :]) & (absent[None, :] <= high)
        alone += int(maybe.sum())
        after_bounds += int((maybe & inside).sum())
    return alone / len(absent), after_bounds / len(absent)


def _precision(
    files: int,
    confs: tuple[Path, Path],
    handle: IndexHandle,
    data: dict[str, pa.Table],
    part: np.ndarray,
    rng: np.random.Generator,
) -> list[str]:
    """The bytes-against-precision rows of part_key: a Bloom filter per file at 1 % (built here from the rows), the
    old index's Bloom filters sized for the table, and the key index."""

    present = np.unique(part)
    absent = rng.integers(0, files * part.shape[1] * 50, ABSENT_KEYS * 2)
    absent = absent[~np.isin(absent, present)][:ABSENT_KEYS]
    paths = list(data)
    bounds = (part.min(axis=1), part.max(axis=1))
    distinct = np.array([len(np.unique(row)) for row in part])
    values = int(distinct.sum())
    lines = []
    one_percent = []
    for row in part:
        keys = distinct_keys(pa.array(row), LongType())
        one_percent.append(split_block.build(keys.hashes(), split_block.optimal_bytes(len(keys), 0.01)))
    alone, after = _false_files(one_percent, absent, bounds)
    size = sum(map(len, one_percent))
    lines.append(
        f"| {files:,} | Bloom filter per file at 1 % (built for this table, not stored) | {size * 8 / values:,.1f} bits | "
        f"{size / 1e6:,.2f} | {alone:,.2f} | {after:,.2f} |"
    )
    config = load_config(confs[0])
    stored = _payloads(config, PART_KEY).to_pylist()
    bloom = {row["file_path"]: row["payload"] for row in stored if row["kind"] == "bloom"}
    with_filter = [i for i, path in enumerate(paths) if path in bloom]
    sized = [bloom[paths[i]] for i in with_filter]
    rate = min(0.01, 0.5 / files)
    alone, after = _false_files(sized, absent, (bounds[0][with_filter], bounds[1][with_filter]))
    size = sum(map(len, sized))
    lines.append(
        f"| {files:,} | Bloom filter per file sized for {files:,} files ({rate:.2g}; `key_index = false`) | "
        f"{size * 8 / int(distinct[with_filter].sum()):,.1f} bits | {size / 1e6:,.2f} | {alone:,.2f} | {after:,.2f} |"
    )
    new = load_config(confs[1])
    parts = {what: (rows, size) for what, _, rows, size in _index_parts(new, NAMES)}
    rows, size = parts.get("part_key key rows", (0, 0))
    columns = _key_rows_columns(new, PART_KEY)
    kept = handle.lookup(_tree(absent))
    key_index_stage = next((s for s in kept.stages if s.name == "key index"), None)
    probed = key_index_stage.files_in if key_index_stage else 0
    lines.append(
        f"| {files:,} | global key index (key rows of part_key) | {size / max(rows, 1):,.1f} bytes "
        f"(key_hash {columns.get('key_hash', 0) / max(rows, 1):,.1f}, file_path {columns.get('file_path', 0) / max(rows, 1):,.1f}) | "
        f"{size / 1e6:,.2f} | {len(kept.files) / len(absent):,.2f} (the lookup of {len(absent):,} absent keys at once) | "
        f"{len(kept.files) / len(absent):,.2f} ({probed:,} files reached the stage) |"
    )
    return lines


@contextmanager
def _workdir(keep: str | None, files: int) -> Iterator[str]:
    """A temporary directory, or with `--keep DIR` DIR/<files> (kept: the catalog and both indexes, to profile)."""
    if keep is None:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp
        return
    kept = Path(keep) / str(files)
    kept.mkdir(parents=True)
    yield str(kept)


def _profile(path: str, files: int, conf: Path, handle: IndexHandle, rng: Any, rows: int, present: Any) -> None:
    """cProfile of the key index side (to `path`-<files>.txt): a one-off lookup in this process (read_state and
    lookup_in, footers forgotten first) of IN 10,000 keys, and warm lookups of fresh lists of 10,000 and 100,000
    keys (model trees)."""
    import cProfile
    import io
    import pstats

    from indexlib.lookup import lookup_in, read_state
    from indexlib.query.sql import Clock
    from indexlib.store import key_rows

    key_range = files * rows * 50
    report = io.StringIO()

    def profiled(title: str, action: Any) -> None:
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        action()
        profile.disable()
        report.write(f"\n=== {files:,} files: {title}: {(time.perf_counter() - started) * 1e3:,.0f} ms (profiled)\n")
        stats = pstats.Stats(profile, stream=report)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(15)

    def one_off() -> None:
        key_rows._footers.clear()
        config = load_config(conf)
        state = read_state(config, TABLE)
        lookup_in(state, TABLE, _tree(_key_list(rng, 10_000, key_range, present)), Clock.system())

    profiled("one-off lookup (read_state + lookup_in), IN 10,000 keys, model tree", one_off)
    for n in (10_000, 100_000):
        keys = _tree(_key_list(rng, n, key_range, present))
        profiled(f"warm handle, fresh IN {n:,} keys, model tree", lambda keys=keys: handle.lookup(keys))
    with open(f"{path}-{files}.txt", "w") as out:
        out.write(report.getvalue())


def key_index_main(args: argparse.Namespace) -> None:
    """`--key-index`: the new automatic choice (part_key in the global key index) against the old one
    (`key_index = false`: Bloom filters sized for the table), side by side on one table."""
    timing_head = (
        "| files | query | warm ms, SQL: Bloom / key index | warm ms, model tree (no parse): Bloom / key index | "
        "warm ms, a fresh key list each run (model tree): Bloom / key index | parse+bind ms of the SQL | "
        "cold ms, SQL: Bloom / key index | cold ms, model tree: Bloom / key index | kept: Bloom / key index | true |"
    )
    reads_head = (
        "| files | query | cold: index MB read (Arrow), Bloom / key index | cold: key index row groups / rows / KB "
        "read | warm, fresh keys: key index row groups / KB read (median) | cold peak RSS MB: Bloom / key index | "
        "stages, Bloom | stages, key index |"
    )
    timings, reads, sizes, precision = [], [], [], []
    results: dict[tuple[int, str], dict[str, float]] = {}
    names = NAMES
    for files in args.files:
        rng = np.random.default_rng(7)
        with _workdir(args.keep, files) as tmp:
            started = time.perf_counter()
            conf, data, bloom_conf = _make_table(
                Path(tmp), files, args.rows, rng, args.bloom_false_files, bloom_only=True
            )
            setup_s = time.perf_counter() - started
            print(f"{files:,} files: setup {setup_s:,.0f} s (table and both indexes)", file=sys.stderr, flush=True)
            confs = (bloom_conf, conf)
            handles = tuple(open_handle(load_config(c), TABLE) for c in confs)
            schema = handles[1].current().source.schema
            assert {f.field_id: f.name for f in schema.fields} == NAMES, schema
            part = np.stack([t.column("part_key").to_numpy() for t in data.values()])

            def truth(where: str, keys: np.ndarray | None, data: dict = data, part: np.ndarray = part) -> int:
                if keys is None:
                    return _truth(data, where)
                return int(np.isin(part, keys).any(axis=1).sum())

            for label, where, fresh in _key_queries(rng, files, args.rows, np.unique(part)):
                if args.only and label not in args.only:
                    continue
                timing, read, results[files, label] = _key_index_row(
                    files, label, where, fresh, confs, handles, schema, truth, args.runs
                )
                timings.append(timing)
                reads.append(read)
                print(timing, file=sys.stderr, flush=True)
            for side, c in zip(SIDES, confs, strict=True):
                config = load_config(c)
                parts = _index_parts(config, names)
                payloads = _payloads(config)
                by_kind: dict[tuple[int, str], int] = {}
                for field_id, kind, size in zip(
                    payloads.column("field_id").to_pylist(),
                    payloads.column("kind").to_pylist(),
                    payloads.column("bytes").to_pylist(),
                    strict=True,
                ):
                    by_kind[field_id, kind] = by_kind.get((field_id, kind), 0) + size
                total = sum(size for *_, size in parts)
                shown = "; ".join(f"{what} {size / 1e6:,.2f} ({rows:,} rows)" for what, _, rows, size in parts)
                kinds = "; ".join(f"{names[f]} {kind} {size / 1e6:,.2f}" for (f, kind), size in sorted(by_kind.items()))
                sizes.append(f"| {files:,} | {side} | {total / 1e6:,.2f} | {shown} | {kinds or '–'} |")
            precision += _precision(files, confs, handles[1], data, part, rng)
            if args.profile:
                _profile(args.profile, files, confs[1], handles[1], rng, args.rows, np.unique(part))
            print(f"{files:,} files: done at {time.strftime('%H:%M:%S')}", file=sys.stderr, flush=True)
    print(f"Load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}\n")
    print(timing_head)
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(timings))
    print()
    print(reads_head)
    print("|---:|---|---:|---:|---:|---:|---|---|")
    print("\n".join(reads))
    print()
    print("| files | index | MB of Parquet | per partition: MB (rows) | payload MB per column and kind |")
    print("|---:|---|---:|---|---|")
    print("\n".join(sizes))
    print()
    print(
        "| files | structure (part_key) | bytes per distinct value per file | MB | false files per absent key, "
        "all files probed | false files per absent key, after min/max |"
    )
    print("|---:|---|---|---:|---:|---:|")
    print("\n".join(precision))
    if args.chart:
        _chart(
            results,
            args.chart,
            "Warm lookups: Bloom filters sized for the table vs the global key index (kept files differ: see the table)",
        )


# --cold-start (issue 40): whole fresh processes, as a user starts them.
FIRST_LOOKUP = """
import json, sys, time
started = time.perf_counter()
from indexlib import IndexHandle, load_config
imported = time.perf_counter()
catalog = load_config(sys.argv[1]).load_catalog()
handle = IndexHandle.for_iceberg(catalog.load_table(sys.argv[2]))
opened = time.perf_counter()
kept = len(handle.lookup(sys.argv[3]).files)
done = time.perf_counter()
print(json.dumps({"imports": imported - started, "catalog and table": opened - imported, "first lookup": done - opened,
                  "kept": kept}))
"""
DEPENDENCIES = "import pyiceberg.catalog.sql, pyiceberg.io.pyarrow, sqlglot"  # what any cold lookup imports
PLANNER = "fresh planner: IndexHandle + first lookup (=)"  # prints its own split (FIRST_LOOKUP)


def _cold_commands(conf: Path, files: int, rows: int) -> list[tuple[str, list[str]]]:
    equal, in_three = (where for label, where in _queries(np.random.default_rng(7), files, rows)[:2])
    explain = [sys.executable, "-m", "indexlib.cli", "explain", "--conf", str(conf), "--table", TABLE, "--where"]
    return [
        ("skipindex explain, =", [*explain, equal]),
        ("skipindex explain, IN 3 keys", [*explain, in_three]),
        (PLANNER, [sys.executable, "-c", FIRST_LOOKUP, str(conf), TABLE, equal]),
        (f"yardstick: `{DEPENDENCIES}`", [sys.executable, "-c", DEPENDENCIES]),
        ("yardstick: an empty interpreter", [sys.executable, "-c", "pass"]),
    ]


def _timed(command: list[str], checkout: str) -> tuple[float, str]:
    """Wall seconds of `command` in a fresh process with `checkout` first on PYTHONPATH, and what it printed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (checkout, os.environ.get("PYTHONPATH"))))}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env, cwd=checkout)
    return time.perf_counter() - started, done.stdout


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:,.0f} ({min(values) * 1e3:,.0f}-{max(values) * 1e3:,.0f})"


def cold_start_main(args: argparse.Namespace) -> None:
    """`--cold-start`: medians of whole fresh processes, on this checkout and (`--before`) another, alternating."""
    checkouts = {"this checkout": str(Path(__file__).resolve().parents[1])}
    if args.before:
        checkouts = {"before": str(Path(args.before).resolve()), **checkouts}
    print(f"Load average at the start: {Path('/proc/loadavg').read_text().split()[:3]}\n")
    for files in args.files:
        with _workdir(args.keep, files) as tmp:
            conf, _, _ = _make_table(Path(tmp), files, args.rows, np.random.default_rng(7), args.bloom_false_files)
            commands = _cold_commands(conf, files, args.rows)
            wall: dict[tuple[str, str], list[float]] = {}
            phases: dict[tuple[str, str], list[dict]] = {}
            for _, command in commands:  # warm-up: not counted (bytecode caches written where Python may)
                for checkout in checkouts.values():
                    _timed(command, checkout)
            for _ in range(args.runs):
                for label, command in commands:
                    for side, checkout in checkouts.items():  # alternating, run by run
                        seconds, out = _timed(command, checkout)
                        wall.setdefault((label, side), []).append(seconds)
                        if label == PLANNER:
                            phases.setdefault((label, side), []).append(json.loads(out))
            sides = list(checkouts)
            print(f"{files:,} files, median (min-max) ms of {args.runs} fresh processes each:\n")
            print("| process | " + " | ".join(sides) + (" | this / before |" if len(sides) == 2 else " |"))
            print("|---|" + "---:|" * (len(sides) + (len(sides) == 2)))
            for label, _ in commands:
                cells = [_spread(wall[label, side]) for side in sides]
                if len(sides) == 2:
                    ratio = statistics.median(wall[label, sides[1]]) / statistics.median(wall[label, sides[0]])
                    cells.append(f"{ratio:.2f}x")
                print(f"| {label} | " + " | ".join(cells) + " |")
            for (label, side), measured in phases.items():
                split = ", ".join(
                    f"{part} {statistics.median(m[part] for m in measured) * 1e3:,.0f}"
                    for part in ("imports", "catalog and table", "first lookup")
                )
                print(f"\n{label}, {side}: median ms in the process: {split}")
    print(f"\nLoad average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")


# --warm-ab (issue 63): the warm lookup, the scan of an absent key and the service's plan, on this checkout and older
# ones, in one run. Each checkout is measured in its own processes (PYTHONPATH first), alternating round by round.
WARM_TABLE = "bench.ids"
WARM_SIZES = ((200, 5_000), (200, 90_000), (10_000, 100))  # (files, rows per file)
WARM_METRICS = {  # key -> (what, guarded by --warm-ab's regression check)
    "point": ("warm lookup, point key", True),
    "absent": ("warm lookup, absent key", False),
    "scan": ("handle.scan(absent key).to_arrow()", False),
    "plan absent": ("service plan, absent key", True),
    "plan point": ("service plan, point key", False),
}
REGRESSION = 1.2  # a guarded figure this many times the previous checkout's is reported loudly
WARM_CHILD = """
import json, sys, time
conf, table, point, absent, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
import indexlib
from indexlib.config import load_config
from indexlib.handle import IndexHandle
handle = IndexHandle.for_iceberg(load_config(conf).load_catalog().load_table(table))
def best(action):
    action(); action()  # the first reads what the predicate needs: not timed
    times = []
    for _ in range(runs):
        started = time.perf_counter(); action(); times.append(time.perf_counter() - started)
    return min(times)
out = {"indexlib": indexlib.__file__, "kept": [len(handle.lookup(w).files) for w in (point, absent)]}
out["point"] = best(lambda: handle.lookup(point))
out["absent"] = best(lambda: handle.lookup(absent))
if hasattr(handle, "scan"):  # the scan API came later than the handle
    out["scan"] = best(lambda: handle.scan(absent).to_arrow())
print(json.dumps(out))
"""


def _make_id_table(root: Path, files: int, rows: int) -> tuple[Path, int, int]:
    """A table of `files` Parquet files of `rows` rows: `id`, unique random int64 values, and `n`, the row number;
    indexed as a build indexes it (the automatic choice: Bloom filters on `id` below 5,000 files, the global key
    index from there). Kept in `root` and reused when it is there. Returns the conf, a key held by one file and a
    key held by none (inside the files' bounds)."""
    conf, keys = root / "conf.toml", root / "keys.json"
    if keys.exists():
        return conf, *json.loads(keys.read_text())
    shutil.rmtree(root, ignore_errors=True)  # a run stopped while making it
    warehouse = root / "warehouse"
    warehouse.mkdir(parents=True)
    conf.write_text(
        f'[catalog]\nname = "bench"\ntype = "sql"\nuri = "sqlite:///{root}/catalog.db"\nwarehouse = "{warehouse}"\n'
    )
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=str(warehouse))
    catalog.create_namespace("bench")
    rng = np.random.default_rng(63)
    ids = np.unique(rng.integers(-(2**62), 2**62, files * rows + 1_000))
    ids = rng.permutation(ids)[: files * rows + 1]
    absent, ids = int(ids[-1]), ids[:-1]  # unique: in no file
    table = catalog.create_table(WARM_TABLE, schema=pa.schema([("id", pa.int64()), ("n", pa.int64())]))
    paths = []
    for f in range(files):
        path = str(warehouse / f"file-{f:07d}.parquet")
        part = slice(f * rows, (f + 1) * rows)
        pq.write_table(pa.table({"id": ids[part], "n": np.arange(part.start, part.stop, dtype=np.int64)}), path)
        paths.append(path)
    table.add_files(paths)
    table = catalog.load_table(WARM_TABLE)
    schema, name_mapping = table.schema(), table.properties.get("schema.name-mapping.default")
    settings = {f.field_id: sized_settings(IndexSettings(), files) for f in schema.fields}
    with ProcessPoolExecutor() as pool:
        entries = list(
            pool.map(
                _entry,
                paths,
                repeat(schema),
                repeat(name_mapping),
                repeat(settings),
                repeat(None),
                repeat(files),
                chunksize=64,
            )
        )
    version = table.current_snapshot().snapshot_id
    IndexTable(catalog, load_config(conf).index_namespace, WARM_TABLE).commit(
        pa.Table.from_pylist([entry for entry, _ in entries], schema=ENTRY_ARROW_SCHEMA),
        live=LiveSet(version, frozenset(paths)),
        watermark=version,
    )
    point = int(ids[(files // 2) * rows + rows // 3])
    keys.write_text(json.dumps([point, absent]))
    return conf, point, absent


def _checkouts(against: list[str] | None) -> dict[str, str]:
    """Label -> directory: this checkout, and a `git worktree` (made under /tmp once, reused) per revision of
    `against` (default: the last commit that changed indexlib/ before its current state, `previous_revision`)."""
    here = Path(__file__).resolve().parents[1]
    found = {}
    for revision in against or [_previous_revision(here)]:
        sha = _git(here, "rev-parse", "--short", revision)
        tree = Path(f"/tmp/ab-{sha}")
        if not tree.exists():
            _git(here, "worktree", "add", "--detach", str(tree), sha)
        found[sha if sha in revision else f"{revision} ({sha})"] = str(tree)
    return {**found, "this checkout": str(here)}


def _git(here: Path, *command: str) -> str:
    return subprocess.run(["git", *command], cwd=here, capture_output=True, text=True, check=True).stdout.strip()


def _previous_revision(here: Path) -> str:
    """The state of indexlib/ before its last change: the last commit that touched it when the working tree changes
    it (uncommitted), else the last one before that commit."""
    last = _git(here, "log", "-1", "--format=%H", "--", "indexlib")
    if subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "indexlib"], cwd=here).returncode:
        return last
    return _git(here, "log", "-1", "--format=%H", f"{last}^", "--", "indexlib")


def _served_plans(checkout: str, conf: Path, where: dict[str, int], runs: int) -> dict[str, float]:
    """Best-of-`runs` seconds of a plan (`id = key`, the body pyiceberg sends) through `skipindex serve` of
    `checkout`, over one keep-alive connection, per key of `where`; {} when that checkout cannot serve."""
    import http.client
    import signal
    import socket

    from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = "bench-warm-token-0123456789abcdef"  # a throwaway token for the loopback server started here
    env = {**os.environ, "PYTHONPATH": checkout, "SKIPINDEX_SERVE_TOKEN": token}
    log = conf.parent / f"serve-{port}.log"
    command = [sys.executable, "-m", "indexlib.cli", "serve", "--conf", str(conf), "--port", str(port)]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=conf.parent)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                connection.request("GET", "/health")
                if connection.getresponse().read() is not None:
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    print(f"  {checkout}: skipindex serve did not start: {log.read_text()[-500:]}", file=sys.stderr)
                    return {}
                time.sleep(0.2)
        namespace, name = WARM_TABLE.split(".")
        path = f"/v1/namespaces/{namespace}/tables/{name}/plan"
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        found = {}
        for label, key in where.items():
            request = PlanTableScanRequest(filter=EqualTo("id", key), case_sensitive=True)  # type: ignore[call-arg]
            body = request.model_dump_json(by_alias=True, exclude_none=True).encode()

            def plan(body: bytes = body) -> None:
                connection.request("POST", path, body, headers)
                response = connection.getresponse()
                answer = response.read()
                if response.status != 200:
                    raise RuntimeError(f"plan answered {response.status}: {answer[:300]!r}")

            for _ in range(6):  # every plan worker reads what the predicate needs
                plan()
            found[label] = best_of(runs, plan)
        return found
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _warm_profile(path: str, conf: Path, point: int, absent: int, label: str) -> None:
    """cProfile of 20 warm lookups of the point key and 20 scans of the absent key on this checkout."""
    import cProfile
    import io
    import pstats

    handle = open_handle(load_config(conf), WARM_TABLE)
    for where in (f"id = {point}", f"id = {absent}"):
        handle.lookup(where)
    report = io.StringIO()
    for title, action in (
        ("20 warm lookups, point key", lambda: [handle.lookup(f"id = {point}") for _ in range(20)]),
        ("20 scans of the absent key, to_arrow", lambda: [handle.scan(f"id = {absent}").to_arrow() for _ in range(20)]),
    ):
        profile = cProfile.Profile()
        profile.enable()
        action()
        profile.disable()
        report.write(f"\n=== {label}: {title}\n")
        stats = pstats.Stats(profile, stream=report)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)
    with open(path, "a") as out:
        out.write(report.getvalue())


def warm_ab_main(args: argparse.Namespace) -> None:
    """`--warm-ab`: per table size, each figure's best over `--runs` rounds (a round: each checkout once, in turn;
    within a round, best of 20 calls), then this checkout against the first of `--against` as a ratio; a guarded
    figure grown by more than REGRESSION is reported loudly."""
    checkouts = _checkouts(args.against)
    sizes = [(files, rows) for files, rows in WARM_SIZES if files in args.files] if args.files else list(WARM_SIZES)
    root = Path(args.keep or tempfile.mkdtemp(prefix="warm-ab-")).resolve()
    print(f"Load average at the start: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    if args.profile:
        Path(args.profile).write_text("")
    best: dict[tuple[int, int, str, str], float] = {}
    kept: dict[tuple[int, int, str], list[int]] = {}
    for files, rows in sizes:
        started = time.perf_counter()
        conf, point, absent = _make_id_table(root / f"{files}x{rows}", files, rows)
        print(f"{files:,} files x {rows:,} rows: table ready in {time.perf_counter() - started:,.0f} s", flush=True)
        wheres = (f"id = {point}", f"id = {absent}")
        for _ in range(args.runs):
            for label, checkout in checkouts.items():
                env = {**os.environ, "PYTHONPATH": checkout}
                done = subprocess.run(
                    [sys.executable, "-c", WARM_CHILD, str(conf), WARM_TABLE, *wheres, "20"],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=conf.parent,
                )
                if done.returncode:
                    print(f"  {label}: the lookup failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                    continue
                measured = json.loads(done.stdout)
                assert measured["indexlib"].startswith(checkout), (measured["indexlib"], checkout)
                kept[files, rows, label] = measured["kept"]
                plans = _served_plans(checkout, conf, {"plan point": point, "plan absent": absent}, 20)
                for metric, seconds in {**measured, **plans}.items():
                    if metric in WARM_METRICS:
                        key = (files, rows, label, metric)
                        best[key] = min(best.get(key, float("inf")), seconds)
        if args.profile:
            _warm_profile(args.profile, conf, point, absent, f"{files:,} files x {rows:,} rows")
    print(f"Load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}\n")
    labels = list(checkouts)
    previous, this = labels[0], labels[-1]
    print(f"Best of {args.runs} rounds x 20 calls, ms (the ratio: this checkout / {previous}):\n")
    print("| files x rows | figure | " + " | ".join(labels) + " | ratio |")
    print("|---|---|" + "---:|" * (len(labels) + 1))
    grown = []
    for files, rows in sizes:
        for metric, (what, guarded) in WARM_METRICS.items():
            cells = [best.get((files, rows, label, metric)) for label in labels]
            ratio = cells[-1] / cells[0] if cells[0] and cells[-1] else None
            shown = " | ".join("–" if c is None else f"{c * 1e3:,.1f}" for c in cells)
            print(f"| {files:,} x {rows:,} | {what} | {shown} | {'–' if ratio is None else f'{ratio:.2f}x'} |")
            if guarded and ratio is not None and ratio > REGRESSION:
                grown.append(f"{files:,} files x {rows:,} rows, {what}: {ratio:.2f}x {previous}")
        answers = {label: kept.get((files, rows, label)) for label in labels}
        if len({str(a) for a in answers.values() if a is not None}) > 1:
            grown.append(f"{files:,} files x {rows:,} rows: the checkouts keep different files: {answers}")
    if grown:
        banner = "!" * 100
        print(f"\n{banner}\nREGRESSION: {this} against {previous} (more than {REGRESSION:.1f}x):")
        print("\n".join(f"  {line}" for line in grown) + f"\n{banner}")
    else:
        print(f"\nNo guarded figure grew by more than {REGRESSION - 1:.0%} against {previous}.")


if __name__ == "__main__":
    main()
