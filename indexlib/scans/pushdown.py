"""Which kept files an engine may filter inside its own Parquet reader without losing rows that hold NaN.

DuckDB's `read_parquet`, Spark's Parquet reader and pyarrow's (which pyiceberg pushes its filter into) skip row groups
by the min/max statistics of the file's footer, and DuckDB and pyarrow also fold a filter they can decide from them;
Parquet writers leave NaN out of those statistics. So a row group of [1.0, NaN, 2.0] is skipped for `x > 4`, and
one of [NaN, 0.0, -0.0] reads as `x = 0` and loses its NaN row to `isnan(x)` and `x != 0`, though in every engine's
SQL NaN is greater than every number, equal to itself and not equal to 0: the rows are lost (plain Spark, DuckDB and
pyiceberg over the same file lose them too).

The index counts NaN per file (`nan_count`; NaN never enters a bound). A scan pushes its filter into an engine's
Parquet reader only for files where every floating-point column the WHERE names was counted with no NaN; it reads
the other files (`nan_prone`) unfiltered and filters their rows in the engine, where no statistics are consulted.
Unknown means prone: a file the index has no entry for, a column without counts, or a WHERE whose columns cannot be
told. The price is paid only by kept files that hold NaN (or are unindexed) in a column the WHERE names: reading
them without the reader's row-group skipping (docs/benchmarks.md, "Rows with NaN").

Zero has two signs, equal in SQL (`-0.0 = 0.0` is TRUE in every engine). parquet-mr, the Parquet reader of Spark
and of delta-spark, decides a pushed `x = 0`, `x >= 0` or `x IN (0, ...)` against a row group's dictionary and
Bloom filter by Java's `Double.equals` / `Double.compare`, which hold -0.0 and 0.0 apart: a row group whose
dictionary holds -0.0 and not 0.0 is skipped for `x = 0`, and its rows are lost (plain Spark over the same file
loses them too). Its min/max statistics and page indexes are safe: parquet-mr widens a bound of 0.0 to both signs
as it reads them. So Spark reads the files that may hold a zero in a floating-point column the WHERE names
(`zero_prone`: the index's bounds do not exclude 0; unknown means prone) with its dictionary and Bloom filtering
off, or, through delta-spark, with the filter kept above the scan. DuckDB and pyarrow compare floating-point
values as IEEE does (-0.0 == 0.0) and need nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow.compute as pc
from pyiceberg.types import DoubleType, FloatType
from sqlglot import exp
from sqlglot.errors import SqlglotError

from indexlib.lookup import LookupResult
from indexlib.query.model import BoundColumn
from indexlib.scans.where import parsed_where
from indexlib.statistics.provider import ColumnStatistics


def floating_columns_named(result: LookupResult, dialect: str | None) -> list[BoundColumn]:
    """The FLOAT and DOUBLE columns of the table the WHERE names (as engines resolve names: ignoring case); every
    floating-point column when the WHERE cannot be read as SQL here."""
    source = result.source
    if source is None:
        return []
    fields = [f for f in source.schema.fields if isinstance(f.field_type, (FloatType, DoubleType))]
    if not fields:
        return []
    try:
        named = {column.name.lower() for column in parsed_where(result.where, dialect)[0].find_all(exp.Column)}
    except (SqlglotError, AttributeError, TypeError):
        named = {f.name.lower() for f in fields}
    return [BoundColumn(f.field_id, f.name, f.field_type) for f in fields if f.name.lower() in named]


def nan_prone(result: LookupResult, dialect: str | None) -> frozenset[str]:
    """The kept files that may hold NaN in a floating-point column the WHERE names: read them unfiltered."""
    return files_with_nan(result, floating_columns_named(result, dialect))


def files_with_nan(result: LookupResult, columns: list[BoundColumn]) -> frozenset[str]:
    """The kept files that may hold NaN in one of `columns` (floating-point columns of the table)."""
    return _kept_files_that_may_hold(result, columns, lambda statistics: statistics.nan_count != 0)  # -1: unknown


def zero_prone(result: LookupResult, dialect: str | None) -> frozenset[str]:
    """The kept files that may hold a zero (0.0 or -0.0) in a floating-point column the WHERE names: Spark's
    Parquet reader must not skip their row groups by dictionary or Bloom filter (module docstring)."""
    return files_with_zero(result, floating_columns_named(result, dialect))


def files_with_zero(result: LookupResult, columns: list[BoundColumn]) -> frozenset[str]:
    """The kept files that may hold a zero of either sign in one of `columns` (floating-point columns of the
    table): those whose indexed bounds do not exclude 0, or are unknown while the file may hold a number."""

    def may_hold_zero(statistics: ColumnStatistics) -> np.ndarray:
        # IEEE comparisons: -0.0 <= 0 <= -0.0 holds, so a bound of either zero keeps the file
        excludes = pc.fill_null(pc.or_(pc.greater(statistics.lower, 0), pc.less(statistics.upper, 0)), False)
        no_numbers = statistics.comparable_values == 0  # only NULL and NaN (-1, unknown, is not 0)
        return ~(excludes.to_numpy(zero_copy_only=False) | no_numbers)

    return _kept_files_that_may_hold(result, columns, may_hold_zero)


def _kept_files_that_may_hold(
    result: LookupResult, columns: list[BoundColumn], may_hold: Callable[[ColumnStatistics], np.ndarray]
) -> frozenset[str]:
    """The kept files for which `may_hold` is True in one of `columns` (given the columns' statistics over the kept
    files, in `kept_positions` order); every kept file where the index has no statistics."""
    kept = result.files
    if not columns or not kept:
        return frozenset()
    stats = result.state.aligned.stats if result.state is not None else None
    if stats is None or result.state is None:  # (no state: no stats either)
        return frozenset(kept)
    positions = np.asarray(result.kept_positions, dtype=np.int64)
    paths = result.state.live_paths
    prone = np.zeros(len(positions), dtype=bool)
    for column in columns:
        prone |= may_hold(stats.column(column).take(positions))
    return frozenset(paths[i] for i in positions[prone])
