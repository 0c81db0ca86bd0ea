"""Following a table (indexing/follow.py, `skipindex build --follow`): a real follower process on a SQLite catalog
while pyiceberg and delta-rs commit to its table. Every wait polls the index's watermark until it reaches the
source's version (a generous deadline against hangs only, never a timed assertion); a stop by SIGTERM leaves an index
whose answers hold every matching file (brute force over the rows), a restart resumes from its watermark, and a
long-lived handle sees each new index snapshot on its next lookup. The decisions (when to build, what is retried)
are rule tables."""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from lakes import PARTS, QUERIES, Lake, checked_answers, events_batch, live_rows
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, ServerError

import indexlib
from indexlib.config import load_config
from indexlib.errors import BuildFailed, CommitConflict, JobFailed, Unavailable, UnsupportedFeature, UserError
from indexlib.handle import open_handle
from indexlib.indexing.follow import due, is_transient
from indexlib.query.sql import Clock
from indexlib.store.table import IndexTable

ROOT = Path(indexlib.__file__).resolve().parents[1]  # the follower runs the code under test
HANG = 180  # seconds: only a hang takes this long
CLOCK = Clock()


@pytest.mark.parametrize(
    "polled, built, build, rule",
    [
        (None, None, False, "an empty table has nothing to index"),
        (5, None, True, "the first round builds: it resumes from the index's watermark"),
        (5, 5, False, "nothing committed since the last build"),
        (7, 5, True, "new commits since the last build: one build takes them all"),
        (3, 5, True, "a rollback to an older version is a change too"),
    ],
)
def test_when_a_followed_table_is_built(polled, built, build, rule):
    assert due(polled, built) is build, rule


def _sql_error():
    from sqlalchemy.exc import OperationalError

    return OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked"))


@pytest.mark.parametrize(
    "error, transient, rule",
    [
        (CommitConflict("x"), True, "a commit race lost through every retry may be won later"),
        (JobFailed("x"), True, "a failed Spark job may succeed when run again"),
        (OSError("connection reset"), True, "an I/O error (network, object store) may pass"),
        (ConnectionError("refused"), True, "a refused connection may be accepted later"),
        (CommitFailedException("x"), True, "a lost race in the catalog may be won later"),
        (ServerError("503"), True, "a catalog service's 5xx may pass"),
        (_sql_error(), True, "a SQL catalog that is locked or dropped the connection may answer later"),
        (UserError("unknown table"), False, "bad input fails the same way every time"),
        (UnsupportedFeature("x"), False, "a table feature no reader handles stays so"),
        (BuildFailed("unreadable file"), False, "a file the build cannot index stays unreadable"),
        (NoSuchTableError("x"), False, "a dropped table does not come back by waiting"),
        (ValueError("x"), False, "a bug is not retried: its traceback is shown"),
    ],
)
def test_which_failures_the_follower_retries(error, transient, rule):
    assert is_transient(error) is transient, rule


class Follower:
    """`skipindex build --follow` in a subprocess, its output collected by threads."""

    def __init__(self, conf: Path, *tables: str, interval: float = 0.2) -> None:
        argv = [sys.executable, "-m", "indexlib.cli", "build", "--follow", "--conf", str(conf), "--interval"]
        argv += [str(interval), *(arg for table in tables for arg in ("--table", table))]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "JAVA_HOME": "/nonexistent/java"}  # small batches need no JVM
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=lambda s=stream, into=into: into.extend(s), daemon=True)
            for stream, into in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=HANG)
        for reader in self._readers:
            reader.join(timeout=HANG)
        return code

    def running(self) -> bool:
        return self.process.poll() is None


def _wait_indexed(follower: Follower, config, lake: Lake) -> None:
    """Until the index's watermark is the source's current version."""
    index = IndexTable(config.load_catalog(create=False), config.index_namespace, lake.name)
    deadline = time.monotonic() + HANG
    while index.reload() is None or index.watermark() != lake.version():
        assert follower.running(), f"the follower died: {''.join(follower.err)}"
        assert time.monotonic() < deadline, f"the follower did not catch up: {''.join(follower.out + follower.err)}"
        time.sleep(0.1)


def _unindexed(config, lake: Lake) -> int:
    from indexlib.lookup import lookup

    return lookup(config, lake.name, QUERIES[0][0], CLOCK).files_unindexed


