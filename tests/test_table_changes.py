"""Tables change under the index: deletes, overwrites and compaction remove files, backfills cover old ones, the
configuration changes. Real Iceberg (SQLite catalog) and real Delta (delta-rs) tables, a real Spark build, and every
lookup checked against the rows of every live file."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from unittest.mock import patch

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from lakes import EVENTS_SCHEMA, PARTS, QUERIES, Lake, events_batch, live_rows
from pyiceberg.types import BooleanType, DateType, DecimalType, IntegerType, LongType, StringType

from indexlib.automaton import build_tag_regex
from indexlib.config import load_config
from indexlib.errors import BuildFailed, UserError
from indexlib.index_kinds import automaton, bloom, ngram
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing import file_indexer
from indexlib.indexing.backfill import backfill, batches_of_partitions, plan_backfill
from indexlib.indexing.build import build_index
from indexlib.indexing.file_indexer import config_version
from indexlib.lookup import lookup
from indexlib.sources.base import DataFileRef
from indexlib.sources.registry import open_source
from indexlib.store.table import IndexTable


def _check_lookups(config, name: str) -> list[tuple[str, int, int]]:
    """Every query keeps every live file holding a matching row and returns only live files."""
    rows = live_rows(config, name)
    seen = []
    for where, matches in QUERIES:
        result = lookup(config, name, where)
        kept = set(result.files)
        assert kept <= set(rows), f"{where}: lookup returned a file that is not live"
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= kept, f"{where}: files with matching rows were skipped: {truth - kept}"
        assert result.summary["files_total"] == len(rows)
        seen.append((where, len(kept), len(truth)))
    return seen


def _index_paths(config, name: str) -> list[str]:
    source = open_source(config, name)
    return (
        IndexTable(config.load_catalog(), config.index_namespace, source.name).indexed().column("file_path").to_pylist()
    )


@pytest.fixture(params=["iceberg", "delta"])
def lake(request, catalog, tmp_path) -> Lake:
    return Lake(request.param, catalog, tmp_path, "events", partitioned=True)


def test_deletes_and_compaction_drop_removed_entries_and_index_new_files(config, lake, spark):
    rng = random.Random(7)
    for n in range(6):
        lake.append(events_batch(rng, n * 50, 50, PARTS[n % 3]))
    first = build_index(config, lake.name, spark)
    assert first.files_indexed == len(live_rows(config, lake.name))

    lake.delete("service = 'auth' OR id < 25")
    lake.append(events_batch(rng, 300, 50, "b"))
    # Fresh commits since the build: removed files are never returned; new ones are judged by their partition values
    # and the format's own statistics (_check_lookups: never one holding a match dropped), and counted unindexed.
    for where, _, _ in _check_lookups(config, lake.name):
        result = lookup(config, lake.name, where)
        unindexed = set(live_rows(config, lake.name)) - set(_index_paths(config, lake.name))
        assert unindexed, "the delete rewrote files and the append added one"
        assert result.summary["files_unindexed"] == len(unindexed & set(result.files))

    second = build_index(config, lake.name, spark)
    assert second.entries_dropped > 0, "the build drops the entries of files the delete removed"
    lake.compact()
    third = build_index(config, lake.name, spark)
    assert third.files_indexed > 0 and third.entries_dropped > 0, "compaction: old entries dropped, new files indexed"

    paths = _index_paths(config, lake.name)
    assert sorted(paths) == sorted(live_rows(config, lake.name)), "one entry per live file, nothing else"
    results = _check_lookups(config, lake.name)
    kept, truth = next((kept, truth) for where, kept, truth in results if where == "service = 'auth'")
    assert kept == truth < len(paths), "the tag index of the rewritten files keeps exactly the files holding 'auth'"
    assert lookup(config, lake.name, "service = 'auth'").summary["files_unindexed"] == 0


def test_a_rerun_after_changes_commits_nothing(config, lake, spark):
    rng = random.Random(3)
    for n in range(3):
        lake.append(events_batch(rng, n * 20, 20, PARTS[n]))
    build_index(config, lake.name, spark)
    lake.delete("id < 10")
    assert build_index(config, lake.name, spark).committed
    again = build_index(config, lake.name, spark)
    assert not again.committed, "nothing changed since the last build: nothing to commit"


@pytest.fixture
def backfill_config(conf_path):
    conf_path.write_text(
        conf_path.read_text() + "[build]\nindex_existing_files = false\nbackfill_files_per_commit = 2\n"
    )
    return load_config(conf_path)


def test_backfill_indexes_old_partitions_once_and_rebuilds_after_a_configuration_change(
    backfill_config, conf_path, lake, spark
):
    config = backfill_config
    rng = random.Random(11)
    for n in range(9):
        lake.append(events_batch(rng, n * 30, 30, PARTS[n % 3]))
    old = set(live_rows(config, lake.name))
    start = build_index(config, lake.name, spark)
    assert start.committed and start.files_indexed == 0, "index_existing_files = false: the index starts now"
    lake.append(events_batch(rng, 1000, 30, "c"))
    assert build_index(config, lake.name, spark).files_indexed == 1, "later files are indexed by the build"

    part_a = backfill(config, lake.name, "part = 'a'", spark)
    assert part_a.files_indexed == 3 and part_a.commits == 2, "3 files of partition a, 2 files per commit"
    indexed = set(_index_paths(config, lake.name))
    assert {p for p in old if _partition_of(config, lake.name, p) == "part=a"} <= indexed
    again = backfill(config, lake.name, "part = 'a'", spark)
    assert again.files_indexed == 0 and again.commits == 0, "a rerun finds nothing left to do"

    rest = backfill(config, lake.name, None, spark)
    assert rest.files_indexed == 6 and rest.files_rebuilt == 0
    paths = _index_paths(config, lake.name)
    assert sorted(paths) == sorted(live_rows(config, lake.name)), "every live file once"
    _check_lookups(config, lake.name)

    conf_path.write_text(conf_path.read_text() + "[index]\nbloom_fpp = 0.001\n")
    changed = load_config(conf_path)
    source = open_source(changed, lake.name)
    assert config_version(changed.column_settings(source.name, source.schema)) != config_version(
        config.column_settings(source.name, source.schema)
    )
    rebuilt = backfill(changed, lake.name, None, spark)
    assert rebuilt.files_rebuilt == 10 and rebuilt.files_indexed == 0, "every entry is rebuilt, none added"
    state = IndexTable(changed.load_catalog(), changed.index_namespace, source.name).indexed()
    assert state.num_rows == 10 and set(state.column("config_version").to_pylist()) == {
        config_version(changed.column_settings(source.name, source.schema))
    }
    _check_lookups(changed, lake.name)


def _partition_of(config, name: str, path: str) -> str:
    source = open_source(config, name)
    ref = next(f for f in source.live_files() if f.path == path)
    return source.partition_label(ref)


@pytest.mark.parametrize(
    ("sizes", "per_commit", "expected"),
    [
        ({"a": 1, "b": 1, "c": 1}, 2, [["a", "b"], ["c"]]),
        ({"a": 3}, 2, [["a"], ["a"]]),
        ({"a": 1, "b": 3, "c": 1}, 2, [["a"], ["b"], ["b", "c"]]),
        ({"a": 2, "b": 2}, 5, [["a", "b"]]),
    ],
)
def test_backfill_batches_hold_whole_partitions_up_to_the_commit_size(sizes, per_commit, expected):
    files = [
        DataFileRef(f"{part}/{i}", 1, 1, "PARQUET", 0, (("part", part),)) for part, n in sizes.items() for i in range(n)
    ]
    batches = batches_of_partitions(files, lambda f: f.path.split("/")[0], per_commit)
    assert [labels for labels, _ in batches] == expected, "partitions are batched in order, split only when too big"
    assert all(len(members) <= per_commit for _, members in batches), "no commit exceeds the batch size"
    assert sorted(f.path for _, members in batches for f in members) == sorted(f.path for f in files), "each file once"


def test_a_backfill_plan_names_whole_partitions_that_backfill_then_does_batch_by_batch(backfill_config, lake, spark):
    config = backfill_config
    rng = random.Random(12)
    for n in range(7):
        lake.append(events_batch(rng, n * 30, 30, PARTS[n % 3]))  # partition a: 3 files, b: 2, c: 2
    build_index(config, lake.name, spark)  # index_existing_files = false: every file is left to the backfill
    plan = plan_backfill(config, lake.name, "part IN ('a', 'b')")
    assert plan == [["part=a"], ["part=a"], ["part=b"]], "a partition of 3 files is split; 2 files per commit"
    assert plan_backfill(config, lake.name) == [["part=a"], ["part=a"], ["part=b"], ["part=c"]]

    only_b = backfill(config, lake.name, "part IN ('a', 'b')", spark, partitions=["part=b"])
    assert (only_b.files_indexed, only_b.partitions) == (2, 1), "--partition limits the backfill to that partition"
    assert {_partition_of(config, lake.name, p) for p in _index_paths(config, lake.name)} == {"part=b"}
    assert plan_backfill(config, lake.name) == [["part=a"], ["part=a"], ["part=c"]], "done partitions leave the plan"
    with pytest.raises(UserError, match="no live file selected by --where is in partition 'part=x'"):
        backfill(config, lake.name, None, spark, partitions=["part=x"])
    for batch in plan_backfill(config, lake.name):
        backfill(config, lake.name, None, spark, partitions=batch)
    assert plan_backfill(config, lake.name) == [], "nothing left once every batch ran"
    assert sorted(_index_paths(config, lake.name)) == sorted(live_rows(config, lake.name)), "every live file once"
    _check_lookups(config, lake.name)


def test_backfill_where_must_name_a_partition_field(backfill_config, lake, spark):
    lake.append(events_batch(random.Random(1), 0, 10, "a"))
    with pytest.raises(UserError, match="restricts no partition field"):
        backfill(backfill_config, lake.name, "service = 'auth'", spark)


def test_delta_paths_are_the_data_files_delta_rs_resolves(config, catalog, tmp_path):
    """A partition value with '/', '%' and a space is percent-encoded twice in the log; paths must still open (the
    index catalog exists, holding no index: lookups open it read-only)."""
    name = str(tmp_path / "odd")
    write_deltalake(name, pa.table({"k": [1, 2, 3], "p": ["a b", "x/y%", None]}), partition_by=["p"])
    source = open_source(config, name)
    assert sorted(f.path for f in source.live_files()) == sorted(DeltaTable(name).file_uris())
    kept = lookup(config, name, "p = 'x/y%'").files
    assert len(kept) == 1 and pq.read_table(kept[0]).column("k").to_pylist() == [2]
    assert lookup(config, name, "p IS NULL").files == [
        f.path for f in source.live_files() if dict(f.partition)["p"] is None
    ]


def test_unreadable_file_fails_the_build_naming_it_and_commits_nothing(config, catalog, spark):
    table = catalog.create_table("db.broken", schema=EVENTS_SCHEMA)
    for n in range(3):
        table.append(events_batch(random.Random(n), n * 10, 10, "a"))
    victim = sorted(task.file.file_path for task in table.scan().plan_files())[1]
    Path(victim.removeprefix("file://")).write_bytes(b"not parquet at all")
    with pytest.raises(BuildFailed, match=f"cannot index data file {victim}"):
        build_index(config, "db.broken", spark)
    index = IndexTable(catalog, config.index_namespace, "db.broken")
    assert index.watermark() is None and index.indexed().num_rows == 0, "a failed build commits nothing"


def test_unreadable_file_is_skipped_when_configured_and_stays_unindexed(conf_path, catalog, spark):
    conf_path.write_text(conf_path.read_text() + '[build]\non_unreadable_file = "skip"\n')
    config = load_config(conf_path)
    table = catalog.create_table("db.broken", schema=EVENTS_SCHEMA)
    for n in range(3):
        table.append(events_batch(random.Random(n), n * 10, 10, "a"))
    victim = sorted(task.file.file_path for task in table.scan().plan_files())[1]
    Path(victim.removeprefix("file://")).write_bytes(b"not parquet at all")
    result = build_index(config, "db.broken", spark)
    assert [path for path, _ in result.skipped] == [victim] and result.files_indexed == 2
    assert victim in result.message()
    found = lookup(config, "db.broken", "id >= 0")
    assert victim in found.files and found.summary["files_unindexed"] == 1, "a skipped file is kept where it may match"
    assert lookup(config, "db.broken", "id = -1").files == [], "a skipped file is judged by its manifest entry"


def test_bad_build_settings_are_rejected_with_one_line(conf_path):
    conf_path.write_text(conf_path.read_text() + '[build]\non_unreadable_file = "ignore"\n')
    with pytest.raises(UserError, match="build.on_unreadable_file"):
        load_config(conf_path)


TYPED_PARTITION_QUERIES = [
    ("d >= DATE '2024-01-02'", lambda r: r["d"] is not None and r["d"] >= dt.date(2024, 1, 2)),
    ("n = 1", lambda r: r["n"] == 1),
    ("n IS NULL", lambda r: r["n"] is None),
    ("NOT (n = 1)", lambda r: r["n"] is not None and r["n"] != 1),
    (
        "d < DATE '2024-01-02' OR n > 1",
        lambda r: (r["d"] is not None and r["d"] < dt.date(2024, 1, 2)) or (r["n"] or 0) > 1,
    ),
    ("s = 'x' AND n IN (1, 2)", lambda r: r["s"] == "x" and r["n"] in (1, 2)),
    ("d IS NOT NULL AND k > 5", lambda r: r["d"] is not None and r["k"] is not None and r["k"] > 5),
]


@pytest.mark.parametrize(("where", "matches"), TYPED_PARTITION_QUERIES, ids=[q for q, _ in TYPED_PARTITION_QUERIES])
def test_delta_partition_values_prune_like_min_max_and_never_skip_a_matching_file(
    config, catalog, tmp_path, where, matches
):
    """Date and int partition values, NULL partitions included, decided from the log alone (no build has run; the
    index catalog exists, empty: lookups open it read-only)."""
    name = str(tmp_path / "typed")
    rng = random.Random(5)
    for _ in range(3):
        rows = [
            {
                "k": rng.choice([None, *range(10)]),
                "s": rng.choice([None, "x", "y"]),
                "d": rng.choice([None, dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)]),
                "n": rng.choice([None, 1, 2, 3]),
            }
            for _ in range(40)
        ]
        schema = pa.schema([("k", pa.int64()), ("s", pa.string()), ("d", pa.date32()), ("n", pa.int32())])
        write_deltalake(name, pa.Table.from_pylist(rows, schema=schema), mode="append", partition_by=["d", "n"])
    rows = live_rows(config, name)
    result = lookup(config, name, where)
    truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
    assert truth <= set(result.files), f"{where}: a file holding a matching row was skipped"
    for path in result.all_match:
        assert all(matches(r) for r in rows[path]), f"{where}: {path} claimed all-match but a row does not match"
    if "k > 5" not in where and "s = 'x'" not in where:
        assert set(result.files) == truth, f"{where}: partition values alone decide this predicate exactly"


def test_delta_source_counts_match_the_log(config, tmp_path):
    name = str(tmp_path / "counts")
    write_deltalake(name, pa.table({"k": list(range(10)), "p": ["a"] * 5 + ["b"] * 5}), partition_by=["p"])
    refs = open_source(config, name).live_files()
    assert sum(f.record_count for f in refs) == 10
    assert pc.sum(pa.array([f.file_size_in_bytes for f in refs])).as_py() > 0


# ---------------------------------------------------------------- a change of the automatic choice (issue 30)


def _bloom_wanted_before(self, settings, iceberg_type, keys, rows, built) -> bool:
    """BloomIndex.wanted as it was before AUTOMATIC_CHOICE_VERSION 2 (commit 756d0ae)."""
    if isinstance(iceberg_type, BooleanType) or len(keys) < 2 or any(index.exact for index in built):
        return False
    if isinstance(iceberg_type, (IntegerType, LongType, DateType, DecimalType)):
        span = keys.integer_span()
        return span is None or span > len(keys)
    return True


def _automaton_wanted_before(self, settings, iceberg_type, keys, rows, built) -> bool:
    """AutomatonIndex.wanted as it was before AUTOMATIC_CHOICE_VERSION 2: any string column of at most
    automaton_max_ndv values, trimmed when the exact automaton is over budget."""
    return isinstance(iceberg_type, StringType) and 0 < len(keys) <= settings.value(automaton.MAX_NDV)


def _regex_before(values, max_states, max_bytes, trim):
    return build_tag_regex(values, max_states=max_states, max_bytes=max_bytes)  # always trimmed when over budget


_CHOICE_WORDS = ("blithely", "final", "deposits", "sleep", "carefully", "ironic", "packages", "quickly")


def _choice_batch(n: int) -> pa.Table:
    """300 rows: sparse ids, a measure, prose, 150 hex ids each twice (a tag by repeats, but 4.8 KB of text), a tag."""
    rng = random.Random(n)
    refs = ["".join(rng.choice("0123456789abcdef") for _ in range(32)) for _ in range(150)]
    return pa.table(
        {
            "id": pa.array([7 * (300 * n + i) for i in range(300)], pa.int64()),
            "price": pa.array([round(rng.random() * 1000, 2) for _ in range(300)], pa.float64()),
            "note": pa.array(
                [
                    f"{rng.choice(_CHOICE_WORDS)} {rng.choice(_CHOICE_WORDS)} {rng.choice(_CHOICE_WORDS)} {i}"
                    for i in range(300)
                ]
            ),
            "ref": pa.array([refs[i % 150] for i in range(300)]),
            "tag": pa.array([("auth", "billing", "search")[(i + n) % 3] if n < 2 else "web" for i in range(300)]),
        }
    )


def _kinds_by_column(config, name: str) -> dict[str, set[str]]:
    entries = IndexTable(config.load_catalog(), config.index_namespace, name).entries().to_pylist()
    found: dict[str, set[str]] = {}
    for entry in entries:
        for column in entry["columns"]:
            found.setdefault(column["name"], set()).update(index["kind"] for index in column["indexes"] or ())
    return found


def _checked(config, name: str, queries) -> dict[str, int]:
    """Files kept per query, every file holding a matching row among them."""
    rows = live_rows(config, name)
    kept = {}
    for where, matches in queries:
        files = set(lookup(config, name, where).files)
        truth = {path for path, file_rows in rows.items() if any(matches(r) for r in file_rows)}
        assert truth <= files, f"{where}: files with matching rows were skipped: {truth - files}"
        kept[where] = len(files)
    return kept


def test_entries_built_with_the_previous_automatic_choice_answer_until_backfill_rebuilds_them(config, catalog):
    table = catalog.create_table("db.choice", schema=_choice_batch(0).schema)
    for n in range(3):
        table.append(_choice_batch(n))
    sample = _choice_batch(1).to_pylist()[123]
    queries = [
        (f"id = {sample['id']}", lambda r: r["id"] == sample["id"]),
        ("id = 8", lambda r: r["id"] == 8),
        (f"price = {sample['price']}", lambda r: r["price"] == sample["price"]),
        (f"note = '{sample['note']}'", lambda r: r["note"] == sample["note"]),
        ("note LIKE '%ironic%'", lambda r: "ironic" in r["note"]),
        (f"ref = '{sample['ref']}'", lambda r: r["ref"] == sample["ref"]),
        ("ref LIKE '0%'", lambda r: r["ref"].startswith("0")),
        ("tag = 'web'", lambda r: r["tag"] == "web"),
        ("tag IN ('auth', 'search')", lambda r: r["tag"] in ("auth", "search")),
    ]
    with (
        patch.object(file_indexer, "AUTOMATIC_CHOICE_VERSION", 1),
        patch.object(bloom.BloomIndex, "wanted", _bloom_wanted_before),
        patch.object(automaton.AutomatonIndex, "wanted", _automaton_wanted_before),
        patch.object(ngram.NgramIndex, "wanted", lambda *_: False),  # n-gram filters came with rule 3
        patch("indexlib.automaton.build.build_tag_regex", _regex_before),  # the kind imports it there on use
    ):
        assert build_index(config, "db.choice").files_indexed == 3  # in this process: the patches apply
        previous = config_version(config.column_settings("db.choice", table.schema()))
    assert _kinds_by_column(config, "db.choice") == {
        "id": {"bloom"},
        "price": {"bloom"},
        "note": {"bloom"},
        "ref": {"automaton", "bloom"},  # trimmed, with a Bloom filter beside it
        "tag": {"automaton"},
    }, "the previous choice: Bloom filters for measures and prose, trimmed automata for ids"
    before = _checked(config, "db.choice", queries)

    current = config_version(config.column_settings("db.choice", table.schema()))
    assert current != previous, "the choice changed: entries built with the previous one are stale"
    assert _checked(config, "db.choice", queries) == before, "read by this version, the old entries answer the same"

    rebuilt = backfill(config, "db.choice")
    assert (rebuilt.files_rebuilt, rebuilt.files_indexed) == (3, 0), "backfill rebuilds every stale entry"
    state = IndexTable(config.load_catalog(), config.index_namespace, "db.choice").indexed()
    assert set(state.column("config_version").to_pylist()) == {current}
    assert _kinds_by_column(config, "db.choice") == {
        "id": {"bloom"},
        "price": set(),
        "note": {"ngram"},
        "ref": {"automaton", "bloom"},  # trimmed by symbol classes alone, with a Bloom filter beside it
        "tag": {"automaton"},
    }, (
        "the current choice: no filter for a measure, n-gram filters for prose; repeated ids: a bounded trimmed automaton"
    )
    after = _checked(config, "db.choice", queries)
    assert after[f"id = {sample['id']}"] == after[f"ref = '{sample['ref']}'"] == after["tag = 'web'"] == 1
    assert backfill(config, "db.choice").files_rebuilt == 0, "a second backfill finds nothing stale"


def test_a_table_whose_every_column_names_its_kinds_and_key_index_keeps_its_entries_when_the_choice_changes():
    every = {  # kinds and the key index named for every column
        1: IndexSettings(kinds=("bloom",), row_group_kinds=(), key_index=False),
        2: IndexSettings(kinds=(), key_index=True),
    }
    one_automatic = {1: IndexSettings(kinds=("bloom",)), 2: IndexSettings(row_group_kinds=())}
    versions = {}
    for choice in (1, 2):
        with patch.object(file_indexer, "AUTOMATIC_CHOICE_VERSION", choice):
            versions[choice] = [
                config_version(s, mode) for s in (every, one_automatic, {}) for mode in ("false", "true")
            ]
    same = [a == b for a, b in zip(versions[1], versions[2], strict=True)]
    assert same[:2] == [True, True], "no column uses the automatic choice: nothing to rebuild"
    keys_automatic = {1: IndexSettings(kinds=("bloom",), row_group_kinds=()), 2: IndexSettings(kinds=())}
    with patch.object(file_indexer, "AUTOMATIC_CHOICE_VERSION", 1):
        before = config_version(keys_automatic)
    assert config_version(keys_automatic) != before, "kinds named but the key index left to the choice: stale"
    assert same[2:4] == [False, False], "one column's files use it: its entries are stale, with row groups or not"
    assert same[4:] == [False, False], "no settings at all: every column uses it"
