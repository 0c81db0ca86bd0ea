"""Expiry of an index table's old snapshots, then deletion of the files under its location that nothing references.

Why it is safe: lookups, builds and handles read the current snapshot only; the current one and the newest
`retain_last` are never expired. A handle whose cached snapshot expired reads the index again (an expired snapshot is
no longer an ancestor, so `only_appends_since` says no). A file is deleted only when no remaining snapshot, manifest,
metadata file or statistics file names it AND it is older than the cutoff, so a commit in progress (files written,
catalog pointer not yet swapped) or a reader planning from a just-replaced snapshot keeps its files as long as it
takes less than `older_than`. pyiceberg's expiry removes snapshots from the metadata only; the files go here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from pyarrow import fs as pafs
from pyiceberg.io.pyarrow import PyArrowFileIO

from indexlib.errors import UserError

if TYPE_CHECKING:
    from pyiceberg.table import Table


@dataclass(frozen=True)
class ExpiryResult:
    snapshots_expired: int
    snapshots_kept: int
    files_deleted: int
    bytes_deleted: int
    files_too_young: int  # unreferenced files newer than the cutoff, left for a later run


def expire_snapshots(table: Table, older_than: datetime, retain_last: int) -> int:
    """Expire the snapshots committed before `older_than`, except the newest `retain_last` and the current one
    (pyiceberg keeps branch and tag heads itself). Returns how many were expired."""
    if retain_last < 1:
        raise UserError(
            f"{'.'.join(table.name())}: --retain-last must be at least 1 (the current snapshot), not {retain_last}"
        )
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True)
    cutoff_ms = int(older_than.timestamp() * 1000)
    current = table.current_snapshot()
    kept = {s.snapshot_id for s in snapshots[:retain_last]} | ({current.snapshot_id} if current else set())
    expired = [s.snapshot_id for s in snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in kept]
    if expired:
        table.maintenance.expire_snapshots().by_ids(expired).commit()
    return len(expired)


def referenced_files(table: Table) -> set[str]:
    """Every file the table's metadata names: metadata files (current and logged), every remaining snapshot's
    manifest list, manifests and the data and delete files they hold live (a file a snapshot deleted is named live
    by its parent, while that one remains), statistics files."""
    metadata = table.metadata
    named = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    named |= {f.statistics_path for f in metadata.statistics}
    named |= {f.statistics_path for f in metadata.partition_statistics}
    manifests: set[str] = set()
    for snapshot in metadata.snapshots:
        named.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in manifests:
                continue
            manifests.add(manifest.manifest_path)
            named |= {e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io)}
    return {_path_of(location) for location in named | manifests}


def delete_orphan_files(table: Table, older_than: datetime) -> tuple[int, int, int]:
    """Delete the files under the table's location that `referenced_files` does not name and that were last
    modified before `older_than`. Returns (files deleted, bytes deleted, unreferenced files left as too young)."""
    io = table.io
    if not isinstance(io, PyArrowFileIO):
        raise UserError(
            f"{'.'.join(table.name())}: orphan files are listed through pyiceberg's PyArrowFileIO; "
            f"this catalog uses {type(io).__name__} (set py-io-impl = pyiceberg.io.pyarrow.PyArrowFileIO)"
        )
    scheme, netloc, root = PyArrowFileIO.parse_location(table.location(), io.properties)
    filesystem = io.fs_by_scheme(scheme, netloc)
    referenced = referenced_files(table)
    deleted = size = young = 0
    for info in _files_under(filesystem, root):
        if info.path in referenced:
            continue
        if info.mtime is None or info.mtime.timestamp() >= older_than.timestamp():
            young += 1
            continue
        filesystem.delete_file(info.path)
        deleted += 1
        size += info.size or 0
    return deleted, size, young


def expire(table: Table, older_than: datetime, retain_last: int) -> ExpiryResult:
    expired = expire_snapshots(table, older_than, retain_last)
    table = table.refresh()
    deleted, size, young = delete_orphan_files(table, older_than)
    return ExpiryResult(expired, len(table.metadata.snapshots), deleted, size, young)


def _files_under(filesystem: pafs.FileSystem, root: str) -> Iterator[pafs.FileInfo]:
    selector = pafs.FileSelector(root.rstrip("/"), recursive=True, allow_not_found=True)
    return (info for info in filesystem.get_file_info(selector) if info.type == pafs.FileType.File)


def _path_of(location: str) -> str:
    """The path as the table's file system lists it (no scheme; `bucket/key` on object stores)."""
    return PyArrowFileIO.parse_location(location)[2]
