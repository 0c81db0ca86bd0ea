"""`skipindex stats`: per column of a table, its NDV (HLL sketches of the live indexed files merged), the index kinds
the build chose, and what the index costs in bytes. With a WHERE clause, only the files the lookup keeps are counted,
which gives the NDV of a partition or any other slice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from indexlib.config import Config
from indexlib.index_table import IndexTable
from indexlib.ndv import merged_estimate
from indexlib.source import open_source


@dataclass
class ColumnReport:
    name: str
    type: str
    files: int = 0  # live indexed files holding statistics for the column
    ndv: float = 0.0  # estimate over those files (HLL union)
    max_file_ndv: int = 0  # largest exact distinct count of one file
    sketch_bytes: int = 0
    kinds: dict[str, list[int]] = field(default_factory=dict)  # kind -> [files, payload bytes]

    def as_json(self) -> dict[str, Any]:
        return {
            "column": self.name,
            "type": self.type,
            "files": self.files,
            "ndv": round(self.ndv),
            "max_file_ndv": self.max_file_ndv,
            "sketch_bytes": self.sketch_bytes,
            "kinds": {kind: {"files": n, "bytes": size} for kind, (n, size) in sorted(self.kinds.items())},
        }


@dataclass(frozen=True)
class TableReport:
    table: str
    where: str | None
    files_live: int
    files_counted: int  # live files (kept by `where`, if given) with an index entry
    columns: list[ColumnReport]

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "where": self.where,
            "files_live": self.files_live,
            "files_counted": self.files_counted,
            "columns": [column.as_json() for column in self.columns],
        }


def table_stats(config: Config, table: str, where: str | None = None) -> TableReport:
    catalog = config.load_catalog()
    source = open_source(catalog, table)
    live = [f.path for f in source.live_files()]
    wanted = live
    if where is not None:
        from indexlib.lookup import lookup

        wanted = lookup(config, table, where).files
    entries = IndexTable(catalog, config.index_namespace, table).entries()
    entries = entries.filter(pc.is_in(entries.column("file_path"), value_set=pa.array(wanted, pa.string())))
    seen: set[str] = set()
    reports = {f.field_id: ColumnReport(f.name, str(f.field_type)) for f in source.schema.fields}
    sketches: dict[int, list[bytes | None]] = {fid: [] for fid in reports}
    for path, columns in zip(
        entries.column("file_path").to_pylist(), entries.column("columns").to_pylist(), strict=True
    ):
        if path in seen:  # a path indexed twice holds the same statistics
            continue
        seen.add(path)
        for column in columns:
            report = reports.get(column["field_id"])
            if report is None:  # a column dropped from the table since
                continue
            report.files += 1
            report.max_file_ndv = max(report.max_file_ndv, column.get("distinct_count") or 0)
            sketch = column.get("ndv_sketch")
            report.sketch_bytes += len(sketch or b"")
            sketches[column["field_id"]].append(sketch)
            for index in column.get("indexes") or ():
                files_and_bytes = report.kinds.setdefault(index["kind"], [0, 0])
                files_and_bytes[0] += 1
                files_and_bytes[1] += len(index["payload"])
    for fid, report in reports.items():
        report.ndv, _ = merged_estimate(sketches[fid])
    return TableReport(table, where, len(live), len(seen), list(reports.values()))


def format_report(report: TableReport) -> str:
    lines = [
        f"table   {report.table}" + (f"   where {report.where}" if report.where else ""),
        f"files   {report.files_counted} indexed of {report.files_live} live",
        "",
        f"{'column':<20}{'type':<16}{'files':>7}{'NDV':>11}{'max/file':>10}  index kinds (files, bytes)",
    ]
    for column in report.columns:
        kinds = ", ".join(f"{kind} ({n}, {_bytes(size)})" for kind, (n, size) in sorted(column.kinds.items()))
        kinds = kinds or "min/max only"
        lines.append(
            f"{column.name:<20}{column.type:<16}{column.files:>7}{round(column.ndv):>11}{column.max_file_ndv:>10}  "
            f"{kinds}; sketches {_bytes(column.sketch_bytes)}"
        )
    return "\n".join(lines)


def _bytes(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"
