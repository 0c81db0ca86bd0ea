"""A Spark DataFrame over a lookup's kept files: the rows the unpruned query returns at the version the lookup
answered for.

    df = handle.scan("l_orderkey = 42").to_spark(spark)     # or to_spark(spark, reader="files")
    df = IndexHandle.for_table(config, "db.lineitem").scan(where).to_spark(spark)   # from a configuration

Two readers (`reader_of` says which one a lookup gets, and why; `reader=` chooses):
- CONNECTOR: the format's own Spark reader (Iceberg's runtime, delta-spark) over exactly the kept files
  (scans/spark_connectors.py), so every delete and mapping is applied by the format's own code; formats without one
  there (a format plug-in's) are read by the jar-free reads. The default
  (AUTO) where the session has the runtime, unless the lookup kept some file in part (its row groups: the reads
  below read only those), an Iceberg table has over CONNECTOR_MAX_LIVE_FILES live files (the handover's cost) or,
  for Delta, a kept file may hold NaN where the WHERE looks (below);
- FILES, the jar-free reads, for clusters without the connectors.

The jar-free reads choose one of two ways per kept file (`routes` says which and why, per file):
- Spark's own Parquet reader where that is exact, for files read whole (Spark's Parquet reader cannot be told which
  row groups to read: a file the lookup kept some row groups of, `KeptFile.row_groups`, goes through one of the
  Python data sources below, which read those alone): an Iceberg file without delete files whose columns map to the
  current schema as pyiceberg's reader maps them, by field id or, for files imported without field ids
  (`add_files`), through the table's name mapping (`schema.name-mapping.default`): each current column read from the
  file column of its field under the stored name and type, cast where the type was promoted (int -> long, float ->
  double), NULL where the file predates the column (`layout_of` says where that is not certain: such files go
  through pyiceberg); one read per layout. And every file read by name (`FileReads.PARQUET_BY_NAME`: Delta; its
  partition values added as typed literal columns, one read per partition; its deleted positions, for Delta read by
  delta-rs on the driver, dropped by an anti-join on Spark's own `_metadata.file_path` and `_metadata.row_index`,
  `_delta_vectors`). Files that may hold
  NaN in a floating-point column the WHERE names (scans/pushdown.py) are not read by it when filtered: it would
  skip their row groups by statistics that leave NaN out; files that may hold a zero there are read by it with its
  dictionary and Bloom filtering off (`Read.dictionaries`): those hold -0.0 and 0.0 apart;
- otherwise (Iceberg delete files, NaN-prone files, footers `layout_of` cannot map exactly) pyiceberg's own reader,
  per file with its delete files, inside
  Spark tasks through PySpark's Python data source API (`_PyicebergFiles`): pyiceberg applies the field-id mapping,
  identity partition values and position deletes / deletion vectors, so no deleted row is returned; of a file kept
  in part, only its kept row groups (scans/row_groups.py);
- files read by name kept in part (Delta): their kept row groups read with pyarrow inside Spark tasks
  (`_RowGroupFiles`), columns matched by name as Spark's read matches them, their deleted positions dropped by
  whole-file position, partition values added as for plain reads.

The filter is the user's WHERE, transpiled by sqlglot from the handle's dialect to Spark SQL, applied by Spark;
files the lookup proved all-match are read without it. The pyiceberg reads also push the filter down when it has an
exact pyiceberg translation (scans/pyiceberg.py `row_filter`).

What each path needs on Spark's executors: the connectors their jars in the session; Spark's own Parquet reader
nothing of this package; the Python data sources (`IN_PYTHON_WORKERS`) this package and its dependencies importable
by Spark's Python workers. `reader_of` asks the workers once per session (`python_workers`) when a lookup's read
needs them, and where they cannot import the package takes the connector (AUTO) or refuses in one line naming the
fix, before any read runs; `explain_reads` (`Scan.explain(spark)`) and `spark_needs` (the scan's repr) say which
path a lookup takes. Paths are handed to Spark as names, never patterns (`literal`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import pickle
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyiceberg import expressions as ice
from pyiceberg.io.pyarrow import UTC_ALIASES, pyarrow_to_schema, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.table.name_mapping import NameMapping
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type, to_arrow_schema
from pyspark.sql.types import DataType, StructField, StructType

from indexlib.errors import UnsupportedFeature, UserError
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock
from indexlib.scans.pushdown import nan_prone, zero_prone
from indexlib.scans.pyiceberg import row_filter
from indexlib.scans.row_groups import RowGroupScan, selected, stored_rows, task_of, vector_positions
from indexlib.scans.spark_connectors import connector_frame, format_of, has_runtime
from indexlib.scans.where import where_sql
from indexlib.sources.base import FileReads, IcebergFiles, KeptFile, ParquetByName

if TYPE_CHECKING:
    from indexlib.scans.scan import Scan

_log = logging.getLogger(__name__)
PARQUET = "parquet"
PYICEBERG = "pyiceberg"
ROW_GROUPS = "row groups"  # Delta files the lookup kept some row groups of: pyarrow in Spark tasks (_RowGroupFiles)
IN_PYTHON_WORKERS = (PYICEBERG, ROW_GROUPS)  # the routes read by Python data sources: the workers import this package
_PACKAGE = "indexlib"
AUTO, CONNECTOR, FILES = "auto", "connector", "files"  # the readers (module docstring)
# AUTO's limit for Iceberg's reader: handing it the kept files plans the snapshot in the JVM and picks the kept tasks
# over py4j, ~1 ms per live file (7-9 s at 10,000 files, measured on a loaded machine; scans/spark_connectors.py)
CONNECTOR_MAX_LIVE_FILES = 1000
_CONNECTOR_NAMES = {"iceberg": "Iceberg's Spark runtime", "delta": "delta-spark"}


def to_spark(scan: Scan, spark: SparkSession, reader: str = AUTO) -> DataFrame:
    """The scan target "spark" (`scans/scan.py`): the DataFrame of the scan's kept files, with its columns and its
    limit (`reader`: AUTO, CONNECTOR or FILES, module docstring)."""
    _check_reader(reader)
    frame = from_lookup(spark, scan.result, scan.dialect, scan.clock, reader)
    columns = scan.columns()
    frame = frame if columns is None else frame.select(*(F.col("`" + c.replace("`", "``") + "`") for c in columns))
    return frame if scan.limit is None else frame.limit(scan.limit)


@dataclass(frozen=True)
class Reader:
    """The reader a lookup's DataFrame is read by (CONNECTOR or FILES) and why, in words; for FILES, the route of
    each kept file (`routes`), as `reader_of` found them."""

    how: str
    why: str
    routes: dict[str, Route] | None = dataclasses.field(default=None, compare=False, repr=False)
    warning: str | None = dataclasses.field(default=None, compare=False)  # logged by `from_lookup` (one line)


def reader_of(spark: SparkSession, result: LookupResult, dialect: str | None = None, reader: str = AUTO) -> Reader:
    """The reader `from_lookup` reads `result` with (`reader`: what was asked; `dialect`: the lookup's).

    Where the jar-free reads would read a kept file inside Spark's Python workers (`IN_PYTHON_WORKERS`) and those
    workers cannot import this package (`python_workers`), AUTO takes the format's own reader where the session has
    it; otherwise a UserError says so in one line, naming the fix, before any read is planned."""
    chosen = _preferred(spark, result, dialect, reader)
    if chosen.how == CONNECTOR:
        return chosen
    found = routes(result, dialect)
    needing = in_python_workers(found)
    workers = python_workers(spark) if needing else None
    if workers is None or workers.ready:
        return dataclasses.replace(chosen, routes=found)
    why = f"Spark's Python workers ({workers.python}) cannot import {_PACKAGE} ({workers.error})"
    fix = "ship the package to the executors (make dist: --archives or --py-files; docs/how-to/spark-cluster.md)"
    connector = _CONNECTOR_NAMES.get(format_of(result))
    if reader == AUTO and _connector_refusal(spark, result) is None:
        warning = f"table {result.table}: {why}: read by {connector} instead; for the jar-free reads, {fix}"
        return Reader(CONNECTOR, f"{why}, which the jar-free reads of {_counted(needing)} need", warning=warning)
    instead = f", or read with {connector} in the session (reader='connector'; make jars)" if connector else ""
    raise UserError(
        f"table {result.table}: {_counted(needing)} are read inside Spark's Python workers, and {why}: {fix}{instead}"
    )


def _preferred(spark: SparkSession, result: LookupResult, dialect: str | None, reader: str) -> Reader:
    """The reader `reader_of` takes when Spark's Python workers import this package."""
    _check_reader(reader)
    if reader == FILES:
        return Reader(FILES, "asked for")
    refusal = _connector_refusal(spark, result)
    if refusal is not None:
        if reader == CONNECTOR:
            raise refusal.error
        return Reader(FILES, refusal.why)
    if reader == CONNECTOR:
        return Reader(CONNECTOR, "asked for")
    connector = format_of(result)
    if connector == "iceberg" and result.files_total > CONNECTOR_MAX_LIVE_FILES:
        return Reader(
            FILES, f"{result.files_total} live files: handing the kept ones to Iceberg's reader costs ~1 ms each"
        )
    # from here on the kept files' paths alone: the connector needs no delete file of ours (delta-rs cannot list the
    # deletion vectors of some tables, e.g. with type widening; delta-spark reads them)
    if any(result.needed_row_groups(path) is not None for path in result.files):
        return Reader(FILES, "some files kept in part: the jar-free reads read their kept row groups only")
    if connector == "delta" and nan_prone(result, dialect):
        return Reader(FILES, "a kept file may hold NaN where the WHERE looks: Spark's Parquet reader would skip it")
    return Reader(CONNECTOR, f"{_CONNECTOR_NAMES[connector]} in the Spark session")


@dataclass(frozen=True)
class _Refusal:
    why: str  # why AUTO reads jar-free
    error: UserError  # what reader='connector' raises


def _connector_refusal(spark: SparkSession, result: LookupResult) -> _Refusal | None:
    """Why the format's own reader cannot read `result` in this session; None where it can."""
    connector = format_of(result)
    if connector not in _CONNECTOR_NAMES:
        why = f"no Spark connector reads {connector} tables"
        return _Refusal(why, UserError(f"table {result.table}: reader 'connector': {why}"))
    name = _CONNECTOR_NAMES[connector]
    if not has_runtime(spark, connector):
        return _Refusal(
            f"no {name} in the Spark session",
            UserError(
                f"table {result.table}: reader 'connector' needs {name} in the Spark session "
                "(make jars; delta-spark also its session extension)"
            ),
        )
    if (
        connector == "delta"
        and any(f.name.lower() == "_metadata" for f in _spark_schema(result).fields)
        and any(k.deletes for k in result.kept_files)
    ):
        # delta-spark reads deletion vectors through Spark's hidden `_metadata` struct, which a column of that name
        # hides: its read of a file with a vector fails (ClassCastException) where the jar-free reads return the rows
        return _Refusal(
            "deletion vectors and a column named _metadata, which delta-spark's own reads use",
            UnsupportedFeature(
                f"table {result.table}: delta-spark cannot read deletion vectors of a table with a column named "
                "_metadata"
            ),
        )
    return None


def _check_reader(reader: str) -> None:
    if reader not in (AUTO, CONNECTOR, FILES):
        raise UserError(f"reader {reader!r}: one of {AUTO!r}, {CONNECTOR!r}, {FILES!r}")


@dataclass(frozen=True)
class Read:
    """One group of kept files read the same way: `how` (PARQUET, PYICEBERG or ROW_GROUPS), with the filter or not
    (all-match), for Iceberg files read by Spark's Parquet reader their `layout` (`layout_of`), and for Delta the
    (column, value) partition pairs every file of the group shares."""

    how: str  # PARQUET, PYICEBERG or ROW_GROUPS
    filtered: bool
    files: tuple[KeptFile, ...]
    partition: tuple[tuple[str, Any], ...] = ()
    layout: Layout | None = None
    dictionaries: bool = True  # whether Spark's Parquet reader may skip row groups by dictionary and Bloom filter


def plan(
    result: LookupResult,
    nan_files: frozenset[str] = frozenset(),
    zero_files: frozenset[str] = frozenset(),
    found: dict[str, Route] | None = None,
) -> list[Read]:
    """How each kept file is read (`routes`; see the module docstring), grouped. `nan_files`: kept files that may
    hold NaN where the WHERE looks (scans/pushdown.py): when filtered, they are not read by Spark's Parquet reader,
    which would skip their row groups by statistics that leave NaN out. `zero_files`: kept files that may hold a
    zero there: when filtered, Spark's Parquet reader reads them without its dictionary and Bloom filtering, which
    holds -0.0 and 0.0 apart. `found`: the files' routes where already known (`Reader.routes`, for the same
    `nan_files`)."""
    found = _routes(result, nan_files) if found is None else found
    # files read by name carry (column, value) partition pairs; Iceberg files store theirs
    by_name = result.source is not None and result.source.reads is FileReads.PARQUET_BY_NAME
    groups: dict[tuple[str, bool, tuple[tuple[str, Any], ...], Layout | None, bool], list[KeptFile]] = {}
    for k in result.kept_files:
        route = found[k.file.path]
        filtered = not k.all_match
        dictionaries = not (filtered and route.how == PARQUET and k.file.path in zero_files)
        key = (route.how, filtered, tuple(k.file.partition or ()) if by_name else (), route.layout, dictionaries)
        groups.setdefault(key, []).append(k)
    return [
        Read(how, filtered, tuple(files), part, layout, dictionaries)
        for (how, filtered, part, layout, dictionaries), files in groups.items()
    ]


def from_lookup(
    spark: SparkSession,
    result: LookupResult,
    dialect: str | None = None,
    clock: Clock | None = None,
    reader: str = AUTO,
) -> DataFrame:
    """The DataFrame of a lookup already made (`dialect` and `clock`: those it read the WHERE with, so that
    CURRENT_DATE in the filter is the date it pruned for; `reader`: AUTO, CONNECTOR or FILES)."""
    schema = _spark_schema(result)
    condition = where_sql(result, dialect, clock, "spark")
    chosen = reader_of(spark, result, dialect, reader)
    _log.info("table %s: %d kept files read by %s (%s)", result.table, len(result.files), chosen.how, chosen.why)
    if chosen.warning is not None:
        _log.warning(chosen.warning)
    if chosen.how == CONNECTOR:
        frame = _connector_read(spark, result, schema, condition, dialect)
        if frame is not None:
            return frame
        why = f"the format's own reader reads the table's current columns, not those of version {result.source_version}"
        if reader == CONNECTOR:
            raise UnsupportedFeature(f"table {result.table}: {why}; read it with reader='files'")
        chosen = reader_of(spark, result, dialect, FILES)
        _log.info("table %s: read by %s instead: %s", result.table, chosen.how, why)
    frames = []
    nan_files = nan_prone(result, dialect)
    for read in plan(result, nan_files, zero_prone(result, dialect), chosen.routes):
        frame = _read(spark, result, read, schema, nan_files)
        frames.append(frame.filter(condition) if read.filtered else frame)
    if not frames:
        return spark.createDataFrame([], schema)
    return reduce(DataFrame.unionByName, frames)


def _connector_read(
    spark: SparkSession, result: LookupResult, schema: StructType, condition: str, dialect: str | None
) -> DataFrame | None:
    """The kept files through the format's own reader, filtered unless every one of them is all-match; None where
    that reader's columns are not the lookup's (Iceberg's reads a scan of an earlier snapshot with the table's
    current schema: a column renamed, added or dropped since). Iceberg's
    staged scan pushes no filter into its Parquet reader; Delta's file source does, and Spark's Parquet reader skips
    row groups by statistics that leave NaN out and by dictionaries that hold -0.0 and 0.0 apart, so where a kept
    file may hold NaN or a zero the filter is made one nondeterministic conjunct, which Spark keeps above the scan:
    `OR uuid() = ''` is never true, so the rows are the same, NULL included (`OR rand() < 0` is not: Spark's
    optimizer folds it away and pushes the rest)."""
    if not result.files:
        return spark.createDataFrame([], schema)
    frame = connector_frame(spark, result)
    if frame.columns != schema.fieldNames():
        return None
    if set(result.files) <= set(result.all_match):
        return frame
    if format_of(result) == "delta" and (nan_prone(result, dialect) or zero_prone(result, dialect)):
        return frame.filter(F.expr(f"({condition}) OR uuid() = ''"))
    return frame.filter(condition)


def _spark_schema(result: LookupResult) -> StructType:
    source = result.source
    if source is None:
        raise UserError(f"table {result.table}: the lookup holds no source state to read rows from")
    if source.reads is FileReads.PARQUET_BY_NAME:
        arrow = cast(ParquetByName, source).arrow_schema
    else:
        arrow = schema_to_pyarrow(cast(IcebergFiles, source).table.metadata.schema(), include_field_ids=False)
    try:
        return from_arrow_schema(arrow)
    except (TypeError, ValueError) as exc:
        raise UserError(f"table {result.table}: a column type Spark cannot read from Arrow ({exc})") from None


def _read(
    spark: SparkSession, result: LookupResult, read: Read, schema: StructType, nan_files: frozenset[str]
) -> DataFrame:
    if read.how == PYICEBERG:
        return _pyiceberg_frame(spark, result, read, schema, nan_files)
    if read.layout is not None:
        return _parquet_frame(spark, read, schema)
    source = cast(ParquetByName, result.source)  # reads without a layout are by name (`_routes`)
    source.check_read_by_name([k.file.path for k in read.files])
    columns = [f for f in schema.fields if f.name not in dict(read.partition)]
    # each column as the files store it (column mapping: physical names, nested ones too), then named as the table
    # names it: a nested type cast to the table's (Spark casts structs field by field, by position)
    physical = source.physical_names
    files_schema = from_arrow_schema(source.physical_schema)
    stored = StructType([files_schema[physical[f.name]] for f in columns])
    if read.how == ROW_GROUPS:
        frame = _row_groups_frame(spark, result, read, stored)
    else:
        paths = [k.file.path for k in read.files]
        frame = _parquet_reader(spark, read).schema(stored).parquet(*map(literal, paths))
        frame = _delta_vectors(spark, frame, read.files)
    frame = frame.select(
        *[
            F.col(f"`{physical[f.name]}`").cast(f.dataType).alias(f.name)
            if stored[physical[f.name]].dataType != f.dataType
            else F.col(f"`{physical[f.name]}`").alias(f.name)
            for f in columns
        ]
    )
    if not read.partition:
        return frame
    types = {f.name: f.dataType for f in schema.fields}
    for column, value in read.partition:
        frame = frame.withColumn(column, F.lit(value).cast(types[column]))
    return frame.select(*schema.fieldNames())


# -- which Iceberg files Spark's Parquet reader reads exactly ----------------------------------------------------


@dataclass(frozen=True)
class Column:
    """Where one current column's values are in a file Spark reads: the file column `stored` (as the footer spells
    it), read as `stored_type` and cast to the column's current type where they differ (a promotion); NULL where
    `stored` is None (a column added after the file was written)."""

    stored: str | None
    stored_type: DataType | None = None


Layout = tuple[Column, ...]  # one per field of the current schema, in its order


@dataclass(frozen=True)
class Route:
    """How one kept file is read (`how`: PARQUET, PYICEBERG or ROW_GROUPS) and why, in words (the per-file report of
    `routes`); `layout`: the file's columns for Spark's Parquet reader (Iceberg files read by it)."""

    how: str
    why: str
    layout: Layout | None = None


def routes(result: LookupResult, dialect: str | None = None) -> dict[str, Route]:
    """Per kept file (by path), the path `from_lookup` reads it by and why (`dialect`: the lookup's)."""
    return _routes(result, nan_prone(result, dialect))


def in_python_workers(found: dict[str, Route]) -> dict[str, Route]:
    """Of `routes`' answer, the files read inside Spark's Python workers (`IN_PYTHON_WORKERS`)."""
    return {path: route for path, route in found.items() if route.how in IN_PYTHON_WORKERS}


def _counted(found: dict[str, Route]) -> str:
    """'3 kept files (NaN-prone 2, delete files 1)': how many, and why, most common first."""
    whys: dict[str, int] = {}
    for route in found.values():
        whys[route.why] = whys.get(route.why, 0) + 1
    ranked = sorted(whys.items(), key=lambda item: -item[1])
    listed = ", ".join(f"{why} {n}" for why, n in ranked[:3]) + (", ..." if len(ranked) > 3 else "")
    return f"{len(found)} kept file{'s' if len(found) != 1 else ''} ({listed})"


def explain_reads(spark: SparkSession, result: LookupResult, dialect: str | None = None, reader: str = AUTO) -> str:
    """What `from_lookup` will read `result` with in this session, and what each read needs on Spark's executors
    (`Scan.explain(spark)`): the reader and why, the kept files per route, whether the Python workers are ready."""
    out = [f"spark reads (to_spark, reader={reader!r})"]
    try:
        chosen = reader_of(spark, result, dialect, reader)
    except UserError as exc:
        return "\n".join([*out, f"  refused    {exc}"])
    out.append(f"  reader     {chosen.how}: {chosen.why}")
    if chosen.how == CONNECTOR:
        name = _CONNECTOR_NAMES[format_of(result)]
        out.append(f"  connector  {len(result.files)} kept files by {name}: its jar, nothing of ours on the executors")
        return "\n".join(out)
    found = chosen.routes if chosen.routes is not None else routes(result, dialect)
    for how, needs in _NEEDS.items():
        of_how = {path: route for path, route in found.items() if route.how == how}
        if of_how:
            out.append(f"  {how:<10} {_counted(of_how)}: {needs}")
    if in_python_workers(found):
        workers = python_workers(spark)
        state = f"imports {_PACKAGE}" if workers.ready else f"cannot import {_PACKAGE}: {workers.error}"
        out.append(f"  workers    {workers.python} {state}")
    return "\n".join(out)


_NEEDS = {  # what each route of the jar-free reads needs on Spark's executors, in words
    PARQUET: "Spark's own Parquet reader, nothing of ours on the executors",
    PYICEBERG: f"pyiceberg in Spark's Python workers, which import {_PACKAGE} (make dist)",
    ROW_GROUPS: f"pyarrow in Spark's Python workers, which import {_PACKAGE} (make dist)",
}


def spark_needs(result: LookupResult, dialect: str | None = None) -> str:
    """In a few words, what `to_spark` needs on Spark's executors for `result`, known without a session and without
    reading a file (the scan's repr): which kept files the jar-free reads read inside Spark's Python workers because
    of their delete files, kept row groups or NaN. (Iceberg files whose footers Spark's Parquet reader cannot map
    as pyiceberg does, which `explain_reads` counts, are not known here.)"""
    source = result.source
    if source is None or not result.files:
        return "nothing"
    nan_files = nan_prone(result, dialect)
    by_name = source.reads is FileReads.PARQUET_BY_NAME
    found = {
        k.file.path: Route(ROW_GROUPS if by_name else PYICEBERG, why)
        for k in result.kept_files
        for why in [_python_reason(k, nan_files, by_name)]
        if why is not None
    }
    if not found:
        return "Spark's Parquet reader or the format's connector: nothing of ours on the executors"
    return f"{_counted(found)} read in Spark's Python workers ({_PACKAGE} there) unless by the format's connector"


def _python_reason(k: KeptFile, nan_files: frozenset[str], by_name: bool) -> str | None:
    """Why the jar-free reads read `k` inside Spark's Python workers, whatever its footer says; None: not for that."""
    if k.deletes and not by_name:
        return "delete files"
    if selected(k) is not None:
        return "row groups"
    if not k.all_match and k.file.path in nan_files:
        return "NaN-prone"
    return None


def _routes(result: LookupResult, nan_files: frozenset[str]) -> dict[str, Route]:
    source = result.source
    kept = result.kept_files
    by_name = source is not None and source.reads is FileReads.PARQUET_BY_NAME
    found: dict[str, Route] = {}
    candidates = []
    for k in kept:
        why = _python_reason(k, nan_files, by_name)
        if why is not None:
            found[k.file.path] = Route(ROW_GROUPS if by_name else PYICEBERG, why)
        elif by_name:
            found[k.file.path] = Route(PARQUET, "by name")
        else:
            candidates.append(k)
    found.update(_layouts(cast(IcebergFiles, source), candidates))
    return {k.file.path: found[k.file.path] for k in kept}


def _layouts(source: IcebergFiles, kept: Sequence[KeptFile]) -> dict[str, Route]:
    """The routes of `kept` (files without delete files, read whole): Spark's Parquet reader with the file's layout
    where it reads what pyiceberg's reader does, pyiceberg otherwise (`layout_of`)."""
    if not kept:
        return {}
    metadata, io = source.table.metadata, source.table.io
    schema, mapping, specs = metadata.schema(), metadata.name_mapping(), metadata.specs()
    footers = _footers(io, [k.file.path for k in kept])
    found = {}
    for k in kept:
        identity = {p.source_id for p in specs[k.file.spec_id].fields if isinstance(p.transform, IdentityTransform)}
        found[k.file.path] = layout_of(footers[k.file.path], schema, mapping, identity)
    return found


def layout_of(footer: pa.Schema, schema: Schema, mapping: NameMapping | None, identity: set[int]) -> Route:
    """How Spark's by-name Parquet reader returns exactly what pyiceberg's reader returns for a file whose footer
    is `footer`, under the current `schema`: pyiceberg maps the file's columns to fields by field id, or, where any
    column lacks one (files imported with `add_files`), through the table's name `mapping` (pyiceberg's own
    `pyarrow_to_schema`, the function its reader calls, decides); each current field is then the file column of its
    id under its stored name and type, cast to the current type where the type was promoted (int -> long, float ->
    double, a wider decimal: exact casts in Spark too), or NULL where the file has no column of its id. PYICEBERG
    (with the reason) where that is not certain:
    - the mapping fails (a column it does not name) or maps two columns to one field: pyiceberg decides (or fails);
    - two footer names equal but for case: Spark resolves Parquet names ignoring case;
    - a column of a type outside `_SPARK_READS` (Spark reads it otherwise, or pyiceberg converts it: ns or ms
      timestamps, int8/16, dictionaries, fixed, uuid, time) or a changed type other than the promotions above;
    - a nested column, unless the file carries field ids and stores it under the current name and type;
    - an identity-partition source column or a column with an initial default missing: pyiceberg fills them in."""
    names = [name.lower() for name in footer.names]
    if len(set(names)) < len(names):
        return Route(PYICEBERG, "footer names equal but for case")
    by_ids = all(_field_id(f) is not None for f in footer)
    try:
        file_schema = pyarrow_to_schema(footer, mapping, downcast_ns_timestamp_to_us=True)
    except (ValueError, TypeError) as exc:
        return Route(PYICEBERG, f"not mapped by field id or name ({str(exc).splitlines()[0]})")
    stored_by_id: dict[int, Any] = {}
    for position, stored in enumerate(file_schema.fields):
        if stored.field_id in stored_by_id:
            return Route(PYICEBERG, f"two columns for field {stored.field_id}")
        stored_by_id[stored.field_id] = (stored, footer.field(position))
    columns = []
    for field in schema.fields:
        if field.field_id not in stored_by_id:
            if field.field_id in identity:
                return Route(PYICEBERG, f"identity partition column {field.name} not stored")
            if getattr(field, "initial_default", None) is not None:
                return Route(PYICEBERG, f"{field.name} has an initial default")
            columns.append(Column(None))
            continue
        stored, arrow_field = stored_by_id[field.field_id]
        if not field.field_type.is_primitive:
            if not by_ids or stored.name != field.name or stored.field_type != field.field_type:
                return Route(PYICEBERG, f"nested column {field.name}")
            columns.append(Column(stored.name))
            continue
        if not any(accepts(arrow_field.type) for accepts in _SPARK_READS):
            return Route(PYICEBERG, f"{field.name} stored as {arrow_field.type}")
        if stored.field_type == field.field_type:
            columns.append(Column(stored.name))
        elif _promotion(stored.field_type, field.field_type):
            columns.append(Column(stored.name, _spark_type(stored.field_type)))
        else:
            return Route(PYICEBERG, f"{field.name} stored as {stored.field_type}, read as {field.field_type}")
    return Route(PARQUET, "by field id" if by_ids else "by name mapping", tuple(columns))


_SPARK_READS: tuple[Callable[[pa.DataType], bool], ...] = (
    # footer types Spark's Parquet reader returns as the type pyiceberg reads them as, value for value
    pa.types.is_boolean,
    pa.types.is_int32,
    pa.types.is_int64,
    pa.types.is_float32,
    pa.types.is_float64,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_date32,
    pa.types.is_decimal128,
    lambda t: pa.types.is_timestamp(t) and t.unit == "us" and (t.tz is None or t.tz in UTC_ALIASES),
)


def _promotion(stored: IcebergType, current: IcebergType) -> bool:
    """Iceberg's type promotions that a Spark cast carries out value for value."""
    if isinstance(stored, IntegerType):
        return isinstance(current, LongType)
    if isinstance(stored, FloatType):
        return isinstance(current, DoubleType)
    if isinstance(stored, DecimalType) and isinstance(current, DecimalType):
        return stored.scale == current.scale and stored.precision <= current.precision
    return False


def _field_id(field: pa.Field) -> int | None:
    metadata = field.metadata or {}
    value = metadata.get(b"PARQUET:field_id", metadata.get(b"field_id"))
    return int(value) if value is not None else None


def _spark_type(field_type: IcebergType) -> DataType:
    return from_arrow_type(schema_to_pyarrow(field_type, include_field_ids=False))


_FOOTERS: OrderedDict[str, pa.Schema] = OrderedDict()
_FOOTERS_LOCK = threading.Lock()
_FOOTERS_KEPT = 20_000  # data files never change: a footer read once per process


def _footers(io: Any, paths: Sequence[str]) -> dict[str, pa.Schema]:
    """Each file's footer schema (pyarrow's, field ids in the field metadata), read in parallel where not cached."""

    def read(path: str) -> pa.Schema:
        with io.new_input(path).open() as f:
            return pq.read_schema(f)

    with _FOOTERS_LOCK:
        known = {path: _FOOTERS[path] for path in paths if path in _FOOTERS}
    missing = [path for path in dict.fromkeys(paths) if path not in known]
    if missing:
        with ThreadPoolExecutor(max_workers=min(16, len(missing))) as pool:
            read_now = dict(zip(missing, pool.map(read, missing), strict=True))
        with _FOOTERS_LOCK:
            for path, footer in read_now.items():
                _FOOTERS[path] = footer
                while len(_FOOTERS) > _FOOTERS_KEPT:
                    _FOOTERS.popitem(last=False)
        known.update(read_now)
    return known


def _parquet_reader(spark: SparkSession, read: Read) -> DataFrameReader:
    """Spark's Parquet reader for `read`: without parquet-mr's dictionary and Bloom filtering of row groups where
    `read.dictionaries` is False (scans/pushdown.py: they hold -0.0 and 0.0 apart; its statistics do not). Paths
    go to it through `literal`."""
    reader = spark.read
    if not read.dictionaries:
        reader = reader.option("parquet.filter.dictionary.enabled", "false").option(
            "parquet.filter.bloom.enabled", "false"
        )
    return reader


_GLOB = re.compile(r"([{}\[\]*?\\])")  # the characters Spark's `isGlobPath` and Hadoop's glob read as a pattern


def literal(path: str) -> str:
    """`path` as Spark's file sources read it as the name it is, never as a pattern. Spark expands a path holding
    `{ } [ ] * ? \\` as a Hadoop glob (`DataSource.checkAndGlobPathIfNecessary`), so `a[1].parquet` would read
    `a1.parquet` and `c*.parquet` every file starting with c. Each of those characters is escaped with a backslash,
    which Hadoop's glob reads as that character itself; `%` and spaces are characters of a name to Hadoop's `Path`
    already. (Spark's `__globPaths__` option, which turns globbing off, returns every path given once per path
    holding such a character: rows read many times.)"""
    return _GLOB.sub(r"\\\1", path)


def _parquet_frame(spark: SparkSession, read: Read, schema: StructType) -> DataFrame:
    """Iceberg files of one layout through Spark's Parquet reader: their stored columns by their stored names and
    types, each cast and renamed to the current column (NULL where not stored)."""
    assert read.layout is not None
    paths = [k.file.path for k in read.files]
    stored = StructType(
        [
            StructField(column.stored, column.stored_type or field.dataType, True)
            for column, field in zip(read.layout, schema.fields, strict=True)
            if column.stored is not None
        ]
    )
    frame = _parquet_reader(spark, read).schema(stored).parquet(*map(literal, paths))
    columns = []
    for column, field in zip(read.layout, schema.fields, strict=True):
        if column.stored is None:
            value = F.lit(None).cast(field.dataType)
        else:
            value = F.col("`" + column.stored.replace("`", "``") + "`")
            if column.stored_type is not None:
                value = value.cast(field.dataType)
        columns.append(value.alias(field.name))
    return frame.select(*columns)


# -- Delta deletion vectors -------------------------------------------------------------------------------------


_FILE, _POS = "__skipindex_file", "__skipindex_pos"
_BROADCAST_ROWS = 1_000_000  # deleted positions shipped to every task rather than shuffled (~30 MB)


def _delta_vectors(spark: SparkSession, frame: DataFrame, kept: Sequence[KeptFile]) -> DataFrame:
    """`frame` (a plain Parquet read of `kept`) without the rows the files' deletion vectors delete: a left anti-join
    of Spark's own (file, row index) against the deleted positions (`KeptFile.deletes`, read by delta-rs). Spark
    percent-encodes `_metadata.file_path` (`file:/t/p=b%20c/f.parquet`, a '+' left as is); it is decoded back to the
    path the kept file is read by ('+' protected from URL decoding's space), so the keys match exactly."""
    vectors = [(k.file.path, d.positions) for k in kept for d in k.deletes if d.positions is not None]
    if not vectors:
        return frame
    if {name.lower() for name in frame.columns} & {_FILE, _POS}:
        raise UnsupportedFeature(
            f"a Delta table with a column named {_FILE} or {_POS}: its deletion vectors (e.g. of {vectors[0][0]}) "
            "cannot be applied by the Spark scan, which names its own columns so"
        )
    counts = [len(positions) for _, positions in vectors]
    deleted = spark.createDataFrame(
        pa.table(
            {
                _FILE: pa.array(np.repeat(np.array([path for path, _ in vectors], dtype=object), counts), pa.string()),
                _POS: pa.array(np.concatenate([positions for _, positions in vectors]), pa.int64()),
            }
        )
    )
    if sum(counts) <= _BROADCAST_ROWS:
        deleted = F.broadcast(deleted)
    metadata = frame.metadataColumn("_metadata")  # Spark's, even where a data column is named _metadata
    encoded = F.regexp_replace(metadata.getField("file_path"), r"\+", "%2B")
    path = F.regexp_replace(F.url_decode(encoded), "^file:/+", "/")
    keyed = frame.withColumn(_FILE, path).withColumn(_POS, metadata.getField("row_index"))
    return keyed.join(deleted, [_FILE, _POS], "left_anti").drop(_FILE, _POS)


# -- whether Spark's Python workers import this package -----------------------------------------------------------


@dataclass(frozen=True)
class Workers:
    """What Spark's Python workers of a session import (`python_workers`): `ready` when they import this package as
    the Python data sources of the jar-free reads need it; `python`: the interpreter Spark starts them with; `error`:
    otherwise, what importing raised there, in one line."""

    python: str
    ready: bool
    error: str = ""


_WORKERS: dict[tuple[Any, ...], Workers] = {}
_WORKERS_LOCK = threading.Lock()
_RAISED = re.compile(r"^\s*((?:\w+\.)*\w*(?:Error|Exception)\b.*)$", re.MULTILINE)


def python_workers(spark: SparkSession) -> Workers:
    """Whether the Python data sources of the jar-free reads (`_PyicebergFiles`, `_RowGroupFiles`) can run in this
    session: one row read through `_WorkersProbe`, a Python data source of this module, so Spark's Python workers
    unpickle it as they unpickle those (importing this module, hence pyiceberg, pyarrow and numpy), on the
    interpreter and with the files Spark gives them (`spark.pyspark.python` / `PYSPARK_PYTHON`, `--archives`,
    `--py-files`, `addPyFile`). One small job (1-2 s once the workers run), once per session, interpreter, shipped
    files and worker environment (what PySpark hands each Python function it registers): a file shipped later asks
    again."""
    context = spark.sparkContext
    key = (
        context.applicationId,
        context.pythonExec,
        tuple(context._python_includes or ()),
        tuple(sorted(context.environment.items())),
    )
    with _WORKERS_LOCK:
        known = _WORKERS.get(key)
    if known is not None:
        return known
    try:
        spark.dataSource.register(_WorkersProbe)
        (row,) = spark.read.format(_WorkersProbe.name()).load().collect()
        found = Workers(row.python, True)
    except PySparkException as exc:  # the workers' traceback, as Spark reports it (PYTHON_DATA_SOURCE_ERROR)
        raised = _RAISED.findall(str(exc))
        error = raised[-1].strip() if raised else str(exc).strip().splitlines()[0]
        found = Workers(context.pythonExec, False, error)
    except Py4JJavaError as exc:  # Spark could not start them (no such interpreter)
        found = Workers(context.pythonExec, False, str(exc.java_exception.toString()).splitlines()[0])
    with _WORKERS_LOCK:
        _WORKERS[key] = found
    return found


class _WorkersProbe(DataSource):
    """One row, read in Spark's Python workers: unpickling this class imports this module there."""

    @classmethod
    def name(cls) -> str:
        return "skipindex_workers_probe"

    def schema(self) -> str:
        return "python string"

    def reader(self, schema: StructType) -> DataSourceReader:
        return _WorkersProbeReader()


class _WorkersProbeReader(DataSourceReader):
    def read(self, partition: InputPartition) -> Iterator[tuple[str]]:
        yield (sys.executable,)


# -- pyiceberg inside Spark tasks -------------------------------------------------------------------------------


def _pyiceberg_frame(
    spark: SparkSession, result: LookupResult, read: Read, schema: StructType, nan_files: frozenset[str]
) -> DataFrame:
    """The rows of `read.files` read by pyiceberg in Spark tasks; with the exact pyiceberg filter where there is one,
    applied in memory to the files in `nan_files` (scans/row_groups.py)."""
    table = cast(IcebergFiles, result.source).table  # PYICEBERG reads are Iceberg's (`_routes`)
    pushed: ice.BooleanExpression = ice.AlwaysTrue()
    if read.filtered:
        try:
            pushed = row_filter(result)  # exact: pyiceberg drops rows early; Spark's filter still decides
        except UserError:
            pushed = ice.AlwaysTrue()
    tasks = [task_of(k, pushed, k.file.path in nan_files) for k in read.files]  # each: its kept row groups alone
    slots = 2 * spark.sparkContext.defaultParallelism
    payload = _ReadPayload(table.metadata, table.io, pushed, tasks, _groups(tasks, slots), schema.json())
    spark.dataSource.register(_PyicebergFiles)
    return spark.read.format(_PyicebergFiles.name()).schema(schema).option("payload", payload.encode()).load()


@dataclass
class _ReadPayload:
    """What a Spark task needs to read its file through pyiceberg, shipped as a data source option."""

    metadata: Any
    io: Any
    row_filter: ice.BooleanExpression
    tasks: Sequence[FileScanTask]
    groups: list[tuple[int, ...]]  # positions in `tasks`: one Spark partition each
    schema_json: str

    def encode(self) -> str:
        return base64.b64encode(pickle.dumps(self)).decode("ascii")

    @staticmethod
    def decode(text: str) -> _ReadPayload:
        return pickle.loads(base64.b64decode(text))  # noqa: S301 (written by this module's driver side)


class _PyicebergFiles(DataSource):
    """Partitions are groups of kept files (`_groups`); each reads its files with their delete files through
    pyiceberg's `ArrowScan`."""

    @classmethod
    def name(cls) -> str:
        return "skipindex_pyiceberg_files"

    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(_ReadPayload.decode(self.options["payload"]).schema_json))

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PyicebergReader(_ReadPayload.decode(self.options["payload"]), schema)


