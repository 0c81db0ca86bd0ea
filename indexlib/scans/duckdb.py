"""A DuckDB relation over a lookup's kept files: the rows `SELECT * FROM table WHERE <where>` returns at the version
the lookup answered for, reading only those files.

    handle = IndexHandle.for_iceberg(catalog.load_table("db.t"))    # or IndexHandle.for_delta(path, ...)
    rel = indexlib.scans.duckdb.relation(handle, "k = 42")          # a duckdb.DuckDBPyRelation
    rel.aggregate("count(*)").fetchall()

Which path reads which file (README, "Reading rows through the index"):
- Iceberg, a file without delete files or with position delete files in Parquet: DuckDB's own `read_parquet`, its
  columns mapped to the current schema by Parquet field id (`schema=` parameter: renamed columns, promoted types,
  columns added since are NULL), the deleted positions anti-joined on (file, row number) from the delete files' rows
  for the data files they apply to (pyiceberg's DeleteFileIndex matched them). A table with a name mapping (files
  imported without field ids), or with nested, uuid or fixed columns, reads every file the next way instead, and so
  does a file that leaves an identity-partition column out (Iceberg allows it; pyiceberg fills it in from the
  partition).
- Iceberg, a file with deletion vectors (Puffin blobs DuckDB cannot read), and every file of the tables above:
  pyiceberg's `ArrowScan` applies the deletes into Arrow (unfiltered; DuckDB filters), unioned in; equality delete files are refused with one line (the
  lookup's `kept_files`).
- Delta: DuckDB's `read_parquet` over the kept files (`union_by_name`: a column added later is NULL in older
  files; no Hive partitioning guessed from directory names), joined by file name to each file's partition values
  from its add action (`file.partition`), typed by the table's schema. A table whose protocol enables deletion
  vectors is refused with one line when anything is kept (delta-rs cannot say which files have one).

The filter is the user's WHERE transpiled to DuckDB's dialect with sqlglot (read in `[lookup] dialect`), with
CURRENT_DATE / CURRENT_TIMESTAMP / NOW() fixed to the clock the lookup pruned with; files the lookup proved all-match
are read without it. Every part is cast to the table's schema, so the union and an empty kept list (an empty
relation) have the same columns and types.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa
from pyiceberg import expressions as ice
from pyiceberg import types as it
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.table import FileScanTask
from pyiceberg.transforms import IdentityTransform

from indexlib.errors import UserError
from indexlib.handle import IndexHandle
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock
from indexlib.scans.where import where_sql
from indexlib.sources.base import KeptFile
from indexlib.sources.delta import DeltaSource
from indexlib.sources.iceberg import IcebergSource
from indexlib.sources.iceberg_deletes import data_file_of

_NAME_MAPPING = "schema.name-mapping.default"


def relation(
    table_or_handle: Any, where: str, *, connection: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyRelation:
    """Look `where` (SQL text in the handle's dialect) up now and return a relation over the kept files at that
    version, in `connection` (default: a cursor of this module's in-memory database). `table_or_handle`: an `IndexHandle` (Iceberg or
    Delta; `open_handle(config, table)` makes one from a configuration) or a pyiceberg Table (its index in the
    same catalog)."""
    handle = table_or_handle if isinstance(table_or_handle, IndexHandle) else IndexHandle.for_iceberg(table_or_handle)
    clock = Clock.system(handle.time_zone)
    return relation_of(handle.lookup(where, clock), dialect=handle.dialect, clock=clock, connection=connection)


def relation_of(
    result: LookupResult,
    *,
    dialect: str | None = None,
    clock: Clock | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyRelation:
    """The relation over an answered lookup's kept files. `dialect` and `clock` must be those the lookup parsed
    `where` with (what CURRENT_DATE meant when it pruned), or the filter could ask for rows of files it skipped.
    Default connection: a cursor of one in-memory database of this module's (0.3 ms; a new database costs 10-20
    ms, more than reading one kept file)."""
    con = connection if connection is not None else _own_connection()
    source = result.source
    if source is None:
        raise UserError(f"table {result.table}: the lookup holds no source state to read rows from")
    filter_sql = residual_sql(result, dialect, clock)
    if isinstance(source, IcebergSource):
        return _iceberg(con, result, source, filter_sql)
    if isinstance(source, DeltaSource):
        return _delta(con, result, source, filter_sql)
    raise UserError(f"table {result.table}: no DuckDB reader for {type(source).__name__}")


_DATABASE: list[duckdb.DuckDBPyConnection] = []
_DATABASE_LOCK = threading.Lock()


def _own_connection() -> duckdb.DuckDBPyConnection:
    """A new cursor (its own connection: the Arrow tables it registers are its own) of a shared in-memory database."""
    with _DATABASE_LOCK:
        if not _DATABASE:
            _DATABASE.append(duckdb.connect(database=":memory:"))
        return _DATABASE[0].cursor()


def residual_sql(result: LookupResult, dialect: str | None, clock: Clock | None) -> str:
    """The lookup's WHERE in DuckDB's dialect, the current date and time replaced by the lookup's clock."""
    return where_sql(result, dialect, clock, "duckdb")


