"""The incremental build: index the live files the index has no row of (those committed since the last build, and
any a rollback brought back), drop the rows of files no longer live, and commit both with the new watermark at once.

The driver lists the changes (metadata only), Spark runs tasks planned by bytes (indexing/splits.py), each task
reads only the indexed columns of its files, and the driver commits. A crash before the commit leaves the index
as it was; a commit that races another writer is re-planned (store/table.py), and when another build moved the
watermark in the meantime this one starts over from the new watermark.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from indexlib.errors import BuildFailed, CommitConflict, JobFailed
from indexlib.indexing.file_indexer import TASK_OUTPUT_SCHEMA, index_files_task
from indexlib.indexing.file_rows import unindexed_entries, with_file_facts
from indexlib.indexing.local import run_in_driver, session_for, thread_split
from indexlib.indexing.progress import Progress, SparkProgress, Task
from indexlib.indexing.spec import BuildSpec, Sizing, build_spec
from indexlib.indexing.splits import plan_splits, progress_parallelism
from indexlib.indexing.upgrade import upgrade_index
from indexlib.sources.base import DataFileRef, Source
from indexlib.sources.registry import open_source
from indexlib.store.schema import ENTRY_ARROW_SCHEMA
from indexlib.store.table import IndexTable, LiveSet, WatermarkMoved

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.config import Config

log = logging.getLogger(__name__)

_TASK_INPUT_SCHEMA = "path string, file_format string, file_size_in_bytes long"
_RESTARTS = 5


@dataclass(frozen=True)
class IndexedFiles:
    """What Spark computed for a list of files: entries (with their file facts, indexing/file_rows.py), and the
    files skipped as unreadable (path, reason), with the file rows that keep them in the index as unindexed."""

    entries: pa.Table
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unindexed: pa.Table = field(default_factory=ENTRY_ARROW_SCHEMA.empty_table)


@dataclass(frozen=True)
class BuildResult:
    table: str
    index_table: str
    files_indexed: int
    rows_indexed: int
    source_version: int | None
    committed: bool
    entries_dropped: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def message(self) -> str:
        if not self.committed:
            return f"{self.table}: index {self.index_table} is up to date (source version {self.source_version}); nothing committed"
        lines = [
            f"{self.table}: indexed {self.files_indexed} new files ({self.rows_indexed} rows) into {self.index_table}, "
            f"dropped {self.entries_dropped} entries of removed files, watermark now source version {self.source_version}"
        ]
        lines += [
            f"{self.table}: skipped unreadable file (left unindexed, always kept): {reason}"
            for _, reason in self.skipped
        ]
        return "\n".join(lines)


def index_new_files(
    spark: SparkSession | None,
    source: Source,
    files: list[DataFileRef],
    version: int,
    spec: BuildSpec,
    skip_unreadable: bool = False,
    table_files: int | None = None,
    verb: Literal["indexed", "recomputed"] = "indexed",
) -> IndexedFiles:
    """Entries for `files` as `spec` sets them, payloads sized for a table of `table_files` live files: computed by
    Spark tasks, or without `spark` by the same task function in this process (indexing/local.py). A file that
    cannot be read fails the whole call (`BuildFailed`, naming it) or, with `skip_unreadable`, is left unindexed
    (`skipped`)."""
    if not files:
        return IndexedFiles(ENTRY_ARROW_SCHEMA.empty_table())
    task = spec.task(source, version, table_files or len(files))
    open_cost = spec.sizing.open_cost_bytes
    size = sum(f.file_size_in_bytes for f in files)
    try:
        if spark is None:
            log.info("%s: %s %d files (%.1f MB) in this process", source.name, _ING[verb], len(files), size / 1e6)
            progress = Progress(source.name, len(files), size, open_cost, "in this process", verb)
            at_a_time, column_threads = thread_split(spec.sizing.local_threads, len(files))
            with progress:
                run = index_files_task(replace(task, column_threads=column_threads))
                result = run_in_driver(run, files, progress, at_a_time)
        else:
            result = _run_on_spark(spark, index_files_task(task), source, files, size, spec.sizing, verb)
    except Exception as exc:  # the job itself failed (an executor lost, a worker killed), not one file
        raise JobFailed(f"{source.name}: index build failed: {_why_the_job_failed(exc)}") from exc
    failed = pc.is_valid(result.column("error"))
    skipped = result.filter(failed)
    if skipped.num_rows and not skip_unreadable:
        reasons = sorted(skipped.column("error").to_pylist())
        more = f" (and {len(reasons) - 1} more files)" if len(reasons) > 1 else ""
        raise BuildFailed(f"{source.name}: {reasons[0]}{more}")
    entries = with_file_facts(result.filter(pc.invert(failed)).drop_columns(["error"]), files, source)
    skipped_paths = set(skipped.column("file_path").to_pylist())
    return IndexedFiles(
        entries,
        list(zip(skipped.column("file_path").to_pylist(), skipped.column("error").to_pylist(), strict=True)),
        unindexed_entries([f for f in files if f.path in skipped_paths], source, version),
    )


_ING = {"indexed": "indexing", "recomputed": "recomputing"}  # verify re-checks files: its log says so


def _run_on_spark(
    spark: SparkSession,
    task: Task,
    source: Source,
    files: list[DataFileRef],
    size: int,
    sizing: Sizing,
    verb: Literal["indexed", "recomputed"],
) -> pa.Table:
    """The task's output for `files`, one Spark task per planned split."""
    from pyspark.sql.pandas.types import from_arrow_schema

    context = spark.sparkContext
    parallelism = progress_parallelism(files, context.defaultParallelism, sizing.open_cost_bytes)
    splits = plan_splits(files, sizing.split_bytes, sizing.open_cost_bytes, parallelism)
    rows = [[(f.path, f.file_format, f.file_size_in_bytes) for f in split.files] for split in splits]
    # one element per slice: each split is exactly one Spark task
    frame = spark.createDataFrame(context.parallelize(rows, len(rows)).flatMap(lambda split: split), _TASK_INPUT_SCHEMA)
    log.info(
        "%s: %s %d files (%.1f MB) in %d Spark tasks", source.name, _ING[verb], len(files), size / 1e6, len(splits)
    )
    context.setJobDescription(f"skipindex: {_ING[verb]} {len(files)} files of {source.name}")
    where = f"in {len(splits)} Spark tasks"
    progress = SparkProgress(spark, source.name, len(files), size, sizing.open_cost_bytes, where, verb)
    with progress:
        return frame.mapInArrow(progress.counting(task), from_arrow_schema(TASK_OUTPUT_SCHEMA)).toArrow()


