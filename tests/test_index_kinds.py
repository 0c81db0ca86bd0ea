"""Rules of the index kinds beyond min/max: canonical keys, Bloom filters, automata, the automatic choice.

Each case writes real Parquet files (in the file's own Arrow types, which may differ from the table's), indexes them
with the build's per-file code and asks the lookup's index stages. A SKIP case also checks that min/max alone keeps
the file, so the skip is the kind's doing.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import re
import string
from decimal import Decimal
from unittest.mock import patch

import numpy as np
import pyarrow as pa
import pytest
from conftest import write_and_index
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from indexlib.automaton import build_tag_regex
from indexlib.automaton.emit import ANY_STRING_REGEX
from indexlib.index_kinds import bloom, split_block
from indexlib.index_kinds.bloom import FPP, BloomIndex, load_filter, might_contain_each
from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.file_indexer import index_column
from indexlib.pruning.index_evidence import prune
from indexlib.query.binding import bound_predicate
from indexlib.query.model import BoundColumn
from indexlib.query.value_set import ValueSet
from indexlib.statistics.canonical import Keys, distinct_keys, literal_hashes, literal_key
from indexlib.statistics.provider import ColumnStatistics, Decoded, Payloads

BLOOM = IndexSettings(kinds=("bloom",))
AUTOMATON = IndexSettings(kinds=("automaton",))
UTC = dt.UTC


def _schema(iceberg_type: IcebergType) -> Schema:
    return Schema(NestedField(1, "c", iceberg_type))


def _file(values, arrow_type) -> pa.Table:
    """One column `c` with Iceberg field id 1, in the file's own Arrow type."""
    field = pa.field("c", arrow_type, metadata={b"PARQUET:field_id": b"1"})
    return pa.Table.from_arrays([pa.array(values, arrow_type)], schema=pa.schema([field]))


def _stages(tmp_path, iceberg_type, arrow_type, values, where, index_settings):
    table = _file(values, arrow_type)
    schema = _schema(iceberg_type)
    paths, entries = write_and_index(tmp_path, [table], schema, index_settings)
    verdicts = prune(bound_predicate(where, schema, "db.t"), paths, entries)
    return {name: bool(kept[0]) for name, kept, _ in verdicts.stages}


KEEP, SKIP = "keep", "skip"
# (rule, iceberg type, file's Arrow type, file values, WHERE, settings, expected)
CANONICAL_CASES = [
    (
        "an int file in a long table hashes like the long literal",
        LongType(),
        pa.int32(),
        [1, 5, 9],
        "c = 5",
        BLOOM,
        KEEP,
    ),
    ("5.0 is the long 5", LongType(), pa.int32(), [1, 5, 9], "c = 5.0", BLOOM, KEEP),
    ("'5' is the long 5", LongType(), pa.int64(), [1, 5, 9], "c = '5'", BLOOM, KEEP),
    ("an absent long inside the bounds is skipped", LongType(), pa.int64(), [1, 5, 9], "c = 6", BLOOM, SKIP),
    ("IN with one present value keeps", LongType(), pa.int64(), [1, 5, 9], "c IN (2, 9)", BLOOM, KEEP),
    ("IN with only absent values skips", LongType(), pa.int64(), [1, 5, 9], "c IN (2, 3, 8)", BLOOM, SKIP),
    ("-0.0 in the file equals the literal 0", DoubleType(), pa.float64(), [-0.0, 3.0], "c = 0", BLOOM, KEEP),
    ("0.0 in the file equals the literal -0.0", DoubleType(), pa.float64(), [0.0, 3.0], "c = -0.0", BLOOM, KEEP),
    ("an absent double is skipped", DoubleType(), pa.float64(), [0.0, 3.0], "c = 1.5", BLOOM, SKIP),
    ("NaN literal proves nothing", DoubleType(), pa.float64(), [0.0, float("nan"), 3.0], "c = 'NaN'", BLOOM, KEEP),
    (
        "decimal(4,1) file values hash like the table's decimal(6,2) literal",
        DecimalType(6, 2),
        pa.decimal128(4, 1),
        [Decimal("1.5"), Decimal("3.0")],
        "c = 1.50",
        BLOOM,
        KEEP,
    ),
    (
        "decimal 1.5 is 1.50",
        DecimalType(6, 2),
        pa.decimal128(6, 2),
        [Decimal("1.50"), Decimal("3.00")],
        "c = 1.5",
        BLOOM,
        KEEP,
    ),
    (
        "an absent decimal is skipped",
        DecimalType(6, 2),
        pa.decimal128(6, 2),
        [Decimal("1.50"), Decimal("3.00")],
        "c = 2",
        BLOOM,
        SKIP,
    ),
    (
        "a millisecond file hashes like a microsecond literal",
        TimestampType(),
        pa.timestamp("ms"),
        [dt.datetime(2024, 1, 1, 0, 0, 0, 5000), dt.datetime(2024, 1, 3)],
        "c = TIMESTAMP '2024-01-01 00:00:00.005'",
        BLOOM,
        KEEP,
    ),
    (
        "a nanosecond value keeps the microsecond below it (engines that truncate)",
        TimestampType(),
        pa.timestamp("ns"),
        [pa.scalar(1_704_067_200_000_001_500, pa.timestamp("ns")).as_py(), dt.datetime(2024, 1, 3)],
        "c = TIMESTAMP '2024-01-01 00:00:00.000001'",
        BLOOM,
        KEEP,
    ),
    (
        "a nanosecond value keeps the microsecond above it (engines that round)",
        TimestampType(),
        pa.timestamp("ns"),
        [pa.scalar(1_704_067_200_000_001_500, pa.timestamp("ns")).as_py(), dt.datetime(2024, 1, 3)],
        "c = TIMESTAMP '2024-01-01 00:00:00.000002'",
        BLOOM,
        KEEP,
    ),
    (
        "an absent timestamp is skipped",
        TimestampType(),
        pa.timestamp("us"),
        [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 3)],
        "c = TIMESTAMP '2024-01-02 00:00:00'",
        BLOOM,
        SKIP,
    ),
    (
        "a timestamptz literal with an offset is the same instant",
        TimestamptzType(),
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 3, tzinfo=UTC)],
        "c = CAST('2024-01-01 05:30:00+05:30' AS TIMESTAMPTZ)",
        BLOOM,
        KEEP,
    ),
    (
        "an absent date is skipped",
        DateType(),
        pa.date32(),
        [dt.date(2024, 1, 1), dt.date(2024, 1, 3)],
        "c = DATE '2024-01-02'",
        BLOOM,
        SKIP,
    ),
    ("the empty string is a value", StringType(), pa.string(), ["", "b"], "c = ''", BLOOM, KEEP),
    (
        "precomposed é is not e + combining accent (SQL compares code points)",
        StringType(),
        pa.string(),
        ["a", "\u00e9"],
        "c = 'e\u0301'",
        BLOOM,
        SKIP,
    ),
    ("precomposed é finds itself", StringType(), pa.string(), ["\u00e9", "z"], "c = '\u00e9'", BLOOM, KEEP),
    (
        "emoji keys are whole code points",
        StringType(),
        pa.string(),
        ["\U0001f600", "z"],
        "c = '\U0001f600'",
        BLOOM,
        KEEP,
    ),
    ("LIKE without wildcards is an equality", StringType(), pa.string(), ["ab", "z"], "c LIKE 'b'", BLOOM, SKIP),
    ("NOT IN is never decided by a Bloom filter", LongType(), pa.int64(), [1, 9], "c NOT IN (1, 9)", BLOOM, KEEP),
]