class _PyicebergReader(DataSourceReader):
    def __init__(self, payload: _ReadPayload, schema: StructType) -> None:
        self.payload = payload
        self.arrow_schema = to_arrow_schema(schema)  # timestamp_utc: Spark TIMESTAMP as tz=UTC

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(group) for group in self.payload.groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        payload = self.payload
        scan = RowGroupScan(payload.metadata, payload.io, payload.metadata.schema(), payload.row_filter)
        for batch in scan.to_record_batches([payload.tasks[i] for i in partition.value]):
            yield batch.select(self.arrow_schema.names).cast(self.arrow_schema)


def _groups(tasks: Sequence[Any], slots: int) -> list[tuple[int, ...]]:
    """The tasks' positions (anything with `file.file_size_in_bytes`) in at most `slots` groups of about equal bytes
    (largest first into the lightest): a Spark task of the Python data source costs ~0.1-0.2 s however small its
    file, so one per file is not."""
    bins: list[tuple[int, list[int]]] = [(0, []) for _ in range(max(1, min(slots, len(tasks))))]
    for i in sorted(range(len(tasks)), key=lambda i: -tasks[i].file.file_size_in_bytes):
        size, members = min(bins, key=lambda b: b[0])
        bins.remove((size, members))
        bins.append((size + tasks[i].file.file_size_in_bytes, [*members, i]))
    return [tuple(sorted(members)) for _, members in bins if members]


