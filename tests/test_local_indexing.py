"""Small work without a JVM (indexing/local.py): builds, backfills and verifies at or under `[build]
local_max_files` and `local_max_bytes` run the per-file task in the driver and write exactly the entries Spark
writes; the driver path is proven JVM-free by running the real CLI where Java cannot start (JAVA_HOME points
nowhere). And progress a person can follow (indexing/progress.py), read from real builds' logs."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakes import Lake, events_batch
from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
from pyiceberg.schema import assign_fresh_schema_ids

import indexlib
from indexlib.config import load_config
from indexlib.errors import BuildFailed
from indexlib.indexing import local, progress
from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.indexing.file_indexer import IndexTask, index_file
from indexlib.store.table import IndexTable

ROOT = Path(indexlib.__file__).resolve().parents[1]  # the CLI subprocesses run the code under test
# Spark's launcher runs $JAVA_HOME/bin/java: with this environment no JVM can start, so a command that succeeds
# under it never needed Spark.
NO_JAVA = {**os.environ, "JAVA_HOME": "/nonexistent/java", "PYTHONPATH": str(ROOT)}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "indexlib.cli", *args], capture_output=True, text=True, timeout=300, env=NO_JAVA
    )


def _variant(conf_path: Path, name: str, extra: str = "") -> Path:
    """The test's catalog with the index tables in namespace `name`, plus `extra` TOML."""
    path = conf_path.with_name(f"{name}.toml")
    path.write_text(conf_path.read_text() + f'[index]\nnamespace = "{name}"\n' + extra)
    return path


def _lake(kind: str, catalog, tmp_path: Path, files: int = 6) -> Lake:
    lake = Lake(kind, catalog, tmp_path, "events", partitioned=True)
    for n in range(files):
        lake.append(events_batch(random.Random(n), n * 50, 50, "ab"[n % 2]))
    return lake


def _entries(conf: Path, table: str):
    config = load_config(conf)
    return IndexTable(config.load_catalog(), config.index_namespace, table).entries().sort_by("file_path")


@pytest.mark.parametrize("kind", ["iceberg", "delta"])
def test_a_small_build_runs_without_a_jvm_and_writes_the_entries_spark_writes(
    kind, conf_path, catalog, spark, tmp_path
):
    lake = _lake(kind, catalog, tmp_path)
    local = _variant(conf_path, "local", "[build]\nlocal_threads = 3\n")  # three files at a time, in threads
    on_spark = _variant(conf_path, "spark")
    done = _cli("build", "--conf", str(local), "--table", lake.name)
    assert done.returncode == 0, f"a build of 6 small files needs no JVM: {done.stderr}"
    assert "in this process" in done.stderr, "the build says it ran in the driver"
    build_index(load_config(on_spark), lake.name, spark)
    assert _entries(local, lake.name).equals(_entries(on_spark, lake.name)), (
        "the driver (three files at a time) and Spark run the same task: the same entries, every field, byte for byte"
    )


def test_a_small_backfill_runs_without_a_jvm_and_writes_the_entries_spark_writes(conf_path, catalog, spark, tmp_path):
    lake = _lake("iceberg", catalog, tmp_path)
    start_now = "[build]\nindex_existing_files = false\n"
    local, on_spark = _variant(conf_path, "local", start_now), _variant(conf_path, "spark", start_now)
    for conf in (local, on_spark):
        build_index(load_config(conf), lake.name)  # no file to index: only unindexed rows, no Spark either way
    done = _cli("backfill", "--conf", str(local), "--table", lake.name)
    assert done.returncode == 0, f"a backfill of 6 small files needs no JVM: {done.stderr}"
    assert "backfill indexed 6 files" in done.stdout, done.stdout
    backfill(load_config(on_spark), lake.name, spark=spark)
    assert _entries(local, lake.name).equals(_entries(on_spark, lake.name)), (
        "a backfill in the driver writes the entries a Spark backfill writes, byte for byte"
    )