@pytest.mark.parametrize(
    ("rule", "iceberg_type", "arrow_type", "values", "where", "index_settings", "expected"),
    CANONICAL_CASES,
    ids=[case[0] for case in CANONICAL_CASES],
)
def test_bloom_rule(tmp_path, rule, iceberg_type, arrow_type, values, where, index_settings, expected):
    stages = _stages(tmp_path, iceberg_type, arrow_type, values, where, index_settings)
    if expected == KEEP:
        assert stages["bloom"], f"Should keep: {rule} ({where} over {values})"
    else:
        assert stages["minmax"], f"min/max alone should keep the file for {where} (so the case tests the Bloom)"
        assert not stages["bloom"], f"Should skip: {rule} ({where} over {values})"


SERVICES = ["compactor", "reader", "writer"]
# (rule, file values, WHERE, expected after the automaton stage, expected all-match)
AUTOMATON_CASES = [
    ("Husky's reference: metadata is not in compactor|reader|writer", SERVICES, "c = 'metadata'", SKIP, False),
    ("a present tag keeps", SERVICES, "c = 'reader'", KEEP, False),
    ("IN of absent tags skips", SERVICES, "c IN ('metadata', 'query')", SKIP, False),
    ("IN covering every tag proves all rows", SERVICES, "c IN ('compactor', 'reader', 'writer', 'x')", KEEP, True),
    ("NOT IN covering every tag skips", SERVICES, "c NOT IN ('compactor', 'reader', 'writer')", SKIP, False),
    ("NOT IN missing one tag keeps", SERVICES, "c NOT IN ('compactor', 'reader')", KEEP, False),
    ("!= an absent tag proves all rows", SERVICES, "c != 'metadata'", KEEP, True),
    ("a prefix no tag has skips", SERVICES, "c LIKE 'meta%'", SKIP, False),
    ("starts_with a tag prefix keeps", SERVICES, "starts_with(c, 'comp')", KEEP, False),
    ("an infix no tag has skips", SERVICES, "c LIKE '%ada%'", SKIP, False),
    ("an infix some tag has keeps", SERVICES, "c LIKE '%ead%'", KEEP, False),
    ("a suffix every tag has proves all rows", SERVICES, "c LIKE '%r'", KEEP, True),
    ("NOT LIKE a suffix every tag has skips", SERVICES, "c NOT LIKE '%r'", SKIP, False),
    ("a regex no tag matches skips", SERVICES, "c RLIKE '^(meta|query)'", SKIP, False),
    ("a regex matching inside a tag keeps", SERVICES, "c RLIKE 'ct.r'", KEEP, False),
    ("regex metacharacters in values are literal", ["a.c", "(x)"], "c = 'abc'", SKIP, False),
    ("a value with metacharacters finds itself", ["a.c", "(x)"], "c = '(x)'", KEEP, False),
    ("LIKE's _ is one character", ["a.c", "(x)"], "c LIKE 'a_c'", KEEP, False),
    ("LIKE's _ matching every tag proves all rows", ["a.c", "abc"], "c LIKE 'a_c'", KEEP, True),
    ("the empty string is a tag", ["", "b"], "c = ''", KEEP, False),
    ("a backslash LIKE keeps under either engine's reading", ["a\\b", "z"], "c LIKE 'a\\\\b'", KEEP, False),
]


