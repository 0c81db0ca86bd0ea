"""The automatic choice of the global key index (indexing/key_index.py), rule by rule: which columns of a file get
key rows, and that a keyed column gets no Bloom filter."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.types import BinaryType, DateType, DecimalType, DoubleType, IntegerType, LongType, StringType

from indexlib.index_kinds.settings import IndexSettings
from indexlib.indexing.file_indexer import index_column
from indexlib.indexing.key_index import MIN_FILES
from indexlib.statistics.canonical import distinct_keys, literal_hashes

IDS = [7_000_003 * i % 1_000_003 for i in range(1, 201)]  # 200 distinct, scattered over [0, 10^6)
AUTO = IndexSettings()

# (rule, Iceberg type, Arrow values, table files, settings, keyed)
RULES = [
    ("scattered integer ids in a large table are keyed", LongType(), pa.array(IDS, pa.int64()), MIN_FILES, AUTO, True),
    (
        "the same in a table under MIN_FILES files are not (Bloom filters answer there)",
        LongType(),
        pa.array(IDS, pa.int64()),
        MIN_FILES - 1,
        AUTO,
        False,
    ),
    ("int columns as well", IntegerType(), pa.array(IDS, pa.int32()), MIN_FILES, AUTO, True),
    ("string ids are keyed", StringType(), pa.array([f"u{v:x}" for v in IDS]), MIN_FILES, AUTO, True),
    (
        "binary ids are keyed",
        BinaryType(),
        pa.array([v.to_bytes(4, "big") for v in IDS], pa.binary()),
        MIN_FILES,
        AUTO,
        True,
    ),
    (
        "decimal(18, 0) ids are keyed",
        DecimalType(18, 0),
        pa.array([Decimal(v) for v in IDS], pa.decimal128(18, 0)),
        MIN_FILES,
        AUTO,
        True,
    ),
    (
        "prices (decimal with a scale) are measures, not keyed",
        DecimalType(12, 2),
        pa.array([Decimal(v) / 100 for v in IDS], pa.decimal128(12, 2)),
        MIN_FILES,
        AUTO,
        False,
    ),
    ("doubles are measures, not keyed", DoubleType(), pa.array([v / 7 for v in IDS]), MIN_FILES, AUTO, False),
    ("dates are not identifiers", DateType(), pa.array(IDS, pa.int32()).cast(pa.date32()), MIN_FILES, AUTO, False),
    (
        "a dense run of integers is answered by its bounds, not keyed",
        LongType(),
        pa.array(range(200), pa.int64()),
        MIN_FILES,
        AUTO,
        False,
    ),
    (
        "values that repeat (under half distinct) are tags, not keys",
        StringType(),
        pa.array([f"t{i % 40}" for i in range(200)]),
        MIN_FILES,
        AUTO,
        False,
    ),
    ("a single value is not keyed", LongType(), pa.array([5] * 200, pa.int64()), MIN_FILES, AUTO, False),
    (
        "key_index = true keys any column with keys, in any table",
        DoubleType(),
        pa.array([v / 7 for v in IDS]),
        1,
        IndexSettings(key_index=True),
        True,
    ),
    (
        "key_index = false never keys",
        LongType(),
        pa.array(IDS, pa.int64()),
        MIN_FILES,
        IndexSettings(key_index=False),
        False,
    ),
]


@pytest.mark.parametrize(
    ("rule", "iceberg_type", "values", "files", "settings", "keyed"), RULES, ids=[r[0] for r in RULES]
)
def test_key_index_choice(rule, iceberg_type, values, files, settings, keyed):
    stats = index_column(1, "c", iceberg_type, pa.chunked_array([values]), settings, table_files=files)
    assert (stats.key_hashes is not None) == keyed, rule
    if keyed:
        assert len(stats.key_hashes) == stats.distinct_count, f"{rule}: one hash per distinct value"
        if settings.kinds is None:
            kinds = [index["kind"] for index in stats.indexes]
            assert "bloom" not in kinds, f"{rule}: a keyed column needs no Bloom filter in that file"


def test_explicit_kinds_still_build_a_bloom_filter_beside_the_key_index():
    settings = IndexSettings(kinds=("bloom",), key_index=True)
    stats = index_column(1, "c", LongType(), pa.chunked_array([pa.array(IDS, pa.int64())]), settings)
    assert stats.key_hashes is not None and [i["kind"] for i in stats.indexes] == ["bloom"], "kinds = [...] wins"


@pytest.mark.parametrize(
    ("iceberg_type", "values"),
    [
        (LongType(), [0, -1, 2**63 - 1, -(2**63), 42]),
        (IntegerType(), [5, -7, 2**31 - 1]),
        (StringType(), ["", "é", "a b", "\U0001f600", "x" * 300]),
    ],
)
def test_literal_lists_hash_as_the_build_hashes_the_same_values(iceberg_type, values):
    """Lists of plain ints or strings take a vectorised path; it must give the build's hashes of those values."""
    arrow_type = {"long": pa.int64(), "int": pa.int32(), "string": pa.string()}[str(iceberg_type)]
    built = distinct_keys(pa.array(values, arrow_type), iceberg_type).hashes()
    assert sorted(literal_hashes(iceberg_type, values).tolist()) == sorted(built.tolist())
    odd = 5 if isinstance(iceberg_type, StringType) else True  # a companion of another type: the general path
    general = [literal_hashes(iceberg_type, [value, odd])[0] for value in values]
    assert sorted(int(h) for h in general) == sorted(built.tolist()), "the general path gives the same hashes"
