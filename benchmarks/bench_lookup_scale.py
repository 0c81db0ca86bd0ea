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

    .venv/bin/python benchmarks/bench_lookup_scale.py [--files 10000] [--rows 16] [--row-groups 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from timing import best_of

from indexlib.config import load_config
from indexlib.handle import IndexHandle, open_handle
from indexlib.index_kinds.registry import sized_settings
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.file_indexer import index_file
from indexlib.lookup import prune_aligned
from indexlib.pruning.iceberg_filter import to_iceberg_filter
from indexlib.pruning.partitions import prune_partitions
from indexlib.query.binding import bind
from indexlib.query.normalize import normalize
from indexlib.query.sql import parse_where
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, entry_row
from indexlib.store.table import IndexTable, LiveSet

MODES = np.array(["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"])
TABLE = "bench.events"
FILES_ONLY = "skipindex_files_only"  # --row-groups: the second index, without row-group entries


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
    root: Path, files: int, rows: int, rng: np.random.Generator, false_files: float | None, row_groups: int = 0
) -> tuple[Path, dict[str, pa.Table], Path | None]:
    """The table, its index, and each data file's rows (for the truth). With `row_groups`, files of that many row
    groups, indexed with row-group entries, and a second index of the same entries without them (in namespace
    `FILES_ONLY`): the conf of that second index is the third value."""
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
    if not row_groups:
        return conf, data, None
    for path in paths[:20]:  # the entry without row-group entries is what a build without them writes
        plain = _entry(path, iceberg_schema, name_mapping, settings, None)[0]
        assert plain == _entry(path, iceberg_schema, name_mapping, settings, group_settings)[1], path
    files_only = root / "files_only.toml"
    files_only.write_text(conf.read_text() + f'[index]\nnamespace = "{FILES_ONLY}"\n')
    IndexTable(catalog, FILES_ONLY, TABLE).commit(
        pa.Table.from_pylist([without for _, without in entries], schema=ENTRY_ARROW_SCHEMA),
        live=live,
        watermark=version,
    )
    return conf, data, files_only


def _entry(
    path: str, schema: Any, name_mapping: str | None, settings: dict, group_settings: dict | None
) -> tuple[dict, dict]:
    """The file's entry (with row-group entries when `group_settings` is given), and the same entry without them."""
    mode = "true" if group_settings is not None else "false"
    count, stats = index_file(
        path, "PARQUET", schema, {}, name_mapping, settings, row_groups=mode, row_group_settings=group_settings
    )
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
        f"{index_stages[0].row_groups_in if index_stages else 0:,} |",
        {"without row groups": warm[0], "with row groups": warm[1]},
    )


def _chart(results: dict[tuple[int, str], dict[str, float]], path: str) -> None:
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
    axes.set_title("Lookup at lake scale: pyiceberg plan_files vs skipindex (bench_lookup_scale.py)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000])
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
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