# -- Delta files read in part: pyarrow inside Spark tasks -------------------------------------------------------


def _row_groups_frame(spark: SparkSession, result: LookupResult, read: Read, stored: StructType) -> DataFrame:
    """The kept row groups of Delta files (Spark's Parquet reader cannot be told which row groups to read): their
    stored columns, by name as Spark's by-name read matches them, rows their deletion vectors delete dropped."""
    files = [_PartFile(k.file.path, selected(k), vector_positions(k), k.file.file_size_in_bytes) for k in read.files]
    slots = 2 * spark.sparkContext.defaultParallelism
    source = cast(ParquetByName, result.source)  # ROW_GROUPS reads are by name (`_routes`)
    payload = _PartsPayload(dict(source.io_properties), files, _groups(files, slots), stored.json())
    spark.dataSource.register(_RowGroupFiles)
    return spark.read.format(_RowGroupFiles.name()).schema(stored).option("payload", payload.encode()).load()


@dataclass(frozen=True)
class _PartFile:
    path: str
    row_groups: tuple[int, ...] | None  # None: every one
    deleted: np.ndarray  # whole-file positions
    file_size_in_bytes: int

    @property
    def file(self) -> _PartFile:  # what `_groups` weighs
        return self


@dataclass
class _PartsPayload:
    io_properties: dict[str, str]
    files: list[_PartFile]
    groups: list[tuple[int, ...]]
    schema_json: str

    def encode(self) -> str:
        return base64.b64encode(pickle.dumps(self)).decode("ascii")

    @staticmethod
    def decode(text: str) -> _PartsPayload:
        return pickle.loads(base64.b64decode(text))  # noqa: S301 (written by this module's driver side)


class _RowGroupFiles(DataSource):
    """Partitions are groups of files; each reads the kept row groups of its files with pyarrow (through pyiceberg
    FileIO with the catalog's storage properties, as the build reads Delta files)."""

    @classmethod
    def name(cls) -> str:
        return "skipindex_row_group_files"

    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(_PartsPayload.decode(self.options["payload"]).schema_json))

    def reader(self, schema: StructType) -> DataSourceReader:
        return _RowGroupReader(_PartsPayload.decode(self.options["payload"]), schema)


class _RowGroupReader(DataSourceReader):
    def __init__(self, payload: _PartsPayload, schema: StructType) -> None:
        self.payload = payload
        self.arrow_schema = to_arrow_schema(schema)  # timestamp_utc: Spark TIMESTAMP as tz=UTC

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(group) for group in self.payload.groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for i in partition.value:
            part = self.payload.files[i]
            for table in stored_rows(
                self.payload.io_properties, part.path, part.row_groups, part.deleted, self.arrow_schema
            ):
                yield from table.to_batches()
