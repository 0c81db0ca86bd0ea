"""Bringing an index table written by an older skipindex to the current format before anything is committed to it
(store/table.py `IndexTable.upgrade`)."""

from __future__ import annotations

import logging

import pyarrow as pa

from indexlib.indexing.file_rows import unindexed_entries
from indexlib.sources.base import Source
from indexlib.store.table import IndexTable

log = logging.getLogger(__name__)


def upgrade_index(index: IndexTable, source: Source) -> None:
    """Upgrade `index` if it is older than the current format; files live at its watermark that it holds no entry
    of become unindexed file rows, so that its file rows are again every file live at the watermark."""

    def unindexed_at(watermark: int, known: set[str]) -> pa.Table | None:
        files = source.files_at(watermark)
        if files is None:
            log.warning(
                "%s: source version %s (the index's watermark) is gone; the next build compares every live file",
                source.name,
                watermark,
            )
            return None
        return unindexed_entries([f for f in files if f.path not in known], source, watermark)

    if index.upgrade(unindexed_at):
        log.info("%s: index table %s upgraded to the current format", source.name, index.identifier)
