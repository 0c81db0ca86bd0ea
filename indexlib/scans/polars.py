"""A Polars `LazyFrame` over a lookup's kept files, with the rows of the DuckDB relation (scans/duckdb.py).

    lf = handle.scan("k = 42").to_polars()
    lf.select("id", "name").collect()

The lookup runs now (the frame is pinned to the version it answered for); rows are read when the frame is collected,
through the DuckDB relation, so Iceberg deletes, field-id mapping, Delta partition values and deletion vectors, and
the all-match files are handled in one place, and the WHERE keeps its SQL meaning (a Polars expression would read
`x NOT IN (...)` and NULLs differently). Projection and row limits reach DuckDB; a predicate Polars pushes down is applied to each
batch (Polars leaves it to the source).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from indexlib.errors import UserError
from indexlib.scans import duckdb as duckdb_scan

try:
    import polars as pl
    from polars.io.plugins import register_io_source
except ImportError:  # optional: pip install 'skipindex[polars]'
    pl = None  # type: ignore[assignment]  # the module or None: `to_polars` checks

if TYPE_CHECKING:
    import duckdb

    from indexlib.scans.scan import Scan


def to_polars(scan: Scan, connection: duckdb.DuckDBPyConnection | None = None) -> pl.LazyFrame:
    """The scan target "polars" (`scans/scan.py`): a LazyFrame over the scan's DuckDB relation."""
    _check_installed()
    return of_relation(duckdb_scan.to_duckdb(scan, connection))


def _check_installed() -> None:
    if pl is None:
        raise UserError("the Polars scan needs polars installed (pip install 'skipindex[polars]')")


def of_relation(relation: duckdb.DuckDBPyRelation) -> pl.LazyFrame:
    """A LazyFrame reading a DuckDB relation when collected."""
    # polars types from_arrow `DataFrame | Series`: of an Arrow table it is a DataFrame
    empty = duckdb_scan.record_batches(relation.limit(0), 1).read_all()
    schema = pl.from_arrow(empty).schema  # type: ignore[union-attr]

    def source(
        with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None
    ) -> Iterator[Any]:
        rel = (
            relation
            if with_columns is None
            else relation.project(", ".join(duckdb_scan.quote_name(c) for c in with_columns))
        )
        if n_rows is not None and predicate is None:
            rel = rel.limit(n_rows)
        left = n_rows
        for batch in duckdb_scan.record_batches(rel, batch_size or 100_000):
            frame = pl.from_arrow(pa.Table.from_batches([batch]))
            if predicate is not None:
                frame = frame.filter(predicate)
            if left is not None:
                frame, left = frame.head(left), left - min(left, frame.height)  # type: ignore[union-attr]  # as above
            yield frame
            if left == 0:
                return

    return register_io_source(source, schema=schema, explain_name="skipindex kept files")