def _why_the_job_failed(exc: Exception) -> str:
    """The line of a failed job's error that says why: a Python worker's own exception (its traceback's last line)
    rather than PySpark's "see the stack trace below", which a one-line error does not show (the stack is in Spark's
    log); else the error's first line."""
    from pyspark.errors import PythonException

    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[-1] if isinstance(exc, PythonException) else lines[0]


def build_index(config: Config, table_name: str, spark: SparkSession | None = None, catalog: Any = None) -> BuildResult:
    """Index `table_name` up to its current version (the module docstring); `catalog`: the configured catalog when
    the caller keeps one loaded (a follower, indexing/follow.py), else loaded here. The configuration is read here,
    once (`build_spec`); what runs below reads the spec."""
    catalog = catalog if catalog is not None else config.load_catalog()
    for _ in range(_RESTARTS):
        source = open_source(config, table_name, catalog)
        index = IndexTable(catalog, config.index_namespace, source.name)
        upgrade_index(index, source)
        spec = build_spec(config, source)  # bad settings fail before any work
        try:
            return _build_once(spec, source, index, spark)
        except WatermarkMoved as moved:
            log.warning("%s; planning again from the new watermark", moved)
    raise CommitConflict(f"{table_name}: other builds kept moving the watermark; gave up after {_RESTARTS} attempts")


def _build_once(spec: BuildSpec, source: Source, index: IndexTable, spark: SparkSession | None) -> BuildResult:
    """Make the file rows exactly the files live at the source's current version C, indexing the live files the
    index has no row of, and commit them with C as both the watermark and the live version (docs/index-table.md).

    The files live at C come from the file rows when they claim a version that C reached by appends alone (plus
    the files of those appends), else from the source's own plan. Comparing them with the file rows, not with the
    files live at the watermark, is what repairs any history: after a rollback the files it brought back have no
    row and are indexed, the rows of files it took away are dropped."""
    version = source.current_version()
    watermark = index.watermark()
    live_version = index.live_version()
    if version is None or version == watermark == live_version:
        return BuildResult(source.name, index.identifier, 0, 0, version, committed=False)

    known = index.known_paths()  # indexed or not: a file skipped once waits for backfill
    appended = source.appended_since(live_version) if live_version is not None else None
    if appended is not None:
        candidates = appended
        live_paths = frozenset(known | {f.path for f in appended})
    else:
        candidates = source.live_files()
        live_paths = frozenset(f.path for f in candidates)
    new_files = [f for f in candidates if f.path not in known]
    live = LiveSet(version, live_paths)
    if watermark is None and not spec.index_existing_files:
        # Start indexing from now: older files wait for `skipindex backfill`, known as unindexed.
        result = index.commit(
            unindexed_entries(new_files, source, version), live=live, watermark=version, expected_watermark=None
        )
        log.info("%s: index starts at source version %s; backfill indexes older files", source.name, version)
        return BuildResult(source.name, index.identifier, 0, 0, version, True, result.dropped)

    since = live_version if appended is not None else watermark
    log.info(
        "%s: %d live data files without an index row, %d rows of removed files, %s",
        source.name,
        len(new_files),
        len(known - live_paths),
        "first build" if since is None else f"since source version {since}",
    )
    computed = (
        index_new_files(
            session_for(spec, new_files, spark),
            source,
            new_files,
            version,
            spec,
            skip_unreadable=spec.skip_unreadable,
            table_files=len(live_paths),
        )
        if new_files
        else IndexedFiles(ENTRY_ARROW_SCHEMA.empty_table())
    )
    result = index.commit(
        pa.concat_tables([computed.entries, computed.unindexed]),
        live=live,
        watermark=version,
        expected_watermark=watermark,
    )
    indexed_rows = pc.sum(computed.entries.column("record_count")).as_py() or 0
    return BuildResult(
        source.name,
        index.identifier,
        computed.entries.num_rows,
        indexed_rows,
        version,
        True,
        result.dropped,
        computed.skipped,
    )
