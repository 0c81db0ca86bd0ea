"""Reading only the Parquet row groups a lookup kept (`KeptFile.row_groups`), through pyiceberg's own reader.

pyiceberg's `ArrowScan` reads whole files: its `_task_to_record_batches` makes one Parquet fragment per file and
applies the schema mapping (field ids or the name mapping, promotions), identity-partition constants, the filter and
position deletes / deletion vectors to the batches it scans. `RowGroupScan` runs that same function, unchanged, on a
fragment limited to the kept row groups: a copy of the function whose one global `_get_file_format` adds
`row_groups=` to its `make_fragment` call (no module of pyiceberg's is patched; other reads are untouched). pyiceberg
counts position deletes from the first row it scans, so the deleted positions (whole-file row numbers) become
positions among the rows read (`shift_positions`), computed when the fragment is made: pyarrow reads a fragment's row
groups in its own order (`set(row_groups)`'s, not ascending), and the footer's row counts come with it. Before the
first batch is handed out, the read checks that the fragment pyiceberg scanned was the limited one, and the deletes
refuse to be read before it was made: if a pyiceberg version read otherwise, it fails rather than apply positions of
one read to another. tests/test_row_group_scans.py pins the rows against pyiceberg's own whole-file read.

pyiceberg pushes its filter into pyarrow's Parquet scan unless the file has position deletes; pyarrow then skips row
groups, and folds the filter, by footer statistics that leave NaN out (a row group of [NaN, 0.0, -0.0] reads as
`x = 0`, so `isnan(x)` and `x != 0` drop its NaN row; scans/pushdown.py). A task marked `nan_prone` whose filter
names a FLOAT or DOUBLE column is therefore read the way pyiceberg reads a file with position deletes: unfiltered,
the filter applied to each batch in memory, where no statistics are consulted (`RowGroupScan` hands pyiceberg an
empty position list to take that path). tests/test_scan_rules.py holds the row group that breaks without it.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import extract_field_ids
from pyiceberg.io import pyarrow as pyiceberg_arrow
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.types import DoubleType, FloatType

from indexlib.scans.equality import EqualityDeletes, is_equality
from indexlib.sources.base import KeptFile
from indexlib.sources.iceberg_deletes import data_file_of


def selected(kept: KeptFile) -> tuple[int, ...] | None:
    """The row groups to read of a kept file, ascending; None: all of them. An all-match file is read whole (every
    row matches, so every row group is kept anyway), and an empty selection, which the lookup never makes, or one
    of a file not in Parquet is read whole too: unknown means read."""
    if kept.all_match or not kept.row_groups or kept.file.file_format.upper() != "PARQUET":
        return None
    return tuple(sorted(set(kept.row_groups)))


ALWAYS_TRUE = AlwaysTrue()


class RowGroupTask(FileScanTask):
    """A pyiceberg `FileScanTask` that reads only `row_groups` of its data file (None: every one). `nan_prone`: the
    file may hold NaN in a column the filter names (scans/pushdown.py; unknown means prone)."""

    def __init__(
        self,
        data_file: Any,
        delete_files: set[Any] | None = None,
        residual: BooleanExpression = ALWAYS_TRUE,
        row_groups: tuple[int, ...] | None = None,
        nan_prone: bool = True,
    ) -> None:
        super().__init__(data_file, delete_files, residual)
        self.row_groups = row_groups
        self.nan_prone = nan_prone


def task_of(kept: KeptFile, residual: BooleanExpression = ALWAYS_TRUE, nan_prone: bool = True) -> RowGroupTask:
    """The task reading a kept file's kept row groups with its delete files."""
    files = {d.data_file for d in kept.deletes}
    return RowGroupTask(data_file_of(kept.file), files, residual, selected(kept), nan_prone)


def shift_positions(positions: np.ndarray, rows: list[int], order: list[int]) -> np.ndarray:
    """Whole-file row positions as positions among the rows read, row groups `order` read in that order (`rows`:
    rows per row group of the file, footer order); positions in row groups not read are dropped."""
    starts = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)])
    shifted, base = [], 0
    for g in order:
        inside = positions[(positions >= starts[g]) & (positions < starts[g + 1])]
        shifted.append(inside - starts[g] + base)
        base += rows[g]
    return np.sort(np.concatenate(shifted)) if shifted else np.empty(0, np.int64)


NO_POSITIONS = pa.chunked_array([], pa.int64())  # position deletes that delete nothing: the filter applied in memory


