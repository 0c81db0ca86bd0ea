"""The delete files of one Iceberg snapshot, read from its delete manifests alone, and which of them a reader must
apply to a data file, matched as pyiceberg's own planning matches them (its `DeleteFileIndex`).

A lookup's kept files need their delete files, but planning the table again to get them would cost what the index
saves. The snapshot summary says whether the table has delete files at all (most have none: then nothing is read);
otherwise only the delete manifests are opened. One fact is not at hand without the data manifests: a data file's
sequence number. Position deletes and deletion vectors name their data file by path, so a delete file older than
the data file lists no position of it; matching them from the lowest sequence number attaches, at worst, files
that delete nothing from it. Equality deletes are matched by sequence number alone, so they cannot be matched
without it; pyiceberg cannot apply them either: asking for the delete files of a snapshot that has some raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
)
from pyiceberg.table.delete_file_index import DeleteFileIndex, _applies_to_data_file

from indexlib.errors import UnsupportedFeature
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


class SnapshotDeletes:
    """The delete files live in one snapshot of `table` (a pyiceberg Table), read on construction."""

    def __init__(self, table: Any, name: str, snapshot_id: int | None) -> None:
        self.name = name
        self.snapshot_id = snapshot_id
        self.index = DeleteFileIndex()
        self.position: list[DataFile] = []
        self.equality: list[str] = []
        snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
        if snapshot is None or (snapshot.summary is not None and snapshot.summary.get("total-delete-files") == "0"):
            return  # no delete file in the table: not even the manifest list is read
        manifests = snapshot.manifests(table.io)
        # a delete manifest written before every data file's sequence number deletes nothing (pyiceberg skips it too)
        oldest_data = min(
            (m.min_sequence_number or 0 for m in manifests if m.content == ManifestContent.DATA), default=0
        )
        for manifest in manifests:
            if manifest.content != ManifestContent.DELETES:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                delete_file = entry.data_file
                if delete_file.content == DataFileContent.EQUALITY_DELETES:
                    if manifest.sequence_number >= oldest_data:
                        self.equality.append(delete_file.file_path)
                else:
                    self.index.add_delete_file(entry, partition_key=delete_file.partition)
                    self.position.append(delete_file)

    def refuse_equality(self) -> None:
        """Raise when the snapshot has equality delete files: neither pyiceberg nor this project can plan or apply
        them yet, and a reader that ignored them would return deleted rows."""
        if self.equality:
            raise UnsupportedFeature(
                f"table {self.name} snapshot {self.snapshot_id}: {len(self.equality)} equality delete file(s) "
                f"(e.g. {self.equality[0]}) cannot be matched to data files without planning, nor applied by "
                "pyiceberg; compact the table (rewrite_data_files) first"
            )

    def for_files(self, files: Sequence[DataFileRef]) -> list[tuple[DeleteFileRef, ...]]:
        """Per data file, its delete files (sorted by path)."""
        self.refuse_equality()
        if not self.position:
            return [() for _ in files]
        return [tuple(sorted(map(_ref, self._for_file(ref)), key=lambda d: d.path)) for ref in files]

    def _for_file(self, ref: DataFileRef) -> set[DataFile]:
        data_file = data_file_of(ref)
        if ref.partition is None:  # the partition is unknown: every delete file whose path bounds admit the file
            return {d for d in self.position if _applies_to_data_file(d, data_file)}
        return self.index.for_data_file(INITIAL_SEQUENCE_NUMBER, data_file, partition_key=ref.partition)
