"""A DuckDB relation over a lookup's kept files: the rows `SELECT * FROM table WHERE <where>` returns at the version
the lookup answered for, reading only those files.

    handle = IndexHandle.for_iceberg(catalog.load_table("db.t"))    # or IndexHandle.for_delta(path, ...)
    rel = handle.scan("k = 42").to_duckdb()                         # a duckdb.DuckDBPyRelation
    rel.aggregate("count(*)").fetchall()

Which path reads which file (docs/how-to/read-rows.md):
- Iceberg, a file without delete files or with position delete files in Parquet: DuckDB's own `read_parquet`, its
  columns mapped to the current schema as pyiceberg maps them: by Parquet field id (`schema=` parameter: renamed
  columns, promoted types, columns added since are NULL), or, for files imported without field ids, through the
  table's name mapping (each file column under the current name of the field it maps to); the deleted positions
  anti-joined on (file, row number) from the delete files' rows for the data files they apply to (pyiceberg's
  DeleteFileIndex matched them).
- Everything else through pyiceberg's `ArrowScan`, which applies the deletes into Arrow (unfiltered; DuckDB
  filters), unioned in: files with deletion vectors (Puffin blobs DuckDB cannot read), every file of a table with
  nested, uuid or fixed columns, a file that leaves an identity-partition column out (Iceberg allows it; pyiceberg
  fills it in from the partition), and a file without field ids the name mapping does not map one to one (`_Layouts`).
  Equality delete files go that way too where DuckDB cannot apply them exactly (`_NativeDeletes`: a compared
  column that is FLOAT or DOUBLE, nested, or a delete file without Parquet field ids): their rows are dropped after
  pyiceberg's read (scans/equality.py). The others DuckDB applies itself: an anti-join `IS NOT DISTINCT FROM` the
  delete file's rows, read by field id, per group of files the same equality deletes apply to.
- Files read by name (`FileReads.PARQUET_BY_NAME`: Delta): DuckDB's `read_parquet` over the kept files
  (`union_by_name`: a column added later is NULL in older files; no Hive partitioning guessed from directory names),
  each column by its physical name, joined by file name to each file's partition values (`file.partition`: Delta's
  from its add action), typed by the table's schema. Deleted positions (Delta's deletion vectors, any storage
  delta-rs reads, read for the kept files by `kept_files`) are anti-joined on (file, row number), all-match files
  included.

The filter is the user's WHERE transpiled to DuckDB's dialect with sqlglot (read in `[lookup] dialect`), with
CURRENT_DATE / CURRENT_TIMESTAMP / NOW() fixed to the clock the lookup pruned with; files the lookup proved all-match
are read without it. Every part has the table's schema, so the union and an empty kept list (an empty relation) have
the same columns and types: a native read is typed by its `schema =` map or, for name-mapped files, by a CAST of the
columns a file stores under another type (a promotion) alone; files of one layout (the same columns, names and types)
are one `read_parquet` bound from its first footer (per call: ~1 ms a layout, not a footer read per file).
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import duckdb
import numpy as np
import pyarrow as pa
from pyiceberg import expressions as ice
from pyiceberg import types as it
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.transforms import IdentityTransform

from indexlib.errors import UnsupportedFeature, UserError
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock
from indexlib.scans.pushdown import nan_prone
from indexlib.scans.row_groups import RowGroupScan, selected, stored_rows, task_of, vector_positions
from indexlib.scans.where import where_sql
from indexlib.sources.base import DeleteFileRef, FileReads, IcebergFiles, KeptFile, ParquetByName

if TYPE_CHECKING:
    from indexlib.scans.scan import Scan


def to_duckdb(scan: Scan, connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
    """The scan target "duckdb" (`scans/scan.py`): the relation over the scan's kept files, with its columns and its
    limit."""
    found = relation_of(scan.result, dialect=scan.dialect, clock=scan.clock, connection=connection)
    columns = scan.columns()
    found = found if columns is None else found.project(", ".join(map(quote_name, columns)))
    return found if scan.limit is None else found.limit(scan.limit)


def record_batches(relation: duckdb.DuckDBPyRelation, batch_size: int) -> pa.RecordBatchReader:
    """The relation's rows as a stream of Arrow record batches of at most `batch_size` rows."""
    if hasattr(relation, "to_arrow_reader"):  # duckdb >= 1.4
        return relation.to_arrow_reader(batch_size)
    return relation.fetch_record_batch(batch_size)


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
    nan_files = nan_prone(result, dialect)
    if source.reads is FileReads.ICEBERG:
        return _iceberg(con, result, cast(IcebergFiles, source), filter_sql, nan_files)
    return _by_name(con, result, cast(ParquetByName, source), filter_sql, nan_files)


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
    con: duckdb.DuckDBPyConnection,
    result: LookupResult,
    source: IcebergFiles,
    filter_sql: str,
    nan_files: frozenset[str],
) -> duckdb.DuckDBPyRelation:
    table = source.table  # the metadata the lookup loaded: the read stays at that snapshot
    schema = table.metadata.schema()
    types = {field.name: _duckdb_type(field.field_type) for field in schema.fields}
    native_ok = all(types.values())
    # native reads come out typed (`_Layouts.read_sql`); pyiceberg's Arrow and the empty table are cast
    columns = ", ".join(
        f"CAST({quote_name(name)} AS {kind}) AS {quote_name(name)}" if native_ok else quote_name(name)
        for name, kind in types.items()
    )
    named = ", ".join(f"d.{quote_name(name)}" for name in types)
    kept = result.kept_files  # with the delete files of each, equality deletes included
    layouts = _Layouts(con, table, schema, types)
    # DuckDB's own columns of a read: a table column of the same name would be shadowed, so such tables' files
    # with deletes or kept row groups go through pyiceberg
    virtual_ok = not {name.lower() for name in types} & _READ_COLUMNS
    parts = []
    for all_match in (False, True):
        group = [k for k in kept if k.all_match is all_match]
        native_deletes = _NativeDeletes(con, schema, types)
        candidates = [
            k
            for k in group
            if native_ok
            and (virtual_ok or (not k.deletes and selected(k) is None))
            and (not k.deletes or native_deletes.applies(k))
        ]
        reads = layouts.native_reads(candidates)
        read_natively = {id(k) for files in reads.values() for k in files}
        through = [k for k in group if id(k) not in read_natively]
        where = "" if all_match else f" WHERE {filter_sql}"
        for projection, mapped in reads.items():
            for (row_groups, prone), by_read in _by_read(mapped, nan_files).items():
                for equality, files in _by_equality_deletes(by_read).items():
                    deleted = _deleted_positions(con, files)
                    read = layouts.read_sql(files, projection, positions=deleted is not None, row_groups=row_groups)
                    if deleted:
                        read += f" ANTI JOIN ({deleted}) x ON d.filename = x.file_path AND d.file_row_number = x.pos"
                    read += "".join(native_deletes.anti_join(d, n) for n, d in enumerate(equality))
                    filtered = "" if all_match else filter_sql
                    parts.append(_filtered(con, f"SELECT {named} FROM {read}", filtered, prone))
        if through:
            arrow = _through_pyiceberg(table, schema, through)
            parts.append(  # duckdb types query() `| None` (for statements without rows): a SELECT gives a relation
                con.from_arrow(arrow).query("kept", f"SELECT {columns} FROM kept{where}")  # type: ignore[arg-type]
            )
    if not parts and native_ok:  # no row: one typed SELECT (an empty Arrow table costs DuckDB two more binds)
        return con.sql(
            f"SELECT {', '.join(f'CAST(NULL AS {kind}) AS {quote_name(n)}' for n, kind in types.items())} LIMIT 0"
        )
    if not parts:
        empty = schema_to_pyarrow(schema, include_field_ids=False).empty_table()
        parts.append(con.from_arrow(empty).query("kept", f"SELECT {columns} FROM kept"))  # type: ignore[arg-type]
    return _union(parts)


