"""Build cost per index kind: throughput (values/s) and bytes, on the demo's data (one TPC-H lineitem file of
~24k rows and one service-log shard of 25k rows), measured step by step as the build's per-file code runs them.

    python benchmarks/bench_build.py

Prints Markdown tables for docs/benchmarks.md. Times are the best of 3 on this machine; compare ratios within one run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
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
            if not kind.chosen(SETTINGS, field.field_type, keys, built_so_far):
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


def main() -> None:
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
