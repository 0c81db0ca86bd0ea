"""What a run changed in an index (indexlib/store/changes.py), the rule behind the index Asset's events in
airflow_dags/: a change is what a reader would see (files indexed or removed, a new watermark or live version),
never a commit that only rewrote the same rows. Real Iceberg tables, builds in this process (no Spark)."""

from __future__ import annotations

import random

from lakes import PARTS, Lake, events_batch

from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact
from indexlib.store.changes import IndexState


def _state(config, lake: Lake) -> IndexState:
    return IndexState.read(config.load_catalog(), config.index_namespace, lake.name)


def test_a_change_is_what_a_reader_would_see(config, catalog, tmp_path):
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(31)
    lake.append(events_batch(rng, 0, 30, PARTS[0]))
    never = _state(config, lake)
    assert never == IndexState(), "a table never indexed: the empty state"
    build_index(config, lake.name)
    change = _state(config, lake).change_since(never)
    assert change is not None and (change.files_indexed, change.files_removed) == (1, 0), "the first build"
    assert change.source_version == lake.version(), "the extra names the source version the index reached"

    for n in (1, 2):  # a build each: small index files for compaction to rewrite
        lake.append(events_batch(rng, n * 30, 30, PARTS[n]))
        build_index(config, lake.name)
    first = _state(config, lake)
    assert len(first.indexed) == 3

    build_index(config, lake.name)
    assert _state(config, lake).change_since(first) is None, "a build with nothing new commits nothing"

    compact(config, lake.name)
    compacted = _state(config, lake)
    assert compacted.snapshot_id != first.snapshot_id, "compaction commits a new snapshot ..."
    assert compacted.change_since(first) is None, "... with nothing a reader sees differently"

    lake.delete("part = 'a'")
    lake.append(events_batch(rng, 900, 30, "b"))
    build_index(config, lake.name)
    change = _state(config, lake).change_since(compacted)
    assert change is not None and (change.files_indexed, change.files_removed) == (1, 1), "indexed and removed"


def test_a_new_watermark_alone_is_a_change(conf_path, catalog, tmp_path):
    """With `index_existing_files = false` the first build records only where the index starts: no file indexed,
    yet readers must see the watermark (the files before it are the backfill's)."""
    from indexlib.config import load_config

    conf_path.write_text(conf_path.read_text() + "[build]\nindex_existing_files = false\n")
    config = load_config(conf_path)
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    lake.append(events_batch(random.Random(1), 0, 30, "a"))
    build_index(config, lake.name)
    change = _state(config, lake).change_since(IndexState())
    assert change is not None and (change.files_indexed, change.source_version) == (0, lake.version())

    before = _state(config, lake)
    backfill(config, lake.name)
    change = _state(config, lake).change_since(before)
    assert change is not None and change.files_indexed == 1, "a backfill's statistics are a change too"
