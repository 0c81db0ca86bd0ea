"""Delta deletion vectors written as Spark's DELETE writes them (delta-rs writes none: its delete rewrites files), in
the three storage types of the protocol ("Deletion Vector Format": a magic number and a RoaringBitmapArray, Z85
inline in the log ('i'), or in a `deletion_vector_<uuid>.bin` file beside the data, named by a Z85 UUID ('u') or
by its absolute URI ('p')), and the brute-force rows of a table: every row of each live data file minus the
positions the test deleted, with the add action's partition values.

The log is replayed here from its JSON commits (the small test tables have no checkpoint), independently of delta-rs.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
MAGIC = 1681511377
_WRITTEN: dict[str, list[int]] = {}  # each vector written here, by its unique id: the positions it deletes


def z85(data: bytes) -> str:
    data += b"\0" * (-len(data) % 4)
    words = (int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data), 4))
    return "".join(Z85[(n // 85**k) % 85] for n in words for k in range(4, -1, -1))


def bitmap(positions: set[int]) -> bytes:
    """The serialized vector: the magic number, then a 64-bit portable Roaring bitmap of one 32-bit bucket (key 0)
    holding one array container (positions < 65,536, at most 4,096 of them)."""
    values = sorted(positions)
    assert values and values[-1] < 1 << 16 and len(values) <= 4096, "one array container"
    container = struct.pack("<IIHHI", 12346, 1, 0, len(values) - 1, 16) + struct.pack(f"<{len(values)}H", *values)
    return struct.pack("<iqi", MAGIC, 1, 0) + container


def descriptor(root: str, positions: set[int], storage: str) -> dict[str, Any]:
    """The add action's `deletionVector`, its data stored as `storage` says ('i', 'u' or 'p')."""
    data = bitmap(positions)
    common = {"sizeInBytes": len(data), "cardinality": len(positions)}
    if storage == "i":
        dv = {"storageType": "i", "pathOrInlineDv": z85(data)} | common
        _WRITTEN[_key(dv)] = sorted(positions)
        return dv
    name = uuid.uuid4()
    prefix = "dv" if storage == "u" else ""
    folder = Path(root) / prefix
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"deletion_vector_{name}.bin"
    # version 1, then per vector: its size (big endian), its data, the CRC-32 of its data; offset 1: the size field
    file.write_bytes(b"\x01" + struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
    where = prefix + z85(name.bytes) if storage == "u" else file.as_uri()
    dv = {"storageType": storage, "pathOrInlineDv": where, "offset": 1} | common
    _WRITTEN[_key(dv)] = sorted(positions)
    return dv


def live_adds(root: str) -> dict[str, dict[str, Any]]:
    """The live add actions by path (as the log spells it), replaying the JSON commits."""
    live: dict[str, dict[str, Any]] = {}
    for commit in sorted((Path(root) / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "remove" in action:
                live.pop(action["remove"]["path"], None)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
    return live


def commit_deletion_vectors(root: str, deletes: dict[str, set[int]], storage: str = "i") -> None:
    """One commit deleting `deletes[path]` positions from each live file (by log path), as Spark's DELETE does: the
    file removed with its old vector and added again with one holding the old and the new positions. A file none of
    whose positions is still live is left alone, and no commit is written when no file changes: Spark's DELETE
    touches only files with a matching live row (an inline vector equal to the old one would make the remove and the
    add one logical file, which delta-rs replays as removed)."""
    live = live_adds(root)
    lines = []
    for path, positions in deletes.items():
        add = live[path]
        if positions <= deleted_positions(root, add):
            continue
        old = add.get("deletionVector")
        remove = {k: add[k] for k in ("path", "partitionValues", "size")} | {
            "deletionTimestamp": 1,
            "dataChange": True,
            "deletionVector": old,
        }
        merged = deleted_positions(root, add) | positions
        lines.append(json.dumps({"remove": remove}))
        lines.append(
            json.dumps({"add": add | {"dataChange": True, "deletionVector": descriptor(root, merged, storage)}})
        )
    if not lines:
        return
    version = max(int(p.stem) for p in (Path(root) / "_delta_log").glob("*.json")) + 1
    (Path(root) / "_delta_log" / f"{version:020}.json").write_text("\n".join(lines) + "\n")


def deleted_positions(root: str, add: dict[str, Any]) -> set[int]:
    """The positions an add action's vector deletes, as this module wrote them (its own record, not delta-rs's)."""
    dv = add.get("deletionVector")
    return set() if dv is None else set(_WRITTEN[_key(dv)])


def brute_force(root: str, schema: pa.Schema, types: dict[str, Any]) -> pa.Table:
    """Every row of each live data file minus the positions its vector deletes, with its partition values
    (`types`: partition column -> a function parsing the log's string)."""
    out = []
    for path, add in live_adds(root).items():
        data = pq.ParquetFile(Path(root) / unquote(path)).read().to_pylist()
        gone = deleted_positions(root, add)
        parts = {c: (None if v is None or v == "" else types[c](v)) for c, v in add["partitionValues"].items()}
        out += [row | parts for i, row in enumerate(data) if i not in gone]
    return pa.Table.from_pylist(out, schema=schema)


def day(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


def _key(dv: dict[str, Any]) -> str:
    return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"
