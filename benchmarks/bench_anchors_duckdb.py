"""DuckDB's Parquet reader, with and without pyarrow-written row-group Bloom filters, against skipindex's scan into
DuckDB (issue 44: "Parquet row-group Bloom filters written by the writer (pyarrow's), read by DuckDB's reader").

Called by bench_anchors.py per data set with the Iceberg table's data files (pyarrow-written Parquet, registered
with `add_files`), a warm `IndexHandle` on that table (index built) and the data set's queries.

Data: the source files as they are, and a pyarrow copy of them with Bloom filters (`pq.write_table(...,
bloom_filter_options={column: {"ndv": rows of the file, "fpp": 0.01}})` on bench_anchors' `BLOOM_COLUMNS`), one
output file per input file, the source files' row-group size (their footers' first row group) and compression, so
the copy differs from the source by its Bloom filters only. Its cost: the write seconds (pyarrow's write alone, the
rows read before the clock starts) against the same pyarrow write without Bloom filters, and the Bloom bytes (the
copy's bytes minus the source's; the footers' `bloom_filter_length` sum as a check).

Variants, per query, on one shared `duckdb.connect()` (DuckDB's defaults: its Parquet metadata cache and its cache of
local files are off, so every read opens every footer it needs):

- `duckdb`: `SELECT * FROM read_parquet(<source files>) WHERE ...` (bench_query.duckdb_read): DuckDB's own skipping,
  the row groups' min/max statistics (and whole files whose statistics exclude the filter);
- `duckdb+pyarrow bloom`: the same over the Bloom copy. DuckDB (2.0.1 here) probes a column chunk's Bloom filter
  for a pushed-down `column = constant` and for an `IN` list kept as an IN filter (non-consecutive constants; a run of
  consecutive integers becomes a range, which no Bloom filter answers); not for OR across columns, LIKE or regexes;
- `skipindex to_duckdb`: `handle.scan(where).to_duckdb(con)` (the lookup in this process, then DuckDB over the kept
  files; its time includes the lookup).

Each is materialised the same way, `.to_arrow_table()` of every column of every matching row; wall time is the
median of `runs` after a warm-up (bench_query.median_of). WHERE text: bench_anchors' queries are Spark SQL; skipindex
reads them in the handle's dialect, DuckDB's reads get them with `regexp_like(` replaced by `regexp_matches(` (its
name for the same partial-match regex test; RE2 against Java's regex, the same on these patterns), nothing else
changed.

Measured per query and variant, besides the time, in one more, untimed run with DuckDB's JSON profiling on: the row
groups DuckDB scanned against those it planned to scan (the query's `total_row_groups_scanned` /
`total_row_groups_to_scan`: a row group dropped by its statistics or a Bloom filter is planned, not scanned), and the
files its Parquet scans opened (the scan operators' `Total Files Read`: over several files DuckDB opens every file's
footer, so its own reads show every file even where no row group of one is scanned). Files read by skipindex: the
kept files of `handle.lookup(where)` (`LookupResult.files`); its row groups are DuckDB's over those files.

Rows: count and an order-free checksum (the sum of DuckDB's `hash()` over every column, in the source schema's
order) per variant, compared with brute force: every row of the source files read by pyarrow (`pq.read_table`, no
filter), then filtered by DuckDB over that Arrow table (which evaluates the filter on every row; no statistics, no
Bloom filter). Any difference is printed loudly to stderr and marked WRONG in the tables.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from bench_query import _short, duckdb_read, median_of

VARIANTS = ["duckdb", "duckdb+pyarrow bloom", "skipindex to_duckdb"]
FPP = 0.01


@dataclass
class BloomCopy:
    """The Bloom-filtered copy of a data set; fields named as bench_anchors' `Written` (`Written(**asdict(copy))`)."""

    system: str
    path: str
    seconds: float  # pyarrow's writes of every file with Bloom filters
    index_bytes: int  # the copy's bytes minus the source's
    data_bytes: int  # the copy's bytes
    note: str = ""
    plain_seconds: float = 0.0  # the same pyarrow writes without Bloom filters
    footer_bloom_bytes: int = 0  # the footers' bloom_filter_length, summed (a check of index_bytes)
    files: list[str] = field(default_factory=list)


