"""End to end with Bloom filters and automata: a real Spark build on a SQLite-catalog Iceberg table of service logs
(each file a few services, random trace ids), the lookup's per-kind stages, `skipindex stats`, per-column settings
from the config file, and an index table written in format 1 upgraded in place."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pytest

from indexlib.config import load_config
from indexlib.errors import UserError
from indexlib.indexing.build import build_index
from indexlib.lookup import lookup
from indexlib.report import table_stats
from indexlib.store.schema import FORMAT_VERSION
from indexlib.store.table import FORMAT_PROPERTY, IndexTable

SKIPINDEX = str(Path(sys.executable).with_name("skipindex"))
SHARDS = [["compactor", "reader", "writer"], ["metadata", "reader"], ["auth", "billing", "writer"], ["search"]]


def trace(shard: int, row: int) -> str:
    return hashlib.md5(f"{shard}-{row}".encode()).hexdigest()


def _shard(shard: int, rows: int = 400) -> pa.Table:
    services = SHARDS[shard]
    return pa.table(
        {
            "service": pa.array([services[i % len(services)] for i in range(rows)], pa.string()),
            "trace_id": pa.array([trace(shard, i) for i in range(rows)], pa.string()),
            "status": pa.array([[200, 404, 503][(i * 7 + shard) % 3] * (1 + shard) for i in range(rows)], pa.int64()),
            "user": pa.array([None if i % 5 == 0 else f"user-{i % 40}" for i in range(rows)], pa.string()),
        }
    )


@pytest.fixture
def events(config, catalog, spark):
    table = catalog.create_table("db.events", schema=_shard(0).schema)
    for shard in range(len(SHARDS)):
        table.append(_shard(shard))
    build_index(config, "db.events", spark)
    return table


def _truth(spark, table, where: str) -> set[str]:
    live = [urlparse(t.file.file_path).path for t in table.scan().plan_files()]
    rows = spark.read.parquet(*live).where(where).select("_metadata.file_path").distinct().collect()
    return {urlparse(r[0]).path for r in rows}


QUERIES = [
    # (where, files after minmax, after bloom, after automaton) over the 4 shards above
    ("service = 'metadata'", 3, 3, 1),  # Husky: 'metadata' sorts inside [compactor, writer]
    ("service IN ('auth', 'search')", 3, 3, 2),
    ("service LIKE 'meta%'", 3, 3, 1),
    ("service NOT IN ('reader', 'writer', 'compactor')", 4, 4, 3),
    ("trace_id = '{t}'", 4, 1, 1),
    # an absent value no filter here holds by chance ('not-a-trace' is one of shard 0's 1 % false positives)
    ("trace_id IN ('{t}', 'no-such-trace')", 4, 1, 1),
    ("service = 'nobody'", 3, 3, 0),
]


@pytest.mark.parametrize(("where", "minmax", "bloom", "automaton"), QUERIES, ids=[q[0] for q in QUERIES])
def test_each_kind_prunes_what_min_max_cannot(config, events, spark, where, minmax, bloom, automaton):
    where = where.format(t=trace(2, 17))
    result = lookup(config, "db.events", where)
    out = {stage.name: stage.files_out for stage in result.stages}
    assert [s.name for s in result.stages] == ["partition", "minmax", "key index", "bloom", "automaton"]
    assert (out["minmax"], out["bloom"], out["automaton"]) == (minmax, bloom, automaton), out
    truth = _truth(spark, events, where)
    assert truth <= {urlparse(p).path for p in result.files}, f"a file with a matching row was skipped: {where}"


def test_stats_reports_ndv_kinds_and_bytes(config, events):
    report = {c.name: c for c in table_stats(config, "db.events").columns}
    assert round(report["trace_id"].ndv) == pytest.approx(1600, rel=0.05), "sketches merge across the 4 files"
    assert report["trace_id"].kinds["bloom"][0] == 4 and report["trace_id"].kinds["bloom"][1] > 0
    assert "automaton" in report["service"].kinds and "bloom" not in report["service"].kinds, (
        "exact automata need no Bloom filter"
    )
    assert report["service"].max_file_ndv == 3
    assert round(report["service"].ndv) == 7
    narrowed = {c.name: c for c in table_stats(config, "db.events", "service = 'metadata'").columns}
    assert narrowed["service"].files == 1 and round(narrowed["service"].ndv) == 2, "NDV of the slice the WHERE keeps"


def test_stats_command_prints_json(conf_path, events):
    done = subprocess.run(
        [SKIPINDEX, "stats", "--conf", str(conf_path), "--table", "db.events", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["files_live"] == 4 and out["files_counted"] == 4
    columns = {c["column"]: c for c in out["columns"]}
    assert columns["trace_id"]["kinds"]["bloom"]["files"] == 4


def test_per_column_settings_from_the_config_file(conf_path, catalog, spark):
    conf_path.write_text(
        conf_path.read_text()
        + '[index]\nbloom_fpp = 0.05\n[index.tables."db.events".columns.service]\nkinds = ["bloom"]\n'
        + '[index.tables."db.events".columns.trace_id]\nkinds = []\n'
    )
    config = load_config(conf_path)
    table = catalog.create_table("db.events", schema=_shard(0).schema)
    table.append(_shard(1))
    build_index(config, "db.events", spark)
    report = {c.name: c for c in table_stats(config, "db.events").columns}
    assert set(report["service"].kinds) == {"bloom"}, "kinds = ['bloom'] replaces the automatic automaton"
    assert report["trace_id"].kinds == {}, "kinds = [] leaves min/max only"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('[index.tables."db.events".columns.nope]\nkinds = ["bloom"]\n', "has no column 'nope'"),
        (
            '[index.tables."db.events".columns.status]\nkinds = ["automaton"]\n',
            "an automaton index cannot be built on status",
        ),
    ],
)
def test_settings_naming_a_wrong_column_fail_the_build_before_any_work(conf_path, catalog, settings, message):
    conf_path.write_text(conf_path.read_text() + settings)
    table = catalog.create_table("db.events", schema=_shard(0).schema)
    table.append(_shard(0))
    with pytest.raises(UserError, match=message):
        build_index(load_config(conf_path), "db.events")
    assert IndexTable(catalog, "skipindex", "db.events").load() is None, "nothing written"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("[index]\nbloom_fpp = 2\n", "index.bloom_fpp: expected a number between 0 and 1"),
        ("[index]\nautomaton_max_states = 0\n", "index.automaton_max_states: expected an integer >= 1"),
        ("[index]\nkinds = ['zstd']\n", "index.kinds: expected a list of"),
        ("[index]\nbloom = true\n", "index.bloom: unknown setting"),
        (
            '[index.tables."db.t".columns.c]\nbloom_fp = 0.1\n',
            'index.tables."db.t".columns.c.bloom_fp: unknown setting',
        ),
    ],
)
def test_bad_index_settings_are_one_line_errors_naming_the_setting(conf_path, settings, message):
    conf_path.write_text(conf_path.read_text() + settings)
    with pytest.raises(UserError, match=message.replace(".", r"\.").replace("[", r"\[")) as error:
        load_config(conf_path)
    assert str(conf_path) in str(error.value) and "\n" not in str(error.value)


def test_a_format_1_index_table_is_upgraded_in_place_and_its_old_entries_still_prune(config, catalog, spark):
    from pyiceberg.schema import Schema
    from pyiceberg.types import BinaryType, IntegerType, ListType, LongType, NestedField, StringType, StructType

    v1_schema = Schema(
        NestedField(1, "file_path", StringType(), required=True),
        NestedField(2, "file_size_in_bytes", LongType(), required=True),
        NestedField(3, "record_count", LongType(), required=True),
        NestedField(4, "source_version", LongType(), required=True),
        NestedField(5, "format_version", IntegerType(), required=True),
        NestedField(
            6,
            "columns",
            ListType(
                7,
                StructType(
                    NestedField(10, "field_id", IntegerType(), required=True),
                    NestedField(11, "name", StringType(), required=True),
                    NestedField(12, "type", StringType(), required=True),
                    NestedField(13, "value_count", LongType(), required=True),
                    NestedField(14, "null_count", LongType(), required=True),
                    NestedField(15, "nan_count", LongType(), required=False),
                    NestedField(16, "lower", BinaryType(), required=False),
                    NestedField(17, "upper", BinaryType(), required=False),
                ),
                element_required=True,
            ),
            required=True,
        ),
    )
    source = catalog.create_table("db.events", schema=_shard(0).schema)
    source.append(_shard(0))
    index = IndexTable(catalog, "skipindex", "db.events")
    catalog.create_namespace_if_not_exists("skipindex")
    old = catalog.create_table(
        index.identifier,
        schema=v1_schema,
        properties={"skipindex.source-table": "db.events", FORMAT_PROPERTY: "1"},
    )
    path = next(iter(source.scan().plan_files())).file.file_path
    old_entry = {
        "file_path": path,
        "file_size_in_bytes": 1,
        "record_count": 400,
        "source_version": source.current_snapshot().snapshot_id,
        "format_version": 1,
        "columns": [
            {
                "field_id": 1,
                "name": "service",
                "type": "string",
                "value_count": 400,
                "null_count": 0,
                "nan_count": None,
                "lower": b"compactor",
                "upper": b"writer",
            }
        ],
    }
    old.append(
        pa.Table.from_pylist([old_entry], schema=old.schema().as_arrow()),
        snapshot_properties={"skipindex.source-version": str(source.current_snapshot().snapshot_id)},
    )
    assert lookup(config, "db.events", "service = 'zebra'").files == [], "format-1 bounds still prune"
    old_stats = {c.name: c for c in table_stats(config, "db.events").columns}
    assert (old_stats["service"].files, old_stats["service"].kinds) == (1, {}), "stats read format-1 entries"

    source.append(_shard(1))
    build_index(config, "db.events", spark)
    upgraded = catalog.load_table(index.identifier)
    assert upgraded.properties[FORMAT_PROPERTY] == str(FORMAT_VERSION), "upgraded to the current format"
    assert upgraded.properties["commit.retry.num-retries"] == "0", "and pyiceberg's rebasing retry switched off"
    result = lookup(config, "db.events", "service = 'query'")  # inside both files' [min, max], in neither
    assert result.files == [path], "the old entry (no automaton) keeps its file; the new one's automaton skips"


def _prose_table(catalog: Any) -> Any:
    """db.notes: `note` free text (1,200 distinct sentences), `k` a key (Bloom filter), `tag` 3 values (automaton),
    `price` a measure; two files."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    rows = 1200  # 600 distinct sentences a file: free text needs more than 256
    data = pa.table(
        {
            "k": pa.array([i * 7919 for i in range(rows)], pa.int64()),
            "note": [f"the {words[i % 6]} report number {i} was filed late" for i in range(rows)],
            "tag": [["api", "db", "web"][i % 3] for i in range(rows)],
            "price": pa.array([i * 0.37 for i in range(rows)], pa.float64()),
        }
    )
    table = catalog.create_table("db.notes", schema=data.schema)
    table.append(data.slice(0, rows // 2))
    table.append(data.slice(rows // 2))
    return table


# (WHERE, the columns explain names as having no structure for it, the rule)
MIN_MAX_ONLY_RULES = [
    ("note = 'the alpha report number 6 was filed late'", ["note"], "free text gets no Bloom filter"),
    ("k = 7919", [], "a key column has its Bloom filter"),
    ("tag = 'db' OR tag LIKE 'w%'", [], "a tag column has its automaton"),
    ("price IN (0.37, 0.74)", ["price"], "a measure gets nothing beyond min/max"),
    ("note LIKE '%report%' AND k > 0", [], "LIKE on free text: its n-gram filters answer it"),
    ("k > 10", [], "a range: min/max is the structure that answers it"),
]


def test_explain_names_the_columns_with_no_structure_for_equality(conf_path, config, catalog) -> None:
    from indexlib.handle import open_handle

    _prose_table(catalog)
    build_index(config, "db.notes")
    handle = open_handle(config, "db.notes")
    for where, named, rule in MIN_MAX_ONLY_RULES:
        notes = handle.lookup(where).min_max_only
        assert [note.split(":")[0] for note in notes] == named, f"{rule}: {where} -> {notes}"
        assert all("min/max only" in note for note in notes), f"{rule}: {notes}"
    (note,) = handle.lookup("note = 'the bravo x'").min_max_only
    assert "free text" in note and 'kinds = ["bloom", "ngram"]' in note, (
        f"says why and what buys it, keeping the n-gram filters the column has: {note}"
    )
    conf_path.write_text(conf_path.read_text() + '[index.tables."db.notes".columns.note]\nkinds = ["bloom"]\n')
    configured = load_config(conf_path)
    build_index(configured, "db.notes")
    from indexlib.indexing.backfill import backfill

    backfill(configured, "db.notes", None)
    answer = open_handle(configured, "db.notes").lookup(MIN_MAX_ONLY_RULES[0][0])
    assert len(answer.files) == 1 and answer.min_max_only == [], (
        'with kinds = ["bloom"] on note its filter keeps the one file holding the value, and explain has no note'
    )
