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


def float_texts(numbers: np.ndarray) -> list[str]:
    """`[repr(v) for v in numbers]` for a float64 array holding no NaN (NaN has no key)."""
    arrow = pa.array(numbers, pa.float64()).cast(pa.string())
    texts: list[str] = arrow.to_pylist()
    magnitude = np.abs(numbers)
    fixed = ((magnitude >= 1e-4) & (magnitude < 1e16)) | (magnitude == 0)  # what Python writes
    written_scientific = pc.match_substring(arrow, "e").to_numpy(zero_copy_only=False)  # what Arrow wrote
    integer = fixed & ~written_scientific & ~pc.match_substring(arrow, ".").to_numpy(zero_copy_only=False)
    for position in np.flatnonzero(integer).tolist():
        texts[position] += ".0"
    for position in np.flatnonzero(~fixed & written_scientific).tolist():
        text = texts[position]
        if text[-2] in "+-":
            texts[position] = f"{text[:-1]}0{text[-1]}"
    for position in np.flatnonzero(np.isfinite(numbers) & (fixed == written_scientific)).tolist():
        texts[position] = repr(float(numbers[position]))
    return texts
