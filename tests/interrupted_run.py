"""`skipindex` in a subprocess that announces its steps, for the kill -9 and concurrency tests.

Nothing in indexlib's source is changed: the catalog's own commit steps, and the task the build hands to Spark, are
wrapped here to print a marker and, when asked, wait there so the test can kill the process (or release two
processes at once) at that exact point. Commit steps are printed by the driver on stdout; the Spark task prints
RUNNING on stderr (Spark forwards its Python workers' output there).

    SKIPINDEX_TEST_PAUSE_AT   running | metadata-written | before-commit | after-commit: announce it, then sleep
    SKIPINDEX_TEST_BARRIER    a file: the first commit waits until it exists (two writers released together)
    SKIPINDEX_TEST_TASK_DIR   a directory: each Spark task attempt writes `<partition>-<attempt>` there holding its
                              Python worker's pid; with PAUSE_AT=first-task, the first attempt to start also writes
                              `paused` ("<partition>-<attempt> <pid>") and waits until `released` appears (120 s at
                              most), so a test can kill its executor mid-build
    SKIPINDEX_TEST_TASK_FAILS any value: every Spark task raises, so the build's Spark job fails (as when its workers
                              die), with a Java stack in Spark's output
"""

import os
import sys
import time

from pyiceberg.catalog.sql import SqlCatalog

import indexlib.indexing.build as build

PAUSE_AT = os.environ.get("SKIPINDEX_TEST_PAUSE_AT", "")
BARRIER = os.environ.get("SKIPINDEX_TEST_BARRIER", "")
TASK_DIR = os.environ.get("SKIPINDEX_TEST_TASK_DIR", "")
TASK_FAILS = bool(os.environ.get("SKIPINDEX_TEST_TASK_FAILS"))
RUNNING = (
    "skipindex-test: a Spark task of the run is indexing files"  # tests/test_crash_and_concurrency.py waits for it
)
_write_metadata = SqlCatalog._write_metadata
_commit_table = SqlCatalog.commit_table
_index_files_task = build.index_files_task
_waited = False


def _marker(name: str) -> None:
    print(name, flush=True)
    if name == PAUSE_AT:
        time.sleep(600)


def write_metadata(metadata, io, metadata_path):
    _write_metadata(metadata, io, metadata_path)
    _marker("metadata-written")


def commit_table(self, table, requirements, updates):
    global _waited
    _marker("before-commit")
    if BARRIER and not _waited:
        _waited = True
        while not os.path.exists(BARRIER):
            time.sleep(0.05)
    response = _commit_table(self, table, requirements, updates)
    _marker("after-commit")
    return response


def index_files_task(*args, **kwargs):
    """The task Spark runs, announcing itself in the Python worker (and with PAUSE_AT=running, waiting there: the
    kill lands inside the Spark job, before any commit step)."""
    task = _index_files_task(*args, **kwargs)
    pause, pause_first, task_dir, fails = PAUSE_AT == "running", PAUSE_AT == "first-task", TASK_DIR, TASK_FAILS

    def announced(batches):
        print(RUNNING, file=sys.stderr, flush=True)
        if fails:
            raise RuntimeError("skipindex-test: this Python worker fails")
        if task_dir:
            _record_attempt(task_dir, pause_first)
        if pause:
            time.sleep(600)
        yield from task(batches)

    return announced


def _record_attempt(task_dir: str, pause_first: bool) -> None:
    """In the Spark task: note this attempt; the first attempt of the run, when asked, waits to be killed."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = f"{context.partitionId()}-{context.attemptNumber()}"
    with open(os.path.join(task_dir, attempt), "w") as out:
        out.write(str(os.getpid()))
    if not pause_first:
        return
    try:
        fd = os.open(os.path.join(task_dir, "paused"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, f"{attempt} {os.getpid()}".encode())
    os.close(fd)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(task_dir, "released")) and time.monotonic() < deadline:
        time.sleep(0.1)


SqlCatalog._write_metadata = staticmethod(write_metadata)
SqlCatalog.commit_table = commit_table
build.index_files_task = index_files_task

if __name__ == "__main__":
    from indexlib.cli import main

    sys.exit(main(sys.argv[1:]))
