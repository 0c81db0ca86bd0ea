"""Row-group entries (format 5) as a container kind (store/containers.py): one container per Parquet row group of
the files a lookup's file stages kept, read only for those files (store/snapshot.py `row_groups`).

A file's row groups are the elements of its column rows' `row_groups` lists (footer order); a file none of whose
asked columns has them is not among the containers (its reader reads it whole). A column row whose list does not
have the file's row-group count is not used (unknown for that column), as is a column the file does not hold.
Decoding, damage isolation and payload reads are `EntryStatistics`' own, over row groups instead of files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexlib.store.containers import PartKind, PartStatistics
from indexlib.store.entries import EntryStatistics

if TYPE_CHECKING:
    from indexlib.store.snapshot import IndexRows


class RowGroupStatistics(EntryStatistics, PartStatistics):
    """Statistics of the row groups of `paths` for the columns `field_ids`. `file_of[i]` and `ordinal[i]`: the
    file (index into `paths`) and row group of container i; `groups[f]`: row groups of file f (0: none)."""

    def __init__(self, paths: pa.Array, rows: IndexRows, field_ids: Sequence[int]) -> None:
        listed = {field_id: rows.row_groups(field_id, paths) for field_id in dict.fromkeys(field_ids)}
        groups = np.zeros(len(paths), dtype=np.int64)
        for table in listed.values():
            files = pc.index_in(table.column("file_path"), value_set=paths).to_numpy(zero_copy_only=False)
            lengths = pc.fill_null(pc.list_value_length(table.column("row_groups")), 0).to_numpy()
            np.maximum.at(groups, files.astype(np.int64), lengths)
        self.groups = groups
        self.starts = np.concatenate([[0], np.cumsum(groups)[:-1]]).astype(np.int64)
        self.file_of = np.repeat(np.arange(len(paths)), groups)
        self.ordinal = np.arange(len(self.file_of)) - self.starts[self.file_of]
        self.file_paths = paths
        self._listed = listed
        self._flat: dict[int, tuple[pa.Table, np.ndarray]] = {}
        super().__init__(paths.take(pa.array(self.file_of, pa.int64())), rows)

    def _flattened(self, field_id: int) -> tuple[pa.Table, np.ndarray]:
        """The column's row-group elements (with their row's `type`), and the container each describes."""
        if field_id not in self._flat:
            table = self._listed.get(field_id)
            if table is None:  # a column the constructor was not asked about: unknown everywhere
                table = self.rows.row_groups(field_id, pa.array([], pa.string()))
            files = pc.index_in(table.column("file_path"), value_set=self.file_paths).to_numpy(zero_copy_only=False)
            lengths = pc.fill_null(pc.list_value_length(table.column("row_groups")), 0).to_numpy()
            usable = (lengths > 0) & (lengths == self.groups[files.astype(np.int64)])
            table, files = table.filter(pa.array(usable)), files[usable].astype(np.int64)
            listed = table.column("row_groups").combine_chunks()
            parent = pc.list_parent_indices(listed).to_numpy()
            flat = pa.Table.from_struct_array(pc.list_flatten(listed))
            flat = flat.append_column("type", table.column("type").combine_chunks().take(pa.array(parent)))
            within = np.arange(len(parent)) - np.searchsorted(parent, parent, side="left")
            self._flat[field_id] = (flat, self.starts[files[parent]] + within)
        return self._flat[field_id]

    def _column_rows(self, field_id: int) -> tuple[pa.Table, np.ndarray]:
        return self._flattened(field_id)

    def _payload_rows(self, field_id: int, wanted: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        flat, positions = self._flattened(field_id)
        keep = wanted[positions]
        return flat.filter(pa.array(keep)), positions[keep]

    def file_name(self, index: int) -> str:
        return f"{self.file_paths[int(self.file_of[index])].as_py()} (row group {int(self.ordinal[index])})"


def _row_group_statistics(paths: pa.Array, rows: IndexRows, field_ids: Sequence[int]) -> RowGroupStatistics | None:
    stats = RowGroupStatistics(paths, rows, field_ids)
    return stats if len(stats.file_of) else None


ROW_GROUPS = PartKind("row_groups", "row groups", _row_group_statistics)
