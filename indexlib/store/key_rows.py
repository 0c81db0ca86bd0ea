"""The global key index: key rows, read by hash.

Key rows are rows of the index table (store/schema.py, format 6): for each data file and each of its columns in the
key index, one row per distinct value's key hash (statistics/key_hash.py): `file_path`, `field_id` = -column, and
`key_hash`. They are written with the file's entry, in the same commit, and deleted with it (a rebuilt or removed
file's rows go with its `file_path`), so they describe exactly the files whose column rows say `keyed`.

Each column's key rows are their own partition of the index table, written sorted by hash, in row groups of 2,048
rows (the table's row-group limit). A lookup of k hashes lists the partition's data files once per snapshot, reads
each file's footer once (cached by path: data files never change), and reads only the row groups whose [min, max]
of `key_hash` holds one of the hashes: at most k row groups per data file, two columns each. A data file with
delete files (never written by skipindex, whose deletes rewrite files) is read through pyiceberg instead.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# mypy takes the pydantic fields of pyiceberg's predicates for their constructor, so it rejects the positional calls
# pyiceberg documents (apache/iceberg-python#3101): those calls carry a `type: ignore` naming the issue.
from pyiceberg.expressions import And, EqualTo, In

from indexlib.store.schema import key_rows_id

if TYPE_CHECKING:
    from pyiceberg.table import FileScanTask, Table

_FOOTERS_KEPT = 256  # data files whose footers are kept in memory (~1 KB per row group each)


@dataclass(frozen=True)
class _Footer:
    """One data file's row groups: their `key_hash` ranges, and the parsed footer (read once per file)."""

    lower: np.ndarray
    upper: np.ndarray
    metadata: Any


@dataclass
class KeyReads:
    """What lookups read of the key index, for explain and the benchmarks."""

    data_files: int = 0  # data files whose row groups were asked
    row_groups: int = 0  # row groups read (a cached one is not read again)
    rows: int = 0
    bytes: int = 0  # compressed bytes of the columns read, as the footers give them


_footers: OrderedDict[str, _Footer] = OrderedDict()
_footers_lock = threading.Lock()