_READ_COLUMNS = {"filename", "file_row_number", "file_row_group_number"}
# a read by field id: DuckDB maps the file's columns itself (`schema =`)
BY_FIELD_ID: tuple[()] = ()


class _Layouts:
    """Which kept files DuckDB reads itself, and how their columns map to the current schema, as pyiceberg's
    reader would map them: by Parquet field id when every column of the file carries one; otherwise (files
    imported with `add_files`) through the table's name mapping, a file column taking the field id whose mapped
    names include its name, a field no column maps to being NULL. A file pyiceberg would read differently goes
    through pyiceberg: one with nested columns, a column the mapping does not name, two columns for one field or
    names equal but for case (DuckDB's names are case-insensitive), or without an identity-partition source column
    (pyiceberg fills it in from the partition; a native read would give NULL). Deciding needs each file's footer
    schema, read only for tables with a name mapping or an identity partition, once per file per process (data
    files never change)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, table: Any, schema: Any, types: dict[str, str | None]) -> None:
        self._con = con
        self._schema = schema
        self._types = types
        mapping = table.metadata.name_mapping()
        self._mapped = (
            {name: field.field_id for field in mapping for name in field.names if field.field_id is not None}
            if mapping is not None
            else None
        )
        self._identity = {
            field.source_id
            for spec in table.metadata.partition_specs
            for field in spec.fields
            if isinstance(field.transform, IdentityTransform)
        }

    def native_reads(self, kept: list[KeptFile]) -> dict[Projection, list[KeptFile]]:
        """The files DuckDB reads, grouped by how their columns map: `BY_FIELD_ID`, or per current field the file
        column that holds it and its type there (None: NULL) with the file's columns in their order: files of one
        group have the same columns under the same names and types, so one `read_parquet` binds them from the
        first file's footer alone (no `union_by_name`, which reads every footer at bind)."""
        if not kept:
            return {}
        if self._mapped is None and not self._identity:
            return {BY_FIELD_ID: kept}
        footers = _footer_columns(self._con, [_local(k.file.path) for k in kept])
        projections: dict[_Footer | None, Projection | None] = {}  # files mostly share a handful of footers
        reads: dict[Projection, list[KeptFile]] = {}
        for k in kept:
            footer = footers[_local(k.file.path)]
            if footer not in projections:
                projections[footer] = self._projection(footer)
            projection = projections[footer]
            if projection is not None:
                reads.setdefault(projection, []).append(k)
        return reads

    def _projection(self, footer: _Footer | None) -> Projection | None:
        if footer is None or footer.nested:
            return None
        ids = [field_id for _, field_id, _ in footer.columns]
        if all(field_id is not None for field_id in ids):
            return BY_FIELD_ID if self._identity <= set(ids) else None
        if self._mapped is None:
            return None  # pyiceberg refuses a file without field ids in a table without a name mapping
        names = [name for name, _, _ in footer.columns]
        if len({n.lower() for n in names}) < len(names) or {n.lower() for n in names} & _READ_COLUMNS:
            return None
        by_id: dict[int, tuple[str, str | None]] = {}
        for name, _, duckdb_type in footer.columns:
            field_id = self._mapped.get(name)
            if field_id is None or field_id in by_id:
                return None
            by_id[field_id] = (name, duckdb_type)
        if not self._identity <= by_id.keys():
            return None
        return (tuple(by_id.get(field.field_id) for field in self._schema.fields), footer.columns)

    def read_sql(
        self,
        files: list[KeptFile],
        projection: Projection,
        positions: bool,
        row_groups: tuple[int, ...] | None = None,
    ) -> str:
        """A FROM item `d` of the files' rows under the current column names and types, with `filename` and
        `file_row_number` when `positions` (for the delete anti-join; they cost binding and reading otherwise), of
        `row_groups` alone when given (`_row_groups_sql`; `file_row_number` stays the position in the whole file).
        A stored column is cast only where its type in the file is not the current one (a promotion)."""
        paths = ", ".join(_string(_local(k.file.path)) for k in files)
        virtual = ", filename = true, file_row_number = true" if positions else ""
        only = _row_groups_sql(row_groups)
        if projection == BY_FIELD_ID:
            mapping = ", ".join(
                f"{field.field_id}: {{name: {_string(field.name)}, type: {_string(str(self._types[field.name]))}, "
                "default_value: NULL}"
                for field in self._schema.fields
            )
            read = f"read_parquet([{paths}], schema = MAP {{{mapping}}}{virtual})"
            return f"(SELECT * FROM {read}{only}) d" if only else f"{read} d"
        stored_columns, _ = cast(MappedProjection, projection)  # BY_FIELD_ID returned above
        columns = ", ".join(
            _column_sql(field.name, stored, str(self._types[field.name]))
            for field, stored in zip(self._schema.fields, stored_columns, strict=True)
        )
        return (
            f"(SELECT {columns}{', filename, file_row_number' if positions else ''} FROM read_parquet([{paths}], "
            f"union_by_name = false{virtual}){only}) d"
        )


