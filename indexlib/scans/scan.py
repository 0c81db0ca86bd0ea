"""One read through the index, as pyiceberg users know a scan: a lookup made once, then its kept files' rows in
whichever engine the caller reads with.

    scan = handle.scan("l_orderkey IN (1, 2, 3)")       # or indexlib.handle.scan(table, where): a pyiceberg Table
    scan = handle.scan(where, selected_fields=("l_orderkey", "l_comment"))   # only these columns, in every output
    scan = handle.scan(where, limit=10)            # at most 10 of the matching rows, in every output
    scan = handle.scan(where, snapshot_id=s)       # the rows at an older version (Iceberg snapshot, Delta version)
    scan.to_arrow()          # .to_arrow_batch_reader() .to_pandas() .to_duckdb() .to_polars() .to_spark(spark)
    scan.count(); scan.plan_files(); print(scan.explain())

The lookup is made when the scan is (`IndexHandle.scan`), so every output of one scan reads the same files at the
same source version, whatever was committed since, and CURRENT_DATE in the WHERE means what it meant when the lookup
pruned (the scan keeps the lookup's clock and dialect). That version is the source's current one, or the one asked
for (`snapshot_id`, as pyiceberg's `table.scan(snapshot_id=...)`; `IndexHandle.scan` says how it is answered).

Each engine is a scan target: a function `(scan, **options)` returning that engine's object, registered under the
entry-point group `skipindex.scan_targets` (pyproject.toml), as the index kinds are. `to_duckdb()` is
`to("duckdb")`, and a new engine is one module and one registration: `scan.to("<its name>")`. A target returns the
scan's `columns()` of the rows of `result.kept_files` that match, at most `limit` of them. Targets are loaded by name
(`plugins.py`, the one rule for every plug-in group), so this module imports no engine (the handle, which makes
scans, imports none either).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, Any

from pyiceberg.expressions import BooleanExpression

from indexlib import plugins
from indexlib.errors import UserError
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock
from indexlib.sources.base import KeptFile

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

ENTRY_POINT_GROUP = "skipindex.scan_targets"
BUILT_IN = {
    "arrow": "indexlib.scans.arrow:to_arrow",
    "arrow_batch_reader": "indexlib.scans.arrow:to_arrow_batch_reader",
    "count": "indexlib.scans.arrow:count",
    "duckdb": "indexlib.scans.duckdb:to_duckdb",
    "polars": "indexlib.scans.polars:to_polars",
    "spark": "indexlib.scans.spark:to_spark",
}

Target = Callable[..., Any]  # (scan, **options) -> the engine's object


@cache
def targets() -> dict[str, Target]:
    """Every scan target by name: the built-in ones, then the plug-ins of the entry-point group (`plugins.load`: a
    plug-in may not replace a built-in). Loaded once, on the first scan that is read."""
    return plugins.load(ENTRY_POINT_GROUP, BUILT_IN)


@dataclass(frozen=True)
class Scan:
    """A lookup's answer and what its rows are read with (module docstring). Made by `IndexHandle.scan`.

    `dialect` and `clock` are those the lookup read the WHERE with; `row_filter` is the pyiceberg row filter the
    scan was asked with, if it was (then the Arrow outputs apply it with pyiceberg's own semantics, as
    `table.scan(row_filter=...)` does; otherwise the WHERE keeps its SQL meaning in every engine)."""

    result: LookupResult
    dialect: str | None
    clock: Clock
    row_filter: BooleanExpression | None = None
    selected_fields: tuple[str, ...] = ("*",)
    limit: int | None = None  # at most this many of the matching rows (None: all), as pyiceberg's scan `limit`

    def __post_init__(self) -> None:
        self.columns()  # an unknown column is refused when the scan is made, not when it is read
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0
        ):
            raise UserError(
                f"table {self.result.table}: limit {self.limit!r} is not a whole number of rows (0 or more)"
            )

    @property
    def snapshot_id(self) -> int | None:
        """The source version the scan reads (Iceberg: a snapshot id; Delta: a table version): the lookup's."""
        return self.result.source_version

    def columns(self) -> list[str] | None:
        """The top-level columns `selected_fields` names, in the table's order (as pyiceberg's `select` orders
        them), or None for every column ("*"). UserError naming the table and the column for one it lacks."""
        if "*" in self.selected_fields:
            return None
        source = self.result.source
        if source is None:
            raise UserError(f"table {self.result.table}: the lookup holds no source state to read rows from")
        names = [field.name for field in source.schema.fields]
        for name in self.selected_fields:
            if name not in names:
                raise UserError(f"table {self.result.table} has no top-level column {name!r} to select")
        return [name for name in names if name in self.selected_fields]

    def plan_files(self) -> list[KeptFile]:
        """The kept files, each with its delete files, its row groups to read and whether every row matches."""
        return self.result.kept_files

    def __repr__(self) -> str:
        """The table, the WHERE, the files kept and what `to_spark` needs on Spark's executors (`explain(spark)`
        says exactly, for a session)."""
        spark_needs = import_module("indexlib.scans.spark").spark_needs(self.result, self.dialect)
        fields = "" if "*" in self.selected_fields else f", selected_fields={self.selected_fields!r}"
        fields += "" if self.limit is None else f", limit={self.limit}"
        return (
            f"Scan(table={self.result.table!r}, where={self.result.where!r}{fields}, "
            f"files kept {len(self.result.files)} of {self.result.files_total}, to_spark needs: {spark_needs})"
        )

    def explain(self, spark: SparkSession | None = None, reader: str = "auto") -> str:
        """What `skipindex explain` prints for this lookup: the predicate, each stage's files in and out; with a
        Spark session, also how `to_spark(spark, reader)` reads the kept files and what each read needs on Spark's
        executors (`scans.spark.explain_reads`)."""
        text = self.result.explain()
        if spark is None:
            return text
        reads = import_module("indexlib.scans.spark").explain_reads(spark, self.result, self.dialect, reader)
        return f"{text}\n\n{reads}"

    def to(self, target: str, **options: Any) -> Any:
        """The rows in the engine registered as `target` (`targets()`), with that target's `options`."""
        found = targets().get(target)
        if found is None:
            known = ", ".join(sorted(targets()))
            raise UserError(f"table {self.result.table}: no scan target {target!r} (registered: {known})")
        return found(self, **options)

    def to_arrow(self) -> pa.Table:
        return self.to("arrow")

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        return self.to("arrow_batch_reader")

    def to_pandas(self, **kwargs: Any) -> pd.DataFrame:
        return self.to_arrow().to_pandas(**kwargs)

    def to_duckdb(self, connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over the kept files, read when it is (unlike pyiceberg's `to_duckdb`, which registers
        the rows read into Arrow as a table of a connection)."""
        return self.to("duckdb", connection=connection)

    def to_polars(self, connection: duckdb.DuckDBPyConnection | None = None) -> pl.LazyFrame:
        """A LazyFrame reading the DuckDB relation when collected."""
        return self.to("polars", connection=connection)

    def to_spark(self, spark: SparkSession, reader: str = "auto") -> DataFrame:
        """A Spark DataFrame of the rows (`reader`: "auto", "connector" or "files", as `scans.spark` says)."""
        return self.to("spark", spark=spark, reader=reader)

    def count(self) -> int:
        """The matching rows; files proven all-match without deletes are counted from metadata."""
        return int(self.to("count"))