@pytest.mark.parametrize(
    ("rule", "values", "where", "expected", "expected_all"), AUTOMATON_CASES, ids=[c[0] for c in AUTOMATON_CASES]
)
def test_automaton_rule(tmp_path, rule, values, where, expected, expected_all):
    table = _file(values, pa.string())
    schema = _schema(StringType())
    paths, entries = write_and_index(tmp_path, [table], schema, AUTOMATON)
    verdicts = prune(bound_predicate(where, schema, "db.t"), paths, entries)
    stages = {name: bool(kept[0]) for name, kept, _ in verdicts.stages}
    if expected == KEEP:
        assert stages["automaton"], f"Should keep: {rule} ({where} over {values})"
    else:
        assert not stages["automaton"], f"Should skip: {rule} ({where} over {values})"
    assert bool(verdicts.all_match[0]) == expected_all, f"all-match should be {expected_all}: {rule} ({where})"


def test_automaton_proves_nothing_with_nulls(tmp_path):
    table = _file(["reader", None], pa.string())
    schema = _schema(StringType())
    paths, entries = write_and_index(tmp_path, [table], schema, AUTOMATON)
    verdicts = prune(bound_predicate("c != 'metadata'", schema, "db.t"), paths, entries)
    assert verdicts.kept[0] and not verdicts.all_match[0], "a NULL row is not TRUE for != : no all-match"


def test_minmax_cannot_skip_the_husky_case_but_the_automaton_can(tmp_path):
    table = _file(SERVICES * 3, pa.string())
    schema = _schema(StringType())
    paths, entries = write_and_index(tmp_path, [table], schema)  # automatic choice
    stages = prune(bound_predicate("c = 'metadata'", schema, "db.t"), paths, entries).stages
    kept = {name: bool(mask[0]) for name, mask, _ in stages}
    assert kept == {"minmax": True, "key index": True, "bloom": True, "automaton": False}, kept


# ---------------------------------------------------------------- property: zero false negatives per kind
TEXT = st.text(
    st.sampled_from(list("ab.*+?()[]{}|\\^$-%_ \n") + ["é", "\u0301", "ß", "😀", "\u2028", "\x00"]), max_size=6
)
TYPED_VALUES = {
    "long": (LongType(), pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int-file": (LongType(), pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "double": (DoubleType(), pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    "decimal": (DecimalType(9, 3), pa.decimal128(9, 3), st.decimals("-999999.999", "999999.999", places=3)),
    "decimal-wide": (DecimalType(25, 2), pa.decimal128(25, 2), st.decimals("-1e20", "1e20", places=2)),
    "decimal-file-scale": (DecimalType(9, 3), pa.decimal128(7, 1), st.decimals("-99999.9", "99999.9", places=1)),
    "string": (StringType(), pa.string(), TEXT),
    "binary": (BinaryType(), pa.binary(), st.binary(max_size=4)),
    "timestamp-ns": (
        TimestampType(),
        pa.timestamp("ns"),
        st.integers(0, 2**62).map(lambda n: pa.scalar(n, pa.timestamp("ns")).as_py()),
    ),
    "boolean": (BooleanType(), pa.bool_(), st.booleans()),
}


@settings(max_examples=300, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(TYPED_VALUES)))
def test_every_stored_value_is_found_by_its_literal_key(data, name):
    """Bloom soundness at the key level: the key of each value as a query literal (in the physical domain the
    binder produces) is among the file's keys, and so in its Bloom filter."""
    iceberg_type, arrow_type, values = TYPED_VALUES[name]
    column = data.draw(st.lists(st.one_of(st.none(), values), min_size=1, max_size=30))
    array = pa.array(column, arrow_type)
    keys = distinct_keys(array, iceberg_type)
    assert keys is not None
    texts = set(keys.texts())
    payload = BloomIndex().build(keys, iceberg_type, IndexSettings(bloom_fpp=0.2)).payload
    for value in array.drop_null().to_pylist():
        if isinstance(value, float) and np.isnan(value):
            assert literal_key(iceberg_type, value) is None, "NaN has no key: a NaN literal proves nothing"
            continue
        literal = _physical_literal(iceberg_type, value)
        assert literal_key(iceberg_type, literal) in texts, (
            f"{name}: value {value!r} (literal {literal!r}) lost its key"
        )
        assert split_block.contains_each(payload, literal_hashes(iceberg_type, [literal])).all(), (
            f"{name}: value {value!r} (literal {literal!r}) is not in its file's Bloom filter"
        )


def _physical_literal(iceberg_type: IcebergType, value):
    """The bound literal the binder makes for a value equal to `value` (days / micros for temporal columns)."""
    if isinstance(iceberg_type, TimestampType):
        return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    return value


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), TEXT), min_size=1, max_size=40),
    max_states=st.sampled_from([2, 3, 8, 32, 256]),
)
def test_automaton_index_accepts_every_value_within_its_budget(values, max_states):
    index_settings = IndexSettings(kinds=("automaton",), automaton_max_states=max_states, automaton_max_bytes=256)
    stats = index_column(1, "c", StringType(), pa.chunked_array([pa.array(values, pa.string())]), index_settings)
    present = [v for v in values if v is not None]
    if not present:
        assert stats.indexes == (), "no values, no automaton"
        return
    if not stats.indexes:
        universal = build_tag_regex(present, max_states=max_states, max_bytes=256).regex
        assert universal == ANY_STRING_REGEX, "only an automaton accepting every string is left out"
        return
    (index,) = stats.indexes
    payload = json.loads(index["payload"])
    assert payload["states"] <= max_states, f"state budget {max_states} exceeded: {payload}"
    assert len(payload["regex"].encode()) <= 256, f"byte budget exceeded: {payload}"
    pattern = re.compile(payload["regex"])
    for value in present:
        assert pattern.match(value), f"stored regex {payload['regex']!r} rejects the file's value {value!r}"


