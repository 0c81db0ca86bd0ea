"""A Spark DataFrame over a lookup's kept files: the rows the unpruned query returns at the version the lookup
answered for, without an Iceberg or Delta runtime in Spark.

    from indexlib.scans.spark import dataframe
    df = dataframe(spark, handle, None, "l_orderkey = 42")   # or dataframe(spark, config, "db.lineitem", where)

Two ways to read a kept file, chosen per file (`plan`):
- plain `spark.read.parquet` where that is exact, for files read whole (Spark's Parquet reader cannot be told which
  row groups to read: a file the lookup kept some row groups of, `KeptFile.row_groups`, goes through one of the
  Python data sources below, which read those alone): an Iceberg file without delete files whose columns carry the
  current schema's field ids under the current names and types (a renamed or promoted column, a dropped and
  re-added name, a file without field ids or missing an identity partition column is not), and every Delta file
  (its partition values added as typed literal columns, one read per partition; rows its deletion vector deletes,
  read by delta-rs on the driver, dropped by an anti-join on Spark's own `_metadata.file_path` and
  `_metadata.row_index`, `_delta_vectors`);
- otherwise (Iceberg delete files, schema evolution) pyiceberg's own reader, per file with its delete files, inside
  Spark tasks through PySpark's Python data source API (`_PyicebergFiles`): pyiceberg applies the field-id mapping,
  identity partition values and position deletes / deletion vectors, so no deleted row is returned; of a file kept
  in part, only its kept row groups (scans/row_groups.py);
- Delta files kept in part: their kept row groups read with pyarrow inside Spark tasks (`_RowGroupFiles`), columns
  matched by name as Spark's read matches them, the rows their deletion vectors delete dropped by whole-file
  position, partition values added as for plain reads.

The filter is the user's WHERE, transpiled by sqlglot from the handle's dialect to Spark SQL, applied by Spark;
files the lookup proved all-match are read without it. The pyiceberg reads also push the filter down when it has an
exact pyiceberg translation (scans/pyiceberg.py `row_filter`).
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg import expressions as ice
from pyiceberg.io.pyarrow import pyarrow_to_schema, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.transforms import IdentityTransform
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from indexlib.errors import UserError
from indexlib.handle import IndexHandle, open_handle
from indexlib.lookup import LookupResult
from indexlib.query.sql import Clock
from indexlib.scans.pushdown import nan_prone
from indexlib.scans.pyiceberg import row_filter
from indexlib.scans.row_groups import RowGroupScan, selected, stored_rows, task_of, vector_positions
from indexlib.scans.where import where_sql
from indexlib.sources.base import KeptFile
from indexlib.sources.delta import DeltaSource
from indexlib.sources.iceberg import IcebergSource

PARQUET = "parquet"
PYICEBERG = "pyiceberg"
ROW_GROUPS = "row groups"  # Delta files the lookup kept some row groups of: pyarrow in Spark tasks (_RowGroupFiles)


def dataframe(spark: SparkSession, config_or_handle: Any, table: str | None, where: str) -> DataFrame:
    """Look `where` (SQL text) up now and return a DataFrame of the matching rows of the kept files at that
    version. `config_or_handle`: an `IndexHandle` (`table` None) or a loaded Config (`table` names the table)."""
    if isinstance(config_or_handle, IndexHandle):
        if table is not None and table != config_or_handle.name:
            raise UserError(f"table {table}: the handle is for {config_or_handle.name}")
        handle = config_or_handle
    else:
        if table is None:
            raise UserError("dataframe(spark, config, table, where): name the table")
        handle = open_handle(config_or_handle, table)
    clock = Clock.system(handle.time_zone)
    return from_lookup(spark, handle.lookup(where, clock), handle.dialect, clock)


@dataclass(frozen=True)
class Read:
    """One group of kept files read the same way: `how` (PARQUET or PYICEBERG), with the filter or not (all-match),
    and for Delta the (column, value) partition pairs every file of the group shares."""

    how: str  # PARQUET, PYICEBERG or ROW_GROUPS
    filtered: bool
    files: tuple[KeptFile, ...]
    partition: tuple[tuple[str, Any], ...] = ()


def plan(result: LookupResult, nan_files: frozenset[str] = frozenset()) -> list[Read]:
    """How each kept file is read (see the module docstring), grouped. `nan_files`: kept files that may hold NaN
    where the WHERE looks (scans/pushdown.py): when filtered, they are not read by Spark's Parquet reader, which
    would skip their row groups by statistics that leave NaN out."""
    source = result.source
    kept = result.kept_files

    def pushable(k: KeptFile) -> bool:
        return k.all_match or k.file.path not in nan_files

    if isinstance(source, DeltaSource):
        groups: dict[tuple[str, bool, tuple[tuple[str, Any], ...]], list[KeptFile]] = {}
        for k in kept:
            how = PARQUET if selected(k) is None and pushable(k) else ROW_GROUPS
            groups.setdefault((how, not k.all_match, tuple(k.file.partition or ())), []).append(k)
        return [Read(how, filtered, tuple(files), part) for (how, filtered, part), files in groups.items()]
    if not isinstance(source, IcebergSource):
        raise UserError(f"table {result.table}: the Spark scan reads Iceberg and Delta tables only")
    exact = _exact_as_parquet(source, [k for k in kept if not k.deletes and selected(k) is None and pushable(k)])
    reads = []
    for how in (PARQUET, PYICEBERG):
        for filtered in (True, False):
            files = tuple(
                k for k in kept if ((k.file.path in exact) == (how == PARQUET)) and k.all_match is not filtered
            )
            if files:
                reads.append(Read(how, filtered, files))
    return reads


def from_lookup(
    spark: SparkSession, result: LookupResult, dialect: str | None = None, clock: Clock | None = None
) -> DataFrame:
    """The DataFrame of a lookup already made (`dialect` and `clock`: those it read the WHERE with, so that
    CURRENT_DATE in the filter is the date it pruned for)."""
    schema = _spark_schema(result)
    condition = where_sql(result, dialect, clock, "spark")
    frames = []
    for read in plan(result, nan_prone(result, dialect)):
        frame = _read(spark, result, read, schema)
        frames.append(frame.filter(condition) if read.filtered else frame)
    if not frames:
        return spark.createDataFrame([], schema)
    return reduce(DataFrame.unionByName, frames)


def _spark_schema(result: LookupResult) -> StructType:
    source = result.source
    if isinstance(source, DeltaSource):
        arrow = pa.schema(source.table.schema().to_arrow())
    else:
        arrow = schema_to_pyarrow(source.table.metadata.schema(), include_field_ids=False)
    try:
        return from_arrow_schema(arrow)
    except (TypeError, ValueError) as exc:
        raise UserError(f"table {result.table}: a column type Spark cannot read from Arrow ({exc})") from None


def _read(spark: SparkSession, result: LookupResult, read: Read, schema: StructType) -> DataFrame:
    if read.how == PYICEBERG:
        return _pyiceberg_frame(spark, result, read, schema)
    stored = StructType([f for f in schema.fields if f.name not in dict(read.partition)])
    if read.how == ROW_GROUPS:
        frame = _row_groups_frame(spark, result, read, stored)
    else:
        paths = [k.file.path for k in read.files]
        frame = _delta_vectors(spark, spark.read.schema(stored).parquet(*paths), read.files)
    if not read.partition:
        return frame
    types = {f.name: f.dataType for f in schema.fields}
    for column, value in read.partition:
        frame = frame.withColumn(column, F.lit(value).cast(types[column]))
    return frame.select(*schema.fieldNames())


# -- which Iceberg files plain Parquet reads exactly ------------------------------------------------------------


def _exact_as_parquet(source: IcebergSource, kept: Sequence[KeptFile]) -> set[str]:
    """The paths among `kept` (files without delete files) whose footers map to the current schema by name and
    type, so Spark's by-name Parquet read returns what pyiceberg's field-id read does."""
    if not kept:
        return set()
    metadata, io = source.table.metadata, source.table.io
    schema = metadata.schema()
    specs = metadata.specs()

    def exact(k: KeptFile) -> bool:
        with io.new_input(k.file.path).open() as f:
            arrow = pq.read_schema(f)
        identity = {p.source_id for p in specs[k.file.spec_id].fields if isinstance(p.transform, IdentityTransform)}
        return _maps_by_name(arrow, schema, identity)

    with ThreadPoolExecutor(max_workers=min(16, len(kept))) as pool:
        verdicts = list(pool.map(exact, kept))
    return {k.file.path for k, ok in zip(kept, verdicts, strict=True) if ok}


def _maps_by_name(arrow: pa.Schema, schema: Schema, identity_sources: set[int]) -> bool:
    try:
        file_schema = pyarrow_to_schema(arrow)
    except ValueError:  # no field ids: pyiceberg reads it through the name mapping
        return False
    by_id = {f.field_id: f for f in file_schema.fields}
    names = {f.name.lower() for f in file_schema.fields}  # Spark resolves Parquet columns case-insensitively
    for field in schema.fields:
        stored = by_id.get(field.field_id)
        if stored is None:
            # absent: NULL in both readers, unless the name is another column's or pyiceberg fills it in
            if field.name.lower() in names or field.field_id in identity_sources:
                return False
            if getattr(field, "initial_default", None) is not None:
                return False
        elif stored.name != field.name or stored.field_type != field.field_type:
            return False
    return True


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
        raise UserError(
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


# -- pyiceberg inside Spark tasks -------------------------------------------------------------------------------


def _pyiceberg_frame(spark: SparkSession, result: LookupResult, read: Read, schema: StructType) -> DataFrame:
    table = result.source.table
    pushed: ice.BooleanExpression = ice.AlwaysTrue()
    if read.filtered:
        try:
            pushed = row_filter(result)  # exact: pyiceberg drops rows early; Spark's filter still decides
        except UserError:
            pushed = ice.AlwaysTrue()
    tasks = [task_of(k, pushed) for k in read.files]  # each reads its kept row groups alone
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
    tasks: list[FileScanTask]
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
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

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
    payload = _PartsPayload(dict(result.source.io_properties), files, _groups(files, slots), stored.json())
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
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(group) for group in self.payload.groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for i in partition.value:
            part = self.payload.files[i]
            for table in stored_rows(
                self.payload.io_properties, part.path, part.row_groups, part.deleted, self.arrow_schema
            ):
                yield from table.to_batches()
