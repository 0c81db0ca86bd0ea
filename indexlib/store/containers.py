"""Containers inside data files: the kinds of part a lookup judges inside the files its file stages kept (Parquet row
groups; Parquet pages, or row ranges of another file format, would be others).

Each kind is one `PartKind` in one module, registered under the entry-point group `skipindex.containers`
(pyproject.toml), as the index kinds, the scan targets and the formats are; the built-in one (row groups,
store/row_groups.py) is also found without package metadata. A kind says how the parts of a list of files become
statistics (`PartKind.statistics`: one container per part, `file_of` and `ordinal` naming its file and its place in
it); everything else is the lookup's, the same for every kind (pruning/parts.py `prune_parts`):

- its stages run after the file stages, over the parts of the kept files the kind has statistics for, each part
  taking its file's verdicts per leaf (pruning/containers.py) narrowed by its own bounds and payloads (the same
  evaluator and evidence as files);
- a file none of whose parts might match is dropped, and one whose every part matches on every row is all-match;
- its answer is one `KeptParts` in `LookupResult.parts` and in each `KeptFile.parts`, under the kind's `key`, and
  explain shows its stages (`"<name>: minmax"`, ...) and its kept parts.

Safe for any kind whose parts partition the file's rows: a part's statistics describe its rows only, so the
evaluator's soundness per container is soundness per part, and "no part might match" means no row of the file does.
A reader that knows a kind reads only its kept parts (every scan knows row groups: `KeptFile.row_groups`); one that
does not reads the whole file, which returns the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from indexlib import plugins
from indexlib.statistics.provider import StatisticsProvider

if TYPE_CHECKING:
    from indexlib.store.snapshot import IndexRows

ENTRY_POINT_GROUP = "skipindex.containers"
BUILT_IN = {"row_groups": "indexlib.store.row_groups:ROW_GROUPS"}


class PartStatistics(StatisticsProvider):
    """Statistics of the parts of some files, one container per part, ordered by file then part: `file_of[i]` is
    the file (an index into the paths asked about) and `ordinal[i]` the part's number in that file (0-based, in the
    file's own order). A file with no part here has no statistics of this kind (its parts are not judged)."""

    file_of: np.ndarray
    ordinal: np.ndarray


@dataclass(frozen=True)
class PartKind:
    """One kind of container inside data files. `key`: its name in `LookupResult.parts`, `KeptFile.parts`, the
    summary (`<key>_total`, `<key>_kept`, `<key>_all_match`) and the entry-point group; `name`: how explain names its
    stages and parts ("row groups"). `statistics(paths, rows, field_ids)`: the parts of the files `paths` with what
    is known of the columns `field_ids` (the index's rows `rows`, or anything the kind reads itself), or None when
    none of those files has parts of this kind."""

    key: str
    name: str
    statistics: Callable[[pa.Array, IndexRows, Sequence[int]], PartStatistics | None]


@cache
def part_kinds() -> dict[str, PartKind]:
    """Every kind by key, in the order a lookup judges them: the built-in ones, then the plug-ins of the
    entry-point group by key (`plugins.load`: a plug-in may not replace a built-in). Loaded once."""
    return plugins.load(ENTRY_POINT_GROUP, BUILT_IN)