# ---------------------------------------------------------------- Bloom false-positive rate
def _string_keys(values) -> Keys:
    return distinct_keys(pa.array(list(values), pa.string()), StringType())


def _string_hashes(values) -> np.ndarray:
    return literal_hashes(StringType(), list(values))


@pytest.mark.slow
@pytest.mark.parametrize("fpp", [0.01, 0.001])
def test_bloom_false_positive_rate_is_within_one_and_a_half_times_the_configured_rate(fpp):
    rng = random.Random(7)
    stored = sorted({"".join(rng.choices(string.ascii_lowercase, k=12)) for _ in range(10_000)})
    probes = sorted({"".join(rng.choices(string.ascii_lowercase, k=11)) for _ in range(200_000)})
    payload = BloomIndex().build(_string_keys(stored), StringType(), IndexSettings(bloom_fpp=fpp)).payload
    assert split_block.contains_each(payload, _string_hashes(stored)).all(), "a Bloom filter has no false negatives"
    found = split_block.contains_each(payload, _string_hashes(probes))
    rate = found.mean()
    assert rate <= 1.5 * fpp, f"measured false-positive rate {rate:.5f} above 1.5 x {fpp}"
    sample = probes[:2_000]
    assert [split_block.might_contain_each([payload], _string_hashes([p]))[0] for p in sample] == list(found[:2_000])


# ---------------------------------------------------------------- Bloom payloads: Parquet's split-block layout
def _spec_contains(payload: bytes, value: bytes) -> bool:
    """parquet-format's BloomFilter.md, read literally, one value at a time: the reference the numpy probe must match."""
    import xxhash

    words = split_block.bitset_of(payload)
    h = xxhash.xxh64_intdigest(value)
    block = ((h >> 32) * len(words)) >> 32
    return all(
        (int(words[block][i]) >> ((((h & 0xFFFFFFFF) * int(salt)) & 0xFFFFFFFF) >> 27)) & 1
        for i, salt in enumerate(split_block.SALT)
    )


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=300), st.integers(1, 40), st.sampled_from([1, 3, 7]))
def test_a_filter_set_a_segment_at_a_time_is_the_filter_the_spec_describes(values, blocks, segment_blocks):
    """Filters are set SEGMENT_BLOCKS blocks at a time, the hashes ordered by segment: any segment size (one block,
    sizes that leave a last partial segment) gives the same bytes as one segment for the whole filter, and every
    value is found as parquet-format's BloomFilter.md reads it."""
    hashes = _string_hashes(values)
    whole = split_block.build(hashes, blocks * 32)  # 40 blocks at most: one segment
    with patch.object(split_block, "SEGMENT_BLOCKS", segment_blocks):
        segmented = split_block.build(hashes, blocks * 32)
    assert whole == segmented, f"segments of {segment_blocks} blocks set the same bits"
    assert all(_spec_contains(whole, value.encode()) for value in values), "every value built in is found (spec)"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=120), max_size=40), st.sampled_from([None, 0, 3, 17]))
def test_vectorised_xxh64_is_xxh64(values, sliced_from):
    import xxhash

    from indexlib.statistics.xxhash64 import hash_binary, hash_short, hash_words

    array = pa.array(values, pa.binary())
    if sliced_from is not None:  # Arrow slices keep the parent's buffers with an offset
        array = pa.array([b"x" * 9] * sliced_from + values, pa.binary()).slice(sliced_from)
    expected = [xxhash.xxh64_intdigest(v) for v in values]
    assert hash_binary(array).tolist() == expected, "hash_binary: XXH64 of each value, stripes, lanes and tail bytes"
    words = np.frombuffer(b"".join(v.ljust(8, b"\0")[:8] for v in values), dtype="<i8")
    assert hash_words(words).tolist() == [xxhash.xxh64_intdigest(w.tobytes()) for w in words], "hash_words"
    for length in range(1, 9):  # each value's first `length` bytes (zero-padded), read as a little-endian word
        short = [v[:length].ljust(length, b"\0") for v in values]
        held = np.frombuffer(b"".join(v.ljust(8, b"\0") for v in short), dtype="<u8")
        expected = [xxhash.xxh64_intdigest(v) for v in short]
        assert hash_short(held, length).tolist() == expected, f"hash_short: XXH64 of {length} bytes held in a word"


def test_the_filters_duckdb_writes_into_parquet_files_read_as_ours():
    """Same layout, same hash: DuckDB's own Parquet Bloom filters (long, double and string columns), cut out of the
    file it wrote, find every value it wrote with our probe, and few others."""
    duckdb = pytest.importorskip("duckdb")
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/duck.parquet"
        connection = duckdb.connect()
        connection.sql(
            "COPY (SELECT (i % 300)::BIGINT AS l, ((i % 300) * 1.5)::DOUBLE AS d, 'v' || (i % 100) AS s FROM range(3000) t(i)) "
            f"TO '{path}' (FORMAT parquet)"
        )
        chunks = connection.sql(
            f"SELECT path_in_schema, bloom_filter_offset, bloom_filter_length FROM parquet_metadata('{path}')"
        ).fetchall()
        with open(path, "rb") as parquet_file:
            data = parquet_file.read()
    filters = {name: data[offset : offset + length] for name, offset, length in chunks if offset is not None}
    assert sorted(filters) == ["d", "l", "s"], "DuckDB wrote a filter per dictionary-encoded column"
    cases = [
        ("l", LongType(), list(range(300)), list(range(1_000, 3_000))),
        ("d", DoubleType(), [i * 1.5 for i in range(300)], [i * 1.5 + 0.25 for i in range(2_000)]),
        ("s", StringType(), [f"v{i}" for i in range(100)], [f"w{i}" for i in range(2_000)]),
    ]
    for column, iceberg_type, written, absent in cases:
        payload = filters[column]
        assert split_block.contains_each(payload, literal_hashes(iceberg_type, written)).all(), (
            f"{column}: every value DuckDB wrote is found"
        )
        assert split_block.contains_each(payload, literal_hashes(iceberg_type, absent)).mean() < 0.05, column


