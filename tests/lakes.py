"""A source table for tests, Iceberg (SQLite catalog) or Delta (delta-rs), with the operations real tables see."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType


class Lake:
    """One source table, Iceberg or Delta, with the operations real tables see."""

    def __init__(self, kind: str, catalog, tmp_path: Path, name: str, partitioned: bool = False) -> None:
        """Columns id (long), service (string) and, when `partitioned`, part (string, the partition column)."""
        self.kind = kind
        self.partition_by = ["part"] if partitioned else None
        if kind == "iceberg":
            fields = [NestedField(1, "id", LongType()), NestedField(2, "service", StringType())]
            fields += [NestedField(3, "part", StringType())] if partitioned else []
            spec = (
                PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "part")) if partitioned else PartitionSpec()
            )
            self.iceberg = catalog.create_table(f"db.{name}", schema=Schema(*fields), partition_spec=spec)
            self.name = f"db.{name}"
        else:
            self.name = str(tmp_path / "lake" / name)

    def append(self, table: pa.Table) -> None:
        if self.kind == "iceberg":
            self.iceberg.append(table)
        else:
            write_deltalake(self.name, table, mode="append", partition_by=self.partition_by)

    def version(self) -> int:
        """The source's current version: the watermark a complete build leaves."""
        if self.kind == "iceberg":
            return self.iceberg.refresh().current_snapshot().snapshot_id
        return DeltaTable(self.name).version()

    def delete(self, where: str) -> None:
        if self.kind == "iceberg":
            self.iceberg.delete(where)
        else:
            DeltaTable(self.name).delete(where)

    def compact(self) -> None:
        """Rewrite every file (Iceberg: an overwrite snapshot with the same rows; Delta: OPTIMIZE compact)."""
        if self.kind == "iceberg":
            self.iceberg.overwrite(self.iceberg.scan().to_arrow())
        else:
            DeltaTable(self.name).optimize.compact()
