"""Bloom filters sized for the table they were indexed in, as the table grows.

A file's filters are sized for the table's live files when it is indexed (min(bloom_fpp, bloom_false_files / N)).
Rules: a filter is outgrown once the table is more than twice the size it was sized for (and a filter built now
would be larger); its size says which table sizes build it, so `verify` recomputes it as it was built; compaction
rebuilds outgrown filters from the data files and changes nothing else of their entries; a growing table keeps
about bloom_false_files false files per absent key after a compaction, and every lookup stays exact.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pyiceberg.types import StringType

from indexlib.config import load_config
from indexlib.index_kinds import split_block
from indexlib.index_kinds.bloom import FPP, BloomIndex
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.build import build_index
from indexlib.indexing.upkeep import compact, verify
from indexlib.lookup import lookup
from indexlib.statistics.canonical import Keys, distinct_keys
from indexlib.store.schema import one_entry_per_path
from indexlib.store.table import IndexTable

BLOOM = BloomIndex()


def _keys(count: int) -> Keys:
    keys = distinct_keys(pa.array([f"key-{n}" for n in range(count)]), StringType())
    assert keys is not None
    return keys


def _payload(count: int, table_files: int, declared: IndexSettings | None = None) -> bytes:
    return BLOOM.build(_keys(count), StringType(), BLOOM.sized_for(declared or IndexSettings(), table_files)).payload


# (rule, distinct values, files the filter was sized for, files now, outgrown)
OUTGROWN_CASES = [
    ("a filter sized for the table now is not outgrown", 2_000, 1_000, 1_000, False),
    ("less than twice the table it was sized for: kept", 2_000, 1_000, 1_900, False),
    ("more than twice the table it was sized for: outgrown", 2_000, 1_000, 2_100, True),
    ("a table that grows within bloom_fpp's reach changes no size", 2_000, 10, 45, False),
    ("sized at bloom_fpp, outgrown once bloom_false_files / N is half of it", 2_000, 10, 120, True),
    ("a filter at the 128 MB cap cannot grow: never outgrown", 200_000_000, 100, 100_000, False),
]


@pytest.mark.parametrize(
    ("rule", "distinct", "sized_for", "now", "expected"), OUTGROWN_CASES, ids=[c[0] for c in OUTGROWN_CASES]
)
def test_a_filter_is_outgrown_when_the_table_is_more_than_twice_its_size(rule, distinct, sized_for, now, expected):
    if distinct > 1_000_000:  # the cap: a header naming 128 MB, without building a filter of that size
        num_bytes = split_block.optimal_bytes(distinct, BLOOM.sized_for(IndexSettings(), sized_for).value(FPP))
        assert num_bytes == split_block.MAX_BYTES, "the case is at the cap"
        payload = split_block.header(num_bytes) + bytes(num_bytes)
    else:
        payload = _payload(distinct, sized_for)
    assert BLOOM.outgrown(payload, distinct, IndexSettings(), now, 2.0) is expected, rule


def test_damaged_and_first_format_filters_are_never_outgrown_nor_sized():
    payload = _payload(500, 1_000)
    for damaged in (payload[:-5], b"\x00" + payload[1:]):
        assert not BLOOM.outgrown(damaged, 500, IndexSettings(), 10**6, 2.0), "a damaged filter is verify's to find"
        assert BLOOM.sized_tables(damaged, 500, IndexSettings()) is None, "no size is read from a damaged one"


@hypothesis_settings(max_examples=40, deadline=None)
@given(
    distinct=st.integers(1, 5_000),
    table_files=st.integers(1, 200_000),
    false_files=st.sampled_from([0.1, 0.5, 3.0]),
)
def test_a_filters_size_names_the_table_sizes_that_build_it_exactly(distinct, table_files, false_files):
    """verify recomputes a stored filter for a table size its bytes name: the range holds the size it was built
    for, both its ends build the same bytes, and the sizes just outside it do not."""
    declared = IndexSettings(bloom_false_files=false_files)
    payload = _payload(distinct, table_files, declared)
    named = BLOOM.sized_tables(payload, distinct, declared)
    assert named is not None and named[0] <= table_files <= named[1], f"sized for {table_files}, named {named}"
    assert _payload(distinct, named[0], declared) == payload == _payload(distinct, named[1], declared), (
        "both ends of the range rebuild the same filter"
    )
    assert named[0] == 1 or _payload(distinct, named[0] - 1, declared) != payload, "the range starts where it must"
    assert named[1] == 1 << 40 or _payload(distinct, named[1] + 1, declared) != payload, "... and ends where it must"


# ---------------------------------------------------------------- a growing table, built, verified, compacted


def _batch(rng: random.Random, rows: int = 200) -> pa.Table:
    return pa.table({"id": pa.array([rng.getrandbits(62) for _ in range(rows)], pa.int64())})


@pytest.fixture
def grown(tmp_path: Path, monkeypatch):
    """A table indexed at 4 files, grown to 14 and built again: the first 4 files' filters are sized for 4."""
    monkeypatch.chdir(tmp_path)
    conf = tmp_path / "conf.toml"
    conf.write_text(
        '[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'
        "[index]\nbloom_false_files = 0.01\n"  # sized below bloom_fpp from 2 files on: small tables show growth
    )
    config = load_config(conf)
    catalog = config.load_catalog()
    catalog.create_namespace("db")
    rng = random.Random(7)
    table = catalog.create_table("db.t", schema=_batch(rng).schema)
    written: list[pa.Table] = []
    for files in (4, 10):
        for _ in range(files):
            written.append(_batch(rng))
            table.append(written[-1])
        build_index(config, "db.t")
    return config, written


