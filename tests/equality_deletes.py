"""Iceberg tables with equality delete files written as their real writers write them, and Spark's own read of them.

Flink upserts and CDC pipelines write equality deletes with Iceberg Java's writers; Spark writes none. So the table is
shared between two catalogs over the same SQLite file and warehouse: pyiceberg's SQL catalog (tests/conftest.py's
`config` and `catalog` fixtures) and, in the shared SparkSession, Iceberg's `SparkCatalog` of type `jdbc` under the
same name (`shared_catalog`: the JDBC rows carry the catalog's name, so both catalogs list the same tables). Spark SQL
writes the data (`append`: a DataFrame's `writeTo(...).append()`) and merge-on-read DELETEs (`delete`: position
delete files on format version 2); `write_equality_deletes` writes one equality delete file with Iceberg Java's own
`GenericFileWriterFactory` (py4j, in Spark's JVM) and commits it with a `RowDelta` through the same JDBC catalog,
so pyiceberg's `catalog.load_table` sees every commit. Spark's Iceberg reader applies every delete file itself
(Iceberg's `DeleteFileIndex` and `DeleteFilter`): `oracle` is its read of one snapshot, the rows and the data files
that hold them (`_file`), the truth the index's scans are checked against.

Python values reach Iceberg's generic records as their Java types: py4j passes a Python int as an Integer, so values
are stored through typed one-element Java arrays (`Long[]`, `Float[]`, ...: py4j converts on store) and set with
`GenericRecord.set` called by reflection, which keeps the boxed value in the JVM.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

MERGE_ON_READ = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}
# the Java class a value of each Iceberg primitive type is stored as in a generic record (py4j converts to it)
_BOXED = {
    "INTEGER": "java.lang.Integer",
    "LONG": "java.lang.Long",
    "FLOAT": "java.lang.Float",
    "DOUBLE": "java.lang.Double",
    "BOOLEAN": "java.lang.Boolean",
    "STRING": "java.lang.String",
    "DECIMAL": "java.math.BigDecimal",
}
Rows = pa.Table | Sequence[Mapping[str, Any]]


@contextlib.contextmanager
def shared_catalog(spark: Any, config: Any) -> Iterator[str]:
    """Iceberg's Spark catalog over the SQLite catalog and warehouse of `config` (a pyiceberg SQL catalog with a
    `sqlite:///` uri), named as pyiceberg's catalog is; yields that name. The name's cached catalog is dropped from
    Spark's `CatalogManager` on entry and exit (Spark makes a catalog once per name, on first use, and keeps it), and
    the session's settings of that name are restored on exit, so each test and later modules get their own. Table
    caching is off: every Spark query loads the table as the JDBC catalog has it, after commits made in the JVM."""
    name = config.catalog_name
    props = config.catalog_properties
    if not props.get("uri", "").startswith("sqlite:///") or not props.get("warehouse", "").startswith("file://"):
        raise ValueError("shared_catalog needs a pyiceberg SQL catalog on a sqlite:/// file, with a local warehouse")
    database = props["uri"].removeprefix("sqlite:///")
    warehouse = props["warehouse"].removeprefix("file://")
    settings = {
        f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{name}.type": "jdbc",
        f"spark.sql.catalog.{name}.uri": f"jdbc:sqlite:{database}",
        f"spark.sql.catalog.{name}.warehouse": f"file:{warehouse}",
        f"spark.sql.catalog.{name}.cache-enabled": "false",
    }
    saved = {key: spark.conf.get(key, None) for key in settings}
    _forget_catalog(spark, name)
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield name
    finally:
        _forget_catalog(spark, name)
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _forget_catalog(spark: Any, name: str) -> None:
    """Drop Spark's cached catalog plugin `name` (`CatalogManager.catalogs`, private: read by reflection)."""
    manager = spark._jsparkSession.sessionState().catalogManager()
    field = manager.getClass().getDeclaredField("catalogs")
    field.setAccessible(True)
    field.get(manager).remove(name)


def create_table(
    spark: Any, table: str, columns: str, partitioned_by: str | None = None, format_version: int = 2
) -> None:
    """`CREATE TABLE table (columns) USING iceberg`, merge-on-read (Spark's DELETE writes position delete files on
    format version 2)."""
    properties = {"format-version": str(format_version), **MERGE_ON_READ}
    spark.sql(
        f"CREATE TABLE {table} ({columns}) USING iceberg "
        + (f"PARTITIONED BY ({partitioned_by}) " if partitioned_by else "")
        + "TBLPROPERTIES ("
        + ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
        + ")"
    )


