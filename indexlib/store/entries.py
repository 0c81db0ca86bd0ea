"""The index-entry reader: the statistics of an index-table scan, as a `StatisticsProvider`.

Corrupt statistics. A stored byte string may be damaged: a bound of the wrong length for its type, not UTF-8, or
tagged with a type name that does not parse; a payload an index kind cannot read. The decoders and the index kinds
raise on such a value instead of guessing. Bounds are decoded for all files at once (the fast path); only when that
raises is the work redone over halves of the files, down to single files (`isolate_damage`), and each file that still
fails alone gets that statistic as unknown. One warning per lookup and (column, kind or "bounds") names the column,
how many files and one of them. Not covered: damage that still reads as a well-formed value (a flipped bit inside an
8-byte bound or a Bloom bit array, a string bound cut at a character boundary) cannot be told from data without
checksums.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import PrimitiveType

from indexlib.statistics.column_stats import (
    decode_bounds,
    parse_type,
    physical_arrow_type,
    same_domain,
    supports_bounds,
)
from indexlib.statistics.provider import (
    ColumnRef,
    ColumnStatistics,
    Decoded,
    Payloads,
    StatisticsProvider,
    isolate_damage,
)

if TYPE_CHECKING:
    from indexlib.store.snapshot import IndexRows


class EntryStatistics(StatisticsProvider):
    """Per-file statistics of `paths` (in that order) from an index's rows (store/snapshot.py), decoded lazily per
    column; payloads are read only for the files asked for. A file without rows is unknown; damaged values read as
    unknown (see the module docstring). Thread-safe: a handle's lookups share one."""

    def __init__(self, paths: pa.Array, rows: IndexRows) -> None:
        self.paths = paths
        self.rows = rows
        self.num_files = len(paths)
        self._lock = threading.RLock()
        self._columns: dict[int, ColumnStatistics] = {}
        self._rows_of: dict[int, tuple[pa.Table, np.ndarray]] = {}
        self._payloads: dict[tuple[int, str, int], list[bytes | None]] = {}
        self._asked: dict[tuple[int, str, int], np.ndarray] = {}
        self._decoded: dict[tuple[int, str, int], Decoded] = {}

    def _column_rows(self, field_id: int) -> tuple[pa.Table, np.ndarray]:
        """The column's rows of these files, and the file each describes."""
        if field_id not in self._rows_of:
            rows = self.rows.columns([field_id])
            position = pc.index_in(rows.column("file_path"), value_set=self.paths)
            known = pc.is_valid(position)
            rows = rows.filter(known)
            self._rows_of[field_id] = (rows, pc.drop_null(position).to_numpy().astype(np.int64))
        return self._rows_of[field_id]

    def payloads(self, column: ColumnRef, kind: str, version: int, files: np.ndarray) -> Payloads:
        """The payload of index `kind` for `column` of each of `files`; None where absent, newer than `version`, or
        written for a column type of another physical domain (its keys would not be this type's keys). Only those
        files' payloads are read (and kept for later calls, with what the kind decodes of them: `Decoded`)."""
        key = (column.field_id, kind, version)
        with self._lock:
            decoded = self._decoded.setdefault(key, Decoded())
            found = self._payloads.setdefault(key, [None] * self.num_files)
            asked = self._asked.setdefault(key, np.zeros(self.num_files, dtype=bool))
            _, described = self._column_rows(column.field_id)
            has_row = np.zeros(self.num_files, dtype=bool)
            has_row[described] = True
            candidates = np.zeros(self.num_files, dtype=bool)
            candidates[files] = True
            wanted = has_row & ~asked & candidates
            if wanted.any():
                self._fill(found, *self._payload_rows(column.field_id, wanted), column, kind, version)
                asked |= wanted
            return Payloads([found[i] for i in files], np.asarray(files, dtype=np.int64), decoded)

    def keyed(self, column: ColumnRef) -> np.ndarray:
        """Per file, whether its rows of `column` are in the global key index (store/key_rows.py), written for a
        type of the column's physical domain (another domain's values hash to other keys)."""
        rows, described = self._column_rows(column.field_id)
        found = np.zeros(self.num_files, dtype=bool)
        keyed = pc.fill_null(rows.column("keyed"), False).to_numpy(zero_copy_only=False)
        if not keyed.any():
            return found
        types = rows.column("type")
        usable = [
            t for t in pc.unique(types).to_pylist() if (s := _parsed(t)) is not None and same_domain(s, column.type)
        ]
        usable_row = pc.is_in(types, value_set=pa.array(usable, pa.string())).to_numpy(zero_copy_only=False)
        found[described[keyed & usable_row]] = True
        return found

    def key_files(self, column: ColumnRef, hashes: np.ndarray) -> np.ndarray:
        """Per file, whether a key row of `column` holds one of `hashes` (int64, sorted, unique)."""
        files, _ = self.key_pairs(column, hashes)
        found = np.zeros(self.num_files, dtype=bool)
        found[files] = True
        return found

    def key_pairs(self, column: ColumnRef, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The key rows of `column` holding one of `hashes` (int64, sorted, unique), as (file index, hash) pairs
        (files not among these statistics' files left out)."""
        rows = self.rows.key_rows(column.field_id, hashes)
        positions = pc.index_in(rows.column("file_path"), value_set=self.paths)
        known = pc.is_valid(positions)
        files = pc.filter(positions, known).to_numpy(zero_copy_only=False).astype(np.int64)
        return files, pc.filter(rows.column("key_hash"), known).to_numpy(zero_copy_only=False)

    def key_holders(self, column: ColumnRef, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per file, whether `column` is keyed; and the (file index, hash) pairs of its key rows among `hashes`."""
        return (self.keyed(column), *self.key_pairs(column, hashes))

    def file_name(self, index: int) -> str:
        return self.paths[index].as_py()

    def _payload_rows(self, field_id: int, wanted: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        """The column's payload rows (`type`, `indexes`) of the `wanted` files, and the file each describes."""
        rows = self.rows.payloads(field_id, self.paths.filter(pa.array(wanted)))
        return rows, pc.index_in(rows.column("file_path"), value_set=self.paths).to_numpy(zero_copy_only=False)

    def _fill(
        self,
        found: list[bytes | None],
        rows: pa.Table,
        files: np.ndarray,
        column: ColumnRef,
        kind: str,
        version: int,
    ) -> None:
        indexes = _binary(rows.column("indexes"))
        flat_indexes = pc.list_flatten(indexes)
        if not len(flat_indexes):
            return
        types = rows.column("type")
        usable_types = [
            t
            for t in pc.unique(types).to_pylist()
            if (stored := _parsed(t)) is not None and same_domain(stored, column.type)
        ]
        usable_row = pc.is_in(types, value_set=pa.array(usable_types, pa.string())).to_numpy(zero_copy_only=False)
        flat = pa.Table.from_struct_array(flat_indexes)
        row_of = pc.list_parent_indices(indexes).to_numpy()
        wanted = (
            pc.and_(pc.equal(flat.column("kind"), kind), pc.less_equal(flat.column("version"), version)).to_numpy(
                zero_copy_only=False
            )
            & usable_row[row_of]
        )
        for file, payload in zip(
            files[row_of[wanted]], flat.column("payload").filter(pa.array(wanted)).to_pylist(), strict=True
        ):
            found[int(file)] = payload

    def column(self, column: ColumnRef) -> ColumnStatistics:
        with self._lock:
            if column.field_id not in self._columns:
                self._columns[column.field_id] = self._decode(column)
            return self._columns[column.field_id]

    def _decode(self, column: ColumnRef) -> ColumnStatistics:
        n = self.num_files
        value_count = np.full(n, -1, dtype=np.int64)
        null_count = np.full(n, -1, dtype=np.int64)
        nan_count = np.full(n, -1, dtype=np.int64)
        arrow_type = physical_arrow_type(column.type) if supports_bounds(column.type) else pa.null()
        lower = pa.nulls(n, arrow_type)
        upper = pa.nulls(n, arrow_type)
        rows, parents = self._column_rows(column.field_id)
        if rows.num_rows:
            value_count[parents] = rows.column("value_count").to_numpy()
            null_count[parents] = rows.column("null_count").to_numpy()
            nan_count[parents] = pc.fill_null(rows.column("nan_count"), 0).to_numpy()
            if supports_bounds(column.type) and rows.num_rows:
                lower_parts, upper_parts, positions = [], [], []
                types = rows.column("type").combine_chunks()
                for type_string in pc.unique(types).to_pylist():  # usually one: the type the bounds were written for
                    same = pc.equal(types, type_string)
                    files = parents[same.to_numpy(zero_copy_only=False)]
                    lower_bytes = _binary(rows.column("lower").filter(same))
                    upper_bytes = _binary(rows.column("upper").filter(same))
                    lower, upper = self._decode_bounds(column, type_string, lower_bytes, upper_bytes, files)
                    lower_parts.append(lower)
                    upper_parts.append(upper)
                    positions.append(files)
                order = np.concatenate(positions)
                lower = _scatter(pa.concat_arrays(lower_parts), order, n, arrow_type)
                upper = _scatter(pa.concat_arrays(upper_parts), order, n, arrow_type)
        return ColumnStatistics(
            lower=lower,
            upper=upper,
            value_count=value_count,
            null_count=null_count,
            nan_count=nan_count,
        )

    def _decode_bounds(
        self, column: ColumnRef, type_string: str, lower: pa.Array, upper: pa.Array, files: np.ndarray
    ) -> tuple[pa.Array, pa.Array]:
        """Lower and upper bounds written for `type_string` (one entry row each, of data files `files`), decoded
        into `column`'s domain; a damaged pair reads as unknown (see the class docstring)."""
        arrow_type = physical_arrow_type(column.type)

        def unknown(n: int) -> tuple[pa.Array, pa.Array]:
            return pa.nulls(n, arrow_type), pa.nulls(n, arrow_type)

        stored = _parsed(type_string)
        if stored is None:
            self.damaged(column, "bounds", files, ValueError(f"unknown type {type_string!r}"))
            return unknown(len(files))

        def decode(start: int, stop: int) -> tuple[pa.Array, pa.Array]:
            length = stop - start
            return (
                decode_bounds(stored, column.type, lower.slice(start, length)),
                decode_bounds(stored, column.type, upper.slice(start, length)),
            )

        try:
            return decode(0, len(files))
        except Exception as error:  # a damaged bound: isolate it
            parts, bad, error = isolate_damage(len(files), decode, unknown, error)
            self.damaged(column, "bounds", files[bad], error)
            return pa.concat_arrays([p[0] for p in parts]), pa.concat_arrays([p[1] for p in parts])


def _parsed(type_string: str) -> PrimitiveType | None:
    """The stored type, or None when the name does not parse (damaged, or a type this reader does not know)."""
    try:
        return parse_type(type_string)
    except Exception:
        return None


def _binary(column: pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _scatter(values: pa.Array, positions: np.ndarray, n: int, arrow_type: pa.DataType) -> pa.Array:
    """An array of length n holding values[k] at positions[k] and null elsewhere."""
    index = np.full(n, -1, dtype=np.int64)
    index[positions] = np.arange(len(positions))
    taken = values.take(pa.array(np.where(index >= 0, index, 0), pa.int64()))
    return pc.if_else(pa.array(index >= 0), taken, pa.nulls(n, arrow_type))
