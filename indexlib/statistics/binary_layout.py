"""The buffers of an Arrow binary or string array as numpy arrays, for code that reads every value's bytes at once
(the vectorised hashes, byte searches): no copy for string, binary and their large variants."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def binary_layout(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of `values` (no nulls): value i is data[offsets[i] : offsets[i + 1]], offsets as int64 into
    the whole data buffer (a slice's offsets point into its parent's). Other types are cast to large_binary first."""
    if not any(check(values.type) for check in (pa.types.is_binary, pa.types.is_string, _is_large)):
        values = values.cast(pa.large_binary())
    if values.null_count:
        raise ValueError("cannot read the bytes of null values")
    width = "<i8" if _is_large(values.type) else "<i4"
    offsets = np.frombuffer(values.buffers()[1], dtype=width)[values.offset : values.offset + len(values) + 1]
    data = values.buffers()[2]
    return offsets.astype(np.int64), np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)


def _is_large(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_large_binary(arrow_type) or pa.types.is_large_string(arrow_type))
