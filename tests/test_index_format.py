"""Index formats 4 and 5 (docs/index-table.md): a lookup reads only what its predicate needs of the index, takes the
live files from the index's file rows while the source only appended; a format-3 index table is rewritten in the new
format with every file live at its watermark, and a format-4 one gains the row-group field in place (one metadata
commit: a build killed at any step of it leaves format 4 or 5, whole). Real Iceberg tables (SQLite catalog), real
builds (Spark, or the per-file task in this process for small work; a `skipindex` subprocess for the kills), answers
checked against the rows, and row group by row group where the index has row-group entries."""

from __future__ import annotations

import random

import pyarrow.parquet as pq
import pytest
from lakes import PARTS, QUERIES, Lake, events_batch, live_rows, rewrite_as_format_4, write_format_3_index
from pyiceberg.schema import Schema
from test_crash_and_concurrency import COMMIT_STEPS, Run

from indexlib.config import load_config
from indexlib.indexing.backfill import backfill
from indexlib.indexing.build import build_index
from indexlib.lookup import lookup, lookup_in, read_state
from indexlib.query.sql import Clock
from indexlib.report import table_stats
from indexlib.sources.base import LiveFiles
from indexlib.sources.iceberg import IcebergSource
from indexlib.store.schema import ENTRY_SCHEMA, FORMAT_VERSION, INDEX_SCHEMA
from indexlib.store.snapshot import IndexSnapshot
from indexlib.store.table import FORMAT_PROPERTY, UPGRADE_SUFFIX, IndexTable

CLOCK = Clock()
# Format 3 stored entries as they are: the entry layout without the file facts format 4 added.
FORMAT_3_SCHEMA = Schema(
    *(f for f in ENTRY_SCHEMA.fields if f.name not in ("indexed", "file_format", "spec_id", "partition"))
)


def _check(config, name: str, step: str, rows: dict[str, list[dict]] | None = None) -> None:
    rows = rows if rows is not None else live_rows(config, name)
    for where, matches in QUERIES:
        result = lookup(config, name, where, CLOCK)
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= set(result.files), f"after {step}: {where!r} keeps every file with a matching row"
        assert set(result.files) <= set(rows), f"after {step}: {where!r} returns only live files"


@pytest.fixture
def lake(catalog, tmp_path) -> Lake:
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    rng = random.Random(3)
    for n in range(6):
        lake.append(events_batch(rng, n * 40, 40, PARTS[n % 3]))
    return lake


def test_a_lookup_takes_the_live_files_from_the_index_while_the_source_only_appended(config, lake, spark, monkeypatch):
    build_index(config, lake.name, spark)
    lake.append(events_batch(random.Random(4), 500, 40, "b"))  # not built: unindexed, kept
    rows = live_rows(config, lake.name)

    def planned(self):
        raise AssertionError("the lookup planned every live file of the source")

    with monkeypatch.context() as patched:
        patched.setattr(IcebergSource, "live_files", planned)
        _check(config, lake.name, "an append after the build, without planning the source", rows)
        result = lookup(config, lake.name, "part = 'b'", CLOCK)
        assert result.files_total == 7, "the six files at the watermark and the one appended since"
        assert result.files_unindexed == 1, "the appended file is kept, unindexed"
        assert result.stages[0].files_out < result.files_total, "partition values come from the index's file rows"

    lake.delete("id < 60")  # removes files: the next lookups plan the source, and never return removed files
    _check(config, lake.name, "a delete")
    before_delete = lake.iceberg.refresh().current_snapshot().parent_snapshot_id
    build_index(config, lake.name, spark)
    _check(config, lake.name, "the build after the delete")
    lake.iceberg.manage_snapshots().rollback_to_snapshot(before_delete).commit()
    _check(config, lake.name, "a rollback to before the delete (the watermark is no longer an ancestor)")
    build_index(config, lake.name, spark)
    rows = live_rows(config, lake.name)
    with monkeypatch.context() as patched:
        patched.setattr(IcebergSource, "live_files", planned)
        _check(config, lake.name, "the build after the rollback", rows)


def test_a_lookup_reads_the_named_columns_and_payloads_of_only_the_files_min_max_keeps(config, lake, spark):
    build_index(config, lake.name, spark)
    state = read_state(config, lake.name)
    assert isinstance(state.rows, IndexSnapshot)
    id_field = state.source.schema.find_field("id").field_id
    result = lookup_in(state, lake.name, "id IN (17, 18)", CLOCK)
    kept_by_minmax = next(s.files_out for s in result.stages if s.name == "minmax")
    read = state.rows.reads
    assert [what for what, _, _ in read if what == "files"] == ["files"], "the file rows are read once"
    assert {ids for what, ids, _ in read if what == "bounds"} == {(id_field,)}, "bounds of the named column only"
    payload_rows = sum(n for what, _, n in read if what == "payloads")
    assert 0 < payload_rows <= kept_by_minmax < result.files_total, "payloads of only the files min/max keeps"

    assert isinstance(state.live, LiveFiles) and not state.live.made, (
        "no partition column named: the live files are never made into DataFileRefs (only the stage needs them)"
    )
    again = len(read)
    lookup_in(state, lake.name, "id IN (17, 18)", CLOCK)
    assert len(state.rows.reads) == again, "the same question again reads nothing"


