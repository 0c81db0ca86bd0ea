"""Progress of a long index build that a person can follow: files and bytes done, the rate and the time left,
logged every few seconds (the CLI logs to stderr). Spark tasks count what they indexed in accumulators, which the
driver sees as each task ends, so the figures move one task at a time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Task = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


class Progress:
    def __init__(
        self, spark: SparkSession, table: str, files: int, size: int, open_cost: int, every: float = 10.0
    ) -> None:
        self.table, self.files, self.size, self.open_cost, self.every = table, files, size, open_cost, every
        self._files = spark.sparkContext.accumulator(0)
        self._bytes = spark.sparkContext.accumulator(0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, name=f"skipindex progress {table}", daemon=True)
        self._start = time.monotonic()

    def counting(self, task: Task) -> Task:
        """`task`, counting each batch of entries it yields (one per file) into the accumulators."""
        files, size = self._files, self._bytes

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for out in task(batches):
                files.add(out.num_rows)
                size.add(pc.sum(out.column("file_size_in_bytes")).as_py() or 0)
                yield out

        return run

    def __enter__(self) -> Progress:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            log.info("%s", self.line())

    def line(self) -> str:
        files, size = self._files.value, self._bytes.value
        elapsed = max(time.monotonic() - self._start, 1e-9)
        text = (
            f"{self.table}: indexed {files:,} of {self.files:,} files ({size / 1e6:,.1f} of {self.size / 1e6:,.1f} MB) "
            f"in {elapsed:,.0f} s, {files / elapsed:,.1f} files/s, {size / 1e6 / elapsed:,.2f} MB/s"
        )
        done = size + files * self.open_cost  # the cost the splits were planned by (indexing/splits.py)
        total = self.size + self.files * self.open_cost
        if 0 < done < total:
            text += f", about {(total - done) * elapsed / done:,.0f} s left"
        return text

    def _report(self) -> None:
        while not self._stop.wait(self.every):
            log.info("%s", self.line())
