"""Backfill: index the live files the index knows but holds no statistics of (files older than the index, files
skipped as unreadable) and rebuild entries written with another index configuration, partition by partition.

Each batch of whole partitions is one commit, so a crash loses at most the batch in flight and a rerun picks up
what is still missing: the work list is recomputed from the index itself (an unindexed row, or an entry of another
configuration version), never from a progress file. Commits keep the watermark and the live version as they find
them and never add or drop a file row while the rows claim a live version (store/table.py `commit`): files
committed after the last build are the next build's, and a row the build dropped meanwhile is not brought back. So
a backfill and the scheduled build can run at the same time (store/table.py re-plans a commit that lost a race).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING

import numpy as np

from indexlib.errors import UserError
from indexlib.indexing.build import index_new_files
from indexlib.indexing.local import session_for
from indexlib.indexing.spec import BuildSpec, build_spec
from indexlib.indexing.upgrade import upgrade_index
from indexlib.pruning.partitions import prune_partitions
from indexlib.query.binding import bound_predicate
from indexlib.query.sql import Clock
from indexlib.sources.base import DataFileRef, Source
from indexlib.sources.registry import open_source
from indexlib.store.table import IndexTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from indexlib.config import Config

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackfillResult:
    table: str
    index_table: str
    files_considered: int  # live files the --where predicate selects
    files_indexed: int  # entries written for files that had none
    files_rebuilt: int  # entries rewritten because their configuration version was not the current one
    partitions: int
    commits: int
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def message(self) -> str:
        lines = [
            f"{self.table}: backfill indexed {self.files_indexed} files and rebuilt {self.files_rebuilt} "
            f"of {self.files_considered} selected files in {self.partitions} partitions ({self.commits} commits) "
            f"into {self.index_table}"
        ]
        lines += [f"{self.table}: skipped unreadable file (left unindexed, always kept): {r}" for _, r in self.skipped]
        return "\n".join(lines)


def select_files(source: Source, where: str | None, config: Config) -> list[DataFileRef]:
    """Live files whose partition might satisfy `where` (all live files without one)."""
    live = source.live_files()
    if where is None:
        return live

    predicate = bound_predicate(where, source.schema, source.name, Clock.system(config.time_zone), config.dialect)
    pruning = prune_partitions(source, live, predicate)
    if not pruning.lifted:
        raise UserError(
            f"{source.name}: backfill --where {where!r} restricts no partition field; "
            "name partition columns (or omit --where to backfill every file)"
        )
    return [f for f, keep in zip(live, np.asarray(pruning.might, dtype=bool), strict=True) if keep]


def batches_of_partitions(
    files: list[DataFileRef], label: Callable[[DataFileRef], str], files_per_commit: int
) -> list[tuple[list[str], list[DataFileRef]]]:
    """Whole partitions grouped into batches of about `files_per_commit` files (a bigger partition is split)."""
    batches: list[tuple[list[str], list[DataFileRef]]] = []
    labels: list[str] = []
    current: list[DataFileRef] = []
    for name, group in groupby(sorted(files, key=lambda f: (label(f), f.path)), key=label):
        members = list(group)
        for start in range(0, len(members), files_per_commit):
            chunk = members[start : start + files_per_commit]
            if current and len(current) + len(chunk) > files_per_commit:
                batches.append((labels, current))
                labels, current = [], []
            labels.append(name)
            current.extend(chunk)
    if current:
        batches.append((labels, current))
    return batches


def _work(
    config: Config,
    spec: BuildSpec,
    source: Source,
    index: IndexTable,
    where: str | None,
    partitions: Collection[str] | None,
) -> tuple[list[DataFileRef], list[DataFileRef], dict[str, str | None]]:
    """(files selected by `where` and `partitions`, those still to index or rebuild, the index's configuration
    version per path)."""
    current = spec.config_version
    selected = select_files(source, where, config)
    if partitions is not None:
        labels = {source.partition_label(f) for f in selected}
        unknown = sorted(set(partitions) - labels)
        if unknown and len(unknown) == len(set(partitions)):
            raise UserError(f"{source.name}: no live file selected by --where is in partition {unknown[0]!r}")
        for label in unknown:
            log.warning(
                "%s: partition %r has no live file selected by --where; nothing to do there", source.name, label
            )
        selected = [f for f in selected if source.partition_label(f) in set(partitions)]
    versions = index.config_versions()
    if index.live_version() is not None:  # only files with a row: the rest are the next build's
        known = index.known_paths()
        waiting = [f for f in selected if f.path not in known]
        if waiting:
            log.info(
                "%s: %d selected files were committed after the last build; the next build indexes them",
                source.name,
                len(waiting),
            )
        selected = [f for f in selected if f.path in known]
    return selected, [f for f in selected if versions.get(f.path, "") != current], versions


def plan_backfill(config: Config, table_name: str, where: str | None = None) -> list[list[str]]:
    """The partitions `backfill` would work on, grouped into batches of about `[build] backfill_files_per_commit`
    files: one list of partition labels per batch, for a scheduler that runs one batch per task. Upgrades an
    older index table first, so that batches running at the same time never race to upgrade it."""
    catalog = config.load_catalog()
    source = open_source(config, table_name, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name)
    upgrade_index(index, source)
    spec = build_spec(config, source)  # bad settings fail here
    _, todo, _ = _work(config, spec, source, index, where, None)
    batches = batches_of_partitions(todo, source.partition_label, spec.files_per_commit)
    return [list(dict.fromkeys(labels)) for labels, _ in batches]


def backfill(
    config: Config,
    table_name: str,
    where: str | None = None,
    spark: SparkSession | None = None,
    partitions: Collection[str] | None = None,
) -> BackfillResult:
    """Backfill the files `where` selects; with `partitions` (labels, as `plan_backfill` gives them), only the
    files of those partitions."""
    catalog = config.load_catalog()
    source = open_source(config, table_name, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name)
    upgrade_index(index, source)
    spec = build_spec(config, source)  # bad settings fail here
    selected, todo, versions = _work(config, spec, source, index, where, partitions)
    rebuilt = sum(1 for f in todo if f.path in versions)
    batches = batches_of_partitions(todo, source.partition_label, spec.files_per_commit)
    partition_count = len({source.partition_label(f) for f in todo})
    log.info(
        "%s: backfill of %d selected files: %d to index, %d to rebuild, %d partitions, %d commits",
        source.name,
        len(selected),
        len(todo) - rebuilt,
        rebuilt,
        partition_count,
        len(batches),
    )
    spark = session_for(spec, todo, spark)  # the whole backfill's work decides, not one batch's
    version = source.current_version() or 0
    done, written, rebuilt_done, skipped, commits = 0, 0, 0, [], 0
    for number, (labels, files) in enumerate(batches, start=1):
        computed = index_new_files(
            spark,
            source,
            files,
            version,
            spec,
            skip_unreadable=spec.skip_unreadable,
            table_files=len(versions) + len(todo) - rebuilt,  # the entries the index holds once this backfill ends
        )
        result = index.commit(computed.entries)
        commits += int(result.committed)
        written += result.added - result.replaced
        rebuilt_done += result.replaced
        skipped += computed.skipped
        done += len(files)
        span = labels[0] if len(labels) == 1 else f"{labels[0]} .. {labels[-1]}"
        log.info(
            "%s: backfill batch %d/%d (%s): %d/%d files done", source.name, number, len(batches), span, done, len(todo)
        )
    return BackfillResult(
        source.name, index.identifier, len(selected), written, rebuilt_done, partition_count, commits, skipped
    )
