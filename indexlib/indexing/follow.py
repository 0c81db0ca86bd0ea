"""Following tables: `skipindex build --follow` indexes each new commit of its tables within seconds, in one
long-running process.

Each round asks every table for its current version (`Source.refreshed`: for an Iceberg table in a SQL catalog one
query of the catalog's row, the metadata read only when it moved; for Delta the log entries since the version it
has) and runs the ordinary incremental build (indexing/build.py) on each table whose version is not the one its
last build reached (`due`). A build indexes everything up to the source's version when it starts, so the commits
that arrived while the previous build ran are one batch; removals, compactions, expiry and rollbacks are handled as
`skipindex build` handles them, in the process for small batches and on Spark above `[build] local_max_files` /
`local_max_bytes`. A round that built nothing waits `[follow] interval_seconds` before the next. Every
`COMPACT_EVERY` batches of a table its index is compacted (`skipindex compact`): each batch adds small index
files that every later build reads (the file rows it plans from), so an index followed for hours would otherwise
cost more per batch as it goes; the compaction also rebuilds the filters the growing table has outgrown. Its index
snapshots older than `[follow] expire_after_minutes` are then expired (`skipindex expire`): one per batch, all listed
in the metadata every commit rewrites, they would make each commit slower by the day.

Failures: a transient one (`is_transient`: a lost commit race, a failed Spark job, an I/O or catalog outage) is
retried with jittered exponential back-off, up to `[follow] retries` consecutive times, then raised (an outage that
is not one of our kinds as `Unavailable`, one line); a permanent one
(bad input, such as an unknown table; a file the build cannot index) is raised at once: the command line prints its
one line and exits with its kind's code (indexlib/errors.py).

Stopping: SIGTERM or SIGINT sets `stop`, which the loop reads between batches and during its waits: a build under
way runs to its commit (one Iceberg commit holds the entries and the watermark, store/table.py), then the follower
returns. A second signal exits at once; the batch under way is then not committed, and the index is as the last
batch left it. A restart resumes from the index's watermark, as every build does.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import tenacity
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
    ServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
    WaitingForLockException,
)

from indexlib.errors import SkipIndexError, Unavailable, UserError
from indexlib.indexing.build import BuildResult, build_index
from indexlib.indexing.upkeep import CompactResult, ExpireResult, compact, expire
from indexlib.sources.registry import open_source
from indexlib.store.table import IndexTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.config import Config, FollowSettings

log = logging.getLogger(__name__)

COMPACT_EVERY = 50  # batches of a table between two compactions of its index (docs/benchmarks.md, "Following a table")
# The build's own planning and progress lines: a follower prints one line per batch instead.
_QUIET = ("indexlib.indexing.build", "indexlib.indexing.progress")
# pyiceberg's errors of a catalog or service that may answer next time (REST 5xx and 429, a lock, a lost race)
_TRANSIENT_CATALOG = (
    CommitFailedException,
    CommitStateUnknownException,
    ServerError,
    ServiceUnavailableError,
    TooManyRequestsError,
    WaitingForLockException,
)


def due(polled: int | None, built: int | None) -> bool:
    """Whether a table needs a build: its current version is not the one its last build reached (an older one
    after a rollback counts too). A table with no snapshot has nothing to index."""
    return polled is not None and polled != built


def is_transient(exc: BaseException) -> bool:
    """Whether the same batch may succeed if tried again later: our retryable kinds (a commit race lost through
    every retry, a failed Spark job), an I/O error (a network or object-store outage), a catalog that is busy,
    locked or answering 5xx / 429, a SQL catalog's operational error (SQLite locked, a dropped connection).
    Bad input (`UserError`) and a file a build cannot index (`BuildFailed`) fail the same way every time."""
    if isinstance(exc, SkipIndexError):
        return exc.retryable
    if isinstance(exc, (OSError, *_TRANSIENT_CATALOG)):
        return True
    sql_errors = sys.modules.get("sqlalchemy.exc")  # imported by a SQL catalog, the only place it can come from
    return sql_errors is not None and isinstance(exc, sql_errors.OperationalError)


def backoff(settings: FollowSettings) -> tenacity.wait.wait_base:
    """The wait before retry n: random in [0, min(max_backoff_seconds, 0.5 s * 2^n)] (jittered, so followers of one
    catalog do not retry in step)."""
    return tenacity.wait_random_exponential(multiplier=0.5, max=settings.max_backoff_seconds)


@dataclass(frozen=True)
class Batch:
    """One build of a followed table that committed: what it did and how far behind the source it was."""

    result: BuildResult
    commits: int | None  # source commits it covered (None: the source cannot tell)
    behind: float | None  # seconds from the newest of them to the index commit
    oldest_behind: float | None  # ... from the oldest of them
    seconds: float  # the build's own time
    compacted: CompactResult | None = None  # the index compacted after the batch
    expired: ExpireResult | None = None  # ... and its old snapshots expired

    def line(self) -> str:
        r = self.result
        parts = [_count(r.files_indexed, "file") + f" indexed ({r.rows_indexed} rows)", f"{r.entries_dropped} removed"]
        if self.commits is not None:
            parts.insert(0, _count(self.commits, "commit"))
        lag = "" if self.behind is None else f", {self.behind:.1f} s behind the commit"
        if self.oldest_behind is not None and self.commits is not None and self.commits > 1:
            lag += f" ({self.oldest_behind:.1f} s behind the oldest)"
        skipped = "".join(f"; skipped unreadable file (left unindexed, always kept): {why}" for _, why in r.skipped)
        compacted = (
            ""
            if self.compacted is None
            else f"; index compacted from {self.compacted.data_files_before} to {self.compacted.data_files_after} files"
        )
        if self.compacted is not None and self.compacted.payloads_resized:
            compacted += f", {self.compacted.payloads_resized} outgrown filters rebuilt"
        if self.expired is not None and self.expired.expiry is not None:
            compacted += f", {self.expired.expiry.snapshots_expired} old snapshots expired"
        return f"{r.table}: version {r.source_version}: {', '.join(parts)} in {self.seconds:.1f} s{lag}{skipped}{compacted}"


class _Followed:
    """One followed table: its source as last polled, and the version its last build reached."""

    def __init__(self, config: Config, name: str, catalog: Any) -> None:
        self.name = name
        self.source = open_source(config, name, catalog)  # an unknown table: one line, exit 2
        self.watermark = IndexTable(catalog, config.index_namespace, self.source.name).watermark()
        self.built: int | None = None  # None: build once on start (resumes from the index's watermark)
        self.batches = 0  # committed since the last compaction

    def poll(self) -> int | None:
        try:
            self.source = self.source.refreshed()
        except (NoSuchTableError, NoSuchNamespaceError):
            raise UserError(f"{self.name}: the table is no longer in the catalog; stopped following it") from None
        return self.source.current_version()


def follow(
    config: Config,
    tables: Sequence[str],
    *,
    stop: threading.Event | None = None,
    max_seconds: float | None = None,
    spark: SparkSession | None = None,
    out: Callable[[str], None] = print,
) -> None:
    """Index each new commit of `tables` until `stop` is set (SIGTERM / SIGINT set it when called from the main
    thread) or `max_seconds` have passed, at a batch boundary; one `out` line per batch committed (see the module
    docstring). Raises the first permanent failure, or a transient one after `[follow] retries` attempts."""
    if not tables:
        raise UserError(
            "skipindex build --follow needs tables: --table T (repeatable) or [follow] tables in the configuration"
        )
    settings = config.follow
    stop = stop if stop is not None else threading.Event()
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    catalog = config.load_catalog()
    followed = [_Followed(config, name, catalog) for name in dict.fromkeys(tables)]
    for table in followed:
        out(
            f"{table.name}: following from index watermark {table.watermark} (source version "
            f"{table.source.current_version()}); polling every {settings.interval_seconds:g} s"
        )
    with _quiet_build_logs(), _stopping_on_signals(stop) as rearm:
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            built_any = False
            for table in followed:
                if stop.is_set():
                    break
                batch = _retrying(settings, stop, table.name, functools.partial(_step, config, table, catalog, spark))
                rearm()  # a Spark session started by the build installs its own SIGINT handler
                if batch is not None:
                    built_any = True
                    out(batch.line())
            if not built_any:
                stop.wait(settings.interval_seconds)
    for table in followed:
        out(f"{table.name}: stopped; the index holds source version {table.built}")


def _step(config: Config, table: _Followed, catalog: Any, spark: SparkSession | None) -> Batch | None:
    """Poll `table` and, when `due`, build it: the batch, or None when nothing was committed."""
    if not due(table.poll(), table.built):
        return None
    since = table.watermark
    started = time.monotonic()
    result = build_index(config, table.name, spark, catalog)
    seconds = time.monotonic() - started
    table.built = result.source_version
    if not result.committed or result.source_version is None:
        table.watermark = result.source_version  # another writer may have built it: the index is there now
        return None
    table.watermark = result.source_version
    now = time.time()
    source = table.source.refreshed()  # at least as new as the version the build reached
    times = source.commit_times(since, result.source_version)
    table.batches += 1
    compacted = expired = None
    if table.batches >= COMPACT_EVERY:
        compacted, table.batches = compact(config, table.name, spark), 0
        expired = expire(config, table.name, timedelta(minutes=config.follow.expire_after_minutes), retain_last=1)
    return Batch(
        result,
        commits=len(times) or None,
        behind=now - times[-1] if times else None,
        oldest_behind=now - times[0] if times else None,
        seconds=seconds,
        compacted=compacted,
        expired=expired,
    )


def _retrying(
    settings: FollowSettings, stop: threading.Event, name: str, step: Callable[[], Batch | None]
) -> Batch | None:
    """`step()`, again after a transient failure (`is_transient`) with `backoff`, up to `settings.retries` times in
    a row; the failure is raised after that, a permanent one at once. A stop during a wait returns None."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_transient),
        stop=tenacity.stop_after_attempt(settings.retries + 1) | tenacity.stop_when_event_set(stop),  # ... and retrying
        wait=backoff(settings),
        sleep=lambda seconds: _wait(stop, seconds),  # a stop ends the wait at once ...
        before_sleep=lambda state: log.warning(
            "%s: %s (attempt %d of %d); retrying in %.1f s",
            name,
            _one_line(state.outcome.exception() if state.outcome else None),
            state.attempt_number,
            settings.retries + 1,
            state.upcoming_sleep,
        ),
        reraise=True,
    )
    try:
        return retrying(step)
    except SkipIndexError as exc:
        if stop.is_set() and exc.retryable:  # stopped while waiting to retry: nothing was committed
            return None
        raise
    except Exception as exc:
        if not is_transient(exc):
            raise  # a bug: its traceback
        if stop.is_set():
            return None
        # an outage that outlasted every retry: one line, not a traceback
        raise Unavailable(f"{name}: gave up after {settings.retries + 1} attempts: {_one_line(exc)}") from exc


def _wait(stop: threading.Event, seconds: float) -> None:
    stop.wait(seconds)


def _one_line(exc: BaseException | None) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split()) if exc is not None else "failed"


@contextlib.contextmanager
def _quiet_build_logs() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _QUIET]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextlib.contextmanager
def _stopping_on_signals(stop: threading.Event) -> Iterator[Callable[[], None]]:
    """SIGTERM and SIGINT set `stop` (the loop ends after the batch under way); a second one exits at once. Only the
    main thread can install handlers: elsewhere the caller sets `stop` itself. Yields `rearm`, which installs the
    handlers again (a SparkContext installs its own SIGINT handler when it starts)."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise SystemExit(128 + signum)
        log.warning(
            "%s: stopping after the batch under way (send it again to stop at once)", signal.Signals(signum).name
        )
        stop.set()

    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.getsignal(s) for s in signals}

    def rearm() -> None:
        for s in signals:
            signal.signal(s, handler)

    rearm()
    try:
        yield rearm
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
