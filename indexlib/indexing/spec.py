"""One table's build, resolved from the configuration once: `build_spec` is called at the top of a build, a
backfill or a verify, and what it returns is passed down, so the layers below (the file indexer, the local and
Spark runners, the split planner) read the values they need and never the configuration itself.

What it holds: the index settings of each column and the row-group mode (resolved by the index kinds,
`resolve_table_settings`), the sizing (Spark tasks planned by bytes, indexing/splits.py; the limits of work done
in this process, indexing/local.py), the Spark session's settings, and the `[build]` choices a build makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from indexlib.errors import UserError
from indexlib.index_kinds.registry import resolve_table_settings, sized_settings
from indexlib.indexing.file_indexer import IndexTask, config_version

if TYPE_CHECKING:
    from indexlib.config import Config, SparkSettings
    from indexlib.index_kinds.settings import IndexSettings
    from indexlib.sources.base import DataFileRef, Source


@dataclass(frozen=True)
class Sizing:
    """How work is planned: Spark tasks of up to `split_bytes`, each file costing its size plus `open_cost_bytes`
    (indexing/splits.py); work at or under both `local_max_files` and `local_max_bytes` runs in this process
    (`local_max_files = 0`: always Spark), `local_threads` files at a time (0: one per CPU core)."""

    split_bytes: int
    open_cost_bytes: int
    local_max_files: int
    local_max_bytes: int
    local_threads: int = 0

    def runs_locally(self, files: Sequence[DataFileRef]) -> bool:
        """True when the work is at or under both local limits."""
        size = sum(f.file_size_in_bytes for f in files)
        return self.local_max_files > 0 and len(files) <= self.local_max_files and size <= self.local_max_bytes


@dataclass(frozen=True)
class BuildSpec:
    """What a build of one table does, resolved once (`build_spec`): `columns`, the index settings per field id;
    `row_groups`, `[index] row_groups` for the table ("true", "false" or "auto"); `sizing`; `spark`, the session
    started when the work is too big for this process; `skip_unreadable` (`[build] on_unreadable_file = "skip"`);
    `index_existing_files` (the first build indexes every live file, else only records the watermark);
    `files_per_commit` (`[build] backfill_files_per_commit`)."""

    columns: dict[int, IndexSettings]
    row_groups: str
    sizing: Sizing
    spark: SparkSettings
    skip_unreadable: bool = False
    index_existing_files: bool = True
    files_per_commit: int = 500

    @property
    def config_version(self) -> str:
        """The configuration version the entries of this build are stamped with (file_indexer.py)."""
        return config_version(self.columns, self.row_groups)

    def task(self, source: Source, version: int, table_files: int) -> IndexTask:
        """What every file's task needs to index `source`'s files at `version`, in a table of `table_files` live
        files: file payloads sized for it, row-group payloads at the declared settings."""
        return IndexTask(
            schema=source.schema,
            io_properties=source.io_properties,
            name_mapping_json=source.name_mapping_json,
            source_version=version,
            settings={fid: sized_settings(s, table_files) for fid, s in self.columns.items()},
            config_version=self.config_version,
            row_groups=self.row_groups,
            row_group_settings={fid: s.for_row_groups() for fid, s in self.columns.items()},
            table_files=table_files,
        )


def build_spec(config: Config, source: Source) -> BuildSpec:
    """The build of `source` as `config` sets it; UserError naming the setting when the configuration names a
    column the table does not have or a kind the column's type cannot hold (before any work)."""
    try:
        columns, row_groups = resolve_table_settings(
            source.name,
            source.schema,
            config.index_defaults,
            config.index.row_groups,
            config.table_settings.get(source.name, {}),
        )
    except ValueError as exc:
        raise UserError(f"config file {config.path}: {exc}") from None
    build = config.build
    return BuildSpec(
        columns=columns,
        row_groups=row_groups,
        sizing=Sizing(
            build.split_bytes, build.open_cost_bytes, build.local_max_files, build.local_max_bytes, build.local_threads
        ),
        spark=config.spark,
        skip_unreadable=build.on_unreadable_file == "skip",
        index_existing_files=build.index_existing_files,
        files_per_commit=build.backfill_files_per_commit,
    )