def quote_name(name: str) -> str:
    """A SQL identifier, quoted for DuckDB (and ANSI)."""
    return '"' + name.replace('"', '""') + '"'


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _union(parts: Sequence[duckdb.DuckDBPyRelation]) -> duckdb.DuckDBPyRelation:
    rel = parts[0]
    for part in parts[1:]:
        rel = rel.union(part)  # UNION ALL: rows are a multiset
    return rel


# Iceberg ----------------------------------------------------------------------------------------------------------

_PRIMITIVES: dict[type, str] = {
    it.BooleanType: "BOOLEAN",
    it.IntegerType: "INTEGER",
    it.LongType: "BIGINT",
    it.FloatType: "FLOAT",
    it.DoubleType: "DOUBLE",
    it.DateType: "DATE",
    it.TimeType: "TIME",
    it.TimestampType: "TIMESTAMP",
    it.TimestamptzType: "TIMESTAMPTZ",
    it.StringType: "VARCHAR",
    it.BinaryType: "BLOB",
}


def _duckdb_type(field_type: it.IcebergType) -> str | None:
    """The DuckDB type a column is read as; None for types the native read does not map (nested, uuid, fixed,
    nanosecond timestamps): the table's files are then read through pyiceberg."""
    if isinstance(field_type, it.DecimalType):
        return f"DECIMAL({field_type.precision}, {field_type.scale})"
    return _PRIMITIVES.get(type(field_type))


def _iceberg(
    con: duckdb.DuckDBPyConnection, result: LookupResult, source: IcebergSource, filter_sql: str
) -> duckdb.DuckDBPyRelation:
    table = source.table  # the metadata the lookup loaded: the read stays at that snapshot
    schema = table.metadata.schema()
    types = {field.name: _duckdb_type(field.field_type) for field in schema.fields}
    native_ok = all(types.values()) and _NAME_MAPPING not in table.metadata.properties
    columns = ", ".join(
        f"CAST({quote_name(name)} AS {kind}) AS {quote_name(name)}" if native_ok else quote_name(name)
        for name, kind in types.items()
    )
    kept = result.kept_files  # raises the one-line error for equality delete files
    mapping = ", ".join(
        f"{field.field_id}: {{name: {_string(field.name)}, type: {_string(str(types[field.name]))}, default_value: NULL}}"
        for field in schema.fields
    )
    # DuckDB's own columns of a read: a table column of the same name would be shadowed, so such tables' files
    # with deletes go through pyiceberg
    anti_join_ok = not {name.lower() for name in types} & {"filename", "file_row_number"}
    parts = []
    for all_match in (False, True):
        group = [k for k in kept if k.all_match is all_match]
        native = [k for k in group if native_ok and (not k.deletes or (anti_join_ok and _native_deletes(k)))]
        native = _holding_identity_columns(con, table, native)
        through = [k for k in group if k not in native]
        where = "" if all_match else f" WHERE {filter_sql}"
        if native:
            paths = ", ".join(_string(_local(k.file.path)) for k in native)
            read = f"read_parquet([{paths}], schema = MAP {{{mapping}}}, filename = true, file_row_number = true)"
            deleted = _deleted_positions(con, native)
            if deleted:
                read += f" d ANTI JOIN ({deleted}) x ON d.filename = x.file_path AND d.file_row_number = x.pos"
            parts.append(con.sql(f"SELECT {columns} FROM {read}{where}"))
        if through:
            arrow = _through_pyiceberg(table, schema, through)
            parts.append(con.from_arrow(arrow).query("kept", f"SELECT {columns} FROM kept{where}"))
    if not parts:
        empty = schema_to_pyarrow(schema, include_field_ids=False).empty_table()
        parts.append(con.from_arrow(empty).query("kept", f"SELECT {columns} FROM kept"))
    return _union(parts)


def _holding_identity_columns(con: duckdb.DuckDBPyConnection, table: Any, kept: list[KeptFile]) -> list[KeptFile]:
    """The files of `kept` that store every identity-partition source column. Iceberg lets a writer leave those
    columns out of its data files (their values are in the partition); pyiceberg's reader fills them in, a native
    read would give NULL, so the files without them are read through pyiceberg. Costs one footer read per file,
    and only for tables with an identity partition field."""
    identity = {
        field.source_id
        for spec in table.metadata.partition_specs
        for field in spec.fields
        if isinstance(field.transform, IdentityTransform)
    }
    if not identity or not kept:
        return kept
    paths = ", ".join(_string(_local(k.file.path)) for k in kept)
    stored: dict[str, set[int]] = {}
    for name, field_id in con.sql(f"SELECT file_name, field_id FROM parquet_schema([{paths}])").fetchall():
        stored.setdefault(name, set()).add(field_id)
    return [k for k in kept if identity <= stored.get(_local(k.file.path), set())]


