"""Rules for the keys of decimal columns: every precision and scale gives a key for every value (no value makes the
build fail), and the key is the unscaled integer at the table's scale, hashed as Parquet hashes an int64 when it fits
one: the bytes a decimal's Bloom filter was built from do not change, so no entry needs rebuilding.

Arrow prints small decimals with many places in scientific notation ('0E-10', '1.00E-8'); a key read from that text
broke the build of `decimal(18, 8)` amounts holding 0."""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.types import DecimalType

from indexlib.statistics.canonical import distinct_keys, literal_hashes
from indexlib.statistics.xxhash64 import hash_words

INT64 = (-(2**63), 2**63 - 1)


def _values(precision: int, scale: int) -> list[Decimal]:
    """Zero, the tiniest non-zero value, one, the largest value, and their negatives (where they fit)."""
    with localcontext(prec=80):
        quantum = Decimal(1).scaleb(-scale)
        largest = Decimal(10) ** (precision - scale) - quantum
        values = [Decimal(0), quantum, largest, -quantum, -largest]
        if precision > scale:
            values += [Decimal(1), Decimal(-1)]
        return [v.quantize(quantum) for v in values]


CASES = [(p, s) for p in (1, 7, 9, 10, 18) for s in range(0, p + 1)]
CASES += [(p, s) for p in (19, 25, 28, 38) for s in range(0, p + 1, 3)] + [(38, 38), (38, 37)]


@pytest.mark.parametrize(("precision", "scale"), CASES, ids=[f"decimal({p},{s})" for p, s in CASES])
def test_every_decimal_value_is_keyed_by_its_unscaled_integer(precision, scale):
    iceberg_type = DecimalType(precision, scale)
    values = _values(precision, scale)
    keys = distinct_keys(pa.array(values + [None], pa.decimal128(precision, scale)), iceberg_type)
    assert keys is not None, f"decimal({precision},{scale}): every value has a key (none of {values})"
    literal = literal_hashes(iceberg_type, values)
    assert literal is not None and set(literal.tolist()) <= set(keys.hashes().tolist()), (
        f"decimal({precision},{scale}): each value as a query literal finds its key"
    )
    if precision > 28:
        return  # keys of more than 28 digits are rounded by Python's decimal context, alike for values and literals
    unscaled = sorted({int(v.scaleb(scale)) for v in values})
    expected_numbers = [u for u in unscaled if INT64[0] <= u <= INT64[1]]
    expected_blobs = sorted(str(u).encode() for u in unscaled if not INT64[0] <= u <= INT64[1])
    assert keys.numbers.tolist() == expected_numbers, (
        f"decimal({precision},{scale}): the keys of {values} are their unscaled integers"
    )
    assert sorted(keys.blobs.to_pylist()) == expected_blobs, (
        f"decimal({precision},{scale}): unscaled integers beyond int64 are keyed by their decimal text"
    )
    if precision <= 18:
        assert np.array_equal(keys.hashes(), hash_words(np.array(expected_numbers, dtype=np.int64))), (
            f"decimal({precision},{scale}): hashed as the int64 Parquet hashes, the bytes earlier builds wrote"
        )


def test_decimal_keys_of_a_sliced_column_are_those_of_its_slice():
    """A column arrives as a slice of a record batch: its values start at an offset into Arrow's buffer."""
    column = pa.array([Decimal("1.00000000"), Decimal("0E-8"), Decimal("-0.00000001"), None], pa.decimal128(18, 8))
    keys = distinct_keys(column.slice(1, 3), DecimalType(18, 8))
    assert keys is not None and keys.numbers.tolist() == [-1, 0], "only the slice's values are keyed"
