"""A third table format in one module, for the rule that a format is a plug-in (tests/test_formats.py).

A toy table is a folder of Parquet files and a manifest the writer keeps, `manifest.json`: the table's version, its
schema (Arrow IPC, base64), its partition columns, and per live file its path, row count, size, partition values
(the files do not store the partition columns) and the row positions deleted from it. It is named `toy:<folder>`.

This module is all the format needs: the source (`ToySource`, whose files every engine reads by name,
`FileReads.PARQUET_BY_NAME`) and its registration (`FORMAT`, under the entry-point group `skipindex.formats`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
from pyiceberg.schema import assign_fresh_schema_ids

from indexlib.errors import UserError
from indexlib.sources.base import DataFileRef, DeleteFileRef, FileReads, IdentityPartitioning, Source
from indexlib.sources.registry import SourceFormat
from indexlib.statistics.provider import NoStatistics, StatisticsProvider

PREFIX = "toy:"
MANIFEST = "manifest.json"


class ToySource:
    format = "toy"
    reads = FileReads.PARQUET_BY_NAME

    def __init__(self, name: str) -> None:
        self.name = name
        self.folder = Path(name[len(PREFIX) :])
        try:
            manifest = json.loads((self.folder / MANIFEST).read_text())
        except FileNotFoundError:
            raise UserError(f"no toy table at {self.folder} (no {MANIFEST})") from None
        self.version: int = manifest["version"]
        self.arrow_schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(manifest["schema"])))
        self.physical_schema = self.arrow_schema  # no renames: the files' names are the table's
        self.physical_names = {name: name for name in self.arrow_schema.names}
        self.partition_columns: list[str] = manifest["partition_columns"]
        self.schema = assign_fresh_schema_ids(_pyarrow_to_schema_without_ids(self.arrow_schema))  # never evolves
        self.name_mapping_json = self.schema.name_mapping.model_dump_json()
        self.io_properties: dict[str, str] = {}
        self._files = manifest["files"]

    def refreshed(self) -> Source:
        again = ToySource(self.name)
        return self if again.version == self.version else again

    def keeps_layout(self, earlier: Source) -> bool:
        return False

    def check_read_by_name(self, paths: Sequence[str]) -> None:
        return None

    def current_version(self) -> int | None:
        return self.version

    @property
    def state_key(self) -> object:
        return self.version

    def live_files(self) -> list[DataFileRef]:
        return [
            DataFileRef(f["path"], f["rows"], f["bytes"], "PARQUET", 0, tuple(f["partition"].items()))
            for f in self._files
        ]

    def appended_since(self, version: int) -> list[DataFileRef] | None:
        return [] if version == self.version else None

    def files_at(self, version: int) -> list[DataFileRef] | None:
        return self.live_files() if version == self.version else None

    def at_version(self, version: int) -> Source | None:
        return self if version == self.version else None  # the manifest describes the current version alone

    def live_after(self, version: int, known: pa.Table) -> list[DataFileRef] | None:
        return None

    def stored_partition(self, ref: DataFileRef) -> list[bytes | None] | None:
        return None

    def deletes_for(self, files: Sequence[DataFileRef]) -> list[tuple[DeleteFileRef, ...]]:
        deleted = {f["path"]: f["deleted"] for f in self._files}
        return [
            (DeleteFileRef(f.path, "deletion_vector", "TOY", len(gone), positions=np.array(gone, np.int64)),)
            if (gone := deleted.get(f.path))
            else ()
            for f in files
        ]

    def partition_label(self, ref: DataFileRef) -> str:
        return "/".join(f"{c}={v}" for c, v in ref.partition or ()) or "(unpartitioned)"

    @property
    def partitioning(self) -> IdentityPartitioning:
        by_name = {f.name: f for f in self.schema.fields}
        return IdentityPartitioning(tuple(by_name[c] for c in self.partition_columns))

    def commit_times(self, since: int | None, upto: int) -> list[float]:
        return []  # the manifest keeps no commit times

    def format_statistics(self, files: Sequence[DataFileRef]) -> StatisticsProvider:
        return NoStatistics(len(files))  # the manifest records no column statistics


def _open(config: Any, name: str, catalog: Any) -> ToySource:
    return ToySource(name)


FORMAT = SourceFormat("toy", recognises=lambda name: name.startswith(PREFIX), open=_open)


# The writer (the test's side) -------------------------------------------------------------------------------------


def write_toy(folder: Path, schema: pa.Schema, partition_columns: list[str], files: list[tuple[pa.Table, list[int]]]):
    """A toy table at `folder` (version 1, or one more than the one there) whose live files are `files`: each the
    rows of one file, every row sharing its partition values, and the positions deleted from it. Returns its name."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / MANIFEST
    version = json.loads(manifest_path.read_text())["version"] + 1 if manifest_path.exists() else 1
    entries = []
    for n, (table, deleted) in enumerate(files):
        partition = {c: table.column(c)[0].as_py() for c in partition_columns}
        assert all(table.column(c).unique().to_pylist() == [partition[c]] for c in partition_columns)
        path = folder / f"v{version}-{n}.parquet"
        pq.write_table(table.drop_columns(partition_columns), path, row_group_size=max(1, table.num_rows // 2))
        entries.append(
            {
                "path": str(path),
                "rows": table.num_rows,
                "bytes": path.stat().st_size,
                "partition": partition,
                "deleted": deleted,
            }
        )
    manifest = {
        "version": version,
        "schema": base64.b64encode(schema.serialize().to_pybytes()).decode(),
        "partition_columns": partition_columns,
        "files": entries,
    }
    manifest_path.write_text(json.dumps(manifest))
    return PREFIX + str(folder)