@settings(max_examples=150, deadline=None)
@given(
    files=st.lists(
        st.one_of(st.none(), st.lists(st.integers(0, 3_000), min_size=1, max_size=60, unique=True)), max_size=12
    ),
    absent=st.sampled_from([0, 1, 2, 3, 700, 1_100]),
    present=st.one_of(st.none(), st.integers(0, 3_000)),
    at=st.floats(0, 1),
    fpp=st.sampled_from([0.3, 0.01, 0.0001]),
)
def test_probing_many_filters_at_once_agrees_with_the_specification(files, absent, present, at, fpp):
    payloads = [
        None
        if keys is None
        else BloomIndex().build(_string_keys(map(str, keys)), StringType(), IndexSettings(bloom_fpp=fpp)).payload
        for keys in files
    ]
    keys = [f"absent-{n}" for n in range(absent)]  # mostly misses
    if present is not None:  # one key some filters hold, anywhere in the list (past the first pass too)
        keys.insert(int(at * len(keys)), str(present))
    expected = [p is None or any(_spec_contains(p, key.encode()) for key in keys) for p in payloads]
    leaf = ValueSet(BoundColumn(1, "c", StringType()), tuple(keys))
    stats = ColumnStatistics.unknown(len(payloads), pa.large_string())
    for pairs_per_pass in (split_block.PAIRS_PER_PASS, 7):  # one pass, and many small ones
        with patch.object(split_block, "PAIRS_PER_PASS", pairs_per_pass):
            verdict = BloomIndex().verdict(leaf, payloads, stats)
            answer = [True] * len(payloads) if verdict is None else verdict.might.tolist()
            assert answer == expected, (
                "the vectorised probe (filters grouped by size, hashes in passes) answers as the specification"
            )
            built = [p for p in payloads if p is not None]
            matrix = split_block.contains_matrix(built, _string_hashes(keys)) if built else None
            assert matrix is None or matrix.tolist() == [
                [_spec_contains(p, k.encode()) for k in keys] for p in built
            ], "the per-(filter, hash) probe (residuals' rule 2) answers as the specification, pair by pair"


@settings(max_examples=100, deadline=None)
@given(
    files=st.lists(st.lists(st.integers(0, 3_000), min_size=1, max_size=60, unique=True), min_size=1, max_size=10),
    lookups=st.lists(st.tuples(st.lists(st.booleans(), min_size=10, max_size=10), st.integers(0, 3_000)), max_size=8),
    fpp=st.sampled_from([0.3, 0.01]),
)
def test_a_kept_bank_answers_every_later_lookup_as_the_specification(files, lookups, fpp):
    """Lookups of one table state share the provider's `Decoded`: each asks about some files (the ones its cheaper
    stages kept), the bank takes in the filters it has not seen, and every answer is the specification's."""
    payloads = [
        BloomIndex().build(_string_keys(map(str, keys)), StringType(), IndexSettings(bloom_fpp=fpp)).payload
        for keys in files
    ]
    decoded = Decoded()
    for asked, key in lookups:
        containers = np.array([i for i in range(len(files)) if asked[i]], dtype=np.int64)
        seen = Payloads([payloads[i] for i in containers], containers, decoded)
        leaf = ValueSet(BoundColumn(1, "c", StringType()), (str(key), "absent"))
        verdict = BloomIndex().verdict(leaf, seen, ColumnStatistics.unknown(len(containers), pa.large_string()))
        expected = [any(_spec_contains(payloads[i], k.encode()) for k in (str(key), "absent")) for i in containers]
        answer = [True] * len(containers) if verdict is None else verdict.might.tolist()
        assert answer == expected, "a filter probed from the kept bank answers as the specification"
        held = BloomIndex().values_held(StringType(), [str(key), "absent"], seen)
        assert held is not None and held.tolist() == [
            [_spec_contains(payloads[i], k.encode()) for k in (str(key), "absent")] for i in containers
        ], "values_held from the kept bank answers as the specification, pair by pair"
    if lookups:
        bank = decoded.get("split-block bank", split_block.FilterBank)
        containers = np.arange(len(files))
        bank.include(containers, payloads, containers)
        again = bank._state
        bank.include(containers, payloads, containers)
        assert bank._state is again, "a filter the bank holds is not checked or copied again"
        sizes = [segment.words.nbytes for segment in again.segments]
        assert all(older > 2 * newer for older, newer in itertools.pairwise(sizes)), (
            f"each segment is over twice the next newer one, so they stay logarithmically few: {sizes}"
        )


def test_probing_many_filters_refuses_a_damaged_one():
    good = BloomIndex().build(_string_keys(["a", "b"]), StringType(), IndexSettings()).payload
    for damaged in (good[:-1], good[:10], good + b"\0" * 32, b"\x15", good[:1] + b"\x81" + good[2:]):
        with pytest.raises(ValueError):
            split_block.might_contain_each([good, damaged], _string_hashes(["a"]))