@pytest.mark.parametrize(
    ("limits", "rule"),
    [
        ("", "a sample under the limits is recomputed in the driver"),
        (
            "[build]\nlocal_max_files = 0\n",
            "verify recomputes its sample in the driver even when builds always use Spark",
        ),
    ],
)
def test_verify_never_needs_spark(limits, rule, conf_path, catalog, tmp_path):
    lake = _lake("iceberg", catalog, tmp_path)
    conf = _variant(conf_path, "skipindex", limits)
    build_index(load_config(_variant(conf_path, "skipindex")), lake.name)
    done = _cli("verify", "--conf", str(conf), "--table", lake.name, "--sample", "5")
    assert done.returncode == 0, f"{rule}: {done.stderr}"
    assert "recomputed 5 sampled entries from the data: 0 stale" in done.stdout, rule
    assert "recomputing 5 files" in done.stderr and "indexing 5 files" not in done.stderr, (
        "verify says it re-checks its sample, not that it indexes"
    )


def _break_one_file(lake: Lake) -> str:
    victim = sorted(task.file.file_path for task in lake.iceberg.refresh().scan().plan_files())[1]
    Path(victim.removeprefix("file://")).write_bytes(b"not parquet at all")
    return victim


def test_an_unreadable_file_fails_the_driver_build_with_the_line_spark_gives(conf_path, catalog, spark, tmp_path):
    lake = _lake("iceberg", catalog, tmp_path)
    victim = _break_one_file(lake)
    with pytest.raises(BuildFailed) as on_spark:
        build_index(load_config(_variant(conf_path, "spark")), lake.name, spark)
    done = _cli("build", "--conf", str(_variant(conf_path, "local")), "--table", lake.name)
    assert done.returncode == 4, done.stderr
    assert f"skipindex: error: {on_spark.value}" in done.stderr.splitlines(), (
        "the driver fails with Spark's one line naming the file"
    )
    assert f"cannot index data file {victim}" in str(on_spark.value)
    assert IndexTable(catalog, "local", lake.name).watermark() is None, "a failed build commits nothing"


def test_an_unreadable_file_is_skipped_by_the_driver_build_as_by_spark(conf_path, catalog, spark, tmp_path):
    lake = _lake("iceberg", catalog, tmp_path)
    victim = _break_one_file(lake)
    skip = '[build]\non_unreadable_file = "skip"\n'
    local, on_spark = _variant(conf_path, "local", skip), _variant(conf_path, "spark", skip)
    by_spark = build_index(load_config(on_spark), lake.name, spark)
    done = _cli("build", "--conf", str(local), "--table", lake.name)
    assert done.returncode == 0, done.stderr
    assert by_spark.skipped and by_spark.skipped[0][0] == victim
    assert done.stdout.strip() == by_spark.message().replace("spark.", "local."), "the same skipped report"
    assert _entries(local, lake.name).equals(_entries(on_spark, lake.name)), "the same entries and unindexed row"


WHERE = r"(in this process|in \d+ Spark tasks)"
SUMMARY = re.compile(
    rf"^db\.events: indexed 6 files \([\d.,]+ MB\) in [\d.,]+ s, [\d.,]+ files/s, [\d.,]+ MB/s, {WHERE}$"
)
LINE = re.compile(
    r"^db\.events: indexed (\d) of 6 files \([\d.,]+ of [\d.,]+ MB\) in [\d,]+ s"
    rf"(, {WHERE}; no file finished yet|, [\d.,]+ files/s, [\d.,]+ MB/s(, about [\d,]+ s left)?)$"
)


def _progress_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "indexlib.indexing.progress"]


def test_work_too_small_to_follow_logs_only_the_summary(config, catalog, tmp_path, caplog):
    lake = _lake("iceberg", catalog, tmp_path)
    with caplog.at_level("INFO", logger="indexlib"):
        build_index(config, lake.name)
    lines = _progress_lines(caplog)
    assert len(lines) == 1 and SUMMARY.match(lines[0]), f"a build of well under 5 s: one summary line, {lines}"


