"""What a Delta table's log says that delta-rs does not expose: each live file's deletion-vector descriptor at a
version (where the vector's bytes are: storage type, path or inline data, offset, size, cardinality), and the
versions a client may read with the version whose `metaData` each one reads.

The log is read as the protocol writes it, through pyiceberg FileIO (the data files' own storage access): the JSON
commits `_delta_log/<version>.json` and classic Parquet checkpoints (`<version>.checkpoint.parquet`, or the parts
`_last_checkpoint` names). A version's live files are the newest checkpoint at or below it plus the commits after
it, replayed (`add` replaces a path's entry, `remove` drops it). That replay is ours, so it is checked: its live
paths must be exactly the ones delta-rs lists for the same version (`check_live`), else the table is refused with
one line, never planned from a replay that may have missed a file's vector. Tables with features this reader does
not read (v2 checkpoints, with their sidecar files) are refused before (`READ_FEATURES`).

Commits and checkpoints never change once written, so each is read once per `DeltaLog` (the most recent
`versions_kept` replays are kept).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from indexlib.errors import UnsupportedFeature

# the reader features whose tables this module (and a reader of Iceberg's semantics) reads exactly
READ_FEATURES = frozenset({"columnMapping", "deletionVectors", "timestampNtz", "vacuumProtocolCheck"})
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_UUID_Z85 = 20  # a UUID's 16 bytes are 20 Z85 characters


@dataclass(frozen=True)
class VectorDescriptor:
    """An add action's `deletionVector` (protocol: "Deletion Vector Descriptor Schema")."""

    storage: str  # 'u': a file beside the data named by a UUID; 'p': an absolute path; 'i': inline in the log
    path_or_inline: str
    offset: int | None  # where the vector's 4-byte size field starts in its file (None inline)
    size: int  # the vector's bytes (magic and bitmap), without the size field and the CRC-32 around them
    cardinality: int  # the rows it deletes

    def file(self, root: str) -> str:
        """The file holding the vector, spelt as `DeltaSource.absolute` spells data files. An inline vector has
        none: UnsupportedFeature (a reader that finds vectors by file offset cannot read it)."""
        if self.storage == "u":
            prefix, encoded = self.path_or_inline[:-_UUID_Z85], self.path_or_inline[-_UUID_Z85:]
            name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
            return f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"
        if self.storage == "p":
            from indexlib.sources.delta import _path_of_uri

            return _path_of_uri(self.path_or_inline)
        raise UnsupportedFeature(f"deletion vectors stored inline in the log (storage type {self.storage!r})")


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ RFC 32) text to bytes: 5 characters per 4 bytes, big-endian."""
    if len(text) % 5:
        raise ValueError(f"Z85 text of {len(text)} characters (not a multiple of 5)")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            value = value * 85 + _Z85_VALUE[char]
        out += value.to_bytes(4, "big")
    return bytes(out)


def _descriptor(found: Any) -> VectorDescriptor | None:
    if not found:
        return None
    offset = found.get("offset")
    return VectorDescriptor(
        str(found["storageType"]),
        str(found["pathOrInlineDv"]),
        None if offset is None else int(offset),
        int(found["sizeInBytes"]),
        int(found["cardinality"]),
    )


@dataclass(frozen=True)
class Commit:
    """What one JSON commit does to the live files and the table's metadata."""

    adds: dict[str, VectorDescriptor | None]  # by path as the log spells it: the file's vector (None: no vector)
    removes: frozenset[str]  # applied before `adds`
    metadata: bool  # it holds a `metaData` action (a new schema, partitioning or configuration)