@dataclass
class DuckCell:
    seconds: float = 0.0
    files: int = -1  # -1: not measured
    row_groups_scanned: int = -1
    row_groups_to_scan: int = -1
    rows: int = -1
    checksum: int = 0
    error: str = ""


@dataclass
class DuckRow:
    dataset: str
    query: str
    where: str  # as given (Spark SQL)
    duckdb_where: str  # as DuckDB's own reads got it
    total_files: int
    total_row_groups: int
    expected_rows: int
    expected_checksum: int
    cells: dict[str, DuckCell] = field(default_factory=dict)
    copy: BloomCopy | None = None  # the same object in every row of a data set

    def wrong(self) -> list[str]:
        return [
            variant
            for variant, c in self.cells.items()
            if not c.error and (c.rows != self.expected_rows or c.checksum != self.expected_checksum)
        ]


def rows_of(saved: list[dict[str, Any]]) -> list[DuckRow]:
    """The rows of a saved run (`dataclasses.asdict` of each), for bench_anchors.py's `--replot`."""
    out = []
    for data in saved:
        cells = {variant: DuckCell(**cell) for variant, cell in data.pop("cells").items()}
        copy = data.pop("copy")
        out.append(DuckRow(**data, cells=cells, copy=BloomCopy(**copy) if copy else None))
    return out


# --- the Bloom copy --------------------------------------------------------------------------------------------------


def write_bloom_copy(paths: list[str], bloom_columns: list[str], directory: Path) -> BloomCopy:
    """One pyarrow file per source file in `directory`/bloom, with Bloom filters on `bloom_columns` (ndv: the file's
    rows, fpp 0.01), the source's row-group size and compression; also written once without Bloom filters (to a
    folder deleted after) for the plain write time."""
    target, plain = directory / "bloom", directory / "plain-rewrite"
    target.mkdir(parents=True)
    plain.mkdir()
    seconds = plain_seconds = 0.0
    out = []
    for path in paths:
        meta = pq.ParquetFile(path).metadata
        group_rows = max(1, meta.row_group(0).num_rows) if meta.num_row_groups else None
        compression = meta.row_group(0).column(0).compression.lower() if meta.num_row_groups else "snappy"
        table = pq.read_table(path)
        options = {c: {"ndv": max(1, table.num_rows), "fpp": FPP} for c in bloom_columns}
        name = Path(path).name
        started = time.perf_counter()
        pq.write_table(table, plain / name, row_group_size=group_rows, compression=compression)
        plain_seconds += time.perf_counter() - started
        started = time.perf_counter()
        pq.write_table(
            table, target / name, row_group_size=group_rows, compression=compression, bloom_filter_options=options
        )
        seconds += time.perf_counter() - started
        out.append(str(target / name))
    for written in plain.iterdir():
        written.unlink()
    plain.rmdir()
    source_bytes = sum(Path(p).stat().st_size for p in paths)
    copy_bytes = sum(Path(p).stat().st_size for p in out)
    footer = 0
    for path in out:
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                footer += meta.row_group(g).column(c).bloom_filter_length or 0
    for path, copied in zip(paths, out, strict=True):  # same row groups as the source
        a, b = pq.ParquetFile(path).metadata, pq.ParquetFile(copied).metadata
        assert [a.row_group(g).num_rows for g in range(a.num_row_groups)] == [
            b.row_group(g).num_rows for g in range(b.num_row_groups)
        ], f"{copied}: row groups differ from {path}"
    return BloomCopy(
        "duckdb+pyarrow bloom",
        str(target),
        seconds,
        copy_bytes - source_bytes,
        copy_bytes,
        f"pyarrow Bloom filters on {', '.join(bloom_columns)} (fpp {FPP}); plain pyarrow rewrite {plain_seconds:.2f} s",
        plain_seconds,
        footer,
        out,
    )