def _pylist(rows: Rows) -> list[dict[str, Any]]:
    return rows.to_pylist() if isinstance(rows, pa.Table) else [dict(r) for r in rows]


def append(spark: Any, table: str, rows: Rows) -> int:
    """Append `rows` (in the table's current columns) as Spark writes them: one task, `writeTo(table).append()`, one
    data file per partition. Returns the new snapshot's id."""
    schema = spark.table(table).schema
    data = [tuple(row.get(f.name) for f in schema.fields) for row in _pylist(rows)]
    spark.createDataFrame(data, schema).coalesce(1).writeTo(table).append()
    return current_snapshot(spark, table)


def delete(spark: Any, table: str, where: str) -> int:
    """Spark SQL's DELETE (merge-on-read tables: a position delete file per data file it deletes from). Returns the
    new snapshot's id."""
    spark.sql(f"DELETE FROM {table} WHERE {where}")
    return current_snapshot(spark, table)


def java_table(spark: Any, table: str) -> Any:
    """The Iceberg Java `Table` Spark's catalog loads for `table` (`Spark3Util.loadIcebergTable`), current now."""
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)


def current_snapshot(spark: Any, table: str) -> int:
    return int(java_table(spark, table).currentSnapshot().snapshotId())


class _Records:
    """Iceberg generic records (`org.apache.iceberg.data.GenericRecord`) made from Python values in Spark's JVM."""

    def __init__(self, spark: Any) -> None:
        self.jvm = spark._jvm
        self.gateway = spark.sparkContext._gateway
        lang = self.jvm.java.lang
        types = self.gateway.new_array(lang.Class, 2)
        types[0] = lang.Integer.TYPE
        types[1] = lang.Class.forName("java.lang.Object")
        loader = lang.Thread.currentThread().getContextClassLoader()  # the one that has spark.jars
        record_class = lang.Class.forName("org.apache.iceberg.data.GenericRecord", True, loader)
        self.setter = record_class.getMethod("set", types)

    def record(self, struct: Any, values: Mapping[str, Any]) -> Any:
        """A record of `struct` (an Iceberg `Types.StructType`) holding `values` by field name; every field must be
        given (None: NULL)."""
        record = self.jvm.org.apache.iceberg.data.GenericRecord.create(struct)
        fields = struct.fields()
        for pos in range(fields.size()):
            field = fields.get(pos)
            if field.name() not in values:
                raise ValueError(f"no value for {field.name()!r} in {dict(values)}")
            self.set(record, pos, field.type(), values[field.name()])
        return record

    def set(self, record: Any, pos: int, iceberg_type: Any, value: Any) -> None:
        """`record.set(pos, value)` with `value` as the Java object Iceberg's generic writers take for the type."""
        lang = self.jvm.java.lang
        args = self.gateway.new_array(lang.Object, 2)
        args[0] = pos
        if value is not None:
            type_id = iceberg_type.typeId().name()
            if type_id in _BOXED:
                held = self.gateway.new_array(self._class(_BOXED[type_id]), 1)
                held[0] = value.quantize(Decimal(1).scaleb(-iceberg_type.scale())) if type_id == "DECIMAL" else value
                lang.System.arraycopy(held, 0, args, 1, 1)  # stays in the JVM: a Long stays a Long
            elif type_id == "DATE":
                args[1] = self.jvm.java.time.LocalDate.parse(value.isoformat())
            elif type_id == "TIMESTAMP" and iceberg_type.shouldAdjustToUTC():
                args[1] = self.jvm.java.time.OffsetDateTime.parse(value.astimezone(dt.UTC).isoformat())
            elif type_id == "TIMESTAMP":
                args[1] = self.jvm.java.time.LocalDateTime.parse(value.isoformat())
            else:
                raise ValueError(f"no Java value for Iceberg type {iceberg_type.toString()}")
        self.setter.invoke(record, args)

    def _class(self, name: str) -> Any:
        found = self.jvm
        for part in name.split("."):
            found = getattr(found, part)
        return found