class _ShiftedDeletes:
    """The positional deletes handed to pyiceberg for a file read in part: known only once its fragment is made
    (pyarrow reads the row groups of a fragment in its own order, not the one given), filled then; read before,
    it fails rather than let pyiceberg apply positions of another order. `in_memory`: hand pyiceberg a list even
    when no position is left, so that it filters in memory (module docstring)."""

    def __init__(self, deletes: list[pa.ChunkedArray], in_memory: bool) -> None:
        self._positions = np.concatenate([np.asarray(d.to_numpy(), np.int64) for d in [NO_POSITIONS, *deletes]])
        self._in_memory = in_memory
        self._arrays: list[pa.ChunkedArray] | None = None

    def fill(self, fragment: Any) -> None:
        metadata = fragment.metadata
        rows = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        kept = shift_positions(self._positions, rows, [rg.id for rg in fragment.row_groups])
        self._arrays = [pa.chunked_array([pa.array(kept, pa.int64())])] if len(kept) or self._in_memory else []

    def _filled(self) -> list[pa.ChunkedArray]:
        if self._arrays is None:
            raise RuntimeError("pyiceberg read the positional deletes before making the fragment they apply to")
        return self._arrays

    def __len__(self) -> int:
        return len(self._filled())

    def __iter__(self) -> Iterator[pa.ChunkedArray]:
        return iter(self._filled())

    def __getitem__(self, index: int) -> pa.ChunkedArray:
        return self._filled()[index]


class _Limited:
    """A Parquet file format whose fragments hold only `groups`; records the fragments it made and fills the
    deletes for them."""

    def __init__(self, format_: Any, groups: tuple[int, ...], made: list[Any], deletes: _ShiftedDeletes | None):
        self._format, self._groups, self._made, self._deletes = format_, groups, made, deletes

    def make_fragment(self, file: Any, *args: Any, **kwargs: Any) -> Any:
        fragment = self._format.make_fragment(file, *args, row_groups=list(self._groups), **kwargs)
        self._made.append(fragment)
        if self._deletes is not None:
            self._deletes.fill(fragment)
        return fragment

    def __getattr__(self, name: str) -> Any:
        return getattr(self._format, name)


def _limited_reader(groups: tuple[int, ...], made: list[Any], deletes: _ShiftedDeletes | None) -> Any:
    """pyiceberg's `_task_to_record_batches` with its Parquet fragment limited to `groups`."""
    original = pyiceberg_arrow._task_to_record_batches
    scope = dict(original.__globals__)
    make_format = scope["_get_file_format"]
    scope["_get_file_format"] = lambda *args, **kwargs: _Limited(make_format(*args, **kwargs), groups, made, deletes)
    copy = types.FunctionType(original.__code__, scope, original.__name__, original.__defaults__, original.__closure__)
    copy.__kwdefaults__ = original.__kwdefaults__
    return copy


class RowGroupScan(ArrowScan):
    """pyiceberg's `ArrowScan`, reading a `RowGroupTask` with `row_groups` set from those row groups alone; other
    tasks as `ArrowScan` does. A task that is `nan_prone` (any task not a `RowGroupTask`) is filtered in memory when
    the filter names a FLOAT or DOUBLE column (module docstring). Equality delete files among a task's delete files
    (which pyiceberg's reader would read as position deletes) are taken out before pyiceberg sees the task and
    applied to its rows here (scans/equality.py), the read widened to the columns they compare. Used without
    `limit`."""

    def __init__(
        self, table_metadata: Any, io: Any, projected_schema: Any, row_filter: BooleanExpression, **options: Any
    ) -> None:
        super().__init__(table_metadata, io, projected_schema, row_filter, **options)
        self._row_filter = row_filter
        self._equality: dict[str, EqualityDeletes] = {}

    def to_record_batches(self, tasks: Iterable[FileScanTask]) -> Iterator[pa.RecordBatch]:
        plain = []
        for task in tasks:
            equality = [d for d in task.delete_files if is_equality(d)]
            if equality:
                schema = self._table_metadata.schema()
                self._equality[task.file.file_path] = EqualityDeletes(self._io, schema, equality)
                task = _without(task, set(equality))
            plain.append(task)
        return super().to_record_batches(plain)

    def _record_batches_from_scan_tasks_and_deletes(
        self, tasks: Iterable[FileScanTask], deletes_per_file: dict[str, list[pa.ChunkedArray]]
    ) -> Iterator[pa.RecordBatch]:
        for task in tasks:
            equality = self._equality.get(task.file.file_path)
            if equality is None:
                yield from self._read_task(task, deletes_per_file)
                continue
            projected, schema = self._projected_schema, self._table_metadata.schema()
            missing = [schema.find_field(i) for i in equality.field_ids if i not in projected.field_ids]
            widened = Schema(*projected.fields, *missing)
            read = RowGroupScan(
                self._table_metadata, self._io, widened, self._row_filter, case_sensitive=self._case_sensitive
            )
            names = [field.name for field in projected.fields]
            batches = list(read._read_task(task, deletes_per_file))  # ArrowScan holds a task's batches anyway
            if batches:  # one join per file, not per batch
                rows = pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="permissive")
                yield from equality.drop(rows).select(names).to_batches()

    def _read_task(
        self, task: FileScanTask, deletes_per_file: dict[str, list[pa.ChunkedArray]]
    ) -> Iterator[pa.RecordBatch]:
        schema = self._table_metadata.schema()
        floating = any(
            isinstance(schema.find_type(field_id), (FloatType, DoubleType))
            for field_id in extract_field_ids(self._bound_row_filter)
        )
        in_memory = floating and getattr(task, "nan_prone", True)
        deletes = deletes_per_file.get(task.file.file_path)
        groups = getattr(task, "row_groups", None)
        if groups is None:
            given = {task.file.file_path: deletes or [NO_POSITIONS]} if in_memory else deletes_per_file
            yield from super()._record_batches_from_scan_tasks_and_deletes([task], given)
        else:
            yield from self._row_groups(task, groups, deletes, in_memory)

    def _row_groups(
        self, task: FileScanTask, groups: tuple[int, ...], deletes: list[pa.ChunkedArray] | None, in_memory: bool
    ) -> Iterator[pa.RecordBatch]:
        shifted = _ShiftedDeletes(deletes or [], in_memory) if deletes or in_memory else None
        made: list[Any] = []
        metadata = self._table_metadata
        batches = _limited_reader(groups, made, shifted)(
            io=self._io,
            task=task,
            bound_row_filter=self._bound_row_filter,
            projected_schema=self._projected_schema,
            table_schema=metadata.schema(),
            projected_field_ids=self._projected_field_ids,
            positional_deletes=shifted,
            case_sensitive=self._case_sensitive,
            name_mapping=metadata.name_mapping(),
            partition_spec=metadata.specs().get(task.file.spec_id),
            format_version=metadata.format_version,
            downcast_ns_timestamp_to_us=self._downcast_ns_timestamp_to_us,
            dictionary_columns=self._dictionary_columns,
        )
        first = next(batches, None)  # the fragment is made here, before any row is handed out
        if len(made) != 1 or sorted(rg.id for rg in made[0].row_groups) != list(groups):
            raise RuntimeError(
                f"{task.file.file_path}: pyiceberg did not read the row groups {list(groups)} it was given; this "
                "pyiceberg version's reader is not one indexlib.scans.row_groups supports"
            )
        if first is not None:
            yield first
            yield from batches