# --- measuring -------------------------------------------------------------------------------------------------------

_REGEXP_LIKE = re.compile(r"\bregexp_like\s*\(", re.IGNORECASE)


def duckdb_dialect(where: str) -> str:
    """bench_anchors' Spark SQL for DuckDB's own reads: `regexp_like(` is `regexp_matches(` there."""
    return _REGEXP_LIKE.sub("regexp_matches(", where)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def checksum(con: duckdb.DuckDBPyConnection, table: pa.Table, names: list[str]) -> tuple[int, int]:
    """Rows and an order-free checksum: the sum of DuckDB's `hash` over the columns `names` (as HUGEINT)."""
    view = "bench_anchors_duckdb_rows"
    con.register(view, table.select(names))
    try:
        columns = ", ".join(map(_quote, names))
        rows, total = con.sql(f"SELECT count(*), sum(hash({columns})::HUGEINT) FROM {view}").fetchall()[0]
    finally:
        con.unregister(view)
    return int(rows), int(total or 0)


def profiled(con: duckdb.DuckDBPyConnection, action: Any, output: Path) -> tuple[int, int, int]:
    """Row groups scanned, row groups to scan, and files opened by the Parquet scans of the last query `action`
    runs on `con`, from DuckDB's JSON profiling (on for this call only)."""
    con.execute("PRAGMA enable_profiling = 'json'")
    con.execute(f"PRAGMA profiling_output = '{output}'")
    try:
        action()
    finally:
        con.execute("PRAGMA disable_profiling")
    profile = json.loads(output.read_text())
    query = profile["query"]
    files = 0

    def walk(node: dict[str, Any]) -> None:
        nonlocal files
        info = node.get("extra_info") or {}
        if isinstance(info, dict) and "Total Files Read" in info:
            files += int(info["Total Files Read"])
        for child in node.get("children", []):
            walk(child)

    for node in profile.get("operator", []):
        walk(node)
    return int(query["total_row_groups_scanned"]), int(query["total_row_groups_to_scan"]), files


def run_duckdb(
    handle: Any,
    dataset: str,
    paths: list[str],
    queries: list[tuple[str, str]],
    bloom_columns: list[str],
    directory: Path,
    runs: int,
) -> list[DuckRow]:
    """The three variants (module docstring) of every query over `paths` (the files of `handle`'s table), with
    the Bloom copy written into `directory` (a new folder)."""
    directory.mkdir(parents=True, exist_ok=True)
    copy = write_bloom_copy(paths, bloom_columns, directory)
    names = pq.read_schema(paths[0]).names
    total_groups = sum(pq.ParquetFile(p).metadata.num_row_groups for p in paths)
    con = duckdb.connect()
    everything = pa.concat_tables([pq.read_table(p) for p in paths])  # brute force: every row, nothing pushed
    con.register("bench_anchors_duckdb_truth", everything)
    profile = directory / "profile.json"
    out = []
    for label, where in queries:
        duck_where = duckdb_dialect(where)
        expected = con.sql(f"SELECT * FROM bench_anchors_duckdb_truth WHERE {duck_where}").to_arrow_table()
        rows, check = checksum(con, expected, names)
        row = DuckRow(dataset, label, where, duck_where, len(paths), total_groups, rows, check, copy=copy)
        actions = {
            "duckdb": lambda w=duck_where: duckdb_read(con, paths, w, paths[0]),
            "duckdb+pyarrow bloom": lambda w=duck_where: duckdb_read(con, copy.files, w, copy.files[0]),
            "skipindex to_duckdb": lambda w=where: handle.scan(w).to_duckdb(con).to_arrow_table(),
        }
        for variant, action in actions.items():
            cell = row.cells.setdefault(variant, DuckCell())
            try:
                answer = action()  # warm-up, and the rows
            except duckdb.Error as error:
                if variant.startswith("skipindex"):
                    raise
                cell.error = str(error).splitlines()[0]
                print(f"\n!!! {variant} failed on {dataset} {label}: {cell.error}", file=sys.stderr, flush=True)
                continue
            cell.rows, cell.checksum = checksum(con, answer, names)
            cell.seconds = median_of(runs, action)
            cell.row_groups_scanned, cell.row_groups_to_scan, cell.files = profiled(con, action, profile)
            if variant.startswith("skipindex"):
                cell.files = len(handle.lookup(where).files)
        for variant in row.wrong():
            c = row.cells[variant]
            print(
                f"\n!!! WRONG ROWS: {dataset} {label} on {variant}: {c.rows:,} rows, brute force {rows:,} "
                f"(checksums {c.checksum} / {check}): WHERE {_short(where)}\n",
                file=sys.stderr,
                flush=True,
            )
        out.append(row)
        print(f"  duckdb {dataset} {label}: done", file=sys.stderr, flush=True)
    con.unregister("bench_anchors_duckdb_truth")
    return out