def _column_sql(name: str, stored: tuple[str, str | None] | None, kind: str) -> str:
    """The current column `name` of type `kind` from the file column `stored` (its name and DuckDB type there)."""
    if stored is None:
        return f"CAST(NULL AS {kind}) AS {quote_name(name)}"
    stored_name, stored_type = stored
    value = quote_name(stored_name)
    if _same_type(stored_type, kind):
        return value if stored_name == name else f"{value} AS {quote_name(name)}"
    return f"CAST({value} AS {kind}) AS {quote_name(name)}"


def _same_type(duckdb_type: str | None, kind: str) -> bool:
    """Whether DuckDB reads a file column (its `parquet_schema` duckdb_type) as `kind` already."""
    if duckdb_type is None:
        return False
    spelt = duckdb_type.upper().replace(" ", "")
    return _TYPE_SPELLINGS.get(spelt, spelt) == kind.upper().replace(" ", "")


_TYPE_SPELLINGS = {"TIMESTAMPWITHTIMEZONE": "TIMESTAMPTZ"}

# (per current field: the file column holding it, with its DuckDB type there, or None; the file's columns)
MappedProjection = tuple[tuple[tuple[str, str | None] | None, ...], tuple[tuple[str, int | None, str | None], ...]]
Projection = MappedProjection | tuple[()]


