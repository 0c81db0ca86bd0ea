"""The interface between stored statistics and the pruning rules (as DataFusion's PruningStatistics).

A provider answers, for N files at once, what is known about one column: bounds and counts (`ColumnStatistics`),
and the payloads of the index kinds built for it. Whatever a provider cannot say is unknown (null bounds, -1
counts, None payloads), and every rule reads unknown as "might match, not proven".
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexlib.statistics.column_stats import physical_arrow_type, supports_bounds

if TYPE_CHECKING:
    from pyiceberg.types import IcebergType

log = logging.getLogger(__name__)

T = TypeVar("T")


class ColumnRef(Protocol):
    """A column of the table being pruned (a bound column of the query language has these)."""

    @property
    def field_id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def type(self) -> IcebergType: ...  # the pyiceberg type in the table's current schema


@dataclass(frozen=True)
class ColumnStatistics:
    """One column over N files. Counts are -1 where unknown; bounds are null where unknown."""

    lower: pa.Array
    upper: pa.Array
    value_count: np.ndarray
    null_count: np.ndarray
    nan_count: np.ndarray

    @staticmethod
    def unknown(n: int, arrow_type: pa.DataType) -> ColumnStatistics:
        missing = np.full(n, -1, dtype=np.int64)
        return ColumnStatistics(pa.nulls(n, arrow_type), pa.nulls(n, arrow_type), missing, missing, missing)

    @cached_property
    def known(self) -> np.ndarray:
        return self.value_count >= 0

    @cached_property
    def comparable_values(self) -> np.ndarray:
        """Rows that are neither NULL nor NaN (the ones bounds describe); -1 where unknown."""
        return np.where(self.known, self.value_count - self.null_count - self.nan_count, -1)

    def take(self, files: np.ndarray) -> ColumnStatistics:
        """The statistics of `files` (indices) only, in that order."""
        index = pa.array(files, pa.int64())
        return ColumnStatistics(
            lower=self.lower.take(index),
            upper=self.upper.take(index),
            value_count=self.value_count[files],
            null_count=self.null_count[files],
            nan_count=self.nan_count[files],
        )

    def window(self, start: int, stop: int) -> ColumnStatistics:
        """Files start..stop-1 only."""
        return ColumnStatistics(
            lower=self.lower.slice(start, stop - start),
            upper=self.upper.slice(start, stop - start),
            value_count=self.value_count[start:stop],
            null_count=self.null_count[start:stop],
            nan_count=self.nan_count[start:stop],
        )


class Decoded:
    """What kinds decoded from the payloads of one (column, kind, version) of one provider, by name: the provider
    keeps one per (column, kind, version) as long as itself (a handle keeps its provider per table state), so a
    payload is decoded once however many lookups probe it. A decoded value must be keyed by container (the
    provider's file or row-group index): a container's payload never changes within one provider."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}

    def get(self, name: str, make: Callable[[], T]) -> T:
        """The value kept under `name`, made by `make()` the first time."""
        with self._lock:
            if name not in self._values:
                self._values[name] = make()
            return self._values[name]


class Payloads(Sequence["bytes | None"]):
    """Payloads of some containers (`containers[i]`'s is `self[i]`: bytes, or None where it has none), with the
    provider's `Decoded` of their (column, kind, version) when it keeps one. A slice keeps both, narrowed."""

    def __init__(self, items: list[bytes | None], containers: np.ndarray, decoded: Decoded | None = None) -> None:
        self.items, self.containers, self.decoded = items, containers, decoded

    @overload
    def __getitem__(self, index: int) -> bytes | None: ...
    @overload
    def __getitem__(self, index: slice) -> Payloads: ...
    def __getitem__(self, index: int | slice) -> bytes | None | Payloads:
        if isinstance(index, slice):
            return Payloads(self.items[index], self.containers[index], self.decoded)
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[bytes | None]:
        return iter(self.items)


class StatisticsProvider(ABC):
    """Statistics of N files. `column` and `payloads` are asked once per column (and kind) per lookup stage, so
    providers decode lazily and cache."""

    num_files: int

    @abstractmethod
    def column(self, column: ColumnRef) -> ColumnStatistics:
        """Bounds (in the column's physical domain, see column_stats) and counts of `column` in each file."""

    def payloads(self, column: ColumnRef, kind: str, version: int, files: np.ndarray) -> Sequence[bytes | None]:
        """The payload of index `kind` (at most `version`) for `column` of each of `files` (indices, ascending),
        None where there is none. Only those files' payloads need be read. A provider that keeps what kinds decode
        returns `Payloads` carrying its `Decoded`."""
        return [None] * len(files)

    def key_holders(self, column: ColumnRef, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The global key index's rows for `hashes` (int64, sorted, unique: statistics/key_hash.py): per file
        whether `column` is keyed (a key row for every distinct value it holds), and the (file index, hash) pairs of
        its key rows among `hashes`; None where there is no key index."""
        return None

    def damaged(self, column: ColumnRef, what: str, files: np.ndarray, error: Exception) -> None:
        """Files whose `what` (a kind's name, or "bounds") of `column` could not be read and were read as unknown:
        one warning per provider (one lookup) and (column, what), naming how many files and one of them."""
        reported: set[tuple[int, str]] = self.__dict__.setdefault("_reported_damage", set())
        if not len(files) or (column.field_id, what) in reported:
            return
        reported.add((column.field_id, what))
        log.warning(
            "ignoring %d corrupt %s payload(s) of column %s, read as unknown (e.g. data file %s): %s",
            len(files),
            what,
            column.name,
            self.file_name(int(files[0])),
            error,
        )

    def file_name(self, index: int) -> str:
        """How file `index` is named in warnings."""
        return f"#{index}"


def isolate_damage(
    n: int, run: Callable[[int, int], T], unknown: Callable[[int], T], error: Exception
) -> tuple[list[T], np.ndarray, Exception]:
    """After `run(0, n)` raised `error`: `run` over halves of 0..n-1, recursively, down to single items; each item
    that fails alone gets `unknown(1)`. Returns the parts in order (covering 0..n-1), the failed items, and the
    first of their errors (else `error`). k bad items among n cost O(k log n) calls of `run`.

    Safe: unknown is what a missing statistic already means, so a damaged file is kept and never proven, and every
    other file gets exactly the answer it gets without the damaged one (each file's answer depends only on its own
    statistics). Free on healthy data: the halving runs only after the fast path raised."""
    parts: list[T] = []
    bad = np.zeros(n, dtype=bool)
    errors: list[Exception] = []

    def failed(start: int, stop: int, exc: Exception) -> None:
        if stop - start <= 1:
            if stop > start:
                bad[start] = True
                errors.append(exc)
                parts.append(unknown(1))
            return
        middle = (start + stop) // 2
        for low, high in ((start, middle), (middle, stop)):
            try:
                part = run(low, high)
            except Exception as sub:
                failed(low, high, sub)
            else:
                parts.append(part)

    failed(0, n, error)
    return parts, bad, errors[0] if errors else error


class NoStatistics(StatisticsProvider):
    """N files of which nothing is known."""

    def __init__(self, num_files: int) -> None:
        self.num_files = num_files

    def column(self, column: ColumnRef) -> ColumnStatistics:
        return ColumnStatistics.unknown(
            self.num_files, physical_arrow_type(column.type) if supports_bounds(column.type) else pa.null()
        )


class Placed(StatisticsProvider):
    """`inner`'s statistics of k files, placed at `positions` (ascending) among `num_files`; unknown elsewhere. A
    lookup judges a few unindexed files among many this way, without listing the others' records."""

    def __init__(self, inner: StatisticsProvider, positions: np.ndarray, num_files: int) -> None:
        self.inner, self.positions, self.num_files = inner, np.asarray(positions, dtype=np.int64), num_files
        self._columns: dict[int, ColumnStatistics] = {}

    def column(self, column: ColumnRef) -> ColumnStatistics:
        if column.field_id not in self._columns:
            found = self.inner.column(column)
            index = np.full(self.num_files, -1, dtype=np.int64)
            index[self.positions] = np.arange(len(self.positions))
            present = pa.array(index >= 0)
            taken = pa.array(np.where(index >= 0, index, 0), pa.int64())

            def spread(counts: np.ndarray) -> np.ndarray:
                out = np.full(self.num_files, -1, dtype=np.int64)
                out[self.positions] = counts
                return out

            def bounds(values: pa.Array) -> pa.Array:
                if not len(values):
                    return pa.nulls(self.num_files, values.type)
                return pc.if_else(present, values.take(taken), pa.nulls(self.num_files, values.type))

            self._columns[column.field_id] = ColumnStatistics(
                lower=bounds(found.lower),
                upper=bounds(found.upper),
                value_count=spread(found.value_count),
                null_count=spread(found.null_count),
                nan_count=spread(found.nan_count),
            )
        return self._columns[column.field_id]

    def file_name(self, index: int) -> str:
        return self.inner.file_name(int(np.searchsorted(self.positions, index)))
