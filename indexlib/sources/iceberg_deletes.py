"""The delete files of one Iceberg snapshot, read from its delete manifests, and which of them a reader must apply
to a data file, matched as Iceberg's planning matches them.

A lookup's kept files need their delete files, but planning the table again to get them would cost what the index
saves. The snapshot summary says whether the table has delete files at all (most have none: then nothing is read);
otherwise the delete manifests are opened. Position deletes and deletion vectors name their data file by path, so
they are matched without the data file's sequence number (pyiceberg's `DeleteFileIndex`, from the lowest sequence
number: a delete file older than the data file lists no position of it, so at worst a file that deletes nothing
from it is attached).

Equality deletes (what Flink upserts and CDC pipelines write) delete every row whose equality columns equal one of
theirs, so they are matched exactly, by the spec's rule: a delete applies to a data file whose data sequence number
is strictly lower than its own, in the same partition (spec id and partition values) or anywhere when the delete was
written under an unpartitioned spec. Attaching one that does not apply would drop live rows, so the data files'
sequence numbers and partitions are read from the snapshot's data manifests (once per snapshot, only for a table
that has equality deletes); such a snapshot's live files are listed from the same read (`live_data_files`), since
pyiceberg's planning refuses equality deletes. The rows are dropped by the scans (scans/equality.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
)
from pyiceberg.table.delete_file_index import DeleteFileIndex, _applies_to_data_file

from indexlib.errors import UserError
from indexlib.sources.base import DataFileRef, DeleteFileRef


def data_file_of(ref: DataFileRef) -> DataFile:
    """The data file as pyiceberg's planning would give it to its reader (no column statistics: a reader needs
    none)."""
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=ref.path,
        file_format=FileFormat(ref.file_format.upper()),
        partition=ref.partition,
        record_count=ref.record_count,
        file_size_in_bytes=ref.file_size_in_bytes,
    )
    data_file.spec_id = ref.spec_id
    return data_file


def _kind(delete_file: DataFile) -> str:
    if delete_file.content == DataFileContent.EQUALITY_DELETES:
        return "equality"
    return "deletion_vector" if delete_file.file_format == FileFormat.PUFFIN else "position"


def _ref(delete_file: DataFile) -> DeleteFileRef:
    return DeleteFileRef(
        delete_file.file_path,
        _kind(delete_file),
        delete_file.file_format.value,
        int(delete_file.record_count),
        delete_file,
    )


@dataclass(frozen=True)
class _Equality:
    """An equality delete file with what decides the data files it applies to: its data sequence number, and the
    partition it was written in ((spec id, values); None: an unpartitioned spec, every partition)."""

    delete_file: DataFile
    sequence: int
    partition: tuple[int, tuple[Any, ...]] | None


@dataclass(frozen=True)
class _LiveData:
    """A live data file of the snapshot as its data manifest has it: the ref, and its data sequence number."""

    ref: DataFileRef
    sequence: int


class SnapshotDeletes:
    """The delete files live in one snapshot of `table` (a pyiceberg Table), read on construction."""

    def __init__(self, table: Any, name: str, snapshot_id: int | None) -> None:
        self.name = name
        self.snapshot_id = snapshot_id
        self.index = DeleteFileIndex()
        self.position: list[DataFile] = []
        self.equality: list[_Equality] = []
        # the equality deletes by the partition they apply in (None: every one), in sequence number order, with
        # their sequence numbers (what a data file's is bisected in)
        self._equality_by_scope: dict[tuple[int, tuple[Any, ...]] | None, tuple[list[int], list[_Equality]]] = {}
        self._table = table
        self._manifests: list[Any] = []
        snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        if snapshot is None or (snapshot.summary is not None and snapshot.summary.get("total-delete-files") == "0"):
            return  # no delete file in the table: not even the manifest list is read
        manifests = self._manifests = snapshot.manifests(table.io)
        # a delete manifest written before every data file's sequence number deletes nothing (pyiceberg skips it too)
        oldest_data = min(
            (m.min_sequence_number or 0 for m in manifests if m.content == ManifestContent.DATA), default=0
        )
        specs = table.metadata.specs()
        for manifest in manifests:
            if manifest.content != ManifestContent.DELETES:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                delete_file = entry.data_file
                if delete_file.content == DataFileContent.EQUALITY_DELETES:
                    if manifest.sequence_number >= oldest_data:
                        spec_id = delete_file.spec_id or 0
                        spec = specs.get(spec_id)
                        scope = (
                            None if spec is not None and spec.is_unpartitioned() else (spec_id, _values(delete_file))
                        )
                        self.equality.append(_Equality(delete_file, int(entry.sequence_number or 0), scope))
                else:
                    self.index.add_delete_file(entry, partition_key=delete_file.partition)
                    self.position.append(delete_file)
        for e in sorted(self.equality, key=lambda e: e.sequence):
            sequences, deletes = self._equality_by_scope.setdefault(e.partition, ([], []))
            sequences.append(e.sequence)
            deletes.append(e)

    @cached_property
    def _live_data(self) -> dict[str, _LiveData]:
        """The snapshot's live data files by path, from its data manifests (read once, when first asked)."""
        found: dict[str, _LiveData] = {}
        for manifest in self._manifests:
            if manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(self._table.io, discard_deleted=True):
                data_file = entry.data_file
                found[data_file.file_path] = _LiveData(data_file_ref(data_file), int(entry.sequence_number or 0))
        return found

    def live_data_files(self) -> list[DataFileRef] | None:
        """The snapshot's live data files, read from its data manifests, when it has equality deletes (None: it
        has none, and pyiceberg's planning lists them)."""
        if not self.equality:
            return None
        return [live.ref for live in self._live_data.values()]

    def for_files(self, files: Sequence[DataFileRef]) -> list[tuple[DeleteFileRef, ...]]:
        """Per data file, its delete files (sorted by path)."""
        if not self.position and not self.equality:
            return [() for _ in files]
        return [
            tuple(sorted(map(_ref, [*self._for_file(ref), *self._equality_for(ref)]), key=lambda d: d.path))
            for ref in files
        ]

    def _equality_for(self, ref: DataFileRef) -> list[DataFile]:
        if not self.equality:
            return []
        live = self._live_data.get(ref.path)
        if live is None:  # attaching none would return deleted rows
            raise UserError(
                f"table {self.name} snapshot {self.snapshot_id}: {ref.path} is not a live data file of the "
                "snapshot, so its equality deletes cannot be matched"
            )
        found = []
        for scope in (None, (live.ref.spec_id, _values(live.ref))):
            sequences, deletes = self._equality_by_scope.get(scope, ([], []))
            later = bisect.bisect_right(sequences, live.sequence)  # strictly newer from here
            found += [e.delete_file for e in deletes[later:]]
        return found

    def _for_file(self, ref: DataFileRef) -> set[DataFile]:
        data_file = data_file_of(ref)
        if ref.partition is None:  # the partition is unknown: every delete file whose path bounds admit the file
            return {d for d in self.position if _applies_to_data_file(d, data_file)}
        return self.index.for_data_file(INITIAL_SEQUENCE_NUMBER, data_file, partition_key=ref.partition)


def _values(file: Any) -> tuple[Any, ...]:
    """A data or delete file's partition values (a DataFile's Record, or a DataFileRef's), as a comparable tuple."""
    partition = file.partition
    return tuple(partition) if partition is not None else ()


def data_file_ref(data_file: Any) -> DataFileRef:
    """A pyiceberg `DataFile` (a manifest entry's file) as the lookup reads data files, the entry kept as its
    statistics (`DataFileRef.stats`)."""
    spec_id = getattr(data_file, "spec_id", None)  # without it the partition record cannot be read: leave it unknown
    return DataFileRef(
        path=data_file.file_path,
        record_count=int(data_file.record_count),
        file_size_in_bytes=int(data_file.file_size_in_bytes),
        file_format=str(
            data_file.file_format.value if hasattr(data_file.file_format, "value") else data_file.file_format
        ),
        spec_id=int(spec_id) if spec_id is not None else 0,
        partition=data_file.partition if spec_id is not None else None,
        stats=data_file,
    )