@dataclass(frozen=True)
class _Footer:
    """A Parquet file's top-level columns in order, (name, field id or None, DuckDB's type for it), and whether any
    is nested."""

    columns: tuple[tuple[str, int | None, str | None], ...]
    nested: bool


_FOOTERS: OrderedDict[str, _Footer] = OrderedDict()
_FOOTERS_LOCK = threading.Lock()
_FOOTERS_KEPT = 100_000  # a few hundred bytes each


def _footer_columns(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, _Footer | None]:
    """Each file's footer schema, from this process's cache or one `parquet_schema` read of the missing ones."""
    with _FOOTERS_LOCK:
        known = {path: _FOOTERS[path] for path in paths if path in _FOOTERS}
    missing = sorted(set(paths) - known.keys())
    if missing:
        rows: dict[str, list[tuple[str, int | None, int | None, str | None]]] = {}
        listed = ", ".join(_string(path) for path in missing)
        query = f"SELECT file_name, name, field_id, num_children, duckdb_type FROM parquet_schema([{listed}])"
        for file_name, name, field_id, children, duckdb_type in con.sql(query).fetchall():
            rows.setdefault(file_name, []).append((name, field_id, children, duckdb_type))
        with _FOOTERS_LOCK:
            for path, elements in rows.items():
                groups = [e for e in elements if e[2]]  # the root and any nested column
                leaves = [e for e in elements if not e[2]]
                footer = _Footer(
                    columns=tuple((name, field_id, duckdb_type) for name, field_id, _, duckdb_type in leaves),
                    nested=len(groups) != 1 or groups[0][2] != len(leaves),
                )
                known[path] = _FOOTERS[path] = footer
                while len(_FOOTERS) > _FOOTERS_KEPT:
                    _FOOTERS.popitem(last=False)
    return {path: known.get(path) for path in paths}


def _by_row_groups(kept: list[KeptFile]) -> dict[tuple[int, ...] | None, list[KeptFile]]:
    """The files by the row groups to read of them (`row_groups.selected`): one read per distinct selection, as
    DuckDB applies a condition on `file_row_group_number` to every file of a read (a per-file condition, `filename
    = ... AND file_row_group_number IN ...` OR ..., is pushed down as the union of the row groups: every file
    would read them all). A read costs ~0.5 ms more per file than one read of many files."""
    groups: dict[tuple[int, ...] | None, list[KeptFile]] = {}
    for k in kept:
        groups.setdefault(selected(k), []).append(k)
    return groups


def _by_read(
    kept: list[KeptFile],
    nan_files: frozenset[str],
    by_row_groups: Callable[[list[KeptFile]], dict[tuple[int, ...] | None, list[KeptFile]]] | None = None,
) -> dict[tuple[tuple[int, ...] | None, bool], list[KeptFile]]:
    """The files by (row groups to read, NaN-prone): one read per distinct selection (`_by_row_groups`), the files
    that may hold NaN where the WHERE looks (`pushdown.nan_prone`) apart from the others."""
    groups: dict[tuple[tuple[int, ...] | None, bool], list[KeptFile]] = {}
    for row_groups, files in (by_row_groups or _by_row_groups)(kept).items():
        for k in files:
            groups.setdefault((row_groups, k.file.path in nan_files), []).append(k)
    return groups