class KeyRows:
    """The key rows of one index snapshot; shareable by the snapshots after it (`carried_to`): what was read of
    a data file stays valid, since data files never change. Thread-safe."""

    def __init__(self, table: Table, snapshot_id: int) -> None:
        self.table = table
        self.snapshot_id = snapshot_id
        self.reads = KeyReads()
        self._lock = threading.RLock()
        self._tasks: dict[int, list[FileScanTask]] = {}
        self._pieces: dict[tuple[str, int], tuple[np.ndarray, pa.Array]] = {}

    def carried_to(self, table: Table, snapshot_id: int) -> KeyRows:
        later = KeyRows(table, snapshot_id)
        later._pieces = self._pieces  # keyed by immutable data file and row group
        return later

    def rows_of(self, field_id: int, hashes: np.ndarray) -> pa.Table:
        """The key rows (`key_hash`, `file_path`: unordered) of column `field_id` whose hash is one of `hashes`
        (int64, sorted, unique)."""
        found = [_NO_ROWS]
        if len(hashes):
            with self._lock:
                found += [self._rows_in(task, field_id, hashes) for task in self._tasks_of(field_id)]
        return pa.concat_tables(found)

    def _tasks_of(self, field_id: int) -> list[FileScanTask]:
        if field_id not in self._tasks:
            scan = self.table.scan(
                # pyiceberg#3101 (see the imports)
                row_filter=EqualTo("field_id", key_rows_id(field_id)),  # type: ignore[call-arg, arg-type]
                snapshot_id=self.snapshot_id,
            )
            self._tasks[field_id] = list(scan.plan_files())
        return self._tasks[field_id]

    def _rows_in(self, task: FileScanTask, field_id: int, hashes: np.ndarray) -> pa.Table:
        path = task.file.file_path
        self.reads.data_files += 1
        if task.delete_files:
            return self._through_pyiceberg(field_id, hashes)
        footer = self._footer(path)
        start = np.searchsorted(hashes, footer.lower, side="left")
        hit = (start < len(hashes)) & (hashes[np.minimum(start, len(hashes) - 1)] <= footer.upper)
        groups = np.flatnonzero(hit).tolist()
        missing = [g for g in groups if (path, g) not in self._pieces]
        if missing:
            self._read(path, missing, footer.metadata)
        parts = [_NO_ROWS]
        low = np.searchsorted(hashes, footer.lower[groups], side="left")
        high = np.searchsorted(hashes, footer.upper[groups], side="right")
        for group, first, last in zip(groups, low.tolist(), high.tolist(), strict=True):
            stored, paths = self._pieces[path, group]
            inside = hashes[first:last]  # only the hashes inside this row group's range (sorted, unique)
            if not len(inside):
                continue
            at = np.minimum(np.searchsorted(inside, stored), len(inside) - 1)
            wanted = inside[at] == stored
            if wanted.any():
                parts.append(_key_rows(stored[wanted], paths.filter(pa.array(wanted))))
        return pa.concat_tables(parts)

    def _footer(self, path: str) -> _Footer:
        with _footers_lock:
            if path in _footers:
                _footers.move_to_end(path)
                return _footers[path]
        with self.table.io.new_input(path).open() as stream:
            metadata = pq.ParquetFile(stream).metadata
        column = metadata.schema.names.index("key_hash")
        lower, upper = [], []
        for group in range(metadata.num_row_groups):
            statistics = metadata.row_group(group).column(column).statistics
            known = statistics is not None and statistics.has_min_max
            lower.append(statistics.min if known else np.iinfo(np.int64).min)  # no statistics: any hash may be in it
            upper.append(statistics.max if known else np.iinfo(np.int64).max)
        footer = _Footer(np.array(lower, np.int64), np.array(upper, np.int64), metadata)
        with _footers_lock:
            _footers[path] = footer
            while len(_footers) > _FOOTERS_KEPT:
                _footers.popitem(last=False)
        return footer

    def _read(self, path: str, groups: list[int], metadata: Any) -> None:
        with self.table.io.new_input(path).open() as stream:
            parquet = pq.ParquetFile(stream, metadata=metadata, read_dictionary=["file_path"])
            read = parquet.read_row_groups(groups, columns=["key_hash", "file_path"], use_threads=False)
        names = metadata.schema.names
        columns = [names.index("key_hash"), names.index("file_path")]
        self.reads.row_groups += len(groups)
        self.reads.rows += read.num_rows
        self.reads.bytes += sum(metadata.row_group(g).column(c).total_compressed_size for g in groups for c in columns)
        offsets = np.cumsum([0, *(metadata.row_group(g).num_rows for g in groups)])
        stored = read.column("key_hash").to_numpy()
        paths = read.column("file_path")
        for k, group in enumerate(groups):
            piece = paths.slice(offsets[k], offsets[k + 1] - offsets[k]).combine_chunks()
            self._pieces[path, group] = (stored[offsets[k] : offsets[k + 1]], piece)

    def _through_pyiceberg(self, field_id: int, hashes: np.ndarray) -> pa.Table:
        row_filter = And(
            EqualTo("field_id", key_rows_id(field_id)),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
            In("key_hash", hashes.tolist()),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
        )
        read = self.table.scan(
            row_filter=row_filter, selected_fields=("key_hash", "file_path"), snapshot_id=self.snapshot_id
        ).to_arrow()
        self.reads.rows += read.num_rows
        return _key_rows(read.column("key_hash").to_numpy(), read.column("file_path").combine_chunks())


_NO_ROWS = pa.table({"key_hash": pa.array([], pa.int64()), "file_path": pa.array([], pa.string())})


def _key_rows(stored: np.ndarray, paths: pa.Array) -> pa.Table:
    return pa.table({"key_hash": pa.array(stored, pa.int64()), "file_path": pc.cast(paths, pa.string())})
