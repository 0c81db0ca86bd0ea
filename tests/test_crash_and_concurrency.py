"""Builds killed with SIGKILL at every step of a commit, and two real processes committing to one index at once.

Each run is a real `skipindex` subprocess (its own Spark) against the test's SQLite catalog; tests/interrupted_run.py
only makes the catalog's commit steps announce themselves (and wait when asked) so a kill lands exactly there.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from lakes import Lake, events_batch

from indexlib.config import load_config
from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.sources.registry import open_source
from indexlib.store.table import IndexTable

RUNNER = Path(__file__).with_name("interrupted_run.py")
SCHEMA = pa.schema([("id", pa.int64()), ("service", pa.string())])


def _batch(start: int, rows: int = 20) -> pa.Table:
    rng = random.Random(start)
    return pa.Table.from_pylist(
        [{"id": i, "service": rng.choice(["auth", "web", "mail"])} for i in range(start, start + rows)], schema=SCHEMA
    )


COMMIT_STEPS = ("metadata-written", "before-commit", "after-commit")  # as tests/interrupted_run.py announces them
RUNNING = "skipindex-test: a Spark task of the run is indexing files"  # its Spark task's marker, on stderr


class Run:
    """One `skipindex` subprocess in its own process group (so SIGKILL takes its JVM too)."""

    def __init__(
        self, tmp_path: Path, args: list[str], launcher: tuple[str, ...] = (sys.executable,), **env: str
    ) -> None:
        """`launcher` runs tests/interrupted_run.py: this Python, or spark-submit and its options."""
        self.out = tmp_path / f"run-{time.monotonic_ns()}.out"
        self.err = self.out.with_suffix(".err")
        environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, **env}
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                [*launcher, str(RUNNER), *args],
                stdout=out,
                stderr=err,
                env=environment,
                cwd=Path(__file__).parent.parent,
                start_new_session=True,
            )

    def wait_for(self, marker: str, stream: str = "out", timeout: float = 180) -> None:
        """Until stdout has the line `marker` (a commit step), or stderr has `marker` in a log line."""
        deadline = time.monotonic() + timeout
        while not (marker in self.out.read_text().splitlines() if stream == "out" else marker in self.err.read_text()):
            assert self.process.poll() is None, f"exited before {marker}: {self.err.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"no {marker} after {timeout}s"
            time.sleep(0.05)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def finish(self, timeout: float = 300) -> str:
        assert self.process.wait(timeout) == 0, self.err.read_text()[-3000:]
        return self.err.read_text()


def _state(config, name: str) -> tuple[collections.Counter, int | None]:
    index = IndexTable(config.load_catalog(), config.index_namespace, open_source(config, name).name)
    return collections.Counter(index.indexed().column("file_path").to_pylist()), index.watermark()


def _live(config, name: str) -> collections.Counter:
    return collections.Counter(f.path for f in open_source(config, name).live_files())


@pytest.mark.parametrize(
    ("kind", "kill_at"),
    [
        *(("iceberg", step) for step in ("running", "metadata-written", "before-commit", "after-commit")),
        *(("delta", step) for step in ("before-commit", "after-commit")),
    ],
)
def test_a_build_killed_at_any_step_leaves_the_index_before_or_after_and_the_next_run_completes(
    conf_path, config, catalog, spark, tmp_path, kind, kill_at
):
    table = Lake(kind, catalog, tmp_path, "crash")
    for n in range(3):
        table.append(_batch(n * 20))
    build_index(config, table.name, spark)
    before = _state(config, table.name)
    for n in range(3, 5):
        table.append(_batch(n * 20))
    after = (_live(config, table.name), table.version())

    args = ["build", "--conf", str(conf_path), "--table", table.name]
    run = Run(tmp_path, args, SKIPINDEX_TEST_PAUSE_AT=kill_at)
    if kill_at == "running":  # a Spark task announced itself and waits: the kill lands inside the Spark job
        run.wait_for(RUNNING, stream="err")
    else:
        run.wait_for(kill_at)
    run.kill()

    # where the kill landed: the last commit step the run announced, or none (in the Spark job, its task announced)
    steps = [line for line in run.out.read_text().splitlines() if line in COMMIT_STEPS]
    landed = steps[-1] if steps else "running" if RUNNING in run.err.read_text() else "before the Spark job"
    assert landed == kill_at, f"the run paused at {kill_at}, but the kill landed at {landed} (announced: {steps})"
    state = _state(config, table.name)
    if landed == "after-commit":
        assert state == after, "killed after the catalog committed: the commit stands"
    else:
        assert state == before, f"killed at {landed}: the catalog never saw the commit, the index is as before"
    build_index(config, table.name, spark)
    assert _state(config, table.name) == after, "the next run completes: each live file once, watermark current"


def test_a_backfill_killed_between_commits_resumes_without_duplicates(conf_path, catalog, spark, tmp_path):
    conf_path.write_text(
        conf_path.read_text() + "[build]\nindex_existing_files = false\nbackfill_files_per_commit = 2\n"
    )
    config = load_config(conf_path)
    table = catalog.create_table("db.old", schema=SCHEMA)
    for n in range(6):
        table.append(_batch(n * 20))
    build_index(config, "db.old", spark)  # the index starts now: all six files are old

    run = Run(
        tmp_path,
        ["backfill", "--conf", str(conf_path), "--table", "db.old"],
        SKIPINDEX_TEST_PAUSE_AT="after-commit",
    )
    run.wait_for("after-commit")
    run.kill()
    paths, _ = _state(config, "db.old")
    assert paths and max(paths.values()) == 1, "the first batch stands, once"
    assert len(paths) == 2, "one commit of two files landed before the kill"

    resumed = backfill(config, "db.old", None, spark)
    assert resumed.files_indexed == 4, "the rerun indexes only what is missing"
    assert _state(config, "db.old")[0] == _live(config, "db.old"), "every live file once"


@pytest.mark.parametrize("kind", ["iceberg", "delta"])
def test_a_build_and_a_backfill_committing_at_once_lose_nothing_and_duplicate_nothing(
    conf_path, catalog, spark, tmp_path, kind
):
    conf_path.write_text(conf_path.read_text() + "[build]\nindex_existing_files = false\n")
    config = load_config(conf_path)
    table = Lake(kind, catalog, tmp_path, "busy")
    for n in range(4):
        table.append(_batch(n * 20))
    build_index(config, table.name, spark)  # the index starts now
    for n in range(4, 6):
        table.append(_batch(n * 20))  # new files: the build's work (the backfill sees them too)

    barrier = tmp_path / "go"
    common = ["--conf", str(conf_path), "--table", table.name]
    runs = [
        Run(tmp_path, ["build", *common], SKIPINDEX_TEST_BARRIER=str(barrier)),
        Run(tmp_path, ["backfill", *common], SKIPINDEX_TEST_BARRIER=str(barrier)),
    ]
    for run in runs:
        run.wait_for("before-commit")
    barrier.touch()  # both planned against the same snapshot: one commit must lose and re-plan
    logs = [run.finish() for run in runs]
    assert any("commit conflict" in log for log in logs), "the two commits raced"
    paths, watermark = _state(config, table.name)
    assert paths == _live(config, table.name), "every live file exactly once"
    assert watermark == table.version(), "the build's watermark survived"


def test_backfill_batches_of_two_scheduler_tasks_committing_at_once_lose_nothing_and_duplicate_nothing(
    conf_path, catalog, spark, tmp_path
):
    """What the Airflow backfill DAG's mapped tasks do: one process per batch of partitions, committing together."""
    conf_path.write_text(conf_path.read_text() + "[build]\nindex_existing_files = false\n")
    config = load_config(conf_path)
    table = Lake("iceberg", catalog, tmp_path, "parts", partitioned=True)
    for n, part in enumerate("aabb"):
        table.append(events_batch(random.Random(n), n * 20, 20, part))
    build_index(config, table.name, spark)  # the index starts now: every file is the backfill's

    barrier = tmp_path / "go"
    common = ["backfill", "--conf", str(conf_path), "--table", table.name]
    runs = [
        Run(tmp_path, [*common, "--partition", f"part={part}"], SKIPINDEX_TEST_BARRIER=str(barrier)) for part in "ab"
    ]
    for run in runs:
        run.wait_for("before-commit")
    barrier.touch()
    logs = [run.finish() for run in runs]
    assert any("commit conflict" in log for log in logs), "the two commits raced"
    paths, watermark = _state(config, table.name)
    assert paths == _live(config, table.name), "every live file exactly once"
    assert watermark == table.version(), "backfill commits keep the watermark"