def _filtered(
    con: duckdb.DuckDBPyConnection, read_sql: str, filter_sql: str, nan_prone: bool
) -> duckdb.DuckDBPyRelation:
    """The rows of `read_sql` where `filter_sql` holds ("": all). For files that may hold NaN where the filter looks
    (scans/pushdown.py) the filter is applied to the rows read unfiltered, batch by batch, over Arrow: DuckDB would
    otherwise skip row groups, or fold the filter, by footer statistics that leave NaN out (duckdb/duckdb#25521), and
    an Arrow scan has no statistics and takes no filter. The matching rows are read now and held (memory: those rows
    and one batch); the price is reading every row of those files (docs/benchmarks.md, "Rows with NaN")."""
    if not filter_sql:
        return con.sql(read_sql)
    if not nan_prone:
        return con.sql(f"SELECT * FROM ({read_sql}) WHERE {filter_sql}")
    rows = con.sql(read_sql)
    batches = rows.to_arrow_reader(_BATCH_ROWS) if hasattr(rows, "to_arrow_reader") else rows.fetch_record_batch()
    matcher = con.cursor()  # a connection of its own: `rows` streams from `con` meanwhile
    matched = [
        matcher.from_arrow(pa.Table.from_batches([batch], batches.schema))
        .query("b", f"SELECT * FROM b WHERE {filter_sql}")
        .to_arrow_table()  # type: ignore[union-attr]  # duckdb: query() of a SELECT gives a relation
        for batch in batches
    ]
    return con.from_arrow(pa.concat_tables(matched) if matched else batches.schema.empty_table())


_BATCH_ROWS = 1_048_576  # rows filtered at a time on the NaN path


def _row_groups_sql(row_groups: tuple[int, ...] | None) -> str:
    """The WHERE a `read_parquet` reads only `row_groups` with: DuckDB skips the other row groups without reading
    them (its `file_row_group_number` filter is pushed into the scan)."""
    if row_groups is None:
        return ""
    return f" WHERE file_row_group_number IN ({', '.join(map(str, row_groups))})"


class _NativeDeletes:
    """Which delete files DuckDB applies itself, and how. Position delete files in Parquet: an anti-join on file and
    row position (`_deleted_positions`). Equality delete files in Parquet whose compared columns are top-level
    columns DuckDB reads, stored with Parquet field ids (as Iceberg's writers store them), none FLOAT or DOUBLE: an
    anti-join on those columns `IS NOT DISTINCT FROM` the delete file's rows read by field id (NULL equals NULL, as
    in Iceberg; DuckDB's `0.0 = -0.0`, which Iceberg's Java readers do not hold, is why floating-point columns go
    through pyiceberg, scans/equality.py). Deletion vectors (Puffin blobs) and everything else go through
    pyiceberg."""

    def __init__(self, con: duckdb.DuckDBPyConnection, schema: Any, types: dict[str, str | None]) -> None:
        self._con, self._schema, self._types = con, schema, types
        self._top = {field.field_id: field.name for field in schema.fields}
        self._known: dict[str, bool] = {}  # by equality delete file: DuckDB applies it (decided once per call)

    def applies(self, kept: KeptFile) -> bool:
        if not all(d.kind in ("position", "equality") and d.file_format.upper() == "PARQUET" for d in kept.deletes):
            return False
        return all(self._applies_equality(d) for d in kept.deletes if d.kind == "equality")

    def _applies_equality(self, delete: DeleteFileRef) -> bool:
        if delete.path not in self._known:
            footer = _footer_columns(self._con, [_local(delete.path)])[_local(delete.path)]
            ids = list(delete.data_file.equality_ids or [])
            self._known[delete.path] = not (
                footer is None
                or footer.nested
                or not ids
                or not set(ids) <= {i for _, i, _ in footer.columns}
                or any(i not in self._top or self._types[self._top[i]] in (None, "FLOAT", "DOUBLE") for i in ids)
            )
        return self._known[delete.path]

    def anti_join(self, delete: DeleteFileRef, n: int) -> str:
        """The ANTI JOIN dropping the rows of `d` (the read) that equal one of the equality delete file's rows."""
        ids = list(delete.data_file.equality_ids)
        names = [self._top[i] for i in ids]
        mapping = ", ".join(
            f"{i}: {{name: {_string(f'c{j}')}, type: {_string(str(self._types[name]))}, default_value: NULL}}"
            for j, (i, name) in enumerate(zip(ids, names, strict=True))
        )
        rows = f"SELECT DISTINCT * FROM read_parquet([{_string(_local(delete.path))}], schema = MAP {{{mapping}}})"
        same = " AND ".join(f"d.{quote_name(name)} IS NOT DISTINCT FROM e{n}.c{j}" for j, name in enumerate(names))
        return f" ANTI JOIN ({rows}) e{n} ON {same}"


