"""`skipindex` in a subprocess that announces its steps, for the kill -9 and concurrency tests.

Nothing in indexlib's source is changed: the catalog's own commit steps, and the task the build hands to Spark, are
wrapped here to print a marker and, when asked, wait there so the test can kill the process (or release two
processes at once) at that exact point. Commit steps are printed by the driver on stdout; the Spark task prints
RUNNING on stderr (Spark forwards its Python workers' output there).

    SKIPINDEX_TEST_PAUSE_AT   running | metadata-written | before-commit | after-commit: announce it, then sleep
    SKIPINDEX_TEST_BARRIER    a file: the first commit waits until it exists (two writers released together)
"""

import os
import sys
import time

from pyiceberg.catalog.sql import SqlCatalog

import indexlib.indexing.build as build

PAUSE_AT = os.environ.get("SKIPINDEX_TEST_PAUSE_AT", "")
BARRIER = os.environ.get("SKIPINDEX_TEST_BARRIER", "")
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
    pause = PAUSE_AT == "running"

    def announced(batches):
        print(RUNNING, file=sys.stderr, flush=True)
        if pause:
            time.sleep(600)
        yield from task(batches)

    return announced


SqlCatalog._write_metadata = staticmethod(write_metadata)
SqlCatalog.commit_table = commit_table
build.index_files_task = index_files_task

if __name__ == "__main__":
    from indexlib.cli import main

    sys.exit(main(sys.argv[1:]))