def _false_file_rate(config) -> float:
    """The expected false files per absent key of the whole table: the sum of every filter's rate."""
    entries = one_entry_per_path(IndexTable(config.load_catalog(), config.index_namespace, "db.t").entries())
    total = 0.0
    for row in entries.to_pylist():
        for column in row["columns"]:
            for index in column["indexes"] or ():
                bitset = split_block.bitset_of(index["payload"])
                total += split_block.false_positive_rate(column["distinct_count"], len(bitset))
    return total


def test_compaction_rebuilds_outgrown_filters_and_nothing_else(grown):
    config, _ = grown
    index = IndexTable(config.load_catalog(), config.index_namespace, "db.t")
    before = {row["file_path"]: row for row in one_entry_per_path(index.entries()).to_pylist()}
    rate_before = _false_file_rate(config)
    result = compact(config, "db.t")
    assert (result.files_resized, result.payloads_resized) == (4, 4), (
        f"the 4 files indexed at 4 of now 14 files are rebuilt, one filter each: {result.message()}"
    )
    assert "rebuilt 4 filters of 4 files" in result.message()
    index = IndexTable(config.load_catalog(), config.index_namespace, "db.t")
    after = {row["file_path"]: row for row in one_entry_per_path(index.entries()).to_pylist()}
    assert after.keys() == before.keys(), "one entry per file, as before"
    changed = {path for path in after if after[path] != before[path]}
    assert len(changed) == 4, "only the outgrown files' entries change"
    for path in changed:
        for old, new in zip(before[path]["columns"], after[path]["columns"], strict=True):
            assert {k: v for k, v in old.items() if k != "indexes"} == {
                k: v for k, v in new.items() if k != "indexes"
            }, "bounds, counts, sketches and key hashes stay as stored"
        assert {k: v for k, v in before[path].items() if k != "columns"} == {
            k: v for k, v in after[path].items() if k != "columns"
        }, "the entry's source and configuration version stay as stored"
    rate_after = _false_file_rate(config)
    assert rate_after <= 1.1 * 0.01 and rate_after < 0.6 * rate_before, (
        "after compaction every filter is sized for the table now: about bloom_false_files (0.01) false files per "
        f"absent key, {rate_before:.4f} before, {rate_after:.4f} after"
    )
    assert compact(config, "db.t").payloads_resized == 0, "a filter rebuilt for the table now is not rebuilt again"


def test_verify_finds_a_grown_tables_filters_healthy_and_a_damaged_one_stale(grown):
    config, _ = grown
    report = verify(config, "db.t", sample=14)
    assert report.ok and report.sampled == 14, f"filters sized for a smaller table are not stale: {report.message()}"
    index = IndexTable(config.load_catalog(), config.index_namespace, "db.t")

    def damage(entries: pa.Table, live_version):
        rows = one_entry_per_path(entries).to_pylist()
        payload = bytearray(rows[0]["columns"][0]["indexes"][0]["payload"])
        payload[-1] ^= 0xFF  # same size, other bits
        rows[0]["columns"][0]["indexes"][0]["payload"] = bytes(payload)
        return pa.Table.from_pylist(rows, schema=entries.schema)

    index.rewrite(damage)
    report = verify(config, "db.t", sample=14)
    assert len(report.stale) == 1 and "indexes differs" in report.stale[0][1], report.message()


def test_every_key_keeps_its_file_after_the_rebuild(grown):
    config, _ = grown
    compact(config, "db.t")
    table = config.load_catalog().load_table("db.t")
    for task in table.scan().plan_files():
        path = task.file.file_path
        ids = pq.read_table(path.removeprefix("file://")).column("id").to_pylist()
        for key in ids[:3]:
            assert path in lookup(config, "db.t", f"id = {key}").files, f"id = {key}: the file holding it is kept"
