"""What a lookup reads of an index: one snapshot of the index table, read selectively and cached.

A lookup needs, in this order: the file rows (which files the index knows, and their partition values); the bounds
and counts of the columns its predicate names; then the payloads (Bloom filters, automata) of those columns for the
files that survived the cheaper stages. Format 4 stores each column in its own partition of the index table
(store/schema.py), so each of these is one scan that Iceberg's metadata narrows to the data files of the columns
asked for, and, for payloads, to the row groups of the files asked for. Whatever was read is kept: a handle asks
the same snapshot many questions (handle.py), and after an append to the index it reads only the appended rows.

A format-3 table (one nested row per file) cannot be read selectively: it is read whole once and served from memory.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# mypy takes the pydantic fields of pyiceberg's predicates for their constructor, so it rejects the positional calls
# pyiceberg documents (apache/iceberg-python#3101): those calls carry a `type: ignore` naming the issue.
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In

from indexlib.store.key_rows import KeyReads, KeyRows
from indexlib.store.schema import (
    FILE_ROW,
    ROW_ARROW_SCHEMA,
    ROWS_FORMAT,
    as_entries,
    key_rows_id,
    one_entry_per_path,
    rows_of,
)
from indexlib.store.table import format_of, live_version_of, watermark_of

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

FILE_FIELDS = (
    "file_path",
    "file_size_in_bytes",
    "record_count",
    "source_version",
    "config_version",
    "indexed",
    "file_format",
    "spec_id",
    "partition",
)
BOUND_FIELDS = (
    "file_path",
    "field_id",
    "name",
    "type",
    "value_count",
    "null_count",
    "nan_count",
    "lower",
    "upper",
    "distinct_count",
    "keyed",  # format 6: the column's values are in the global key index (store/key_rows.py)
)
PAYLOAD_FIELDS = ("file_path", "field_id", "type", "indexes")
ROW_GROUP_FIELDS = ("file_path", "field_id", "type", "row_groups")  # format 5: per row group, read like payloads
_PER_FILE = {"payloads": PAYLOAD_FIELDS, "row groups": ROW_GROUP_FIELDS}
# Payloads of at most this many files are read with `file_path IN (...)` (pyiceberg binds each literal, ~0.1 ms
# apiece); beyond it the column's whole partition is streamed and filtered in Arrow.
MAX_LISTED_PATHS = 500


def _schema(fields: Sequence[str]) -> pa.Schema:
    return pa.schema([ROW_ARROW_SCHEMA.field(name) for name in fields])


def _empty(fields: Sequence[str]) -> pa.Table:
    return _schema(fields).empty_table()


def _conform(table: pa.Table, fields: Sequence[str]) -> pa.Table:
    """`fields` of the rows, in the stored Arrow layout (pyiceberg reads large types); a field the rows were
    written without (an older format) reads as null."""
    schema = _schema(fields)
    return pa.Table.from_arrays(
        [
            table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )


class IndexRows:
    """An index's rows in memory (a format-3 table read whole, or entries a test built). `live_version`: the source
    version whose live files the file rows are, exactly (None: they claim nothing, and readers plan the source);
    rows in memory never claim one."""

    live_version: int | None = None

    def __init__(self, rows: pa.Table, watermark: int | None = None) -> None:
        self.watermark = watermark
        self._rows = rows
        self._is_file = pc.equal(rows.column("field_id"), FILE_ROW)

    @staticmethod
    def of_entries(entries: pa.Table, watermark: int | None = None) -> IndexRows:
        return IndexRows(rows_of(one_entry_per_path(as_entries(entries))), watermark)

    def files(self) -> pa.Table:
        return self._rows.filter(self._is_file).select(list(FILE_FIELDS))

    def columns(self, field_ids: Sequence[int]) -> pa.Table:
        wanted = pc.is_in(self._rows.column("field_id"), value_set=pa.array(list(field_ids), pa.int32()))
        return self._rows.filter(wanted).select(list(BOUND_FIELDS))

    def payloads(self, field_id: int, paths: pa.Array) -> pa.Table:
        return self._of_files(field_id, paths, PAYLOAD_FIELDS)

    def row_groups(self, field_id: int, paths: pa.Array) -> pa.Table:
        """The column's row-group statistics (`row_groups`: null where the file has no row-group entries) of
        the files `paths`."""
        return self._of_files(field_id, paths, ROW_GROUP_FIELDS)

    def _of_files(self, field_id: int, paths: pa.Array, fields: Sequence[str]) -> pa.Table:
        rows = self._rows.filter(pc.equal(self._rows.column("field_id"), field_id))
        return rows.filter(pc.is_in(rows.column("file_path"), value_set=paths)).select(list(fields))

    def key_rows(self, field_id: int, hashes: np.ndarray) -> pa.Table:
        """The key rows (`key_hash`, `file_path`: unordered) of column `field_id` holding one of `hashes` (int64,
        sorted, unique: statistics/key_hash.py)."""
        rows = self._rows.filter(pc.equal(self._rows.column("field_id"), key_rows_id(field_id)))
        held = np.isin(rows.column("key_hash").to_numpy(zero_copy_only=False), hashes)
        found = rows.select(["key_hash", "file_path"]).filter(pa.array(held))
        return found.cast(pa.schema([("key_hash", pa.int64()), ("file_path", pa.string())]))

    @property
    def key_reads(self) -> KeyReads | None:
        """What lookups read of the key index (None: held in memory, nothing read)."""
        return None


class IndexSnapshot(IndexRows):
    """One snapshot of a format-4 index table, read as asked and cached (see the module docstring). Thread-safe."""

    def __init__(self, table: Table, snapshot_id: int, watermark: int | None, live_version: int | None) -> None:
        self.table = table
        self.snapshot_id = snapshot_id
        self.watermark = watermark
        self.live_version = live_version
        # every read, for monitoring, the benchmark and the tests: (what, column field ids, rows); and Arrow bytes
        self.reads: list[tuple[str, tuple[int, ...], int]] = []
        self.bytes_read = 0
        self._lock = threading.RLock()
        self._files: pa.Table | None = None
        self._columns: dict[int, pa.Table] = {}
        # per ("payloads" or "row groups", column): the rows read so far
        self._per_file: dict[tuple[str, int], pa.Table] = {}
        self._keys = KeyRows(table, snapshot_id)

    @staticmethod
    def of(table: Table) -> IndexRows | None:
        """The index at `table`'s current snapshot (None when it has none)."""
        snapshot = table.current_snapshot()
        if snapshot is None:
            return None
        if format_of(table) < ROWS_FORMAT:
            return IndexRows.of_entries(table.scan(snapshot_id=snapshot.snapshot_id).to_arrow(), watermark_of(table))
        return IndexSnapshot(table, snapshot.snapshot_id, watermark_of(table), live_version_of(table))

    def _schema(self) -> Schema:
        """The schema this snapshot's rows were written with, which a scan at it reads: the format-4 upgrade adds
        fields in a commit without a snapshot, so the current schema may have fields the current snapshot has not."""
        snapshot = self.table.snapshot_by_id(self.snapshot_id)
        assert snapshot is not None  # `of` and `after_appends` read `snapshot_id` from the table
        # a snapshot without a schema id (None) reads with the current schema, the `get` default
        return self.table.schemas().get(snapshot.schema_id, self.table.schema())  # type: ignore[arg-type]

    def _scan(
        self, what: str, field_ids: Sequence[int], row_filter: BooleanExpression, fields: Sequence[str]
    ) -> pa.Table:
        stored = [name for name in fields if name in self._schema().column_names]  # older formats lack some
        scan = self.table.scan(row_filter=row_filter, selected_fields=tuple(stored), snapshot_id=self.snapshot_id)
        read = _conform(scan.to_arrow(), fields)
        self._count(what, field_ids, read)
        return read

    def key_rows(self, field_id: int, hashes: np.ndarray) -> pa.Table:
        if "key_hash" not in self._schema().column_names:  # written before format 6: no key rows
            return pa.table({"key_hash": pa.array([], pa.int64()), "file_path": pa.array([], pa.string())})
        found = self._keys.rows_of(field_id, hashes)
        self.reads.append(("keys", (field_id,), found.num_rows))
        return found

    @property
    def key_reads(self) -> KeyReads | None:
        return self._keys.reads

    def _count(self, what: str, field_ids: Sequence[int], read: pa.Table) -> None:
        self.reads.append((what, tuple(field_ids), read.num_rows))
        self.bytes_read += read.nbytes

    def files(self) -> pa.Table:
        with self._lock:
            if self._files is None:
                self._files = self._scan(
                    "files",
                    (),
                    EqualTo("field_id", FILE_ROW),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
                    FILE_FIELDS,
                )
            return self._files

    def columns(self, field_ids: Sequence[int]) -> pa.Table:
        with self._lock:
            missing = sorted({f for f in field_ids if f not in self._columns})
            if missing:
                read = self._scan(
                    "bounds",
                    missing,
                    In("field_id", missing),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
                    BOUND_FIELDS,
                )
                for field_id in missing:
                    self._columns[field_id] = read.filter(pc.equal(read.column("field_id"), field_id))
            parts = [self._columns[f] for f in dict.fromkeys(field_ids)]
            return pa.concat_tables(parts) if parts else _empty(BOUND_FIELDS)

    def _of_files(self, field_id: int, paths: pa.Array, fields: Sequence[str]) -> pa.Table:
        what = "payloads" if fields == PAYLOAD_FIELDS else "row groups"
        if fields == ROW_GROUP_FIELDS and "row_groups" not in self._schema().column_names:
            return _empty(fields)  # written in format 4: no row-group entries
        with self._lock:
            have = self._per_file.get((what, field_id), _empty(fields))
            missing = pc.filter(paths, pc.invert(pc.is_in(paths, value_set=have.column("file_path"))))
            if len(missing):
                have = pa.concat_tables([have, self._read_of_files(what, field_id, missing, fields)])
                self._per_file[what, field_id] = have
            return have.filter(pc.is_in(have.column("file_path"), value_set=paths))

    def _read_of_files(self, what: str, field_id: int, paths: pa.Array, fields: Sequence[str]) -> pa.Table:
        if len(paths) <= MAX_LISTED_PATHS:
            row_filter = And(
                EqualTo("field_id", field_id),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
                In("file_path", paths.to_pylist()),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
            )
            return self._scan(what, (field_id,), row_filter, fields)
        scan = self.table.scan(
            row_filter=EqualTo("field_id", field_id),  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
            selected_fields=tuple(fields),
            snapshot_id=self.snapshot_id,
        )
        kept = [_empty(fields)]
        for batch in scan.to_arrow_batch_reader():  # streamed: only the asked-for files' rows stay in memory
            batch = pa.Table.from_batches([batch])
            kept.append(_conform(batch.filter(pc.is_in(batch.column("file_path"), value_set=paths)), fields))
            self.bytes_read += batch.nbytes
        read = pa.concat_tables(kept)
        self.reads.append((what, (field_id,), read.num_rows))
        return read

    def after_appends(self, table: Table) -> IndexSnapshot:
        """The same index at `table`'s current snapshot, reached by appends only: what this one read, plus the rows
        appended since (read with the same filters, from the appended data files only)."""
        current = table.current_snapshot()
        assert current is not None  # called only when `table` has appends since this snapshot
        snapshot_id = current.snapshot_id
        later = IndexSnapshot(table, snapshot_id, watermark_of(table), live_version_of(table))
        later._keys = self._keys.carried_to(table, snapshot_id)

        def appended(row_filter: BooleanExpression, fields: Sequence[str]) -> pa.Table:
            scan = table.incremental_append_scan(
                row_filter=row_filter,
                selected_fields=tuple(name for name in fields if name in later._schema().column_names),
                from_snapshot_id_exclusive=self.snapshot_id,
                to_snapshot_id_inclusive=snapshot_id,
            )
            read = _conform(scan.to_arrow(), fields)
            later._count("appended", (), read)
            return read

        def extend(cache: dict[int, pa.Table], fields: Sequence[str]) -> dict[int, pa.Table]:
            if not cache:
                return {}
            # pyiceberg#3101 (see the imports)
            new = appended(In("field_id", sorted(cache)), fields)  # type: ignore[call-arg, arg-type]
            return {
                field_id: pa.concat_tables([rows, new.filter(pc.equal(new.column("field_id"), field_id))])
                for field_id, rows in cache.items()
            }

        with self._lock:
            if self._files is not None:
                file_rows = EqualTo("field_id", FILE_ROW)  # type: ignore[call-arg, arg-type]  # pyiceberg#3101
                later._files = pa.concat_tables([self._files, appended(file_rows, FILE_FIELDS)])
            later._columns = extend(self._columns, BOUND_FIELDS)
            for what, fields in _PER_FILE.items():
                grown = extend({field_id: rows for (w, field_id), rows in self._per_file.items() if w == what}, fields)
                later._per_file.update({(what, field_id): rows for field_id, rows in grown.items()})
        return later
