"""The formats' own Spark readers restricted to a lookup's kept files: Iceberg's runtime (`iceberg-spark-runtime`)
and delta-spark, where the Spark session has them, so every delete file, deletion vector, field-id or column mapping
and type promotion of a kept file is applied by the format's own code.

Neither connector prunes by a filter on the file's path (Iceberg pushes no `_file` predicate into its planning, and
Delta's file index lists every file for `_metadata.file_path`: checked against the 1.12 runtime and delta-spark 4.3),
so each is handed the kept files themselves, through the hooks their own maintenance actions read files with:
- Iceberg: the table at the exact metadata file the lookup read (`StaticTableOperations`, Hadoop's FileIO: the same
  file systems the jar-free reads use), its scan planned at the lookup's snapshot, the tasks of the kept files (each
  with its delete files) staged under one id in Iceberg's `ScanTaskSetManager` and `SparkTableCache`, and read by
  `spark.read.format("iceberg").load(id)`: Iceberg's staged scan (`IcebergStagedScan` in the plan), which reads
  those tasks and nothing else, and pushes no filter into the Parquet reader.
- Delta: `DeltaLog.createDataFrame(snapshot, addFiles)` at the lookup's version over the kept `AddFile`s (a
  `TahoeBatchFileIndex` in the plan), what Delta's own MERGE and OPTIMIZE read files with: deletion vectors and
  column mapping applied by Delta's reader.

Both are planned on the driver now, as the jar-free reads are; a kept file missing from the connector's own view of
that version is an error, never a silently smaller answer. Staged Iceberg sets are kept for the last `STAGED_KEPT`
DataFrames made (a DataFrame planned after its set was dropped fails with Iceberg's "no tasks" error, never with
wrong rows); the same kept files at the same snapshot share one set.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from indexlib.errors import UserError
from indexlib.lookup import LookupResult
from indexlib.sources.delta import DeltaSource
from indexlib.sources.iceberg import IcebergSource

STAGED_KEPT = 64  # staged Iceberg task sets kept in the JVM (module docstring)
_RUNTIME_CLASS = {  # a class each connector's jar has: present in the session's JVM means the runtime is there
    "iceberg": "org.apache.iceberg.spark.ScanTaskSetManager",
    "delta": "org.apache.spark.sql.delta.DeltaLog",
}
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_staged: OrderedDict[str, Any] = OrderedDict()  # set id -> the JVM table it is staged for
_staged_lock = threading.Lock()


def format_of(result: LookupResult) -> str:
    """The format of `result`'s table ("iceberg", "delta", ...: `Source.format`), which names its connector."""
    if result.source is None:
        raise UserError(f"table {result.table}: the lookup holds no source state to read rows from")
    return result.source.format


def has_runtime(spark: SparkSession, connector: str) -> bool:
    """Whether the session can read through `connector` ("iceberg" or "delta"): its JVM loads the connector's
    classes, and for delta-spark the session has its extension (its reads refuse to run without it)."""
    from py4j.java_gateway import JavaClass

    if connector not in _RUNTIME_CLASS:
        return False
    found: Any = spark._jvm
    for part in _RUNTIME_CLASS[connector].split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):  # py4j answers a JavaPackage for a name no loaded jar has
        return False
    return connector != "delta" or (
        DELTA_EXTENSION in spark.conf.get("spark.sql.extensions", "")  # type: ignore[operator]  # a str default: a str
    )


def connector_frame(spark: SparkSession, result: LookupResult) -> DataFrame:
    """The rows of `result`'s kept files at its version, every row of them (deleted rows dropped), unfiltered, in
    the table's columns, read by the format's own Spark reader (module docstring)."""
    connector = format_of(result)
    if connector not in _FRAMES:
        raise UserError(f"table {result.table}: no Spark connector reads {connector} tables")
    return _FRAMES[connector](spark, result)


