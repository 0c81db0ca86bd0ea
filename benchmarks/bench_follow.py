"""Following a table: a writer appends small commits every 1-2 s (pyiceberg appends, then Spark SQL inserts) while `skipindex build --follow`
runs in its own process; per commit, the lag from the source commit to the index commit that holds it; the
follower's CPU share; and, sampled while the writer runs, the files a lookup keeps for a point query and a range
query against pyiceberg's own planning (`table.scan(row_filter=...).plan_files()`) and the files that hold a match
(brute force over the rows of every live file).

    python benchmarks/bench_follow.py [--minutes 10] [--rows 5000] [--period 1 2] [--writer pyiceberg spark]

The lag is read after the run from the two tables' own histories, not by polling: each index snapshot records the
source version it reached (`skipindex.source-version`) and its commit time, so a source commit's lag is the first
index snapshot at or past it minus the source snapshot's timestamp. The CPU share is the follower process's user +
system time (/proc/<pid>/stat) over the writer's run, per one core. Prints Markdown for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
TABLE = "bench.events"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us")),
        ("service", pa.string()),
        ("latency", pa.float64()),
    ]
)
SERVICES = [f"svc-{n:02d}" for n in range(30)]
# Absent keys: a new one per sample, in [2^61, 2^62), inside every file's id range and in none (the writers' ids are
# random 63- or 64-bit values: ~1e-12 odds of a match, and brute force counts it if there is one). A fixed key would
# be one draw: a filter that holds it by a false positive holds it at every sample.
ABSENT_KEYS = (2**61, 2**62 - 1)


def batch(rng: random.Random, rows: int, now: datetime) -> pa.Table:
    """Random 63-bit ids (a trace id: min/max cannot prune it), timestamps over the last second (a time-ordered
    table: min/max prunes a recent range), two services per commit (a clustered tag)."""
    services = rng.sample(SERVICES, 2)
    numbers = np.random.default_rng(rng.getrandbits(64))
    start = np.datetime64(now - timedelta(seconds=1), "us")
    return pa.table(
        {
            "id": pa.array(numbers.integers(0, 2**63, rows, dtype=np.int64)),
            "ts": pa.array(start + numbers.integers(0, 1_000_000, rows).astype("timedelta64[us]")),
            "service": pa.array(np.array(services)[numbers.integers(0, 2, rows)]),
            "latency": pa.array(numbers.exponential(50.0, rows)),
        },
        schema=SCHEMA,
    )


class PyicebergWriter:
    """Commits with pyiceberg's `Table.append` (one data file per commit)."""

    name = "pyiceberg appends"

    def __init__(self, table, rng: random.Random, rows: int) -> None:
        self.table, self.rng, self.rows = table, rng, rows

    def commit(self) -> int:
        """One commit of `rows` new rows; returns an id it wrote."""
        data = batch(self.rng, self.rows, datetime.now())
        self.table.append(data)
        return int(data.column("id")[0].as_py())


