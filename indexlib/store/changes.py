"""What a run changed in one index: the state of the index table read before and after it, compared.

A scheduler tells downstream jobs that an index changed (airflow_dags/, the index's Asset event) only when a reader
would see something new: files indexed, files removed, or a new watermark or live version (docs/index-table.md). A
run that committed nothing, or only rewrote the same rows (`compact`), changes none of these. Comparing two reads
of the table, rather than trusting what one command printed, works wherever the command ran (in the task's process
or under spark-submit on a cluster).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from indexlib.store.table import IndexTable, live_version_of, watermark_of

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


@dataclass(frozen=True)
class IndexState:
    """The facts about one index that readers use: which files it has statistics of, which files it knows (indexed
    or left unindexed), its watermark and live version. Empty when the source was never indexed."""

    indexed: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    watermark: int | None = None
    live_version: int | None = None
    snapshot_id: int | None = None

    @classmethod
    def read(cls, catalog: Catalog, namespace: str, source_name: str) -> IndexState:
        index = IndexTable(catalog, namespace, source_name)
        table = index.load()
        snapshot = table.current_snapshot() if table is not None else None
        if snapshot is None:
            return cls()
        rows = index.file_rows()
        paths = rows.column("file_path").to_pylist()
        indexed = rows.column("indexed").to_pylist()
        return cls(
            frozenset(p for p, done in zip(paths, indexed, strict=True) if done),
            frozenset(paths),
            watermark_of(table),
            live_version_of(table),
            snapshot.snapshot_id,
        )

    def change_since(self, before: IndexState) -> IndexChange | None:
        """What readers see now that they did not see in `before`; None when nothing."""
        if self.snapshot_id == before.snapshot_id:
            return None
        change = IndexChange(
            files_indexed=len(self.indexed - before.indexed),
            files_removed=len(before.known - self.known),
            source_version=self.watermark,
            live_version=self.live_version,
            index_snapshot=self.snapshot_id,
        )
        moved = (self.watermark, self.live_version) != (before.watermark, before.live_version)
        return change if moved or change.files_indexed or change.files_removed else None


@dataclass(frozen=True)
class IndexChange:
    files_indexed: int  # files with statistics now that had none before
    files_removed: int  # files the index knew before and no longer does (removed from the source)
    source_version: int | None  # the watermark now: the source version the index has reached
    live_version: int | None
    index_snapshot: int | None  # the index table's snapshot that readers now see

    def as_extra(self) -> dict[str, int | None]:
        """The event's extra (JSON): every field."""
        return asdict(self)
