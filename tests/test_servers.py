"""End to end on real servers on 127.0.0.1 (tests/servers.py): builds submitted with `spark-submit` to a Spark
standalone cluster, an Iceberg table in a PostgreSQL-backed pyiceberg SQL catalog with its warehouse on S3, a Delta
table on S3; lookups checked against the rows, two builds racing on the PostgreSQL catalog, an executor killed with
SIGKILL in the middle of a build.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from lakes import QUERIES, Lake, checked_answers, events_batch
from servers import HOST
from test_crash_and_concurrency import Run, _live, _state

from indexlib.config import load_config
from indexlib.indexing.build import build_index

REPO = Path(__file__).parent.parent
BUILD_JOB = REPO / "jobs" / "build_index.py"
SUBMIT_ENV = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": HOST}  # executors run this venv's Python


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def _lake(tmp_path: Path, postgres, s3, kind: str, build: str = "") -> tuple[Path, Lake]:
    """A fresh database and bucket, a conf file for them, and an empty events table (partitioned by part) of `kind`:
    Iceberg in the PostgreSQL catalog with its warehouse on S3, or Delta on S3."""
    name = f"t{uuid.uuid4().hex[:12]}"  # a database and a bucket of its own
    uri = postgres.create_database(name)
    s3.create_bucket(name)
    catalog = {"name": "pg", "type": "sql", "uri": uri, "warehouse": f"s3://{name}/wh", **s3.catalog_properties()}
    lines = ["[catalog]", *(f"{_toml(k)} = {_toml(v)}" for k, v in catalog.items()), "[delta.storage_options]"]
    lines += [f"{_toml(k)} = {_toml(v)}" for k, v in s3.delta_storage_options().items()]
    conf_path = tmp_path / "conf.toml"
    conf_path.write_text("\n".join(lines) + "\n" + build)
    pyiceberg_catalog = load_config(conf_path).load_catalog()
    pyiceberg_catalog.create_namespace("db")
    location = f"s3://{name}/delta/events"
    lake = Lake(kind, pyiceberg_catalog, tmp_path, "events", True, location, s3.delta_storage_options())
    return conf_path, lake


# These tests are about the cluster: their builds run on it however small (indexing/local.py).
ON_SPARK = "[build]\nlocal_max_files = 0\n"


def _fill(lake: Lake, files: int, rows: int = 40, seed: int = 0) -> None:
    rng = random.Random(seed)
    for n in range(files):
        lake.append(events_batch(rng, seed * 10_000 + n * rows, rows, "abc"[n % 3]))


def _submit(cluster, tmp_path: Path, args: list[str]) -> str:
    """`spark-submit jobs/build_index.py args` on the cluster; its stdout (the build's result)."""
    done = subprocess.run(
        [*cluster.submit_args(tmp_path / "events"), str(BUILD_JOB), *args],
        env={**os.environ, **SUBMIT_ENV},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"spark-submit failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done.stdout


def _explain(conf_path: Path, table: str, where: str) -> dict:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "skipindex"), "explain", "--conf", str(conf_path), "--table", table]
        + ["--where", where, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


# Iceberg on S3 through the cluster is also built by the race test below in every run: its case here (pruning and
# explain on S3) runs in the long profile, Delta's in every run.
@pytest.mark.parametrize("kind", [pytest.param("iceberg", marks=pytest.mark.long_only), "delta"])
def test_a_build_submitted_to_the_cluster_indexes_an_s3_table_and_lookups_keep_every_matching_file(
    tmp_path, spark_cluster, postgres, s3, kind
):
    conf_path, lake = _lake(tmp_path, postgres, s3, kind, ON_SPARK)
    _fill(lake, 6)
    config = load_config(conf_path)
    assert all(path.startswith("s3://") for path in _live(config, lake.name)), "the data files are on S3"

    out = _submit(spark_cluster, tmp_path, ["--conf", str(conf_path), "--table", lake.name])
    assert "indexed 6 new files" in out, out
    assert _state(config, lake.name) == (_live(config, lake.name), lake.version()), "each live file once, watermark"
    events = spark_cluster.events(tmp_path / "events")
    assert any(e["Event"] == "SparkListenerExecutorAdded" for e in events), "the tasks ran on the cluster's executors"

    answers = checked_answers(config, lake.name, f"{kind} on S3: ")
    assert len(answers["id = 17"]) < 6, "min/max prunes"
    assert len(answers["service = 'auth'"]) < 6, "the tag index prunes"
    where = QUERIES[1][0]
    explained = _explain(conf_path, lake.name, where)
    assert explained["files"] == answers[where], "skipindex explain --json answers as the Python API"
    assert explained["summary"]["files_total"] == 6


def test_two_builds_racing_on_the_postgresql_catalog_lose_nothing_and_duplicate_nothing(
    tmp_path, spark_cluster, postgres, s3
):
    conf_path, lake = _lake(tmp_path, postgres, s3, "iceberg", ON_SPARK + "index_existing_files = false\n")
    _fill(lake, 2)
    config = load_config(conf_path)
    build_index(config, lake.name)  # the index starts now (older files wait for backfill): no Spark job
    assert _state(config, lake.name)[1] == lake.version()
    older = _live(config, lake.name)
    _fill(lake, 3, seed=1)  # new files: both builds index them

    barrier = tmp_path / "go"
    launcher = tuple(spark_cluster.submit_args(tmp_path / "events"))
    runs = [
        Run(
            tmp_path,
            ["build", "--conf", str(conf_path), "--table", lake.name],
            launcher,
            SKIPINDEX_TEST_BARRIER=str(barrier),
            **SUBMIT_ENV,
        )
        for _ in range(2)
    ]
    try:
        for run in runs:
            run.wait_for("before-commit")
        barrier.touch()  # both planned from the same watermark: one commit must lose and re-plan
        logs = [run.finish() + run.out.read_text() for run in runs]  # under spark-submit the driver logs on stdout
    finally:
        _kill_left(runs)
    assert _state(config, lake.name) == (_live(config, lake.name) - older, lake.version()), "each new file once"
    assert sum("commit conflict" in log for log in logs) == 1, "the two commits raced, one lost"
    assert sum("planning again from the new watermark" in log for log in logs) == 1, "the loser re-planned"
    checked_answers(config, lake.name, "after the race: ")  # the older files: unindexed, always kept


def _kill_left(runs: list[Run]) -> None:
    """A failed test leaves no build running: SIGKILL to the process group of each run still alive."""
    for run in runs:
        if run.process.poll() is None:
            run.kill()


def _executor_of(pid: int) -> int:
    """The executor JVM above a Spark task's Python worker (worker <- pyspark daemon <- executor)."""
    for _ in range(6):
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the parent
        if "CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_text():
            return pid
    raise AssertionError(f"no executor JVM above the task's Python worker {pid}")


@pytest.mark.long_only  # Spark's own retry of a lost task, 19 s: every file once is also the race test's rule
def test_an_executor_killed_mid_build_is_replaced_and_the_retried_task_leaves_every_file_once(
    tmp_path, spark_cluster, postgres, s3
):
    files = 8
    conf_path, lake = _lake(tmp_path, postgres, s3, "iceberg", ON_SPARK + "split_bytes = 1\nopen_cost_bytes = 0\n")
    _fill(lake, files)  # one task per file
    config = load_config(conf_path)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    run = Run(
        tmp_path,
        ["build", "--conf", str(conf_path), "--table", lake.name],
        tuple(spark_cluster.submit_args(tmp_path / "events")),
        SKIPINDEX_TEST_PAUSE_AT="first-task",
        SKIPINDEX_TEST_TASK_DIR=str(tasks),
        **SUBMIT_ENV,
    )
    try:
        deadline = time.monotonic() + 180
        while not (tasks / "paused").exists() or not (tasks / "paused").read_text():
            assert run.process.poll() is None, f"the build exited before a task ran: {run.err.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no Spark task started in 180 s"
            time.sleep(0.1)
        paused, worker_pid = (tasks / "paused").read_text().split()
        os.kill(_executor_of(int(worker_pid)), signal.SIGKILL)  # the task's executor dies with the task in it
        (tasks / "released").touch()
        run.finish()
    finally:
        (tasks / "released").touch()
        _kill_left([run])

    partition = paused.split("-")[0]
    retries = [p.name for p in tasks.iterdir() if p.name.startswith(f"{partition}-") and p.name != paused]
    assert retries, f"task {partition} ran again after its executor was killed (attempts: {os.listdir(tasks)})"
    events = spark_cluster.events(tmp_path / "events")
    lost = [
        e for e in events if e["Event"] == "SparkListenerTaskEnd" and "ExecutorLost" in e["Task End Reason"]["Reason"]
    ]
    assert lost, "Spark's event log shows a task lost with its executor"
    assert sum(e["Event"] == "SparkListenerExecutorAdded" for e in events) >= 2, "a new executor took over"
    paths, watermark = _state(config, lake.name)
    assert paths == _live(config, lake.name) and len(paths) == files, "every live file exactly once"
    assert watermark == lake.version()