class SparkSqlWriter:
    """Commits with Spark SQL `INSERT INTO` through Iceberg's Spark runtime, on the same SQLite catalog (Iceberg's
    JDBC catalog): one task, so one data file per commit. The rows are made by Spark itself: ids
    `xxhash64(commit, row)` (random 64-bit), timestamps over the last second of the session's local wall clock."""

    name = "Spark SQL inserts"
    CATALOG = "bench"  # the JDBC catalog sees the rows of the pyiceberg catalog of the same name

    def __init__(self, tmp: Path, rows: int) -> None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        from indexlib.jars import spark_jars

        self.spark = (
            SparkSession.builder.master("local[1]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.jars", ",".join(str(j) for j in spark_jars()))
            .config(f"spark.sql.catalog.{self.CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
            .config(f"spark.sql.catalog.{self.CATALOG}.type", "jdbc")
            .config(f"spark.sql.catalog.{self.CATALOG}.uri", f"jdbc:sqlite:{tmp / 'catalog.db'}")
            .config(f"spark.sql.catalog.{self.CATALOG}.warehouse", f"file:{tmp / 'warehouse'}")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.rows, self.commits = rows, 0

    def commit(self) -> int:
        self.commits += 1
        n = self.commits
        self.spark.sql(
            f"INSERT INTO {self.CATALOG}.{TABLE} "
            f"SELECT xxhash64({n}, id), "
            "CAST(current_timestamp() - make_dt_interval(0, 0, 0, rand()) AS TIMESTAMP_NTZ), "
            f"concat('svc-', lpad(CAST(({n} + id % 2) % 30 AS STRING), 2, '0')), -50 * ln(1 - rand()) "
            f"FROM range({self.rows})"
        )
        return int(self.spark.sql(f"SELECT xxhash64({n}, CAST(0 AS BIGINT))").first()[0])

    def close(self) -> None:
        self.spark.stop()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    seconds: float  # since the writer started
    files_total: int
    unindexed: int
    kept: dict[str, int] = field(default_factory=dict)  # per query: the lookup's files
    planned: dict[str, int] = field(default_factory=dict)  # per query: pyiceberg's plan_files
    true: dict[str, int] = field(default_factory=dict)  # per query: files holding a matching row
    # per query, among the files the index held an entry for at that moment: the lookup's files, and those holding a
    # matching row (the precision of the index itself, apart from the newest commit's file not yet indexed)
    kept_indexed: dict[str, int] = field(default_factory=dict)
    true_indexed: dict[str, int] = field(default_factory=dict)
    stages: list[str] = field(default_factory=list)


def queries(last_key: int, absent: int, since: datetime) -> dict[str, tuple[str, object, object]]:
    """name -> (SQL for the lookup, pyiceberg row filter, Arrow filter for brute force)."""
    from pyiceberg.expressions import EqualTo, GreaterThanOrEqual

    stamp = since.strftime("%Y-%m-%d %H:%M:%S.%f")
    return {
        "point (key of the newest commit)": (
            f"id = {last_key}",
            EqualTo("id", last_key),
            pc.field("id") == last_key,
        ),
        "point (absent key)": (f"id = {absent}", EqualTo("id", absent), pc.field("id") == absent),
        "range (last 5 s)": (
            f"ts >= TIMESTAMP '{stamp}'",
            GreaterThanOrEqual("ts", since.isoformat()),
            pc.field("ts") >= pa.scalar(since, pa.timestamp("us")),
        ),
    }


def sample(config, table, started: float, last_key: int, absent: int) -> Sample:
    """One look at the table now: the lookup, pyiceberg's planning and the truth for each query."""
    from indexlib.lookup import lookup
    from indexlib.store.table import IndexTable

    table = table.refresh()
    since = datetime.now() - timedelta(seconds=5)  # the writer stamps rows in local wall time
    live = [task.file.file_path for task in table.scan().plan_files()]
    out = Sample(time.monotonic() - started, len(live), 0)
    for name, (sql, row_filter, arrow_filter) in queries(last_key, absent, since).items():
        # files indexed before the lookup were judged by the index (entries are never dropped for a live file); a
        # file indexed while the lookup ran may have been judged by the format's statistics, and is not counted
        indexed = set(IndexTable(config.load_catalog(), config.index_namespace, TABLE).config_versions())
        result = lookup(config, TABLE, sql)
        out.unindexed = max(out.unindexed, result.summary["files_unindexed"])
        out.stages = [s["name"] for s in result.summary["stages"]]
        out.kept[name] = len(result.files)
        out.kept_indexed[name] = sum(1 for path in result.files if path in indexed)
        out.planned[name] = len(list(table.scan(row_filter=row_filter).plan_files()))
        holding = [path for path in live if _rows(path).filter(arrow_filter).num_rows]
        out.true[name] = len(holding)
        out.true_indexed[name] = sum(1 for path in holding if path in indexed)
    return out


_ROWS: dict[str, pa.Table] = {}  # data files never change: each is read once


def _rows(path: str) -> pa.Table:
    if path not in _ROWS:
        _ROWS[path] = pq.read_table(path.removeprefix("file://"), columns=["id", "ts"])
    return _ROWS[path]


def lags(table, index_table) -> list[float]:
    """Per source commit after the first index snapshot of the run: seconds from its commit to the index commit
    that holds it (the first whose watermark is it or a later commit)."""
    from indexlib.store.table import WATERMARK_PROPERTY

    order = {s.snapshot_id: n for n, s in enumerate(table.snapshots())}  # appends only: history order
    commits = [(order[s.snapshot_id], s.timestamp_ms / 1000) for s in table.snapshots()]
    reached = []  # (position of the source version, index commit time), in index order
    for snapshot in index_table.snapshots():
        version = (snapshot.summary or {}).get(WATERMARK_PROPERTY)
        if version is not None and int(version) in order:
            reached.append((order[int(version)], snapshot.timestamp_ms / 1000))
    out = []
    for position, committed in commits:
        held = [when for at, when in reached if at >= position]
        if held:
            out.append(min(held) - committed)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(
    minutes: float,
    rows: int,
    period: tuple[float, float],
    seed_files: int,
    interval: float,
    writer_kind: str,
    false_files: float | None = None,
    sample_seconds: float = 20.0,
) -> str:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

    from indexlib.config import load_config
    from indexlib.indexing.build import build_index
    from indexlib.store.table import IndexTable

    rng = random.Random(58)
    absent_keys = random.Random(59)  # apart from the writer's, so its rows are those of earlier runs
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "conf.toml"
        conf.write_text(
            '[catalog]\nname = "bench"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'
            f"[follow]\ninterval_seconds = {interval}\n"
            + (f"[index]\nbloom_false_files = {false_files}\n" if false_files is not None else "")
        )
        config = load_config(conf)
        catalog = config.load_catalog()
        catalog.create_namespace("bench")
        schema = Schema(
            NestedField(1, "id", LongType()),
            NestedField(2, "ts", TimestampType()),
            NestedField(3, "service", StringType()),
            NestedField(4, "latency", DoubleType()),
        )
        table = catalog.create_table(TABLE, schema=schema)
        for n in range(seed_files):
            table.append(batch(rng, rows, datetime.now() - timedelta(minutes=seed_files - n)))
        build_index(config, TABLE)  # the history before the follower starts
        writer = PyicebergWriter(table, rng, rows) if writer_kind == "pyiceberg" else SparkSqlWriter(Path(tmp), rows)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        follower = subprocess.Popen(
            [sys.executable, "-m", "indexlib.cli", "build", "--follow", "--conf", str(conf), "--table", TABLE],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(follower.stdout), daemon=True).start()
        while not lines:  # started: its first line
            time.sleep(0.1)
        try:
            started, cpu_start = time.monotonic(), cpu_seconds(follower.pid)
            commits, samples, last_key, next_sample = 0, [], -1, started + sample_seconds
            end = started + minutes * 60
            while time.monotonic() < end:
                last_key = writer.commit()
                commits += 1
                if time.monotonic() >= next_sample:  # right after a commit: its file may not be indexed yet
                    samples.append(sample(config, table, started, last_key, absent_keys.randint(*ABSENT_KEYS)))
                    next_sample = time.monotonic() + sample_seconds
                time.sleep(rng.uniform(*period))
            wall = time.monotonic() - started
            cpu = cpu_seconds(follower.pid) - cpu_start
            time.sleep(max(5.0, 3 * interval))  # the last commit's batch
            samples.append(sample(config, table, started, last_key, absent_keys.randint(*ABSENT_KEYS)))
        finally:  # the follower is this run's process: never left behind, whatever failed
            if follower.poll() is None:
                follower.send_signal(signal.SIGTERM)
            code = follower.wait(timeout=600)
            if isinstance(writer, SparkSqlWriter):
                writer.close()
        index_table = IndexTable(catalog, config.index_namespace, TABLE).reload()
        measured = lags(table.refresh(), index_table)[seed_files:]  # the writer's commits
        sizes = [t.file.file_size_in_bytes for t in table.scan().plan_files()]  # appends only: every file is live
        mib = sum(sizes) / (seed_files + commits) / 2**20  # per commit (a Spark commit writes a file per task)
        batches = [line for line in lines if " indexed (" in line]
    setting = f", bloom_false_files = {false_files:g}" if false_files is not None else ""
    return report(
        writer.name + setting, rows, period, commits, wall, cpu, measured, batches, samples, code, interval, mib
    )


def slowest(batches: list[str], count: int) -> list[str]:
    """The follower's lines of the `count` batches that were furthest behind their newest commit."""

    def behind(line: str) -> float:
        found = re.search(r"([0-9.]+) s behind the commit", line)
        return float(found.group(1)) if found else 0.0

    return sorted(batches, key=behind, reverse=True)[:count]


def report(writer, rows, period, commits, wall, cpu, measured, batches, samples, code, interval, mib) -> str:
    out = [
        f"### {wall / 60:.1f} minutes, {commits} {writer} of {rows:,} rows ({mib:.1f} MiB per commit) every "
        f"{period[0]:g}-{period[1]:g} s, follower polling every {interval:g} s",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| commits / index batches | {commits} / {len(batches)} |",
        f"| lag commit -> index, p50 | {percentile(measured, 0.5):.2f} s |" if measured else "| lag | none measured |",
    ]
    if measured:
        out += [
            f"| lag p99 | {percentile(measured, 0.99):.2f} s |",
            f"| lag max | {max(measured):.2f} s |",
            f"| lag mean | {statistics.mean(measured):.2f} s |",
        ]
    out += [
        f"| follower CPU | {cpu:.1f} s over {wall:.0f} s = {100 * cpu / wall:.1f} % of one core |",
        f"| follower exit code after SIGTERM | {code} |",
        "",
        "The slowest batches and the index's compactions, in the follower's own words:",
        "",
        *(f"    {line.strip()}" for line in slowest(batches, 3)),
        *(f"    {line.strip()}" for line in batches if "compacted" in line),
        "",
        "Files per query, sampled right after a commit (lookup kept / pyiceberg's planning / files with a match; "
        "`unindexed`: live files the index had no entry for at that moment):",
        "",
        "| s | live files | unindexed | " + " | ".join(samples[0].kept) + " |",
        "|---:|---:|---:|" + "---:|" * len(samples[0].kept),
    ]
    for s in samples:
        cells = [f"{s.kept[q]} / {s.planned[q]} / {s.true[q]}" for q in s.kept]
        out.append(f"| {s.seconds:.0f} | {s.files_total} | {s.unindexed} | " + " | ".join(cells) + " |")
    worse = sum(1 for s in samples for q in s.kept if s.kept[q] > s.planned[q])
    indexed = [s for s in samples if s.unindexed == 0]
    ratio = max((s.kept[q] / max(1, s.true[q]) for s in indexed for q in s.kept), default=float("nan"))
    out += [
        "",
        "The index's own precision: among the files it held an entry for at each sample, files kept against files "
        "holding a match (mean over the samples; false files = kept - true):",
        "",
        "| query | samples | kept (mean) | true (mean) | false files (mean) | false files (max) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for q in samples[0].kept:
        kept = [s.kept_indexed[q] for s in samples]
        true = [s.true_indexed[q] for s in samples]
        false = [k - t for k, t in zip(kept, true, strict=True)]
        out.append(
            f"| {q} | {len(samples)} | {statistics.mean(kept):.2f} | {statistics.mean(true):.2f} | "
            f"{statistics.mean(false):.2f} | {max(false)} |"
        )
    out += [
        "",
        f"Lookup stages: {', '.join(samples[-1].stages)}. Samples where the lookup kept more files than pyiceberg's "
        f"planning: {worse} of {len(samples) * len(samples[0].kept)}; worst kept / true (at least 1) once every "
        f"file was indexed: {ratio:.2f}.",
    ]
    return "\n".join(out)


def revision() -> str:
    """The commit measured, and whether the lookup's files differ from it (work in progress in the tree)."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--short", "--", "indexlib"], capture_output=True, text=True
    ).stdout.split("\n")
    edited = sorted(line[3:] for line in changed if line.strip())
    return f"Measured at {head.stdout.strip() or 'an unknown revision'}" + (
        f", with uncommitted changes to {', '.join(edited)}." if edited else "."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the writer commits (default: 10)")
    parser.add_argument("--rows", type=int, default=5000, help="rows per commit (default: 5000)")
    parser.add_argument("--period", type=float, nargs=2, default=(1.0, 2.0), help="seconds between commits")
    parser.add_argument("--seed-files", type=int, default=40, help="files committed and indexed before the run")
    parser.add_argument("--interval", type=float, default=1.0, help="the follower's poll interval (default: 1)")
    parser.add_argument(
        "--writer",
        choices=["pyiceberg", "spark"],
        nargs="+",
        default=["pyiceberg", "spark"],
        help="who commits: pyiceberg appends, Spark SQL inserts (Iceberg's Spark runtime, `make jars`), or both in turn",
    )
    parser.add_argument(
        "--bloom-false-files", type=float, help="the index's bloom_false_files (default: the packaged default)"
    )
    parser.add_argument(
        "--sample-seconds",
        type=float,
        default=20.0,
        help="seconds between the lookups compared with planning and brute force (default: 20); each reads the new "
        "files and competes with the follower for the CPU",
    )
    args = parser.parse_args()
    for writer in args.writer:
        report = run(
            args.minutes,
            args.rows,
            tuple(args.period),
            args.seed_files,
            args.interval,
            writer,
            args.bloom_false_files,
            args.sample_seconds,
        )
        print(report, end="\n\n")
    print(f"\n{revision()}")


if __name__ == "__main__":
    main()
