"""`repr()` of many float64 values at once: the text key of a floating-point value (canonical.py).

Python's `repr` of a float is the shortest text that reads back as the same double. It writes fixed notation when
the decimal point falls within 16 digits (`0.0001`, `1234.5`, `100.0`) and scientific notation otherwise (`1e-05`,
`1e+16`); one call per value costs ~0.4 us, which made a column of 2.5 million distinct doubles spend a second per
file built. Arrow's cast to string writes the same shortest digits (the shortest round-trip digits of a double are
unique) but picks the shorter notation and leaves exponents unpadded (`1e+15`, `1e-7`, `100`), so its texts are
taken where the two agree and mended where the difference is mechanical:

- Python's notation is a function of the value: fixed exactly for 1e-4 <= |x| < 1e16 (and 0). At the edges the
  doubles nearest 1e-4 and 1e16 decide: a double below them reads back as a decimal below them, and one at or above
  them as one at or above (1e16 is exact; the double nearest 1e-4 prints as `0.0001`).
- fixed in both: the same text, plus `.0` for an integer (Python always shows a fraction);
- scientific in both: the same mantissa, the exponent padded to two digits (`1e-07`);
- `inf` and `-inf`: the same;
- different notations (`1e+15` for Python's `1000000000000000.0`, `0.00001` for `1e-05`): `repr` itself.

tests/test_float_text.py checks the result against `repr` over arbitrary doubles and every edge named here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexlib.statistics.binary_layout import binary_layout


def float_text_array(numbers: np.ndarray) -> pa.Array:
    """`[repr(v) for v in numbers]` for a float64 array holding no NaN (NaN has no key), as an Arrow string array:
    Arrow's cast, mended with Arrow kernels (no Python object per value but where `repr` itself is called)."""
    arrow = pa.array(numbers, pa.float64()).cast(pa.string())
    magnitude = np.abs(numbers)
    fixed = ((magnitude >= 1e-4) & (magnitude < 1e16)) | (magnitude == 0)  # what Python writes
    written_scientific = _holding(arrow, b"e")  # what Arrow wrote
    integer = fixed & ~written_scientific & ~_holding(arrow, b".")
    if integer.any():
        arrow = pc.if_else(integer, pc.binary_join_element_wise(arrow, ".0", ""), arrow)
    scientific = ~fixed & written_scientific
    if scientific.any():  # a one-digit exponent gets its leading zero (RE2's \1 then a literal 0)
        arrow = pc.if_else(scientific, pc.replace_substring_regex(arrow, r"e([+-])([0-9])$", r"e\10\2"), arrow)
    notations_differ = np.isfinite(numbers) & (fixed == written_scientific)
    if notations_differ.any():
        written = [repr(value) for value in numbers[notations_differ].tolist()]
        arrow = pc.replace_with_mask(arrow, pa.array(notations_differ), pa.array(written, pa.string()))
    return arrow


def _holding(texts: pa.Array, byte: bytes) -> np.ndarray:
    """Per text of a string array (no nulls), whether it holds `byte`: found in the data buffer at once and given to
    its text by the offsets (a fifth of the time of `pc.match_substring`)."""
    offsets, data = binary_layout(texts)
    found = np.flatnonzero(data[offsets[0] : offsets[-1]] == byte[0]) + offsets[0] if len(texts) else offsets[:0]
    holding = np.zeros(len(texts), dtype=bool)
    holding[np.searchsorted(offsets, found, side="right") - 1] = True
    return holding