EQUAL_VALUE_CASES = [
    ("-0.0 stored, 0.0 asked: SQL says equal", DoubleType(), pa.float64(), [-0.0], 0.0),
    ("0.0 stored, -0.0 asked", DoubleType(), pa.float64(), [0.0], -0.0),
    ("a float file in a double table", DoubleType(), pa.float32(), [1.5], 1.5),
    ("an int32 file in a long table", LongType(), pa.int32(), [7], 7),
    ("a decimal file at another scale", DecimalType(9, 3), pa.decimal128(7, 1), [Decimal("1.5")], Decimal("1.500")),
    ("a string beyond one 32-byte stripe", StringType(), pa.string(), ["x" * 70], "x" * 70),
]


@pytest.mark.parametrize(
    ("rule", "iceberg_type", "arrow_type", "stored", "literal"),
    EQUAL_VALUE_CASES,
    ids=[c[0] for c in EQUAL_VALUE_CASES],
)
def test_a_literal_equal_to_a_stored_value_is_in_its_filter(rule, iceberg_type, arrow_type, stored, literal):
    keys = distinct_keys(pa.array(stored + [None], arrow_type), iceberg_type)
    payload = BloomIndex().build(keys, iceberg_type, IndexSettings(kinds=("bloom",))).payload
    assert split_block.contains_each(payload, literal_hashes(iceberg_type, [literal])).all(), rule


def test_a_filter_written_before_a_type_promotion_finds_its_values():
    """int -> long and decimal(9, 2) -> decimal(20, 2) keep a file's filter valid: values hash by what they are."""
    cases = [
        (IntegerType(), pa.int32(), [3, -7, 2**31 - 1], LongType()),
        (DecimalType(9, 2), pa.decimal128(9, 2), [Decimal("1.50"), Decimal("-3.25")], DecimalType(20, 2)),
    ]
    for written, arrow_type, values, promoted in cases:
        keys = distinct_keys(pa.array(values, arrow_type), written)
        payload = BloomIndex().build(keys, written, IndexSettings()).payload
        assert split_block.contains_each(payload, literal_hashes(promoted, values)).all(), f"{written} -> {promoted}"


# ---------------------------------------------------------------- Bloom payloads written before (pybloom-live)
def _pybloom_payload(keys: list[str], fpp: float) -> bytes:
    """A version 1 payload, as the build wrote them before version 2."""
    import io

    from pybloom_live import BloomFilter

    filter_ = BloomFilter(capacity=max(1, len(keys)), error_rate=fpp)
    for key in keys:
        filter_.add(key, skip_check=True)
    out = io.BytesIO()
    filter_.tofile(out)
    return out.getvalue()


@settings(max_examples=100, deadline=None)
@given(
    files=st.lists(
        st.one_of(st.none(), st.lists(st.integers(0, 3_000), min_size=1, max_size=60, unique=True)), max_size=12
    ),
    absent=st.sampled_from([0, 1, 3, 700]),
    present=st.one_of(st.none(), st.integers(0, 3_000)),
    fpp=st.sampled_from([0.3, 0.01, 0.0001]),
)
def test_version_1_filters_still_answer_as_pybloom_live(files, absent, present, fpp):
    payloads = [None if keys is None else _pybloom_payload(sorted(map(str, keys)), fpp) for keys in files]
    keys = [f"absent-{n}" for n in range(absent)] + ([str(present)] if present is not None else [])
    filters = [None if payload is None else load_filter(payload) for payload in payloads]
    expected = [f is None or any(key in f for key in keys) for f in filters]  # pybloom-live's own answer
    for pairs_per_pass in (bloom.PAIRS_PER_PASS, 7):
        with patch.object(bloom, "PAIRS_PER_PASS", pairs_per_pass):
            assert might_contain_each(payloads, keys).tolist() == expected, "version 1 probe as pybloom-live's"


def test_one_lookup_reads_version_1_and_version_2_filters_side_by_side():
    old = [_pybloom_payload([f"k{n}", "x"], 0.01) for n in range(5)]
    new = [BloomIndex().build(_string_keys([f"k{n}", "x"]), StringType(), IndexSettings()).payload for n in range(5)]
    leaf = ValueSet(BoundColumn(1, "c", StringType()), ("k1", "k3"))
    might = BloomIndex().verdict(leaf, old + new + [None], ColumnStatistics.unknown(11, pa.large_string())).might
    expected = (
        [any(key in load_filter(p) for key in ("k1", "k3")) for p in old]
        + [any(_spec_contains(p, key) for key in (b"k1", b"k3")) for p in new]
        + [True]
    )
    assert might.tolist() == expected, "each file answered by its own payload's version; no payload keeps the file"
    assert all(might[[1, 3, 6, 8, 10]]) and not all(might), "the files holding k1 or k3 are kept, not every file"


# ---------------------------------------------------------------- Bloom sizing for the table's file count
SIZING_CASES = [
    ("a small table keeps bloom_fpp", IndexSettings(), 10, 0.01),
    ("a large table sizes filters for bloom_false_files / N", IndexSettings(), 10_000, 0.5 / 10_000),
    ("a stricter bloom_fpp is never loosened", IndexSettings(bloom_fpp=0.0001), 100, 0.0001),
    ("bloom_false_files is a table-wide budget", IndexSettings(bloom_false_files=5), 1_000, 0.005),
]


