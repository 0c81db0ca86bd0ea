"""Progress of an index build that a person can follow: files and bytes done, the rate and the time left, logged
every few seconds (the CLI logs to stderr), then one summary line. Work shorter than the interval logs only the
summary: a line per second of a two-second build says nothing.

In the driver (indexing/local.py) the figures move file by file. Spark tasks count what they indexed in
accumulators, which the driver sees only as each task ends, so there the figures move task by task; a table that
would otherwise run as one task per core is planned with more, smaller tasks (indexing/splits.py
`progress_parallelism`) so they still move."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

Task = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]

# Seconds between progress lines, and before the first: shorter work gets only the summary line.
REPORT_SECONDS = 5.0


class Progress:
    """Files and bytes done out of a known total. `count` is called once per file's output; a reporter thread logs
    `line()` every `REPORT_SECONDS` while the work runs, and `summary()` when it ends without an error."""

    def __init__(self, table: str, files: int, size: int, open_cost: int, where: str, verb: str = "indexed") -> None:
        self.table, self.files, self.size, self.open_cost = table, files, size, open_cost
        self.where, self.verb = where, verb
        self.every = REPORT_SECONDS
        self._done = (0, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, name=f"skipindex progress {table}", daemon=True)
        self._start = time.monotonic()

    def count(self, out: pa.RecordBatch) -> None:
        """Add one batch of task output (one row per file) to the figures."""
        files, size = self._done
        self._done = (files + out.num_rows, size + (pc.sum(out.column("file_size_in_bytes")).as_py() or 0))

    def done(self) -> tuple[int, int]:
        """(files, bytes) done so far."""
        return self._done

    def __enter__(self) -> Progress:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            log.info("%s", self.summary())

    def _elapsed(self) -> float:
        return max(time.monotonic() - self._start, 1e-9)

    def line(self) -> str:
        """Where the work is: files and MB done of the total, the rate and, once a file is done, the time left."""
        files, size = self.done()
        elapsed = self._elapsed()
        text = (
            f"{self.table}: {self.verb} {files:,} of {self.files:,} files ({size / 1e6:,.1f} of "
            f"{self.size / 1e6:,.1f} MB) in {elapsed:,.0f} s"
        )
        if not files:
            return text + f", {self.where}; no file finished yet"
        text += f", {files / elapsed:,.1f} files/s, {size / 1e6 / elapsed:,.2f} MB/s"
        done = size + files * self.open_cost  # the cost the splits were planned by (indexing/splits.py)
        total = self.size + self.files * self.open_cost
        if done < total:
            text += f", about {(total - done) * elapsed / done:,.0f} s left"
        return text

    def summary(self) -> str:
        files, size = self.done()
        elapsed = self._elapsed()
        return (
            f"{self.table}: {self.verb} {files:,} files ({size / 1e6:,.1f} MB) in {elapsed:,.1f} s, "
            f"{files / elapsed:,.1f} files/s, {size / 1e6 / elapsed:,.2f} MB/s, {self.where}"
        )

    def _report(self) -> None:
        while not self._stop.wait(self.every):
            log.info("%s", self.line())


class SparkProgress(Progress):
    """`Progress` of Spark tasks: the tasks count into accumulators, which reach the driver as each task ends."""

    def __init__(self, spark: SparkSession, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._files = spark.sparkContext.accumulator(0)
        self._bytes = spark.sparkContext.accumulator(0)

    def counting(self, task: Task) -> Task:
        """`task`, counting each batch of entries it yields (one per file) into the accumulators."""
        files, size = self._files, self._bytes

        def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for out in task(batches):
                files.add(out.num_rows)
                size.add(pc.sum(out.column("file_size_in_bytes")).as_py() or 0)
                yield out

        return run

    def done(self) -> tuple[int, int]:
        return self._files.value, self._bytes.value