def test_longer_work_logs_files_mb_rate_and_time_left_then_the_summary(config, catalog, tmp_path, caplog, monkeypatch):
    lake = _lake("iceberg", catalog, tmp_path)
    monkeypatch.setattr(progress, "REPORT_SECONDS", 0.002)  # a line every 2 ms: this build is "long"
    counted = progress.Progress.count

    def count_then_pause(self, out):  # each file takes 25 report periods: the reporter runs between files however
        counted(self, out)  # loaded the machine (at load 11 all six files were once done before its first line)
        time.sleep(0.05)

    monkeypatch.setattr(progress.Progress, "count", count_then_pause)
    with caplog.at_level("INFO", logger="indexlib"):
        build_index(config, lake.name)
    lines = _progress_lines(caplog)
    assert SUMMARY.match(lines[-1]), f"the last line is the summary: {lines[-1]}"
    steps = [LINE.match(line) for line in lines[:-1]]
    assert all(steps), f"every progress line says files, MB, time and rate: {lines}"
    done = [int(m.group(1)) for m in steps]
    assert done == sorted(done), "the files done never go back"
    assert any(0 < n < 6 and "s left" in m.group(0) for n, m in zip(done, steps, strict=True)), (
        f"in the driver the figures move file by file, with a time left: {lines}"
    )


def test_a_spark_build_logs_the_same_lines_and_says_how_many_tasks_ran(
    config, catalog, spark, tmp_path, caplog, monkeypatch
):
    lake = _lake("iceberg", catalog, tmp_path)
    monkeypatch.setattr(progress, "REPORT_SECONDS", 0.002)
    with caplog.at_level("INFO", logger="indexlib"):
        build_index(config, lake.name, spark)
    lines = _progress_lines(caplog)
    assert all(LINE.match(line) for line in lines[:-1]), f"Spark's progress lines read as the driver's: {lines}"
    assert SUMMARY.match(lines[-1]) and re.search(r"in \d+ Spark tasks$", lines[-1]), (
        f"the summary says the work ran on Spark, and in how many tasks: {lines[-1]}"
    )


@pytest.mark.parametrize(
    ("threads", "files", "split", "rule"),
    [
        (2, 1, (1, 2), "one file on two threads: its columns two at a time"),
        (2, 2, (2, 1), "two files on two threads: a file each, columns one at a time"),
        (2, 5, (2, 1), "more files than threads: a file each"),
        (4, 2, (2, 2), "threads left over are shared among the files' columns"),
        (3, 2, (2, 1), "a thread that cannot go to every file stays unused"),
        (1, 1, (1, 1), "local_threads = 1: one file, one column at a time"),
        (2, 0, (1, 2), "no file: nothing at a time, and no error"),
    ],
)
def test_threads_go_to_files_first_then_to_their_columns(threads, files, split, rule):
    assert local.thread_split(threads, files) == split, rule


def test_a_files_columns_indexed_in_threads_give_the_entry_one_thread_gives(tmp_path):
    """Every kind of column (keys, floats with NaN, strings, tags, timestamps, NULLs), with row-group entries: the
    entry is the same, field for field and in the columns' order, whatever the number of column threads."""
    rows = 3_000
    rng = np.random.default_rng(7)
    data = pa.table(
        {
            "id": pa.array(rng.integers(-(2**62), 2**62, rows)),
            "x": pa.array(np.where(rng.random(rows) < 0.01, np.nan, rng.normal(size=rows))),
            "tag": pa.array([["alpha", "beta", None][i % 3] for i in range(rows)]),
            "text": pa.array([f"request {i} took {i % 97} ms on host-{i % 7}" for i in range(rows)]),
            "ts": pa.array(rng.integers(0, 2**40, rows), pa.timestamp("us")),
            "n": pa.array([None if i % 5 == 0 else i % 11 for i in range(rows)], pa.int32()),
        }
    )
    path = str(tmp_path / "f.parquet")
    pq.write_table(data, path, row_group_size=1_000)
    schema = assign_fresh_schema_ids(_pyarrow_to_schema_without_ids(data.schema))
    task = IndexTask(schema, {}, schema.name_mapping.model_dump_json(), 1, row_groups="true")
    one = index_file(path, "PARQUET", task)
    for threads in (2, 6):
        assert index_file(path, "PARQUET", replace(task, column_threads=threads)) == one, (
            f"{threads} column threads: the same record count and column statistics, in the same order"
        )