@pytest.mark.parametrize(("rule", "declared", "files", "rate"), SIZING_CASES, ids=[c[0] for c in SIZING_CASES])
def test_bloom_filters_are_sized_for_the_tables_file_count(rule, declared, files, rate):
    sized = BloomIndex().sized_for(declared, files)
    assert sized.value(FPP) == pytest.approx(rate), rule
    keys = _string_keys(f"key-{n}" for n in range(2_000))
    payload = BloomIndex().build(keys, StringType(), sized).payload
    assert len(split_block.bitset_of(payload)) * 32 == split_block.optimal_bytes(2_000, rate), (
        f"{rule}: the payload is built for that rate"
    )


def test_sized_filters_keep_about_bloom_false_files_files_per_absent_key_however_many_files():
    """1,000 files of 20 keys, probed with IN of 3 absent keys: 1 % filters keep ~30 files, sized ones ~1.5."""
    rng = random.Random(3)
    files = [[f"key-{rng.randrange(10**9)}" for _ in range(20)] for _ in range(1_000)]
    absent = ["absent-1", "absent-2", "absent-3"]
    kept = {}
    for label, sized in (("1 %", IndexSettings()), ("sized", BloomIndex().sized_for(IndexSettings(), 1_000))):
        payloads = [BloomIndex().build(_string_keys(keys), StringType(), sized).payload for keys in files]
        kept[label] = int(split_block.might_contain_each(payloads, _string_hashes(absent)).sum())
    assert kept["sized"] <= 6 < kept["1 %"], f"files kept by an IN of 3 absent keys: {kept}"


def test_the_bloom_stage_leaves_a_leaf_alone_beyond_its_probe_budget():
    payloads = [
        BloomIndex().build(_string_keys([f"k{n}", "x"]), StringType(), IndexSettings()).payload for n in range(10)
    ]
    leaf = ValueSet(BoundColumn(1, "c", StringType()), ("k1", "absent"))
    stats = ColumnStatistics.unknown(10, pa.large_string())
    might = BloomIndex().verdict(leaf, payloads, stats).might
    assert might[1] and might.sum() < 10, "within budget: probed (the file holding k1 kept, others ruled out)"
    with patch.object(bloom, "MAX_PROBE_PAIRS", 19):
        assert BloomIndex().verdict(leaf, payloads, stats) is None, (
            "2 keys x 10 filters over a budget of 19 pairs: no answer (every file kept), not a minute of probing"
        )


# ---------------------------------------------------------------- automatic choice
AUTO = IndexSettings()


def _kinds(iceberg_type, arrow_type, values, index_settings=AUTO):
    stats = index_column(1, "c", iceberg_type, pa.chunked_array([pa.array(values, arrow_type)]), index_settings)
    return sorted(index["kind"] for index in stats.indexes), stats


_HEX = random.Random(30)
HEX_IDS = ["".join(_HEX.choice("0123456789abcdef") for _ in range(32)) for _ in range(150)]
WORDS = ("blithely", "final", "deposits", "sleep", "carefully", "ironic", "packages", "quickly", "furiously")
PROSE = [f"{WORDS[i % 9]} {WORDS[i // 9 % 9]} {WORDS[i // 81 % 9]} {i}" for i in range(300)]  # 3-4 words, 20+ chars
NAMES = [f"{('Mary', 'Wei', 'Jose')[i % 3]} {'ABCDE'[i % 5]}. Chen{i}" for i in range(300)]  # 3 words, < 20 chars
HOSTS = [f"db-{i:02d}.eu" for i in range(40)]