def write_equality_deletes(
    spark: Any,
    table: str,
    rows: Rows,
    equality_columns: Sequence[str],
    partition: Mapping[str, Any] | None = None,
    *,
    spec_id: int | None = None,
    data: Rows | None = None,
) -> str:
    """Write ONE equality delete file of `rows` (each holding a value, None for NULL, of every column of
    `equality_columns`, named as the table's current schema names them) with Iceberg Java's
    `GenericFileWriterFactory`, into the table's data location as Iceberg's writers name files (`OutputFileFactory`),
    under the partition spec `spec_id` (default: the current one) and its `partition` (partition field name ->
    partition value; None for an unpartitioned spec: a global delete), and commit it in a `RowDelta` in the JVM.
    `data`: rows (every column of the table) of a data file of the same partition added by the same commit, as a
    Flink upsert commits its inserts beside its deletes (same data sequence number: the delete does not apply to
    them). Returns the delete file's location."""
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    gateway = spark.sparkContext._gateway
    records = _Records(spark)
    jtable = java_table(spark, table)
    schema = jtable.schema()
    spec = jtable.spec() if spec_id is None else jtable.specs().get(spec_id)
    if spec is None:
        raise ValueError(f"{table} has no partition spec {spec_id}")
    field_ids = gateway.new_array(jvm.int, len(equality_columns))
    for n, column in enumerate(equality_columns):
        field = schema.findField(column)
        if field is None:
            raise ValueError(f"{table} has no column {column!r}")
        field_ids[n] = field.fieldId()
    delete_schema = schema.select(list(equality_columns))
    parquet = iceberg.FileFormat.PARQUET
    factory = (
        getattr(iceberg.data, "GenericFileWriterFactory$Builder")(jtable)
        .dataSchema(schema)
        .dataFileFormat(parquet)
        .deleteFileFormat(parquet)
        .equalityFieldIds(field_ids)
        .equalityDeleteRowSchema(delete_schema)
        .build()
    )
    files = iceberg.io.OutputFileFactory.builderFor(jtable, 1, 1).format(parquet).operationId(str(uuid.uuid4())).build()
    if spec.isUnpartitioned():
        if partition:
            raise ValueError(f"spec {spec.specId()} of {table} is unpartitioned: no partition {partition}")
        struct = None
    else:
        struct = records.record(spec.partitionType(), partition or {})

    def new_file() -> Any:
        return files.newOutputFile() if struct is None else files.newOutputFile(spec, struct)

    writer = factory.newEqualityDeleteWriter(new_file(), spec, struct)
    try:
        for row in _pylist(rows):
            writer.write(records.record(delete_schema.asStruct(), row))
    finally:
        writer.close()
    delete_file = writer.toDeleteFile()
    commit = jtable.newRowDelta()
    if data is not None:
        data_writer = factory.newDataWriter(new_file(), spec, struct)
        try:
            for row in _pylist(data):
                data_writer.write(records.record(schema.asStruct(), row))
        finally:
            data_writer.close()
        commit = commit.addRows(data_writer.toDataFile())
    commit.addDeletes(delete_file).commit()
    return str(delete_file.location())


def comparable(value: Any) -> Any:
    """A value as every reader's rows are compared: NaN spelt so that it equals itself, instants in UTC."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def arrow_rows(table: pa.Table) -> Counter:
    """The rows of an Arrow table as a multiset of ((column, value), ...) tuples (tests/iceberg_tables.py `rows`)."""
    return Counter(tuple((k, comparable(v)) for k, v in row.items()) for row in table.to_pylist())


@dataclass(frozen=True)
class Oracle:
    """Spark's own Iceberg read of one snapshot filtered by a WHERE: the rows, and the data files holding them."""

    rows: Counter
    files: frozenset[str]


def oracle(spark: Any, table: str, where: str, snapshot_id: int | None = None) -> Oracle:
    """Spark's Iceberg read of `table` at `snapshot_id` (default: the current snapshot) filtered by `where` (Spark
    SQL): every delete file applied by Iceberg's own reader. One query: the rows with Iceberg's `_file` column."""
    version = f" VERSION AS OF {snapshot_id}" if snapshot_id is not None else ""
    read = spark.sql(f"SELECT *, _file FROM {table}{version} WHERE {where}").toArrow()
    files = frozenset(read.column("_file").to_pylist())
    return Oracle(arrow_rows(read.drop_columns(["_file"])), files)


def oracle_rows(spark: Any, table: str, where: str, snapshot_id: int | None = None) -> Counter:
    """`oracle(...).rows`: Spark's rows of `table` at `snapshot_id` (default: current) matching `where`."""
    return oracle(spark, table, where, snapshot_id).rows