def _native_deletes(kept: KeptFile) -> bool:
    """Position delete files in Parquet DuckDB applies itself (an anti-join on file and row position); deletion
    vectors (Puffin blobs) and other formats go through pyiceberg."""
    return all(d.kind == "position" and d.file_format.upper() == "PARQUET" for d in kept.deletes)


def _deleted_positions(con: duckdb.DuckDBPyConnection, kept: list[KeptFile]) -> str | None:
    """SQL for the (file_path, pos) rows deleted from `kept`: only the rows each delete file holds for a data file
    it applies to (pyiceberg's DeleteFileIndex matched them by partition and sequence number)."""
    pairs = [(_local(d.path), k.file.path, _local(k.file.path)) for k in kept for d in k.deletes]
    if not pairs:
        return None
    applies = _register(
        con, pa.table(dict(zip(["delete_file", "data_file", "read_as"], zip(*pairs, strict=True), strict=True)))
    )
    paths = ", ".join(_string(path) for path in sorted({p[0] for p in pairs}))
    return (
        f"SELECT a.read_as AS file_path, p.pos FROM read_parquet([{paths}], union_by_name = true, filename = true) p "
        f"JOIN {applies} a ON p.filename = a.delete_file AND p.file_path = a.data_file"
    )


def _local(path: str) -> str:
    """A path as DuckDB opens it and names it in `filename`: a local file without its `file:` scheme. A delete
    file's `file_path` is matched to the data file's path as the manifest spells it."""
    for scheme in ("file://", "file:"):
        if path.startswith(scheme):
            return path[len(scheme) :]
    return path


def _through_pyiceberg(table: Any, schema: Any, kept: list[KeptFile]) -> pa.Table:
    """The files' rows with their delete files applied by pyiceberg, unfiltered: the SQL filter runs in DuckDB, so
    predicates pyiceberg has no exact row filter for still read right."""
    tasks = [FileScanTask(data_file_of(k.file), {d.data_file for d in k.deletes}) for k in kept]
    return ArrowScan(table.metadata, table.io, schema, ice.AlwaysTrue()).to_table(tasks)


# Delta ------------------------------------------------------------------------------------------------------------


def _delta(
    con: duckdb.DuckDBPyConnection, result: LookupResult, source: DeltaSource, filter_sql: str
) -> duckdb.DuckDBPyRelation:
    """DuckDB reads the kept files itself (`union_by_name`: a column added later is NULL in older files; no Hive
    guessing from directory names) and joins each file's partition values, typed, from its add action."""
    schema = pa.schema(source.table.schema().to_arrow())
    kept = result.kept_files
    _refuse_deletion_vectors(source, kept)
    empty = _register(con, schema.empty_table())  # the table's columns and types, no rows
    partitions = set(source.partition_columns)
    data = [name for name in schema.names if name not in partitions]
    columns = ", ".join(
        f"{'v' if name in partitions else 'f'}.{quote_name(name)} AS {quote_name(name)}" for name in schema.names
    )
    parts = []
    for all_match in (False, True):
        group = [k for k in kept if k.all_match is all_match]
        if not group:
            continue
        values = {name: [dict(k.file.partition or ()).get(name) for k in group] for name in source.partition_columns}
        files = _register(
            con,
            pa.table(
                {
                    "__file": [k.file.path for k in group],
                    **{n: pa.array([_typed(v) for v in vs], schema.field(n).type) for n, vs in values.items()},
                }
            ),
        )
        paths = ", ".join(_string(k.file.path) for k in group)
        read = (
            f"SELECT * FROM read_parquet([{paths}], union_by_name = true, hive_partitioning = false, filename = true) "
            f"UNION ALL BY NAME SELECT {', '.join(map(quote_name, data))}, NULL::VARCHAR AS filename FROM {empty}"
        )
        where = "" if all_match else f" WHERE {filter_sql}"
        parts.append(
            con.sql(f"SELECT * FROM (SELECT {columns} FROM ({read}) f JOIN {files} v ON f.filename = v.__file){where}")
        )
    if not parts:
        parts.append(con.sql(f"SELECT * FROM {empty}"))
    return _union(parts)


def _register(con: duckdb.DuckDBPyConnection, table: pa.Table) -> str:
    """`table` as a view of the connection under a name of its own, for SQL that reads it."""
    name = f"__skipindex_{uuid.uuid4().hex}"
    con.register(name, table)
    return name


def _typed(value: Any) -> Any:
    """delta-rs gives a timestamp partition value as a naive datetime in UTC; pyarrow needs the zone."""
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def _refuse_deletion_vectors(source: DeltaSource, kept: list[KeptFile]) -> None:
    """delta-rs 1.x neither writes nor applies deletion vectors, nor lists them per add action: when the table's
    protocol enables them, any kept file may have one, and reading it would return deleted rows."""
    features = source.table.protocol().reader_features or []
    if kept and "deletionVectors" in features:
        raise UserError(
            f"Delta table {source.name} version {source.current_version()}: the protocol enables deletion vectors, "
            f"which cannot be applied here; {len(kept)} kept file(s) (e.g. {kept[0].file.path}) may have one"
        )