CHOICE_CASES = [
    # what min/max already answers
    ("booleans get no index (min/max answers both values)", BooleanType(), pa.bool_(), [True, False], []),
    ("a single distinct value gets none (min = max is exact)", LongType(), pa.int64(), [7, 7, None], []),
    # dense integers: the filter would keep over half the files min/max keeps
    ("integers filling their whole span get none", LongType(), pa.int64(), list(range(50)), []),
    ("integers filling over half their span get none", LongType(), pa.int64(), list(range(0, 100, 2)), []),
    (
        "integers filling half their span get a Bloom filter",
        LongType(),
        pa.int64(),
        [*range(0, 100, 2), 101],
        ["bloom"],
    ),
    ("sparse integers get a Bloom filter", LongType(), pa.int64(), list(range(0, 300, 3)), ["bloom"]),
    ("sparse ints get a Bloom filter", IntegerType(), pa.int32(), list(range(0, 300, 3)), ["bloom"]),
    (
        "dates filling over half their span get none",
        DateType(),
        pa.date32(),
        [dt.date(2026, 1, 1) + dt.timedelta(days=d) for d in range(0, 90) if d % 3],
        [],
    ),
    (
        "sparse dates get a Bloom filter",
        DateType(),
        pa.date32(),
        [dt.date(2026, 1, 1) + dt.timedelta(days=7 * d) for d in range(30)],
        ["bloom"],
    ),
    (
        "sparse decimal(18, 0) keys get a Bloom filter",
        DecimalType(18, 0),
        pa.decimal128(18, 0),
        [Decimal(7 * i) for i in range(100)],
        ["bloom"],
    ),
    # measures
    ("doubles get none (a measure)", DoubleType(), pa.float64(), [0.5, 1.5, 9.25, 17.125], []),
    ("floats get none (a measure)", FloatType(), pa.float32(), [0.5, 1.5, 9.25, 17.125], []),
    (
        "decimals with a scale get none, however sparse (a price)",
        DecimalType(15, 2),
        pa.decimal128(15, 2),
        [Decimal(f"{i * 7.31:.2f}") for i in range(1, 300)],
        [],
    ),
    # moments: asked for by ranges, which min/max answers
    (
        "timestamps get none, however sparse (a moment)",
        TimestampType(),
        pa.timestamp("us"),
        [dt.datetime(2026, 1, 1) + dt.timedelta(microseconds=7_919 * i) for i in range(300)],
        [],
    ),
    (
        "timestamps with a zone get none (a moment)",
        TimestamptzType(),
        pa.timestamp("us", tz="UTC"),
        [dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i) for i in range(300)],
        [],
    ),
    ("times get none (a moment)", TimeType(), pa.time64("us"), [dt.time(i // 60, i % 60) for i in range(300)], []),
    # strings: identifiers keep their filters, prose gets n-gram filters instead
    (
        "many distinct strings get a Bloom filter only",
        StringType(),
        pa.string(),
        [f"trace-{i:05d}" for i in range(1_500)],
        ["bloom"],
    ),
    (
        "prose (most values 3+ words, 20+ characters) gets n-gram filters only",
        StringType(),
        pa.string(),
        PROSE,
        ["ngram"],
    ),
    ("names of 3 short words keep their Bloom filter", StringType(), pa.string(), NAMES, ["bloom"]),
    (
        "whitespace around 2 words makes no third word: padded pairs keep their Bloom filter",
        StringType(),
        pa.string(),
        [f"  {WORDS[i % 9]} {i:05d}{' ' * 12}" for i in range(300)],
        ["bloom"],
    ),
    (
        "URLs (no spaces) keep their Bloom filter",
        StringType(),
        pa.string(),
        [f"https://example.com/items/{i}?page=2" for i in range(300)],
        ["bloom"],
    ),
    ("prose of at most 256 values keeps its (small) Bloom filter", StringType(), pa.string(), PROSE[:256], ["bloom"]),
    # automata: tags, not identifiers; exact only
    ("few strings get an exact automaton only", StringType(), pa.string(), SERVICES, ["automaton"]),
    ("tags that repeat get an exact automaton only", StringType(), pa.string(), HOSTS * 2, ["automaton"]),
    (
        "up to 16 values get an automaton even when they do not repeat",
        StringType(),
        pa.string(),
        HOSTS[:16],
        ["automaton"],
    ),
    (
        "NULLs are not repeats: 20 values among 30 NULLs are ids, a Bloom filter only",
        StringType(),
        pa.string(),
        HOSTS[:20] + [None] * 30,
        ["bloom"],
    ),
    (
        "17 values that do not repeat are ids: a Bloom filter only",
        StringType(),
        pa.string(),
        HOSTS[:17],
        ["bloom"],
    ),
    ("150 random ids in 150 rows: a Bloom filter only", StringType(), pa.string(), HEX_IDS, ["bloom"]),
    (
        "repeated values whose exact automaton is over budget: trimmed by symbol classes, a Bloom filter beside it",
        StringType(),
        pa.string(),
        HEX_IDS[:100] * 2,
        ["automaton", "bloom"],
    ),
    (
        "repeated tags of 5 KiB of text: the exact automaton (the text budget is 16 KiB)",
        StringType(),
        pa.string(),
        [f"service-{i:03d}-{'x' * 20}" for i in range(160)] * 2,
        ["automaton"],
    ),
    (
        "repeated tags of more than 16 KiB of text get no automaton",
        StringType(),
        pa.string(),
        [f"service-{i:03d}-{'x' * 64}" for i in range(250)] * 2,
        ["bloom"],
    ),
]


@pytest.mark.parametrize(
    ("rule", "iceberg_type", "arrow_type", "values", "expected"), CHOICE_CASES, ids=[c[0] for c in CHOICE_CASES]
)
def test_automatic_choice(rule, iceberg_type, arrow_type, values, expected):
    kinds, _ = _kinds(iceberg_type, arrow_type, values)
    assert kinds == expected, f"{rule}: got {kinds}"


def test_configured_automata_are_trimmed_when_the_exact_one_is_over_budget():
    kinds, stats = _kinds(StringType(), pa.string(), HEX_IDS, IndexSettings(kinds=("automaton", "bloom")))
    assert kinds == ["automaton", "bloom"], "configured kinds are built whatever the values"
    automaton = next(index for index in stats.indexes if index["kind"] == "automaton")
    assert json.loads(automaton["payload"])["exact"] is False, "configured: trimmed to a superset, as before"


def test_configured_kinds_override_the_choice():
    assert _kinds(LongType(), pa.int64(), list(range(50)), IndexSettings(kinds=("bloom",)))[0] == ["bloom"]
    moments = [dt.datetime(2026, 1, 1, 0, 0, i) for i in range(50)]
    assert _kinds(TimestampType(), pa.timestamp("us"), moments, IndexSettings(kinds=("bloom",)))[0] == ["bloom"]
    assert _kinds(StringType(), pa.string(), SERVICES, IndexSettings(kinds=()))[0] == []


def test_every_column_gets_its_distinct_count_and_a_mergeable_sketch():
    from indexlib.statistics.sketches import merged_estimate

    _, first = _kinds(LongType(), pa.int64(), list(range(0, 3000)) + [None])
    _, second = _kinds(LongType(), pa.int32(), list(range(2000, 5000)))
    assert (first.distinct_count, second.distinct_count) == (3000, 3000)
    estimate, merged = merged_estimate([first.ndv_sketch, second.ndv_sketch, None])
    assert merged == 2
    assert abs(estimate - 5000) / 5000 < 0.05, f"int and long files of one column merge: {estimate} ~ 5000"
