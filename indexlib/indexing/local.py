"""Small work without a JVM: builds, backfills and verifies whose files are at or under `[build] local_max_files`
and `local_max_bytes` run the per-file task (file_indexer.py `index_files_task`, the same function Spark maps) in
this process, one file after another, so a few new files cost their reading and not ~15 s of Spark start-up
(docs/benchmarks.md, "Small work without Spark"). Above the limits, Spark as before.

An explicit SparkSession (a test's, or a caller's that already paid for the JVM) always means Spark: it is how a
caller forces the Spark path. `local_max_files = 0` forces it from configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from indexlib.indexing.file_indexer import TASK_OUTPUT_SCHEMA
from indexlib.sources.base import DataFileRef

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.indexing.progress import Progress, Task
    from indexlib.indexing.spec import BuildSpec

# What a task reads: the same columns Spark's `mapInArrow` hands each task.
TASK_INPUT_SCHEMA = pa.schema([("path", pa.string()), ("file_format", pa.string()), ("file_size_in_bytes", pa.int64())])


def session_for(spec: BuildSpec, files: Sequence[DataFileRef], spark: SparkSession | None) -> SparkSession | None:
    """The SparkSession to index `files` on, or None to index them in this process: the caller's session if it
    gave one, else none for small work (`Sizing.runs_locally`), else the spec's (started now)."""
    if spark is not None or not files or spec.sizing.runs_locally(files):
        return spark
    from indexlib.indexing.spark import get_spark

    return get_spark(spec.spark)


def run_in_driver(task: Task, files: Sequence[DataFileRef], progress: Progress) -> pa.Table:
    """`task`'s output for `files`, computed here, counting each file into `progress` as it is done."""
    batch = pa.RecordBatch.from_pylist(
        [{"path": f.path, "file_format": f.file_format, "file_size_in_bytes": f.file_size_in_bytes} for f in files],
        schema=TASK_INPUT_SCHEMA,
    )

    def counted() -> Iterator[pa.RecordBatch]:
        for out in task(iter([batch])):
            progress.count(out)
            yield out

    return pa.Table.from_batches(list(counted()), schema=TASK_OUTPUT_SCHEMA)
