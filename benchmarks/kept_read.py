"""DuckDB over a lookup's kept files, until the DuckDB scan module lands: `read_parquet` over the kept paths with
the WHERE. Exact only for append-only tables (no delete files, no schema evolution, no partition values outside the
files), which is what the benchmarks write; swapping to the scan module is this one function."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from indexlib.lookup import LookupResult


def duckdb_read(con: duckdb.DuckDBPyConnection, paths: list[str], where: str, schema_file: str) -> pa.Table:
    """Rows of `paths` matching `where`; no paths reads `schema_file` for an empty answer (read_parquet([]) raises)."""
    if not paths:
        return con.sql(f"SELECT * FROM read_parquet(?) WHERE {where} LIMIT 0", params=[schema_file]).to_arrow_table()
    return con.sql(f"SELECT * FROM read_parquet(?) WHERE {where}", params=[paths]).to_arrow_table()


def duckdb_indexed(con: duckdb.DuckDBPyConnection, result: LookupResult, where: str, schema_file: str) -> pa.Table:
    """DuckDB through the index: the kept files of `result` with the WHERE."""
    return duckdb_read(con, [kept.file.path for kept in result.kept_files], where, schema_file)