def _without(task: FileScanTask, taken: set[Any]) -> FileScanTask:
    """The task without the delete files `taken` (the same row groups and NaN handling)."""
    return RowGroupTask(
        task.file,
        set(task.delete_files) - taken,
        task.residual,
        getattr(task, "row_groups", None),
        getattr(task, "nan_prone", True),
    )


def vector_positions(kept: KeptFile) -> np.ndarray:
    """The whole-file positions a Delta file's deletion vector deletes (none: empty)."""
    vectors = [d.positions for d in kept.deletes if d.positions is not None]
    return np.concatenate(vectors).astype(np.int64) if vectors else np.empty(0, np.int64)


def stored_rows(
    io_properties: dict[str, str],
    path: str,
    row_groups: tuple[int, ...] | None,
    deleted: np.ndarray,
    schema: pa.Schema,
) -> Iterator[pa.Table]:
    """The rows of a data file read by column name, as Spark's and DuckDB's by-name Parquet reads match them (a Delta
    file): `row_groups` alone (None: every one), the rows at whole-file positions `deleted` (its deletion vector)
    dropped, each of `schema`'s columns matched ignoring case, NULL where the file lacks it (added later), cast to
    its type. Read through pyiceberg FileIO with the catalog's storage properties, as the build reads Delta files;
    no filter reaches the reader, so no row is lost to footer statistics."""
    from pyiceberg.io import load_file_io

    with load_file_io(io_properties, path).new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        metadata = parquet.metadata
        starts = np.cumsum([0] + [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)])
        names = {name.lower(): name for name in parquet.schema_arrow.names}
        columns = [names[f.name.lower()] for f in schema if f.name.lower() in names]
        for g in range(metadata.num_row_groups) if row_groups is None else row_groups:
            table = parquet.read_row_group(g, columns=columns)
            if len(deleted):
                positions = np.arange(starts[g], starts[g + 1])
                table = _without_views(table).filter(pa.array(~np.isin(positions, deleted)))
            yield _as_stored(table, schema)


def _without_views(table: pa.Table) -> pa.Table:
    """string_view / binary_view columns (delta-rs writes them) as large_string / large_binary: pyarrow 26's filter
    has no kernel for view types (found by tests/test_scan_rows.py); `_as_stored` casts to the table's types after."""
    plain = {pa.types.is_string_view: pa.large_string(), pa.types.is_binary_view: pa.large_binary()}
    fields = [
        pa.field(f.name, next((kind for test, kind in plain.items() if test(f.type)), f.type), f.nullable, f.metadata)
        for f in table.schema
    ]
    return table.cast(pa.schema(fields)) if fields != list(table.schema) else table


def _as_stored(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The file's columns as the table's stored columns: matched by name ignoring case, a column the file lacks
    (added later) NULL, each cast to the table's type."""
    by_name = {name.lower(): name for name in table.column_names}
    return pa.table(
        [
            table.column(by_name[f.name.lower()]).cast(f.type)
            if f.name.lower() in by_name
            else pa.nulls(table.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )
