"""`skipindex compact` and `skipindex verify` on real index tables, through the CLI where the exit code matters."""

from __future__ import annotations

import json
import logging
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from indexlib.cli import main
from indexlib.config import load_config
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact, indexed_sources, verify
from indexlib.lookup import lookup
from indexlib.store.schema import ENTRY_ARROW_SCHEMA, rows_of
from indexlib.store.table import WATERMARK_PROPERTY, IndexTable

SCHEMA = pa.schema([("id", pa.int64()), ("service", pa.string())])


def _batch(start: int, rows: int = 30) -> pa.Table:
    rng = random.Random(start)
    return pa.Table.from_pylist(
        [{"id": i, "service": rng.choice(["auth", "web", "mail", None])} for i in range(start, start + rows)],
        schema=SCHEMA,
    )


@pytest.fixture
def table(config, catalog, spark):
    """Five builds of one file each: an index table of five small data files."""
    table = catalog.create_table("db.small", schema=SCHEMA)
    for n in range(5):
        table.append(_batch(n * 30))
        build_index(config, "db.small", spark)
    return table


def _data_files(config) -> int:
    return len(config.load_catalog().load_table("skipindex.db__small").inspect.files())


# The index table has one partition per indexed column (id, service) and one for the file rows.
PARTITIONS = 3


def test_compact_rewrites_small_files_into_one_per_partition_and_keeps_every_entry_and_the_watermark(config, table):
    index = IndexTable(config.load_catalog(), config.index_namespace, "db.small")
    before = (sorted(index.indexed().column("file_path").to_pylist()), index.watermark())
    answers = {where: lookup(config, "db.small", where).files for where in ("id = 42", "service = 'auth'")}
    assert _data_files(config) == 5 * PARTITIONS, "each build wrote one data file per partition"

    result = compact(config, "db.small")
    assert (result.data_files_before, result.data_files_after, result.entries) == (5 * PARTITIONS, PARTITIONS, 5)
    assert _data_files(config) == PARTITIONS
    assert (sorted(index.indexed().column("file_path").to_pylist()), index.watermark()) == before
    assert {where: lookup(config, "db.small", where).files for where in answers} == answers
    assert "already compact" in compact(config, "db.small").message(), "a second compaction rewrites nothing"


def test_compact_keeps_every_row_of_the_live_version_and_the_next_build_drops_the_removed_files(config, table, spark):
    table.delete("id < 30")  # removes the first file; no build has run since
    result = compact(config, "db.small")
    assert result.removed_dropped == 0 and result.entries == 5, (
        "the file rows are the files live at the index's live version: a rollback to it makes the removed one live again"
    )
    answer = lookup(config, "db.small", "id >= 0")
    assert answer.files_total == 4 and len(answer.files) == 4, "a lookup plans the source after the delete"
    assert build_index(config, "db.small", spark).entries_dropped == 1, "the build drops it, with the new live version"


def test_compact_prunes_rows_that_claim_no_live_version_to_the_files_live_now(config, table, spark):
    index = IndexTable(config.load_catalog(), config.index_namespace, "db.small").load()
    watermark = index.current_snapshot().summary[WATERMARK_PROPERTY]
    # what an index written before the live version existed looks like: a watermark and no claim
    index.append(rows_of(ENTRY_ARROW_SCHEMA.empty_table()), snapshot_properties={WATERMARK_PROPERTY: watermark})
    table.delete("id < 30")
    result = compact(config, "db.small")
    assert result.removed_dropped == 1 and result.entries == 4, "rows that claim nothing are pruned to the live files"
    assert lookup(config, "db.small", "id >= 0").files_total == 4


def test_compact_without_table_covers_every_indexed_table(config, conf_path, table, capsys):
    assert indexed_sources(config) == ["db.small"]
    assert main(["compact", "--conf", str(conf_path)]) == 0
    assert f"compacted skipindex.db__small from {5 * PARTITIONS} to {PARTITIONS} files" in capsys.readouterr().out


def test_verify_reports_a_healthy_index_and_exits_0(conf_path, table, capsys):
    assert main(["verify", "--conf", str(conf_path), "--table", "db.small", "--sample", "5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["sampled"], report["stale"], report["missing"], report["outdated_config"]) == (5, [], [], 0)


def test_verify_logs_that_it_rechecks_entries_not_that_it_indexes_files(conf_path, table, caplog):
    caplog.set_level(logging.INFO, logger="indexlib")
    assert verify(load_config(conf_path), "db.small", sample=5).ok
    said = [r.getMessage() for r in caplog.records if r.name == "indexlib.indexing.build"]
    assert any(m.startswith("db.small: recomputing 5 files") for m in said), f"verify says it re-checks: {said}"
    assert not any("indexing" in m for m in said), f"and never that it indexes: {said}"


def test_verify_finds_stale_and_missing_entries_and_exits_1(config, conf_path, table, capsys):
    index = IndexTable(config.load_catalog(), config.index_namespace, "db.small")
    victim = sorted(index.indexed().column("file_path").to_pylist())[2]

    def tamper(entries: pa.Table, live_version: int | None) -> pa.Table:
        """The victim's entry claims one row fewer than its file holds."""
        counts = pc.if_else(
            pc.equal(entries.column("file_path"), victim),
            pc.subtract(entries.column("record_count"), 1),
            entries.column("record_count"),
        )
        return entries.set_column(entries.schema.get_field_index("record_count"), "record_count", counts)

    index.rewrite(tamper)
    table.append(_batch(1000))  # committed after the last build: missing, not stale
    report = verify(config, "db.small", sample=5, seed=1)
    assert [path for path, _ in report.stale] == [victim] and "record count" in report.stale[0][1]
    assert len(report.missing) == 1 and not report.ok
    assert main(["verify", "--conf", str(conf_path), "--table", "db.small", "--sample", "5"]) == 1
    assert f"stale    {victim}: record count" in capsys.readouterr().out


def test_verify_rejects_a_negative_sample(conf_path, table, capsys):
    assert main(["verify", "--conf", str(conf_path), "--table", "db.small", "--sample", "-1"]) == 2
    assert "--sample must be >= 0" in capsys.readouterr().err


def test_compact_of_an_index_whose_rows_were_all_dropped_is_already_compact(config, catalog):
    """A snapshot with no data files (every row dropped) is a compact index, not an error."""
    source = catalog.create_table("db.gone", schema=SCHEMA)
    source.append(_batch(0))
    IndexTable(catalog, config.index_namespace, "db.gone").load_or_create().append(
        rows_of(ENTRY_ARROW_SCHEMA.empty_table())
    )
    assert (
        compact(config, "db.gone").message()
        == "db.gone: index skipindex.db__gone is already compact (0 files, 0 entries)"
    )