def _iceberg_frame(spark: SparkSession, result: LookupResult) -> DataFrame:
    source = result.source
    assert isinstance(source, IcebergSource)
    jvm: Any = spark._jvm  # a live session's py4j view (pyspark types it Optional; py4j is untyped)
    kept = set(result.files)
    location = source.table.metadata_location
    key = (
        "skipindex-"
        + hashlib.sha256("\n".join([location, str(result.source_version), *sorted(kept)]).encode()).hexdigest()[:32]
    )
    with _staged_lock:
        if key in _staged:
            _staged.move_to_end(key)
        else:
            io = jvm.org.apache.iceberg.hadoop.HadoopFileIO(spark._jsc.hadoopConfiguration())
            table = jvm.org.apache.iceberg.BaseTable(jvm.org.apache.iceberg.StaticTableOperations(location, io), key)
            tasks = _kept_tasks(spark, result, table, kept)
            _singleton(spark, "org.apache.iceberg.spark.SparkTableCache").add(key, table)
            _singleton(spark, "org.apache.iceberg.spark.ScanTaskSetManager").stageTasks(table, key, tasks)
            _staged[key] = table
            while len(_staged) > STAGED_KEPT:
                old, old_table = _staged.popitem(last=False)
                _singleton(spark, "org.apache.iceberg.spark.ScanTaskSetManager").removeTasks(old_table, old)
                _singleton(spark, "org.apache.iceberg.spark.SparkTableCache").remove(old)
        current = {int(field.fieldId()): str(field.name()) for field in _staged[key].schema().columns()}
    frame = spark.read.format("iceberg").load(key)
    # the staged table's schema adds v3 row lineage (`_row_id`, ...): the table's own columns only, each found by
    # field id and named as the lookup's schema names it (an earlier snapshot's may name it otherwise); a column the
    # current schema no longer has is left out (the caller compares the columns)
    return frame.select(
        *[
            F.col(f"`{current[f.field_id]}`").alias(f.name)
            for f in source.table.metadata.schema().fields
            if f.field_id in current
        ]
    )


def _singleton(spark: SparkSession, name: str) -> Any:
    """`name.get()`, Iceberg's accessor of a JVM-wide instance, called by reflection: `SparkTableCache` also has an
    instance method `get(String)`, and py4j picks one of two overloads of a name in no fixed order."""
    gateway: Any = spark.sparkContext._gateway  # as `jvm` in `_iceberg_frame`
    jvm: Any = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName(name, True, loader)
    method = cls.getMethod("get", gateway.new_array(jvm.java.lang.Class, 0))
    return method.invoke(None, gateway.new_array(jvm.java.lang.Object, 0))


def _kept_tasks(spark: SparkSession, result: LookupResult, table: Any, kept: set[str]) -> Any:
    """A Java list of the scan tasks (data file and its delete files) of the kept files at the lookup's snapshot."""
    jvm: Any = spark._jvm  # as in `_iceberg_frame`
    tasks = jvm.java.util.ArrayList()
    if result.source_version is None:
        return tasks
    planned = table.newScan().useSnapshot(result.source_version).planFiles()
    found = jvm.org.apache.iceberg.relocated.com.google.common.collect.Lists.newArrayList(planned)
    planned.close()
    for i in range(found.size()):
        task = found.get(i)
        if task.file().location() in kept:
            tasks.add(task)
    if tasks.size() != len(kept):
        raise UserError(
            f"table {result.table}: Iceberg's planning of snapshot {result.source_version} has "
            f"{tasks.size()} of the {len(kept)} kept files"
        )
    return tasks


def _delta_frame(spark: SparkSession, result: LookupResult) -> DataFrame:
    source = result.source
    assert isinstance(source, DeltaSource)
    jvm: Any = spark._jvm  # as in `_iceberg_frame`
    kept = set(result.files)
    # the log's own spelling of each kept file (a percent-encoded reference), as the JVM's AddFile holds it
    raw = pa.table(source.table.get_add_actions()).column("path").to_pylist()
    logged = sorted({path for path in raw if source.absolute(path) in kept})
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, source.root)
    snapshot = log.getSnapshotAt(
        result.source_version, *(getattr(log, f"getSnapshotAt$default${n}")() for n in (2, 3, 4))
    )
    adds = snapshot.allFiles().where(F.col("path").isin(logged)._jc).collectAsList()
    if adds.size() != len(kept):
        raise UserError(
            f"table {result.table}: Delta's log at version {result.source_version} has {adds.size()} of the "
            f"{len(kept)} kept files"
        )
    files = jvm.scala.jdk.javaapi.CollectionConverters.asScala(adds).toSeq()
    frame = DataFrame(log.createDataFrame(snapshot, files, False, getattr(log, "createDataFrame$default$4")()), spark)
    return frame.select(*[F.col(f"`{name}`") for name in source.arrow_schema.names])


_FRAMES = {"iceberg": _iceberg_frame, "delta": _delta_frame}  # the connectors' readers, by the format they read