def _versions(lake: Lake) -> int:
    """The source versions committed so far (no rollback here: each on the current one's history)."""
    if lake.kind == "delta":
        return lake.version() + 1
    from pyiceberg.table.snapshots import ancestors_of

    table = lake.iceberg.refresh()
    return len(list(ancestors_of(table.current_snapshot(), table.metadata)))


def _conf(conf_path: Path) -> Path:
    conf_path.write_text(conf_path.read_text() + "[follow]\nretries = 20\nmax_backoff_seconds = 2\n")
    return conf_path


@pytest.mark.parametrize("kind", ["iceberg", "delta"])
def test_a_follower_indexes_each_commit_stops_cleanly_on_sigterm_and_resumes_from_its_watermark(
    kind, conf_path, catalog, tmp_path
):
    config = load_config(_conf(conf_path))
    lake = Lake(kind, catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(58)
    lake.append(events_batch(rng, 0, 40, "a"))
    follower = Follower(conf_path, lake.name)
    _wait_indexed(follower, config, lake)
    handle = open_handle(config, lake.name)  # long-lived: made once, asked after every step
    held = handle.lookup(QUERIES[0][0], CLOCK)
    assert held.files_unindexed == 0, "the first batch indexed the table's file"

    for n in range(1, 4):  # commits in quick succession: one batch or several, each indexed
        lake.append(events_batch(rng, n * 40, 40, PARTS[n % 3]))
    _wait_indexed(follower, config, lake)
    assert handle.lookup(QUERIES[0][0], CLOCK).files_unindexed == 0, (
        "a long-lived handle sees the new index snapshot on its next lookup, no restart"
    )
    lake.delete("part = 'b'")  # a removal: the entries of removed files go
    lake.compact()  # a rewrite of every file
    _wait_indexed(follower, config, lake)
    for where, matches in QUERIES:
        answer, rows = handle.lookup(where, CLOCK), live_rows(config, lake.name)
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= set(answer.files) <= set(rows), f"{where!r}: every matching file, only live ones"
        assert answer.files_unindexed == 0, "after a rewrite the follower indexed the new files"

    assert follower.stop() == 0, f"SIGTERM stops the follower between batches, exit 0: {''.join(follower.err)}"
    batches = [line for line in follower.out if " version " in line and " indexed " in line]
    assert batches and all(lake.name in line and " behind the commit" in line for line in batches), (
        f"one line per batch: table, version, files, seconds behind: {follower.out}"
    )
    assert follower.out[-1].startswith(f"{lake.name}: stopped"), "the last line says it stopped"
    reported = sum(int(re.search(r": (\d+) commits?, ", line).group(1)) for line in batches)
    assert reported == _versions(lake), f"the batches' commits add up to the table's history: {batches}"
    checked_answers(config, lake.name, "after SIGTERM: ")
    stopped_at = IndexTable(config.load_catalog(), config.index_namespace, lake.name).watermark()
    assert stopped_at == lake.version(), "nothing half-written: the index holds the version of its last batch"

    lake.append(events_batch(rng, 1000, 40, "c"))  # committed while no follower runs
    again = Follower(conf_path, lake.name)
    _wait_indexed(again, config, lake)
    assert again.stop() == 0
    assert f"following from index watermark {stopped_at}" in again.out[0], "a restart resumes from the watermark"
    assert _unindexed(config, lake) == 0, "the commit made while it was stopped is indexed"
    checked_answers(config, lake.name, "after the restart: ")


def test_an_unknown_table_is_one_line_and_a_non_zero_exit(conf_path, catalog):
    follower = Follower(conf_path, "db.nope")
    code = follower.process.wait(timeout=HANG)
    for reader in follower._readers:
        reader.join(timeout=HANG)
    lines = [line for line in "".join(follower.err).splitlines() if line.strip()]
    assert code == 2, "a permanent error exits with its kind's code (UserError: 2)"
    assert len(lines) == 1 and lines[0].startswith("skipindex: error: unknown table 'db.nope'"), lines


def test_a_locked_catalog_is_retried_with_back_off_and_the_follower_catches_up(conf_path, catalog, tmp_path):
    config = load_config(_conf(conf_path))
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(7)
    lake.append(events_batch(rng, 0, 40, "a"))
    follower = Follower(conf_path, lake.name)
    _wait_indexed(follower, config, lake)
    lake.append(events_batch(rng, 40, 40, "b"))
    # a writer holds SQLite's exclusive lock longer than the catalog's 5 s busy timeout: every read of the catalog
    # fails while it holds it
    locker = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    deadline = time.monotonic() + HANG
    while not any("retrying in" in line for line in follower.err):
        assert follower.running() and time.monotonic() < deadline, f"no retry: {''.join(follower.err)}"
        time.sleep(0.2)
    locker.execute("COMMIT")
    locker.close()
    _wait_indexed(follower, config, lake)
    assert follower.stop() == 0, "a transient failure does not end the follower"
    assert _unindexed(config, lake) == 0, "the commit made during the outage is indexed once it passed"


@pytest.mark.parametrize(
    "failures, retries, outcome, rule",
    [
        ([OSError("reset")] * 2, 3, "done", "transient failures are retried until the step succeeds"),
        ([OSError("reset")] * 4, 3, Unavailable, "after `retries` retries in a row the outage is raised as one line"),
        ([UserError("unknown table")], 3, UserError, "a permanent failure is raised at once, not retried"),
        ([CommitConflict("race")], 0, CommitConflict, "retries = 0: the first failure is raised"),
    ],
)
def test_retries_follow_the_rules(failures, retries, outcome, rule):
    from indexlib.config import FollowSettings
    from indexlib.indexing.follow import _retrying

    calls = []

    def step():
        calls.append(1)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return "done"

    settings = FollowSettings(retries=retries, max_backoff_seconds=0.01)
    if outcome == "done":
        assert _retrying(settings, threading.Event(), "t", step) == "done", rule
        assert len(calls) == len(failures) + 1, rule
    else:
        with pytest.raises(outcome):
            _retrying(settings, threading.Event(), "t", step)
        permanent = not is_transient(failures[0])
        assert len(calls) == (1 if permanent else retries + 1), rule


def test_a_stop_during_a_back_off_ends_it_without_another_attempt():
    from indexlib.config import FollowSettings
    from indexlib.indexing.follow import _retrying

    stop, calls = threading.Event(), []

    def step():
        calls.append(1)
        stop.set()  # as SIGTERM would, while the step runs
        raise OSError("reset")

    assert _retrying(FollowSettings(retries=5), stop, "t", step) is None, "stopped: nothing to report, no error"
    assert len(calls) == 1, "no attempt after the stop"


def test_the_follower_compacts_the_index_every_few_batches_expires_its_snapshots_and_answers_stay_right(
    conf_path, catalog, tmp_path, monkeypatch
):
    from indexlib.indexing import follow

    monkeypatch.setattr(follow, "COMPACT_EVERY", 2)
    conf = _conf(conf_path)
    conf.write_text(conf.read_text() + "expire_after_minutes = 0.001\n")  # 60 ms: every snapshot but the last
    config = load_config(conf)
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(5)
    lake.append(events_batch(rng, 0, 40, "a"))
    stop, lines = threading.Event(), []
    runner = threading.Thread(
        target=follow.follow, args=(config, [lake.name]), kwargs={"stop": stop, "out": lines.append}
    )
    runner.start()  # in a thread: no signal handlers, the test sets `stop` itself
    index = IndexTable(config.load_catalog(), config.index_namespace, lake.name)
    for n in range(1, 5):
        lake.append(events_batch(rng, n * 40, 40, PARTS[n % 3]))
        deadline = time.monotonic() + HANG
        while index.reload() is None or index.watermark() != lake.version():
            assert runner.is_alive() and time.monotonic() < deadline, f"the follower did not catch up: {lines}"
            time.sleep(0.1)
    stop.set()
    runner.join(timeout=HANG)
    compactions = [line for line in lines if "; index compacted from " in line]
    assert len(compactions) >= 2, f"every 2 batches the index is compacted: {lines}"
    assert all(" old snapshots expired" in line for line in compactions), f"each compaction expires: {lines}"
    snapshots = len(index.reload().snapshots())
    assert snapshots <= 3, f"snapshots older than expire_after_minutes are expired after a compaction: {snapshots}"
    assert _unindexed(config, lake) == 0, "compaction keeps every entry"
    checked_answers(config, lake.name, "after compactions: ")
