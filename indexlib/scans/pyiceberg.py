"""A pyiceberg scan over a lookup's kept files: what `table.scan(row_filter=...)` returns, without planning.

    scan = indexlib.scans.pyiceberg.scan(table, "l_orderkey = 42")   # a pyiceberg Table or an IndexHandle
    scan.to_arrow()                                                  # or to_pandas(), to_duckdb(...), count()

It builds pyiceberg `FileScanTask`s from the lookup's kept files (each with its delete files, lookup.KeptFile) and
reads them with pyiceberg's own `ArrowScan`, so field-id schema mapping (renamed and promoted columns), identity
partition values and position deletes / deletion vectors are applied by pyiceberg itself; of a file the lookup kept
some row groups of (`KeptFile.row_groups`), only those are read (scans/row_groups.py, deletes shifted to match). `ArrowScan` and
`FileScanTask` are half-internal pyiceberg API: tests/test_pyiceberg_scan.py pins the behaviour against pyiceberg's
own unpruned read. The read is pinned to the snapshot the lookup answered for (the table metadata it loaded). Files
the lookup proved all-match are read without the filter.

The filter is the SQL predicate translated to a pyiceberg row filter with SQL's meaning (`sql_semantics`: negative
leaves unknown on NULL, NaN above every number); a predicate that has no exact translation (a LIKE that is not a
prefix, month(ts) = 3, a FLOAT column, ...) is refused with one line rather than read wrongly.
A pyiceberg row filter is applied as given, so the rows are those of `table.scan(row_filter=...)`; the lookup prunes
with a predicate that holds for at least those rows (query/from_iceberg.py) and proves no file all-match.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
from pyiceberg import expressions as ice
from pyiceberg.expressions.visitors import bind, extract_field_ids
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import FileScanTask
from pyiceberg.types import DoubleType, FloatType

from indexlib.errors import UnsupportedFeature, UserError
from indexlib.handle import IndexHandle
from indexlib.lookup import LookupResult
from indexlib.pruning.iceberg_filter import to_iceberg_filter, to_strict_iceberg_filter
from indexlib.query.model import BoundColumn, Expr
from indexlib.scans.pushdown import files_with_nan
from indexlib.scans.row_groups import RowGroupScan, task_of
from indexlib.sources.base import FileReads, IcebergFiles

if TYPE_CHECKING:
    import duckdb
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table


def scan(
    table_or_handle: IndexHandle | Table,
    where: str | Expr | ice.BooleanExpression,
    *,
    selected_fields: tuple[str, ...] = ("*",),
) -> IndexedScan:
    """Look `where` up now (SQL text, a `query.model` tree, or a pyiceberg row filter as `table.scan(row_filter=)`
    takes) and return a scan of the kept files at that snapshot. `table_or_handle`: a pyiceberg Table (its index
    in the same catalog) or an `IndexHandle`."""
    handle = table_or_handle if isinstance(table_or_handle, IndexHandle) else IndexHandle.for_iceberg(table_or_handle)
    given = where if isinstance(where, ice.BooleanExpression) else None
    return IndexedScan(handle.lookup(where), selected_fields, pyiceberg_filter=given)


def row_filter(result: LookupResult) -> ice.BooleanExpression:
    """The lookup's predicate as an exact pyiceberg row filter, with the SQL meaning the other scans give it
    (`sql_semantics`)."""
    bound = result.bound
    if bound is None:
        raise UserError(f"table {result.table}: the lookup has no bound predicate to filter rows with")
    strict, inclusive = to_strict_iceberg_filter(bound), to_iceberg_filter(bound)
    if strict != inclusive:
        raise UnsupportedFeature(
            f"table {result.table}: {result.where!r} has no exact pyiceberg row filter "
            f"(pyiceberg would read it as {inclusive}); filter the rows of the kept files yourself"
        )
    floating = {
        leaf.column.name  # type: ignore[attr-defined]  # a leaf the condition below found a `column` on
        for leaf in _leaves(bound)
        if isinstance(getattr(getattr(leaf, "column", None), "type", None), (FloatType, DoubleType))
    }
    return sql_semantics(strict, floating)


def _leaves(expr: Expr) -> list[Expr]:
    children = [getattr(expr, name) for name in ("left", "right", "child") if hasattr(expr, name)]
    return [leaf for child in children for leaf in _leaves(child)] if children else [expr]


_NEGATIVE = (ice.NotEqualTo, ice.NotIn, ice.NotStartsWith, ice.NotNaN)
_ABOVE = (ice.GreaterThan, ice.GreaterThanOrEqual)


def sql_semantics(expr: ice.BooleanExpression, floating: set[str]) -> ice.BooleanExpression:
    """A pyiceberg filter of NOT-free SQL leaves (the binder pushed NOT into them), read as SQL reads the WHERE:

    - A row is kept where the WHERE is TRUE; a leaf over NULL is unknown. With NOT pushed into the leaves, AND and
      OR keep a row exactly when they do with every unknown leaf read as FALSE (Kleene logic is monotone), so each
      leaf must be FALSE on NULL. pyiceberg reads a negative leaf (`!=`, NOT IN, NOT STARTS WITH, NOT isnan) as TRUE
      on NULL, and on a file without the column (added since) as TRUE for every row: each gets `IS NOT NULL`.
    - NaN is greater than every number and equal to itself in SQL (Spark, DuckDB), and unordered in pyiceberg's
      comparisons (IEEE): `c > v` and `c >= v` on a FLOAT / DOUBLE column also hold for NaN. `<`, `<=`, `=` and `!=`
      agree on NaN already (the binder refuses NaN literals).
    - -0.0 equals 0.0 in SQL and in pyarrow's comparisons, but not in pyarrow's `is_in`, which pyiceberg's IN and
      NOT IN use (it hashes the bits): a set holding zero also matches the other zero by an `=` (`!=` for NOT IN)."""
    if isinstance(expr, ice.And):
        return ice.And(sql_semantics(expr.left, floating), sql_semantics(expr.right, floating))
    if isinstance(expr, ice.Or):
        return ice.Or(sql_semantics(expr.left, floating), sql_semantics(expr.right, floating))
    zero = isinstance(expr, ice.SetPredicate) and _name(expr) in floating and any(v.value == 0 for v in expr.literals)
    # mypy reads pyiceberg's predicates' constructors as pydantic's keyword-only ones, not as their own __init__
    # (term, literal), apache/iceberg-python#3101: the type: ignores below
    if isinstance(expr, ice.In) and zero:
        return ice.Or(expr, ice.EqualTo(_name(expr), 0.0))  # type: ignore[call-arg, arg-type]
    if isinstance(expr, _NEGATIVE):
        leaf = (
            ice.And(expr, ice.NotEqualTo(_name(expr), 0.0))  # type: ignore[call-arg, arg-type]
            if zero
            else expr
        )
        return ice.And(ice.NotNull(_name(expr)), leaf)  # type: ignore[call-arg, arg-type]
    if isinstance(expr, _ABOVE) and _name(expr) in floating:
        return ice.Or(expr, ice.IsNaN(_name(expr)))  # type: ignore[call-arg, arg-type]
    return expr


def _name(predicate: ice.UnboundPredicate) -> str:
    # pyiceberg types a predicate's term as any `UnboundTerm`; its one kind of unbound term is a `Reference`
    return cast(ice.Reference, predicate.term).name


_PLAIN = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


class IndexedScan:
    """Usable where a pyiceberg `DataScan` is read: `to_arrow`, `to_arrow_batch_reader`, `to_pandas`,
    `to_duckdb`, `to_polars`, `count`; `plan_files()` returns the tasks (no planning: they come from the lookup)."""

    def __init__(
        self,
        result: LookupResult,
        selected_fields: tuple[str, ...] = ("*",),
        pyiceberg_filter: ice.BooleanExpression | None = None,
    ) -> None:
        """`pyiceberg_filter`: the pyiceberg filter the lookup was asked with, applied to the rows as given (pyiceberg's
        own semantics); default: the lookup's SQL predicate translated exactly."""
        if result.source is None or result.source.reads is not FileReads.ICEBERG:
            raise UserError(f"table {result.table}: the pyiceberg scan reads Iceberg tables only")
        self.result = result
        self.snapshot_id = result.source_version
        self.table = cast(
            IcebergFiles, result.source
        ).table  # the metadata the lookup loaded: the scan stays at that snapshot
        self.row_filter = pyiceberg_filter if pyiceberg_filter is not None else row_filter(result)
        self.selected_fields = selected_fields
        self.nan_files = files_with_nan(result, self._floating_columns())

    def _floating_columns(self) -> list[BoundColumn]:
        """The FLOAT and DOUBLE columns the row filter names: kept files that may hold NaN in one are filtered in
        memory, not by pyarrow's Parquet read (scans/row_groups.py)."""
        schema = self.table.metadata.schema()
        named = extract_field_ids(bind(schema, self.row_filter, case_sensitive=True))
        # (a field id of the filter bound to `schema` has a name in it)
        return [
            BoundColumn(field_id, cast(str, schema.find_column_name(field_id)), schema.find_type(field_id))
            for field_id in sorted(named)
            if isinstance(schema.find_type(field_id), (FloatType, DoubleType))
        ]

    def projection(self) -> Schema:
        schema = self.table.metadata.schema()
        return schema if "*" in self.selected_fields else schema.select(*self.selected_fields)

    def plan_files(self) -> list[FileScanTask]:
        """One task per kept file, reading only its kept row groups (`scans.row_groups`)."""
        return [
            task_of(kept, ice.AlwaysTrue() if kept.all_match else self.row_filter, kept.file.path in self.nan_files)
            for kept in self.result.kept_files
        ]

    def _reads(self, tasks: list[FileScanTask]) -> list[tuple[RowGroupScan, list[FileScanTask]]]:
        """Two pyiceberg reads: the all-match files without the filter, the others with it (ArrowScan applies one
        filter to every task it reads)."""
        reads = []
        for matched in (False, True):
            group = [t for t in tasks if (t.residual == ice.AlwaysTrue()) is matched]
            if group:
                row_filter = ice.AlwaysTrue() if matched else self.row_filter
                reads.append((RowGroupScan(self.table.metadata, self.table.io, self.projection(), row_filter), group))
        return reads

    def _schema(self) -> pa.Schema:
        """The projection with plain string and binary types, as pyiceberg reads them from Parquet files (its
        `schema_to_pyarrow` says large ones; its reads mix both, depending on which files held rows)."""
        schema = schema_to_pyarrow(self.projection(), include_field_ids=False)
        return pa.schema([field.with_type(_PLAIN.get(field.type, field.type)) for field in schema])

    def _read(self, tasks: list[FileScanTask]) -> pa.Table:
        """One schema whichever files held rows: pyiceberg's own read gives `large_string` when any batch it read
        had it, so its type would depend on which files the filter left rows in."""
        schema = self._schema()
        tables = [arrow_scan.to_table(group) for arrow_scan, group in self._reads(tasks)]
        if not tables:
            return schema.empty_table()
        table = pa.concat_tables(tables, promote_options="permissive")
        return table if table.schema == schema else table.cast(schema)

    def to_arrow(self) -> pa.Table:
        return self._read(self.plan_files())

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        schema = self._schema()
        reads = self._reads(self.plan_files())

        def batches() -> Iterator[pa.RecordBatch]:
            for arrow_scan, group in reads:
                for batch in arrow_scan.to_record_batches(group):
                    yield batch.cast(schema) if batch.schema != schema else batch

        return pa.RecordBatchReader.from_batches(schema, batches())

    def to_pandas(self, **kwargs: Any) -> Any:
        return self.to_arrow().to_pandas(**kwargs)

    def to_duckdb(
        self, table_name: str, connection: duckdb.DuckDBPyConnection | None = None
    ) -> duckdb.DuckDBPyConnection:
        import duckdb

        con = connection or duckdb.connect(database=":memory:")
        con.register(table_name, self.to_arrow())
        return con

    def to_polars(self) -> Any:
        try:
            import polars as pl
        except ImportError:
            raise UserError("to_polars needs polars installed (pip install polars)") from None
        return pl.from_arrow(self.to_arrow())

    def count(self) -> int:
        """Rows of all-match files without deletes are counted from metadata, as pyiceberg's `count` does."""
        total = 0
        reads = []
        for task in self.plan_files():
            if task.residual == ice.AlwaysTrue() and not task.delete_files:
                total += task.file.record_count
            else:
                reads.append(task)
        if reads:
            total += self._read(reads).num_rows
        return total
