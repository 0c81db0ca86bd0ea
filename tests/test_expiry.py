"""Expiry of index snapshots and orphan files (`skipindex expire`, store/expiry.py): what stays is exactly what the
remaining metadata references, lookups and a handle held across the expiry answer as before, and nothing younger
than the cutoff is deleted. Real Iceberg tables (SQLite catalog, local warehouse), a real Spark build."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from lakes import QUERIES, Lake, checked_answers, events_batch, partitioned_events

from indexlib.cli import main
from indexlib.handle import open_handle
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact, expire
from indexlib.lookup import lookup
from indexlib.query.sql import Clock
from indexlib.store.expiry import referenced_files
from indexlib.store.table import IndexTable

CLOCK = Clock()


@pytest.fixture
def lake(catalog, tmp_path) -> Lake:
    return partitioned_events(catalog, tmp_path, "events", seed=5, rows=40)


def _churn(config, lake: Lake, spark) -> None:
    """Builds after appends and a delete, then a compaction: snapshots whose files later ones replaced."""
    build_index(config, lake.name, spark)
    lake.append(events_batch(random.Random(6), 300, 40, "b"))
    build_index(config, lake.name, spark)
    lake.delete("id < 40")
    build_index(config, lake.name, spark)
    compact(config, lake.name)


def _files_under(table) -> set[str]:
    root = Path(table.location().removeprefix("file://"))
    return {str(p) for p in root.rglob("*") if p.is_file()}


def test_expiry_leaves_exactly_the_files_the_remaining_snapshots_reference(config, catalog, lake, spark):
    _churn(config, lake, spark)
    index = IndexTable(catalog, "skipindex", lake.name)
    before = index.reload()
    assert len(before.metadata.snapshots) > 1
    files_before = _files_under(before)
    assert files_before == referenced_files(before), "before the expiry every file is referenced"
    answers = checked_answers(config, lake.name)
    handle = open_handle(config, lake.name)
    held = {where: handle.lookup(where, CLOCK).files for where, _ in QUERIES}

    result = expire(config, lake.name, timedelta(0), retain_last=1).expiry
    after = index.reload()
    assert result is not None and result.snapshots_expired == len(before.metadata.snapshots) - 1
    assert [s.snapshot_id for s in after.metadata.snapshots] == [before.current_snapshot().snapshot_id]
    assert _files_under(after) == referenced_files(after), "every unreferenced file is deleted, no referenced one"
    assert result.files_deleted == len(files_before - _files_under(after)) > 0
    assert checked_answers(config, lake.name) == answers, "lookups answer as before the expiry"
    assert {where: handle.lookup(where, CLOCK).files for where, _ in QUERIES} == held, "a held handle too"

    lake.append(events_batch(random.Random(7), 600, 40, "c"))
    build_index(config, lake.name, spark)  # the handle's cached snapshot is gone: it must read the index again
    for where, _ in QUERIES:
        assert handle.lookup(where, CLOCK).files == lookup(config, lake.name, where, CLOCK).files, where


def test_nothing_younger_than_the_cutoff_is_expired_or_deleted(config, catalog, lake, spark):
    _churn(config, lake, spark)
    index = IndexTable(catalog, "skipindex", lake.name)
    table = index.reload()
    stray = Path(table.location().removeprefix("file://")) / "data" / "stray-from-a-commit-in-progress.parquet"
    stray.write_bytes(b"not yet committed")
    files = _files_under(table)

    result = expire(config, lake.name, timedelta(hours=1), retain_last=1).expiry
    assert result is not None and (result.snapshots_expired, result.files_deleted) == (0, 0)
    assert result.files_too_young == len(files - referenced_files(table)) >= 1
    assert _files_under(index.reload()) == files, "files younger than the cutoff stay"
    assert len(index.reload().metadata.snapshots) == len(table.metadata.snapshots)

    result = expire(config, lake.name, timedelta(0), retain_last=3).expiry
    assert result is not None and result.snapshots_kept == 3, "the newest --retain-last snapshots stay"
    assert not stray.exists()
    checked_answers(config, lake.name)


def test_the_expire_command_names_each_table_and_refuses_bad_input(conf_path, config, lake, spark, capsys):
    build_index(config, lake.name, spark)
    assert main(["expire", "--conf", str(conf_path), "--older-than", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{lake.name}: expired 0 snapshots of skipindex.") and "0 kept" not in out
    cases = [
        (["--older-than", "-1"], "--older-than must be >= 0 hours"),
        (["--retain-last", "0"], "--retain-last must be at least 1"),
        (["--table", "db.nope"], "db.nope"),
    ]
    for args, message in cases:
        assert main(["expire", "--conf", str(conf_path), *args]) == 2, f"bad input {args} exits 2"
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, f"{args}: one line naming the problem, got {err!r}"