def _format_3_index(catalog, lake: Lake, indexed: list[str]) -> IndexTable:
    """An index table as skipindex wrote format 3: entries (here without statistics) of `indexed` only."""
    return write_format_3_index(catalog, "skipindex", lake.name, [(path, 1, 40) for path in indexed], lake.version())


@pytest.mark.parametrize(
    "crash",
    [None, "before the old table was dropped", "between the drop and the rename"],
)
def test_a_format_3_index_is_rewritten_as_format_4_with_a_file_row_for_every_file_live_at_its_watermark(
    config, catalog, lake, spark, crash
):
    live = sorted(live_rows(config, lake.name))
    index = _format_3_index(catalog, lake, live[:4])  # two live files were never indexed (skipped, say)
    watermark = lake.version()
    _check(config, lake.name, "format 3, before the upgrade")
    staged = index.identifier + UPGRADE_SUFFIX
    if crash == "before the old table was dropped":
        catalog.create_table(staged, schema=INDEX_SCHEMA)  # a half-written new table
    if crash == "between the drop and the rename":
        index.upgrade(lambda watermark, entries: None)
        catalog.rename_table(index.identifier, staged)
        found = lookup(config, lake.name, "id = 17", CLOCK)
        assert not found.has_index and found.files_unindexed == len(found.files) > 0, (
            "no index table: every file is judged by the format's statistics alone"
        )

    build_index(config, lake.name, spark)  # the source did not change: the build only upgrades

    upgraded = IndexTable(catalog, "skipindex", lake.name)
    table = upgraded.load()
    assert table.properties[FORMAT_PROPERTY] == str(FORMAT_VERSION) and not catalog.table_exists(staged)
    if crash != "between the drop and the rename":  # that run upgraded without the source's help, see above
        assert upgraded.watermark() == watermark, "the watermark is kept"
        rows = upgraded.file_rows()
        assert sorted(rows.column("file_path").to_pylist()) == live, "a file row for every file live at the watermark"
        assert sorted(upgraded.indexed_paths()) == live[:4], "the files it never indexed stay unindexed"
        assert set(upgraded.config_versions().values()) == {"old"}, "entries keep their configuration version"
        result = lookup(config, lake.name, "id = 17", CLOCK)
        assert set(live[:4]) <= set(result.files), "entries without statistics keep their files"
        assert result.files_unindexed == len(set(result.files) - set(live[:4])), (
            "the files never indexed are judged by their manifest entries"
        )
        report = table_stats(config, lake.name)
        assert (report.files_live, report.files_counted) == (6, 4), "stats count the indexed files only"
    _check(config, lake.name, "the upgrade")


def test_a_backfill_batch_never_brings_back_the_row_of_a_file_a_build_dropped_meanwhile(config, catalog, lake, spark):
    build_index(config, lake.name, spark)
    index = IndexTable(catalog, "skipindex", lake.name)
    victim = next(path for path, rows in live_rows(config, lake.name).items() if all(r["id"] < 40 for r in rows))
    computed = index.entries([victim])  # what a backfill batch computed before the source removed the file
    lake.delete("id < 40")  # the whole first file: the source removes it
    build_index(config, lake.name, spark)  # drops its row and moves the watermark
    index.reload()
    assert victim not in index.known_paths()

    result = index.commit(computed)  # a backfill's commit: it keeps the file rows the live version claims
    index.reload()
    assert victim not in index.known_paths(), "a file row must not outlive its file"
    assert index.live_version() == index.watermark() == lake.version() and result.added == 0
    _check(config, lake.name, "a backfill batch committed after a build")


# ---- format 4 -> 5: the row-group field added in place ---------------------------------------------------------

ROW_GROUP_ROWS = 10  # the source's row-group limit: each 40-row file has four row groups


def _row_groups_of(config, name: str) -> dict[str, list[list[dict]]]:
    """Every live file's rows, per Parquet row group (footer order)."""
    files = {}
    for path in live_rows(config, name):
        parquet = pq.ParquetFile(path.removeprefix("file://"))
        files[path] = [parquet.read_row_group(g).to_pylist() for g in range(parquet.metadata.num_row_groups)]
    return files


def _check_row_groups(config, name: str, step: str) -> int:
    """`_check`, and per kept file: every row group holding a matching row is among those a reader reads. Returns
    how many row groups the lookups judged (0: no row-group entries were used)."""
    _check(config, name, step)
    judged = 0
    for where, matches in QUERIES:
        result = lookup(config, name, where, CLOCK)
        judged += result.kept_parts("row_groups").total
        needed = {kept.file.path: kept.row_groups for kept in result.kept_files}
        for path, groups in _row_groups_of(config, name).items():
            for g, rows in enumerate(groups):
                if any(matches(r) for r in rows):
                    assert needed[path] is None or g in needed[path], (
                        f"after {step}: {where!r} leaves out row group {g} of {path}, which holds a matching row"
                    )
    return judged