class DeltaLog:
    """The log of the Delta table at `root` (module docstring)."""

    def __init__(self, root: str, io_properties: dict[str, str], versions_kept: int = 8) -> None:
        from pyiceberg.io import load_file_io

        self.root = root.rstrip("/")
        self.io = load_file_io(io_properties, self.root)
        self._commits: dict[int, Commit | None] = {}
        self._live: OrderedDict[int, dict[str, VectorDescriptor | None]] = OrderedDict()
        self._kept = versions_kept
        self._lock = threading.Lock()

    def _path(self, name: str) -> str:
        return f"{self.root}/_delta_log/{name}"

    def commit(self, version: int) -> Commit | None:
        """The JSON commit of `version`; None when the log no longer holds it (or never did)."""
        with self._lock:
            if version in self._commits:
                return self._commits[version]
        source = self.io.new_input(self._path(f"{version:020d}.json"))
        if not source.exists():
            found = None
        else:
            with source.open() as stream:
                text = stream.read().decode()
            adds: dict[str, VectorDescriptor | None] = {}
            removes: set[str] = set()
            metadata = False
            for line in text.splitlines():
                if not line.strip():
                    continue
                action = json.loads(line)
                if "add" in action:  # a path removed and added in one commit: a new vector for the file
                    adds[action["add"]["path"]] = _descriptor(action["add"].get("deletionVector"))
                elif "remove" in action:
                    removes.add(action["remove"]["path"])
                metadata = metadata or "metaData" in action
            found = Commit(adds, frozenset(removes), metadata)
        with self._lock:
            self._commits[version] = found
        return found

    def _checkpoint_parts(self, version: int) -> list[str] | None:
        """The Parquet files of a classic checkpoint at `version` (one, or the parts `_last_checkpoint` names);
        None when there is none."""
        single = self._path(f"{version:020d}.checkpoint.parquet")
        if self.io.new_input(single).exists():
            return [single]
        last = self.io.new_input(self._path("_last_checkpoint"))
        if last.exists():
            with last.open() as stream:
                named = json.loads(stream.read().decode())
            parts = named.get("parts")
            if named.get("version") == version and parts:
                return [
                    self._path(f"{version:020d}.checkpoint.{n:010d}.{parts:010d}.parquet") for n in range(1, parts + 1)
                ]
        return None

    def _checkpoint(self, parts: list[str]) -> dict[str, VectorDescriptor | None]:
        live: dict[str, VectorDescriptor | None] = {}
        for part in parts:
            with self.io.new_input(part).open(seekable=True) as stream:
                adds = pq.read_table(stream, columns=["add"]).column("add").to_pylist()
            for add in adds:
                if add is not None:
                    live[add["path"]] = _descriptor(add.get("deletionVector"))
        return live

    def live(self, version: int) -> dict[str, VectorDescriptor | None]:
        """The files live at `version` (paths as the log spells them), each with its deletion vector or None."""
        with self._lock:
            if version in self._live:
                self._live.move_to_end(version)
                return self._live[version]
        replay: list[Commit] = []
        at = version
        while True:  # back to a replay kept, a checkpoint, or version 0
            with self._lock:
                known = self._live.get(at)
            if known is not None:
                live = dict(known)
                break
            parts = self._checkpoint_parts(at)
            if parts is not None:
                live = self._checkpoint(parts)
                break
            commit = self.commit(at)
            if commit is None:
                raise UnsupportedFeature(f"version {version}: its log (commit {at}) is no longer kept")
            replay.append(commit)
            if at == 0:
                live = {}
                break
            at -= 1
        for commit in reversed(replay):
            for path in commit.removes:
                live.pop(path, None)
            live.update(commit.adds)
        with self._lock:
            self._live[version] = live
            while len(self._live) > self._kept:
                self._live.popitem(last=False)
        return live

    def readable(self, current: int) -> list[int]:
        """The versions a client may read, oldest first: back from `current` while the JSON commits are kept, to
        version 0 or the oldest checkpoint among them (a version before it cannot be replayed)."""
        oldest = current
        while oldest > 0 and self.commit(oldest - 1) is not None:
            oldest -= 1
        if oldest == 0:
            return list(range(0, current + 1))
        start = next((v for v in range(oldest, current + 1) if self._checkpoint_parts(v) is not None), current)
        return list(range(start, current + 1))

    def metadata_versions(self, versions: Sequence[int]) -> dict[int, int]:
        """Per version of `versions` (ascending, contiguous), the version whose `metaData` it reads: the newest at
        or below it whose commit holds one (the first version where no kept commit says)."""
        found: dict[int, int] = {}
        last = versions[0] if versions else 0
        for version in versions:
            commit = self.commit(version)
            if commit is not None and commit.metadata:
                last = version
            found[version] = last
        return found


def check_live(log_live: dict[str, Any], paths: Sequence[str], absolute: Any, table: str, version: int) -> None:
    """The replay's live files must be delta-rs's (module docstring): refused with one line where they differ."""
    replayed = {absolute(path) for path in log_live}
    listed = set(paths)
    if replayed != listed:
        odd = sorted(replayed ^ listed)[:1]
        raise UnsupportedFeature(
            f"Delta table {table} version {version}: its log as read here lists other live files than delta-rs "
            f"({len(replayed)} against {len(listed)}, e.g. {odd[0] if odd else '?'}): not planned"
        )
