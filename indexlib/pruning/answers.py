"""What a lookup reports of its stages: files (and parts) in and out per stage (`Stage`), and per container kind the
parts of the kept files a reader needs (`KeptParts`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Stage:
    """One stage's files in and out; a stage of a container kind (`container`: its key, e.g. "row_groups") also
    counts its parts (of the files it judged) in and out."""

    name: str
    files_in: int
    files_out: int
    parts_in: int | None = None
    parts_out: int | None = None
    container: str | None = None

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"name": self.name, "files_in": self.files_in, "files_out": self.files_out}
        if self.container is not None:
            shown |= {f"{self.container}_in": self.parts_in, f"{self.container}_out": self.parts_out}
        return shown


@dataclass(frozen=True)
class KeptParts:
    """One container kind's answer (store/containers.py) over the kept files that have its parts and reached its
    stages: per such file, the parts that might match (in the file's order; a dropped file is not here) and, where
    any, those proven to match on every row; `counts`: how many parts each judged file has; `total`: parts judged."""

    name: str
    kept: dict[str, tuple[int, ...]]
    all_match: dict[str, tuple[int, ...]]
    total: int
    counts: dict[str, int] = field(compare=False, repr=False)

    def needed(self, path: str) -> tuple[int, ...] | None:
        """The parts of kept file `path` a reader must read; None: all of them (not judged, or every part kept)."""
        parts = self.kept.get(path)
        return None if parts is None or len(parts) == self.counts[path] else parts
