"""Small work without a JVM: builds, backfills and verifies whose files are at or under `[build] local_max_files`
and `local_max_bytes` run the per-file task (file_indexer.py `index_files_task`, the same function Spark maps) in
this process, one file after another, so a few new files cost their reading and not ~15 s of Spark start-up
(docs/benchmarks.md, "Small work without Spark"). Above the limits, Spark as before.

An explicit SparkSession (a test's, or a caller's that already paid for the JVM) always means Spark: it is how a
caller forces the Spark path. `local_max_files = 0` forces it from configuration.

Files are indexed `[build] local_threads` at a time (0: one per CPU core), in threads; threads no file needs (fewer
files than threads: a followed table's one new file) index one file's columns at a time instead. Most of a file's
indexing releases the interpreter's lock (Parquet decoding, Arrow's hashing and casts, numpy's sorts, hashes and
filter bits), so two 55 MB files take ~0.65x the time of one after the other on two cores, and one file's four
columns on two threads ~0.68x (docs/benchmarks.md, "Following a table"). Threads and not processes: a process pool
would start its workers by importing the caller's main module again, and a script that builds without an
`if __name__ == "__main__"` guard would run again in each of them. The task function keeps no state between files,
so threads may share it; each holds one file's distinct values at a time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


def thread_split(threads: int, files: int) -> tuple[int, int]:
    """(files at a time, columns of each file at a time) for `files` files on `threads` threads (0: one per CPU
    core): every file its own thread first, the threads left over shared among the files' columns."""
    threads = threads or os.cpu_count() or 1
    at_a_time = min(threads, max(files, 1))
    return at_a_time, max(threads // at_a_time, 1)


def run_in_driver(task: Task, files: Sequence[DataFileRef], progress: Progress, threads: int = 1) -> pa.Table:
    """`task`'s output for `files`, computed here `threads` files at a time, in the files' order, counting each
    file into `progress` as it is done."""

    def one(file: DataFileRef) -> list[pa.RecordBatch]:
        batch = pa.RecordBatch.from_pylist(
            [{"path": file.path, "file_format": file.file_format, "file_size_in_bytes": file.file_size_in_bytes}],
            schema=TASK_INPUT_SCHEMA,
        )
        return list(task(iter([batch])))

    outputs: list[pa.RecordBatch] = []
    with ThreadPoolExecutor(threads) as pool:
        for out in pool.map(one, files):
            for batch in out:
                progress.count(batch)
            outputs += out
    return pa.Table.from_batches(outputs, schema=TASK_OUTPUT_SCHEMA)
