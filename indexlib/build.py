"""The incremental build: index the files committed since the watermark, commit entries + watermark at once.

The driver lists new files (metadata only), Spark runs one task per file (or per `files_per_task` files),
each task reads only the indexed columns of its files, and the driver appends the entries with the new
watermark in one Iceberg commit. A crash before that commit leaves the index as it was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from indexlib.errors import UserError
from indexlib.file_indexer import index_files_task, settings_json
from indexlib.index_table import ENTRY_ARROW_SCHEMA, IndexTable
from indexlib.source import DataFileRef, Source, open_source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.config import Config
    from indexlib.index_choice import IndexSettings

log = logging.getLogger(__name__)

_TASK_INPUT_SCHEMA = "path string, file_format string, file_size_in_bytes long"


@dataclass(frozen=True)
class BuildResult:
    table: str
    index_table: str
    files_indexed: int
    rows_indexed: int
    source_version: int | None
    committed: bool

    def message(self) -> str:
        if not self.committed:
            return f"{self.table}: index {self.index_table} is up to date (source version {self.source_version}); nothing committed"
        return (
            f"{self.table}: indexed {self.files_indexed} new files ({self.rows_indexed} rows) into {self.index_table}, "
            f"watermark now source version {self.source_version}"
        )


def index_new_files(
    spark: SparkSession,
    source: Source,
    files: list[DataFileRef],
    version: int,
    files_per_task: int,
    column_settings: dict[int, IndexSettings] | None = None,
) -> pa.Table:
    """Entries for `files`, computed by Spark tasks."""
    if not files:
        return ENTRY_ARROW_SCHEMA.empty_table()
    from pyspark.sql.pandas.types import from_arrow_schema

    rows = [(f.path, f.file_format, f.file_size_in_bytes) for f in files]
    tasks = max(1, -(-len(files) // files_per_task))
    frame = spark.createDataFrame(rows, _TASK_INPUT_SCHEMA).repartition(tasks)
    task = index_files_task(
        source.schema.model_dump_json(),
        source.io_properties,
        source.name_mapping_json,
        version,
        settings_json(column_settings or {}),
    )
    spark.sparkContext.setJobDescription(f"skipindex: index {len(files)} files of {source.name}")
    try:
        result = frame.mapInArrow(task, from_arrow_schema(ENTRY_ARROW_SCHEMA)).toArrow()
    except Exception as exc:
        raise UserError(_task_failure_line(exc, source.name)) from exc
    return result.cast(ENTRY_ARROW_SCHEMA)


def _task_failure_line(exc: Exception, table: str) -> str:
    """The one line of a failed Spark job that names the data file, if a task said which."""
    for line in str(exc).splitlines():
        if "skipindex: cannot index data file" in line:
            return f"{table}: " + line.split("skipindex: ", 1)[1].strip()
    return f"{table}: index build failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def build_index(config: Config, table_name: str, spark: SparkSession | None = None) -> BuildResult:
    catalog = config.load_catalog()
    source = open_source(catalog, table_name)
    index = IndexTable(catalog, config.index_namespace, table_name)
    column_settings = config.column_settings(table_name, source.schema)  # bad settings fail before any work
    version = source.current_version()
    watermark = index.watermark()
    if version is None or version == watermark:
        return BuildResult(table_name, index.identifier, 0, 0, version, committed=False)

    already = index.indexed_paths()
    new_files = [f for f in source.files_added_since(watermark) if f.path not in already]
    log.info("%s: %d new data files since source version %s", table_name, len(new_files), watermark)
    if new_files and spark is None:
        from indexlib.spark import get_spark

        spark = get_spark(config)
    entries = (
        index_new_files(spark, source, new_files, version, config.files_per_task, column_settings)
        if new_files
        else ENTRY_ARROW_SCHEMA.empty_table()
    )
    # An empty append still moves the watermark, so the next run does not rescan these snapshots.
    index.commit(entries, version)
    return BuildResult(
        table_name, index.identifier, entries.num_rows, sum(f.record_count for f in new_files), version, True
    )
