"""Spark tasks planned by bytes, the way Spark's own file scan plans them (`FilePartition.getFilePartitions`), so a
build of many small files runs a few tasks instead of one per file, and large files still spread over the cores.

Each file costs its size plus an open cost (`[build] open_cost_bytes`, Spark's `spark.sql.files.openCostInBytes`);
the split size is `min(split_bytes, max(open_cost_bytes, total cost / parallelism))` (Spark's
`maxPartitionBytes` rule), and files, largest first, fill a split until the next would overflow it. A file larger
than the split size gets a split of its own (files are not cut by row group).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from indexlib.sources.base import DataFileRef


@dataclass(frozen=True)
class Split:
    """The files one Spark task indexes."""

    files: tuple[DataFileRef, ...]


def split_size(files: Sequence[DataFileRef], split_bytes: int, open_cost_bytes: int, parallelism: int) -> int:
    total = sum(f.file_size_in_bytes + open_cost_bytes for f in files)
    return min(split_bytes, max(open_cost_bytes, total // max(1, parallelism)))


def plan_splits(files: Sequence[DataFileRef], split_bytes: int, open_cost_bytes: int, parallelism: int) -> list[Split]:
    """Every file in exactly one split, no split over the split size unless one file alone is."""
    limit = split_size(files, split_bytes, open_cost_bytes, parallelism)
    splits: list[Split] = []
    current: list[DataFileRef] = []
    size = 0
    for ref in sorted(files, key=lambda f: (-f.file_size_in_bytes, f.path)):
        cost = ref.file_size_in_bytes + open_cost_bytes
        if current and size + cost > limit:
            splits.append(Split(tuple(current)))
            current, size = [], 0
        current.append(ref)
        size += cost
    if current:
        splits.append(Split(tuple(current)))
    return splits


# A table planned with one task per core reports no progress until its tasks end (accumulators reach the driver
# when a task ends): give it up to this many tasks per core, each of at least PROGRESS_TASK_BYTES of cost (its files'
# bytes and open costs), so a task's fixed cost (~0.1-0.25 s for a Python task, docs/benchmarks.md) stays small
# against its work while progress moves step by step.
PROGRESS_TASKS_PER_CORE = 4
PROGRESS_TASK_BYTES = 8 * 1024 * 1024


def progress_parallelism(files: Sequence[DataFileRef], parallelism: int, open_cost_bytes: int) -> int:
    """The task count to plan for (Spark's `minPartitionNum`): the cores, or more when the work is big enough that
    several tasks per core cost little and let progress move."""
    cost = sum(f.file_size_in_bytes + open_cost_bytes for f in files)
    return max(parallelism, min(PROGRESS_TASKS_PER_CORE * parallelism, cost // PROGRESS_TASK_BYTES))
