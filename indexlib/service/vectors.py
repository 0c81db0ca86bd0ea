"""Deletion vectors (format version 3) on the wire: which blob of a Puffin delete file belongs to which data file.

A v3 table's merge-on-read DELETE, UPDATE and MERGE write deletion vectors: one Puffin file per commit holding one
blob per data file, each blob a manifest entry of its own that names its data file (`referenced_data_file`) and
where its bytes are (`content_offset`, `content_size_in_bytes`). A REST client reads a vector from exactly those
fields (Iceberg Java's reader fails on a vector without them). pyiceberg 0.12 reads none of the three from the
manifests, so they are read here from the Puffin file's footer, which lists every blob with its offset, length and
`referenced-data-file` property: the footer only (its last bytes), once per file (Puffin files are immutable), the
`files_kept` most recent ones cached.

A vector applies to the one data file it names: a Puffin file attached to a data file it holds no blob for (delete
files are matched by partition) deletes nothing from it and is left out of that file's task. A Puffin file whose
footer cannot be read as the specification writes it (compressed, truncated, no magic) makes the plan Unplannable:
refused, never sent without its vector.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.table.puffin import Footer

from indexlib.service.wire import Unplannable, VectorRef

MAGIC = b"PFA1"
TAIL = 12  # footer payload size (4, little-endian), flags (4), magic (4)
VECTOR_BLOB = "deletion-vector-v1"


@dataclass(frozen=True)
class Blob:
    offset: int
    length: int
    cardinality: int


class Vectors:
    """Per Puffin file, its deletion vectors by referenced data file (module docstring)."""

    def __init__(self, files_kept: int = 1024) -> None:
        self._kept = files_kept
        self._footers: OrderedDict[str, dict[str, Blob]] = OrderedDict()
        self._lock = threading.Lock()

    def resolve(self, io: Any, data_path: str, deletes: tuple[DataFile, ...]) -> tuple[DataFile | VectorRef, ...]:
        """`deletes` of the data file `data_path`, each Puffin file replaced by its vector for that file (and left
        out when it holds none)."""
        resolved: list[DataFile | VectorRef] = []
        for delete in deletes:
            if delete.file_format != FileFormat.PUFFIN:
                resolved.append(delete)
                continue
            blob = self._blobs(io, delete.file_path).get(data_path)
            if blob is not None:
                resolved.append(VectorRef(delete, data_path, blob.offset, blob.length, blob.cardinality))
        return tuple(resolved)

    def _blobs(self, io: Any, path: str) -> dict[str, Blob]:
        with self._lock:
            found = self._footers.get(path)
            if found is not None:
                self._footers.move_to_end(path)
                return found
        found = read_vectors(io, path)
        with self._lock:
            self._footers[path] = found
            while len(self._footers) > self._kept:
                self._footers.popitem(last=False)
        return found


def read_vectors(io: Any, path: str) -> dict[str, Blob]:
    """The deletion-vector blobs of the Puffin file at `path`, by referenced data file, from its footer alone."""
    source = io.new_input(path)
    size = len(source)
    with source.open(seekable=True) as stream:
        if size < 2 * len(MAGIC) + TAIL:
            raise Unplannable(f"{path}: not a Puffin file ({size} bytes)")
        stream.seek(size - TAIL)
        tail = stream.read(TAIL)
        payload_size = int.from_bytes(tail[:4], "little")
        if tail[8:] != MAGIC or int.from_bytes(tail[4:8], "little") & 1:
            raise Unplannable(f"{path}: a Puffin footer this service cannot read (no magic, or compressed)")
        start = size - TAIL - payload_size - len(MAGIC)
        if start < len(MAGIC):
            raise Unplannable(f"{path}: its Puffin footer is larger than the file")
        stream.seek(start)
        footer = stream.read(len(MAGIC) + payload_size)
    if footer[: len(MAGIC)] != MAGIC:
        raise Unplannable(f"{path}: no Puffin magic before its footer")
    blobs: dict[str, Blob] = {}
    for blob in Footer.model_validate_json(footer[len(MAGIC) :]).blobs:
        referenced = blob.properties.get("referenced-data-file")
        if blob.type != VECTOR_BLOB or referenced is None:
            continue
        cardinality = blob.properties.get("cardinality")
        if cardinality is None or not cardinality.isdigit():
            raise Unplannable(f"{path}: deletion vector for {referenced} without its cardinality")
        blobs[referenced] = Blob(blob.offset, blob.length, int(cardinality))
    return blobs
