"""A second container kind in one module, for the rule that a container is a plug-in (tests/test_containers.py).

"Footer row groups": the Parquet row groups of a data file, judged by the statistics its own footer holds (read at
lookup time), not by index entries. Its parts are the same row groups the built-in kind judges by the index; it is
here only because it needs nothing but this module: its statistics (`FooterStatistics`) and its registration
(`FOOTER_ROW_GROUPS`, under the entry-point group `skipindex.containers`). Integer columns only; every other column,
a row group without statistics, or a file that is not a local Parquet file, is unknown (kept).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.types import IntegerType, LongType

from indexlib.statistics.column_stats import physical_arrow_type
from indexlib.statistics.provider import ColumnRef, ColumnStatistics
from indexlib.store.containers import PartKind, PartStatistics

if TYPE_CHECKING:
    from indexlib.store.snapshot import IndexRows


class FooterStatistics(PartStatistics):
    """One container per row group of each of `paths` (footer order)."""

    def __init__(self, paths: pa.Array) -> None:
        self.footers = [pq.ParquetFile(path.removeprefix("file://")).metadata for path in paths.to_pylist()]
        groups = np.array([footer.num_row_groups for footer in self.footers], dtype=np.int64)
        self.file_of = np.repeat(np.arange(len(paths)), groups)
        self.ordinal = np.arange(len(self.file_of)) - np.concatenate([[0], np.cumsum(groups)[:-1]])[self.file_of]
        self.num_files = len(self.file_of)
        self.paths = paths

    def column(self, column: ColumnRef) -> ColumnStatistics:
        if not isinstance(column.type, (IntegerType, LongType)):
            return ColumnStatistics.unknown(self.num_files, physical_arrow_type(column.type))
        known = ColumnStatistics.unknown(self.num_files, pa.int64())
        lower, upper = [None] * self.num_files, [None] * self.num_files
        values, nulls = known.value_count.copy(), known.null_count.copy()
        for i, (f, g) in enumerate(zip(self.file_of.tolist(), self.ordinal.tolist(), strict=True)):
            group = self.footers[f].row_group(g)
            names = [group.column(c).path_in_schema for c in range(group.num_columns)]
            if column.name not in names:
                continue
            stats = group.column(names.index(column.name)).statistics
            if stats is None or not stats.has_null_count:
                continue
            if stats.has_min_max:
                lower[i], upper[i] = stats.min, stats.max
            elif stats.null_count != group.num_rows:  # values without bounds: unknown
                continue
            values[i], nulls[i] = group.num_rows, stats.null_count
        zero = np.where(values >= 0, 0, -1)  # no NaN in an integer column
        return ColumnStatistics(pa.array(lower, pa.int64()), pa.array(upper, pa.int64()), values, nulls, zero)

    def file_name(self, index: int) -> str:
        return f"{self.paths[int(self.file_of[index])].as_py()} (footer row group {int(self.ordinal[index])})"


def _footer_statistics(paths: pa.Array, rows: IndexRows, field_ids: Sequence[int]) -> FooterStatistics | None:
    stats = FooterStatistics(paths)
    return stats if stats.num_files else None


FOOTER_ROW_GROUPS = PartKind("footer_row_groups", "footer row groups", _footer_statistics)
