"""Bringing an index table written by an older skipindex to the current format before anything is committed to it
(store/table.py `IndexTable.upgrade`)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from indexlib.indexing.file_rows import unindexed_entries
from indexlib.sources.base import Source
from indexlib.store.table import IndexTable

log = logging.getLogger(__name__)


def upgrade_index(index: IndexTable, source: Source) -> None:
    """Upgrade `index` if it is older than the current format. Its file rows become exactly the files live at its
    watermark (the format-4 claim, docs/index-table.md): the old entries of those files, and unindexed rows for the
    ones it holds no entry of; entries of files no longer live at the watermark are left behind."""

    def live_at(watermark: int, entries: pa.Table) -> pa.Table | None:
        files = source.files_at(watermark)
        if files is None:
            log.warning(
                "%s: source version %s (the index's watermark) is gone; the next build compares every live file",
                source.name,
                watermark,
            )
            return None
        live = pa.array(sorted({f.path for f in files}), pa.string())
        kept = entries.filter(pc.is_in(entries.column("file_path"), value_set=live))
        known = set(kept.column("file_path").to_pylist())
        return pa.concat_tables([kept, unindexed_entries([f for f in files if f.path not in known], source, watermark)])

    if index.upgrade(live_at):
        log.info("%s: index table %s upgraded to the current format", source.name, index.identifier)