def _layout(index: IndexTable) -> tuple[int, bool]:
    """(format property, whether the schema has the fields added since format 4, `row_groups` and `key_hash`): 4
    without or the current format with, never a mix."""
    table = index.reload()
    names = table.schema().column_names
    return int(table.properties[FORMAT_PROPERTY]), "row_groups" in names and "key_hash" in names


def test_a_lookup_right_after_the_format_4_upgrade_reads_the_index_at_its_snapshot_schema(
    conf_path, config, catalog, tmp_path
):
    """The upgrade is a schema commit without a snapshot: the index's current snapshot was written with the
    format-4 schema, which has no `row_groups`, and a build with nothing to do commits no snapshot after it."""
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    with lake.iceberg.transaction() as transaction:
        transaction.set_properties({"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)})
    for n in range(3):
        lake.append(events_batch(random.Random(n), n * 40, 40, PARTS[n]))
    build_index(config, lake.name)
    index = rewrite_as_format_4(catalog, "skipindex", lake.name)
    with_row_groups = tmp_path / "row_groups.toml"
    with_row_groups.write_text(conf_path.read_text() + "[index]\nrow_groups = true\n")
    result = build_index(load_config(with_row_groups), lake.name)
    assert not result.committed and _layout(index) == (FORMAT_VERSION, True), "upgraded in place; nothing else to do"
    _check_row_groups(config, lake.name, "a build that only upgraded")


@pytest.mark.parametrize("kill_at", [None, "metadata-written", "before-commit", "after-commit"])
def test_a_format_4_index_gains_row_groups_in_place_and_a_kill_during_the_upgrade_leaves_4_or_5_whole(
    conf_path, config, catalog, tmp_path, kill_at
):
    lake = Lake("iceberg", catalog, tmp_path, "events", partitioned=True)
    with lake.iceberg.transaction() as transaction:
        transaction.set_properties({"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)})
    rng = random.Random(5)
    for n in range(4):
        lake.append(events_batch(rng, n * 40, 40, PARTS[n % 3]))
    build_index(config, lake.name)  # without row-group entries (`row_groups` is "false" by default)
    index = rewrite_as_format_4(catalog, "skipindex", lake.name)
    assert _layout(index) == (4, False), "a format-4 index table: no row_groups field"
    assert _check_row_groups(config, lake.name, "format 4, before the upgrade") == 0, "format 4 has no row groups"

    with_row_groups = tmp_path / "row_groups.toml"
    with_row_groups.write_text(conf_path.read_text() + "[index]\nrow_groups = true\n")
    row_group_config = load_config(with_row_groups)
    watermark = index.watermark()
    lake.append(events_batch(rng, 160, 40, "b"))  # the next build has a file to index, with row groups
    if kill_at is None:
        build_index(row_group_config, lake.name)
    else:
        run = Run(
            tmp_path, ["build", "--conf", str(with_row_groups), "--table", lake.name], SKIPINDEX_TEST_PAUSE_AT=kill_at
        )
        run.wait_for(kill_at)
        run.kill()
        steps = [line for line in run.out.read_text().splitlines() if line in COMMIT_STEPS]
        assert steps[-1] == kill_at, f"the kill landed at {kill_at} of the first commit (the upgrade): {steps}"
        assert index.watermark() == watermark, "the build's own commit never came"
        expected = (FORMAT_VERSION, True) if kill_at == "after-commit" else (4, False)
        assert _layout(index) == expected, (
            f"killed at {kill_at} of the upgrade's one commit: format {expected[0]}, whole"
        )
        _check_row_groups(config, lake.name, f"a build killed at {kill_at} of the upgrade")
        build_index(row_group_config, lake.name)  # the next build upgrades (again, or not) and indexes

    assert _layout(index) == (FORMAT_VERSION, True), (
        "the build upgraded the index to the current format in place"
    )  # (reloads it)
    indexed = index.entries()
    with_groups = {
        entry["file_path"]
        for entry in indexed.to_pylist()
        if entry["columns"] and all(column["row_groups"] for column in entry["columns"])
    }
    assert len(with_groups) == 1, "the file the build indexed has row-group entries, the old entries none"
    assert _check_row_groups(row_group_config, lake.name, "the upgrade and a build with row groups") > 0

    result = backfill(row_group_config, lake.name, None)
    assert result.files_rebuilt == 4, "enabling row_groups changes the configuration version: old entries rebuilt"
    index.reload()
    assert set(index.config_versions().values()) == set(index.entries().column("config_version").to_pylist()), (
        "read at the index's current snapshot"
    )
    assert len(set(index.config_versions().values())) == 1, "every entry is current"
    judged = _check_row_groups(row_group_config, lake.name, "the backfill with row groups")
    assert judged > 0
    point = lookup(row_group_config, lake.name, "id = 17", CLOCK)
    assert point.kept_parts("row_groups").total == 4 and list(point.kept_parts("row_groups").kept.values()) == [(1,)], (
        "id = 17 is in the second row group (ids 10-19) of the first file: only that row group is read"
    )