def _by_equality_deletes(kept: list[KeptFile]) -> dict[tuple[DeleteFileRef, ...], list[KeptFile]]:
    """The files by the equality delete files that apply to them: one read per distinct set."""
    groups: dict[tuple[DeleteFileRef, ...], list[KeptFile]] = {}
    for k in kept:
        groups.setdefault(tuple(d for d in k.deletes if d.kind == "equality"), []).append(k)
    return groups


def _deleted_positions(con: duckdb.DuckDBPyConnection, kept: list[KeptFile]) -> str | None:
    """SQL for the (file_path, pos) rows deleted from `kept`: only the rows each position delete file holds for a
    data file it applies to (pyiceberg's DeleteFileIndex matched them by partition and sequence number)."""
    pairs = [
        (_local(d.path), k.file.path, _local(k.file.path)) for k in kept for d in k.deletes if d.kind == "position"
    ]
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
    """The files' rows (of their kept row groups) with their delete files applied by pyiceberg, unfiltered: the
    SQL filter runs in DuckDB, so predicates pyiceberg has no exact row filter for still read right."""
    return RowGroupScan(table.metadata, table.io, schema, ice.AlwaysTrue()).to_table([task_of(k) for k in kept])


# Parquet by name (Delta) ------------------------------------------------------------------------------------------


def _by_name(
    con: duckdb.DuckDBPyConnection,
    result: LookupResult,
    source: ParquetByName,
    filter_sql: str,
    nan_files: frozenset[str],
) -> duckdb.DuckDBPyRelation:
    """DuckDB reads the kept files itself (`union_by_name`: a column added later is NULL in older files; no Hive
    guessing from directory names), drops the rows their deleted positions name (an anti-join on file and row
    number, as for Iceberg position deletes) and joins each file's partition values, typed (Delta's from its add
    action). DuckDB's file name column is named `_FILE_COLUMN` (a data column may be named `filename`); where a data
    column is named `file_row_number` or `file_row_group_number`, DuckDB's own are hidden by it: such tables' files
    with deleted positions are read by pyarrow (`row_groups.stored_rows`), and their files are read whole."""
    schema = source.arrow_schema
    physical = source.physical_names  # a column's name in the files (column mapping), by its name in the table
    partitions = set(source.partition_columns)
    data = [physical[name] for name in schema.names if name not in partitions]
    names = {n.lower() for n in [*schema.names, *data]}
    if _FILE_COLUMN in names:
        raise UnsupportedFeature(
            f"table {source.name}: a column named {_FILE_COLUMN} hides the DuckDB scan's file name"
        )
    kept = result.kept_files  # each file's deletion vector, read by delta-rs for the kept files alone
    source.check_read_by_name([k.file.path for k in kept])
    stored = pa.schema(
        [source.physical_schema.field(physical[name]) for name in schema.names if name not in partitions]
    )
    empty = _register(con, stored.empty_table())  # the files' columns and types, no rows
    columns = ", ".join(
        f"v.{quote_name(name)} AS {quote_name(name)}"
        if name in partitions
        else f"{_as_named(f'f.{quote_name(physical[name])}', schema.field(name).type, source.physical_schema.field(physical[name]).type)} AS {quote_name(name)}"
        for name in schema.names
    )
    by_row_groups = _by_row_groups if "file_row_group_number" not in names else _whole
    reads = [
        (all_match, row_groups, prone, files)
        for all_match in (False, True)
        for (row_groups, prone), files in _by_read(
            [k for k in kept if k.all_match is all_match], nan_files, by_row_groups
        ).items()
    ]
    parts = []
    for all_match, row_groups, prone, group in reads:
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
        deleted = _deletion_vector_positions(con, group)
        if deleted and "file_row_number" in names:
            read = f"SELECT * FROM {_register(con, _read_by_pyarrow(source, group, stored))}"
        else:
            paths = ", ".join(_string(k.file.path) for k in group)
            read = (
                f"SELECT * FROM read_parquet([{paths}], union_by_name = true, hive_partitioning = false, "
                f"filename = {_string(_FILE_COLUMN)}{', file_row_number = true' if deleted else ''})"
                f"{_row_groups_sql(row_groups)} "
                f"UNION ALL BY NAME SELECT {', '.join(map(quote_name, data))}, NULL::VARCHAR AS {_FILE_COLUMN}"
                f"{', NULL::BIGINT AS file_row_number' if deleted else ''} FROM {empty}"
            )
            if deleted:
                read = (
                    f"SELECT r.* FROM ({read}) r ANTI JOIN {deleted} x "
                    f"ON r.{_FILE_COLUMN} = x.file AND r.file_row_number = x.pos"
                )
        joined = f"SELECT {columns} FROM ({read}) f JOIN {files} v ON f.{_FILE_COLUMN} = v.__file"
        parts.append(_filtered(con, joined, "" if all_match else filter_sql, prone))
    if not parts:
        parts.append(con.sql(f"SELECT * FROM {_register(con, schema.empty_table())}"))  # the table's own columns
    return _union(parts)