# --- printing --------------------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def _count(n: int) -> str:
    return "-" if n < 0 else f"{n:,}"


def print_duckdb(rows: list[DuckRow], title: str) -> None:
    """Markdown tables: wall time (files read), row groups scanned / planned, the Bloom copy's cost."""
    if not rows:
        return
    first = rows[0]
    print(f"\n#### {title}, DuckDB {duckdb.__version__}: wall time ms (median), files read / {first.total_files}\n")
    print("| query | " + " | ".join(VARIANTS) + " | rows |")
    print("|---|" + "---:|" * len(VARIANTS) + "---:|")
    for r in rows:
        cells = []
        for variant in VARIANTS:
            c = r.cells.get(variant)
            if c is None:
                cells.append("-")
            elif c.error:
                cells.append("failed")
            else:
                mark = " **WRONG**" if variant in r.wrong() else ""
                cells.append(f"{_ms(c.seconds)} ({_count(c.files)}){mark}")
        print(f"| {r.query} | " + " | ".join(cells) + f" | {r.expected_rows:,} |")
    print(
        f"\n#### {title}, DuckDB: row groups scanned / planned (DuckDB's profiling), of {first.total_row_groups} "
        "in the files\n"
    )
    print("| query | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---:|" * len(VARIANTS))
    for r in rows:
        cells = []
        for variant in VARIANTS:
            c = r.cells.get(variant)
            ok = c is not None and not c.error
            cells.append(f"{_count(c.row_groups_scanned)} / {_count(c.row_groups_to_scan)}" if ok else "-")
        print(f"| {r.query} | " + " | ".join(cells) + " |")
    copy = first.copy
    if copy is not None:
        print(
            f"\nBloom copy: pyarrow write {copy.seconds:,.2f} s with Bloom filters against {copy.plain_seconds:,.2f} s "
            f"without; Bloom bytes {copy.index_bytes / 1e6:,.3f} MB ({copy.footer_bloom_bytes / 1e6:,.3f} MB by the "
            f"footers) of {copy.data_bytes / 1e6:,.1f} MB; {copy.note}"
        )
    for r in rows:
        for variant, c in r.cells.items():
            if c.error:
                print(f"\n{variant} failed on {r.query}: `{c.error}`")
    wrong = [(r.query, v, r.cells[v].rows) for r in rows for v in r.wrong()]
    if wrong:
        print("\n**WRONG ROWS** (query, variant, rows; brute force in the last column above): " + repr(wrong))
    translated = [r.query for r in rows if r.duckdb_where != r.where]
    if translated:
        print(f"\nDuckDB's own reads: `regexp_like(` read as `regexp_matches(` in {', '.join(translated)}")
    print("\nQueries: " + "; ".join(f"{r.query}: `{_short(r.where)}`" for r in rows))
