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
from indexlib.sources.registry import open_source
from indexlib.statistics.sketches import merged_estimate
from indexlib.store.schema import one_entry_per_path
from indexlib.store.table import IndexTable


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
    catalog = config.load_catalog(create=False)  # a report never creates a catalog
    source = open_source(config, table, catalog)
    index = IndexTable(catalog, config.index_namespace, source.name)
    index.require()  # NDV and index bytes are statistics of the index: none to report without one
    live = [f.path for f in source.live_files()]
    wanted = live
    if where is not None:
        from indexlib.lookup import lookup

        wanted = lookup(config, table, where).files
    entries = index.entries()
    entries = entries.filter(pc.fill_null(entries.column("indexed"), True))  # files the index holds statistics of
    entries = entries.filter(pc.is_in(entries.column("file_path"), value_set=pa.array(wanted, pa.string())))
    entries = one_entry_per_path(entries)  # a path indexed twice holds the same statistics: count it once
    reports = {f.field_id: ColumnReport(f.name, str(f.field_type)) for f in source.schema.fields}
    columns = pc.list_flatten(entries.column("columns"))
    if len(columns):
        _fill_reports(reports, pa.Table.from_struct_array(columns))
    return TableReport(table, where, len(live), entries.num_rows, list(reports.values()))


def _fill_reports(reports: dict[int, ColumnReport], columns: pa.Table) -> None:
    """Per field id: files, largest distinct count, sketch bytes, merged NDV, and files and bytes per index kind."""
    if "ndv_sketch" not in columns.column_names:  # format-1 entries: counts and bounds only
        columns = columns.append_column("ndv_sketch", pa.nulls(columns.num_rows, pa.binary()))
        columns = columns.append_column("distinct_count", pa.nulls(columns.num_rows, pa.int64()))
    per_column = (
        columns.append_column("sketch_bytes", pc.binary_length(columns.column("ndv_sketch")))
        .group_by("field_id")
        .aggregate([("field_id", "count"), ("distinct_count", "max"), ("sketch_bytes", "sum")])
    )
    for fid, files, largest, sketch_bytes in zip(*(per_column.column(i).to_pylist() for i in range(4)), strict=True):
        if fid in reports:  # else a column dropped from the table since
            report = reports[fid]
            report.files, report.max_file_ndv, report.sketch_bytes = files, largest or 0, sketch_bytes or 0
    field_ids = columns.column("field_id").combine_chunks()
    sketches = columns.column("ndv_sketch").combine_chunks()
    for fid, report in reports.items():
        report.ndv, _ = merged_estimate(sketches.filter(pc.equal(field_ids, fid)).to_pylist())
    if "key_hashes" in columns.column_names:  # format 6: key rows, 8 bytes of hash each (before compression)
        hashes = columns.column("key_hashes").combine_chunks()
        keyed = pc.is_valid(hashes)
        per_column = (
            pa.table({"field_id": field_ids.filter(keyed), "keys": pc.list_value_length(hashes.filter(keyed))})
            .group_by("field_id")
            .aggregate([("keys", "count"), ("keys", "sum")])
        )
        for fid, files, keys in zip(*(per_column.column(i).to_pylist() for i in range(3)), strict=True):
            if fid in reports:
                reports[fid].kinds["key index"] = [files, 8 * keys]
    if "indexes" not in columns.column_names:
        return
    _count_payloads(reports, field_ids, columns.column("indexes").combine_chunks(), "")
    if "row_groups" in columns.column_names:  # format 5: payloads per row group, counted per row group
        listed = columns.column("row_groups").combine_chunks()
        groups = pa.Table.from_struct_array(pc.list_flatten(listed))
        if groups.num_rows:
            owners = field_ids.take(pc.list_parent_indices(listed))
            _count_payloads(reports, owners, groups.column("indexes").combine_chunks(), " (row groups)")


def _count_payloads(reports: dict[int, ColumnReport], field_ids: pa.Array, indexes: pa.Array, suffix: str) -> None:
    """Per (field id, kind): how many payloads (`indexes[i]` belongs to column `field_ids[i]`) and their bytes,
    under the kind's name plus `suffix`."""
    flat = pc.list_flatten(indexes)
    if not len(flat):
        return
    kinds = pa.Table.from_struct_array(flat)
    per_kind = (
        pa.table(
            {
                "field_id": field_ids.take(pc.list_parent_indices(indexes)),
                "kind": kinds.column("kind"),
                "bytes": pc.binary_length(kinds.column("payload")),
            }
        )
        .group_by(["field_id", "kind"])
        .aggregate([("bytes", "count"), ("bytes", "sum")])
    )
    for row in per_kind.to_pylist():
        if row["field_id"] in reports:
            reports[row["field_id"]].kinds[row["kind"] + suffix] = [row["bytes_count"], row["bytes_sum"]]


def format_report(report: TableReport) -> str:
    lines = [
        f"table   {report.table}" + (f"   where {report.where}" if report.where else ""),
        f"files   {report.files_counted} indexed of {report.files_live} live",
        "",
        f"{'column':<20}{'type':<16}{'files':>7}{'NDV':>11}{'max/file':>10}  index kinds (payloads: files or row groups, bytes)",
    ]
    for column in report.columns:
        kinds = ", ".join(f"{kind} ({n}, {_bytes(size)})" for kind, (n, size) in sorted(column.kinds.items()))
        kinds = kinds or "min/max only"
        lines.append(
            f"{column.name:<20}{column.type:<16}{column.files:>7}{round(column.ndv):>11}{column.max_file_ndv:>10}  "
            f"{kinds}; sketches {_bytes(column.sketch_bytes)}"
        )
    return "\n".join(lines)


def _bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"
