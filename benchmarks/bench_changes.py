"""What tracking a changing table costs the driver, side by side in one run: listing the files live now, which a
build compares with the index's file rows (Iceberg appends only since the rows' live version: an incremental append
scan of the new manifests; after a delete: one plan of the live files; Delta: the live files delta-rs has after
replaying the log) and planning a commit (reading `file_path` + `config_version` of every entry).

    python benchmarks/bench_changes.py [FILES]

FILES data files (default 1,000) in 10 partitions, committed in 100 appends. Prints a Markdown table for
docs/benchmarks.md. Times are the best of 3; compare rows within one run.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from timing import best_of

from indexlib.sources.delta import DeltaSource
from indexlib.sources.iceberg import IcebergSource
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, entry_row
from indexlib.store.table import IndexTable

PARTS = 10
SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "part", StringType()))


def _commit_batch(start: int, files: int) -> pa.Table:
    """`files` rows, one per partition: each append writes one file per partition."""
    return pa.table(
        {"id": pa.array(range(start, start + files), pa.int64()), "part": [f"p{i % PARTS}" for i in range(files)]}
    )


def main(files: int) -> None:
    appends = max(1, files // PARTS)
    with tempfile.TemporaryDirectory() as tmp:
        catalog = SqlCatalog("bench", uri=f"sqlite:///{tmp}/catalog.db", warehouse=f"file://{tmp}/warehouse")
        catalog.create_namespace("db")
        spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
        table = catalog.create_table("db.t", schema=SCHEMA, partition_spec=spec)
        delta = str(Path(tmp) / "delta")
        for n in range(appends):
            batch = _commit_batch(n * PARTS, PARTS)
            table.append(batch)
            write_deltalake(delta, batch, mode="append", partition_by=["part"])
        source = IcebergSource(catalog, "db.t")
        half = source.table.history()[appends // 2].snapshot_id  # watermark: half of the appends are new
        rows = []
        rows.append(
            ("Iceberg, appends only (incremental append scan)", best_of(3, lambda: source.appended_since(half)))
        )
        delta_source = DeltaSource(delta)
        rows.append(
            (
                "Delta, appends only (live files of the loaded version)",
                best_of(3, delta_source.live_files),
            )
        )
        table.delete("id < 5")
        DeltaTable(delta).delete("id < 5")
        source = IcebergSource(catalog, "db.t")
        delta_source = DeltaSource(delta)
        rows.append(("Iceberg, after a delete (live files now: one plan)", best_of(3, source.live_files)))
        rows.append(("Delta, after a delete", best_of(3, delta_source.live_files)))

        index = IndexTable(catalog, "skipindex", "db.t")
        live = source.live_files()
        entries = pa.Table.from_pylist(
            [entry_row(f.path, f.file_size_in_bytes, f.record_count, 1, [], "v1") for f in live[:-PARTS]],
            schema=ENTRY_ARROW_SCHEMA,
        )
        index.commit(entries, watermark=1)
        rows.append(
            (f"read index state ({entries.num_rows:,} entries: path + config version)", best_of(3, index.indexed))
        )
        last = pa.Table.from_pylist(
            [entry_row(f.path, f.file_size_in_bytes, f.record_count, 1, [], "v1") for f in live[-PARTS:]],
            schema=ENTRY_ARROW_SCHEMA,
        )
        rows.append((f"commit {PARTS} new entries (plan + one Iceberg commit)", best_of(1, lambda: index.commit(last))))

    print(f"{len(live):,} live data files, {appends} appends of {PARTS} files; watermark at append {appends // 2}\n")
    print("| step | ms |\n|---|---:|")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1000:,.1f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000)
