"""`skipindex` in a subprocess that announces its commits, for the kill -9 and concurrency tests.

Nothing in indexlib is changed: the catalog's own commit steps are wrapped to print a marker line and, when
asked, wait there so the test can kill the process (or release two processes at once) at that exact point.

    SKIPINDEX_TEST_PAUSE_AT   metadata-written | before-commit | after-commit: print the marker, then sleep
    SKIPINDEX_TEST_BARRIER    a file: the first commit waits until it exists (two writers released together)
"""

import os
import sys
import time

from pyiceberg.catalog.sql import SqlCatalog

PAUSE_AT = os.environ.get("SKIPINDEX_TEST_PAUSE_AT", "")
BARRIER = os.environ.get("SKIPINDEX_TEST_BARRIER", "")
_write_metadata = SqlCatalog._write_metadata
_commit_table = SqlCatalog.commit_table
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


SqlCatalog._write_metadata = staticmethod(write_metadata)
SqlCatalog.commit_table = commit_table

if __name__ == "__main__":
    from indexlib.cli import main

    sys.exit(main(sys.argv[1:]))