_FILE_COLUMN = "__skipindex_file"  # DuckDB's file name column in reads by name (`read_parquet(filename = ...)`)


def _as_named(value: str, kind: pa.DataType, stored: pa.DataType, depth: int = 0) -> str:
    """SQL for `value`, read as the files store it (`stored`: the same type with every struct field under its
    physical name), with every struct field under its name in the table (`kind`). A NULL struct stays NULL; lists
    and maps are rebuilt element by element; a value whose names are the same in both is taken as it is."""
    if kind.equals(stored):
        return value
    if pa.types.is_struct(kind):
        fields = ", ".join(
            f"{quote_name(child.name)} := "
            f"{_as_named(f'struct_extract({value}, {_string(held.name)})', child.type, held.type, depth + 1)}"
            for child, held in zip(kind, stored, strict=True)
        )
        return f"CASE WHEN {value} IS NULL THEN NULL ELSE struct_pack({fields}) END"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element = f"x{depth}"
        inner = _as_named(element, kind.value_type, stored.value_type, depth + 1)
        return f"list_transform({value}, lambda {element}: {inner})"
    if pa.types.is_map(kind):
        entry = f"e{depth}"
        key = _as_named(f"{entry}.key", kind.key_type, stored.key_type, depth + 1)
        item = _as_named(f"{entry}.value", kind.item_type, stored.item_type, depth + 1)
        return f"map_from_entries(list_transform(map_entries({value}), lambda {entry}: struct_pack(key := {key}, value := {item})))"
    return value


def _read_by_pyarrow(source: ParquetByName, kept: list[KeptFile], stored: pa.Schema) -> pa.Table:
    """The kept row groups of files read by name with their deleted positions applied, read by pyarrow, with the file name
    column: for tables whose data columns hide DuckDB's row numbers."""
    tables = [
        table.append_column(_FILE_COLUMN, pa.array([k.file.path] * table.num_rows, pa.string()))
        for k in kept
        for table in stored_rows(source.io_properties, k.file.path, selected(k), vector_positions(k), stored)
    ]
    return pa.concat_tables(tables) if tables else stored.append(pa.field(_FILE_COLUMN, pa.string())).empty_table()


def _whole(kept: list[KeptFile]) -> dict[tuple[int, ...] | None, list[KeptFile]]:
    return {None: kept} if kept else {}


def _deletion_vector_positions(con: duckdb.DuckDBPyConnection, kept: list[KeptFile]) -> str | None:
    """A registered (file, pos) table of the rows the files' deletion vectors delete, `file` spelt as the file is
    read (DuckDB's `filename`); None when none of them has one."""
    vectors = [(k.file.path, d.positions) for k in kept for d in k.deletes if d.positions is not None]
    if not vectors:
        return None
    counts = [len(positions) for _, positions in vectors]
    table = pa.table(
        {
            "file": pa.array(np.repeat(np.array([path for path, _ in vectors], dtype=object), counts), pa.string()),
            "pos": pa.array(np.concatenate([positions for _, positions in vectors]), pa.int64()),
        }
    )
    return _register(con, table)


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
