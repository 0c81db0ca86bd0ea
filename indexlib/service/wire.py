"""Data and delete files as the REST specification's content-file objects, built with pyiceberg's own models
(`pyiceberg.catalog.rest.scan_planning`), so a response is what pyiceberg's client parses and, by the same models,
what the specification defines.

Partition values use Iceberg's JSON single-value serialisation (the form Java's `SingleValueParser` writes and
reads): numbers and booleans as JSON numbers and booleans, dates, times and timestamps as ISO-8601 text, decimals as
text, binary and fixed as upper-case hex, UUIDs as text. Column statistics are sent for the fields a request names
in `stats-fields` only (they are optional and a reader needs none): the manifests' counts, and their lower and upper
bounds in the same single-value form; a bound that does not decode as the column's current type (written before a
type promotion) is left out, which a client reads as "no bound". `file-format` is written in lower case, as the
specification's enum spells it (pyiceberg reads either case).

A residual is written once per response, however many tasks carry it (`Written`): its JSON is made once and spliced
into the response text, so a response costs the time of copying its bytes, not of serialising the filter per task.
Every task carries its residual, `AlwaysTrue` (a file proven all-match) as the JSON `true` (the form Iceberg Java's
`ExpressionParser` writes and pyiceberg reads as AlwaysTrue). None is left out: the specification lets a client
whose task has none use its original filter, but pyiceberg 0.12 reads a missing residual as AlwaysTrue (its
`count()` then takes the file's record count as its rows) and Iceberg Java's `RESTFileScanTaskParser` builds its
`ResidualEvaluator` on null, which fails when Spark opens the file (a NullPointerException in its reader).

A deletion vector (a Puffin delete file of a format-version-3 table) is written with `referenced-data-file`,
`content-offset` and `content-size-in-bytes`, as vectors.py reads them from the file's footer: one delete-file
entry per vector, however many vectors share the Puffin file.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field, field_serializer, model_serializer
from pyiceberg import types as it
from pyiceberg.catalog.rest.scan_planning import (
    CountMap,
    PrimitiveTypeValue,
    RESTDataFile,
    RESTDeleteFile,
    RESTEqualityDeleteFile,
    RESTFileScanTask,
    RESTPositionDeleteFile,
    ScanTasks,
    ValueMap,
)
from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.utils.datetime import (
    days_to_date,
    micros_to_time,
    micros_to_timestamp,
    micros_to_timestamptz,
)

from indexlib.errors import UserError
from indexlib.service.filters import Opaque

# pyiceberg's REST models are made here by field name (`populate_by_name`); without pydantic's mypy plugin mypy knows
# them by their aliases alone ("data-file"): those calls carry a `type: ignore[call-arg]`


class Unplannable(UserError):
    """A file the wire format (or this service) cannot carry faithfully: the plan is refused, never altered."""


class _LowerCaseFormat:
    @field_serializer("file_format")
    def _lower_case(self, value: Any) -> str:
        return str(getattr(value, "value", value)).lower()


# a NULL partition value is JSON null (Java's `SingleValueParser` reads it as null); pyiceberg's model has no None
_Partition = list[PrimitiveTypeValue | None]


class _DataFile(_LowerCaseFormat, RESTDataFile):
    partition: _Partition = Field(default_factory=list)  # type: ignore[assignment]  # also None (see above)


class _PositionDeleteFile(_LowerCaseFormat, RESTPositionDeleteFile):
    partition: _Partition = Field(default_factory=list)  # type: ignore[assignment]  # also None (see above)


class _EqualityDeleteFile(_LowerCaseFormat, RESTEqualityDeleteFile):
    partition: _Partition = Field(default_factory=list)  # type: ignore[assignment]  # also None (see above)


class Written(BooleanExpression):
    """A residual whose JSON `text` is made once: pydantic writes `placeholder`, which `spliced` replaces."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    text: str
    placeholder: str = Field(default_factory=lambda: f"{_PLACEHOLDER}{secrets.token_hex(8)}")

    def __invert__(self) -> BooleanExpression:
        raise TypeError("a written residual is never negated")

    @model_serializer
    def _as_placeholder(self) -> str:
        return self.placeholder


_PLACEHOLDER = "\x00skipindex-residual-"
_WRITTEN = re.compile(re.escape(json.dumps(_PLACEHOLDER)[:-1]) + r'[0-9a-f]{16}"')


def spliced(text: str, residuals: Iterable[Written]) -> str:
    """`text` (a response written by pydantic) with each residual's placeholder replaced by its JSON, in one pass
    (the placeholders are random: no client's string can name one)."""
    by_placeholder = {json.dumps(r.placeholder): r.text for r in residuals}
    return _WRITTEN.sub(lambda m: by_placeholder.get(m.group(0), m.group(0)), text)


def response_text(model: IcebergBaseModel) -> str:
    """A response model as JSON. `serialize_as_any`: a residual filter is typed as the abstract BooleanExpression in
    pyiceberg's task model, which would otherwise be written as `{}` (and fail the client's parse); residuals are
    written once each and spliced in (`Written`)."""
    text = model.model_dump_json(serialize_as_any=True)
    written = {id(t.residual_filter): t.residual_filter for t in getattr(model, "file_scan_tasks", ())}
    return spliced(text, (r for r in written.values() if isinstance(r, Written)))


def residual_text(residual: BooleanExpression) -> str:
    """The residual's JSON; AlwaysTrue (the file is all-match) as `true` (module docstring)."""
    if residual == AlwaysTrue():
        return "true"
    if isinstance(residual, Opaque):
        return json.dumps(residual.raw)
    return residual.model_dump_json(serialize_as_any=True)


@dataclass(frozen=True)
class VectorRef:
    """A deletion vector: one blob of a Puffin delete file, for one data file (vectors.py finds it)."""

    delete: DataFile  # the Puffin file's manifest entry (pyiceberg 0.12 reads none of the fields below from it)
    referenced_data_file: str
    content_offset: int
    content_size_in_bytes: int
    cardinality: int  # the rows it deletes: the entry's record count

    @property
    def file_path(self) -> str:
        return self.delete.file_path

    @property
    def key(self) -> tuple[str, str]:
        return self.delete.file_path, self.referenced_data_file


@dataclass(frozen=True)
class Task:
    """One file scan task before it is put on the wire: the data file, its delete files (a deletion vector as the
    blob for this file), the residual filter."""

    data_file: DataFile
    deletes: tuple[DataFile | VectorRef, ...]
    residual: BooleanExpression


def partition_value(field_type: it.IcebergType, value: Any) -> Any:
    """One partition value in Iceberg's JSON single-value form (module docstring)."""
    if value is None or isinstance(field_type, it.BooleanType | it.IntegerType | it.LongType | it.StringType):
        return value
    if isinstance(field_type, it.FloatType | it.DoubleType):
        return float(value)
    if isinstance(field_type, it.DateType):
        return days_to_date(value).isoformat() if isinstance(value, int) else value.isoformat()
    if isinstance(field_type, it.TimeType):
        return micros_to_time(value).isoformat() if isinstance(value, int) else value.isoformat()
    if isinstance(field_type, it.TimestamptzType):
        return micros_to_timestamptz(value).isoformat() if isinstance(value, int) else value.isoformat()
    if isinstance(field_type, it.TimestampType):
        return micros_to_timestamp(value).isoformat() if isinstance(value, int) else value.isoformat()
    if isinstance(field_type, it.DecimalType):
        return str(Decimal(value))
    if isinstance(field_type, it.UUIDType):
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value)))
    if isinstance(field_type, it.BinaryType | it.FixedType):
        return bytes(value).hex().upper()
    raise Unplannable(f"a partition value of type {field_type} has no JSON form here")


def partition_values(data_file: DataFile, specs: dict[int, PartitionSpec], schema: Schema) -> list[Any]:
    spec = specs.get(data_file.spec_id)
    if spec is None:
        raise Unplannable(f"{data_file.file_path}: partition spec {data_file.spec_id} is not in the table metadata")
    if spec.is_unpartitioned():
        return []
    partition = data_file.partition
    fields = spec.partition_type(schema).fields
    if partition is None or len(partition) != len(fields):
        raise Unplannable(f"{data_file.file_path}: its partition values are not known")
    return [partition_value(f.field_type, partition[i]) for i, f in enumerate(fields)]


def _common(data_file: DataFile, specs: dict[int, PartitionSpec], schema: Schema) -> dict[str, Any]:
    if data_file.key_metadata:
        raise Unplannable(f"{data_file.file_path} is encrypted (key metadata): not served")
    return {
        "spec_id": data_file.spec_id,
        "partition": partition_values(data_file, specs, schema),
        "file_path": data_file.file_path,
        "file_format": data_file.file_format,
        "file_size_in_bytes": data_file.file_size_in_bytes,
        "record_count": data_file.record_count,
        "split_offsets": list(data_file.split_offsets) if data_file.split_offsets else None,
        "sort_order_id": data_file.sort_order_id,
    }


def data_file(
    data: DataFile, specs: dict[int, PartitionSpec], schema: Schema, stats_fields: frozenset[int] = frozenset()
) -> RESTDataFile:
    return _DataFile(**_common(data, specs, schema), **_statistics(data, schema, stats_fields))


def _statistics(data: DataFile, schema: Schema, stats_fields: frozenset[int]) -> dict[str, Any]:
    """The column statistics of `stats_fields` (module docstring); none asked, none sent."""
    found: dict[str, Any] = {}
    if not stats_fields:
        return found
    for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
        counts = {k: int(v) for k, v in (getattr(data, name, None) or {}).items() if k in stats_fields}
        if counts:
            found[name] = CountMap(keys=sorted(counts), values=[counts[k] for k in sorted(counts)])
    for name in ("lower_bounds", "upper_bounds"):
        values = {}
        for field_id, raw in (getattr(data, name, None) or {}).items():
            if field_id not in stats_fields:
                continue
            try:
                field_type = schema.find_type(field_id)
                values[field_id] = partition_value(field_type, from_bytes(field_type, raw))  # type: ignore[arg-type]
            except Exception:  # a dropped column, or a bound written before a promotion: no bound
                continue
        if values:
            found[name] = ValueMap(keys=sorted(values), values=[values[k] for k in sorted(values)])
    return found


def delete_file(delete: DataFile | VectorRef, specs: dict[int, PartitionSpec], schema: Schema) -> RESTDeleteFile:
    """A delete file; a deletion vector with the three fields a reader finds its blob by (vectors.py). A Puffin file
    without them is refused: Iceberg Java cannot read a vector it has no offset for."""
    if isinstance(delete, VectorRef):
        common = {**_common(delete.delete, specs, schema), "record_count": delete.cardinality}
        return _PositionDeleteFile(  # type: ignore[call-arg]  # by field name (see the top)
            **common,
            referenced_data_file=delete.referenced_data_file,
            content_offset=delete.content_offset,
            content_size_in_bytes=delete.content_size_in_bytes,
        )
    if delete.file_format == FileFormat.PUFFIN:
        raise Unplannable(f"{delete.file_path}: a deletion vector without its blob's offset (vectors.py)")
    common = _common(delete, specs, schema)
    if delete.content == DataFileContent.EQUALITY_DELETES:
        return _EqualityDeleteFile(  # type: ignore[call-arg]  # by field name
            **common, equality_ids=list(delete.equality_ids or []) or None
        )
    return _PositionDeleteFile(**common)


def scan_tasks(
    tasks: Sequence[Task],
    specs: dict[int, PartitionSpec],
    schema: Schema,
    plan_tasks: Sequence[str] = (),
    stats_fields: frozenset[int] = frozenset(),
    texts: dict[int, str] | None = None,
    files: dict[int, RESTDataFile] | None = None,
) -> ScanTasks:
    """One batch: its file scan tasks, each naming its delete files by position in the batch's own `delete-files`
    list (a delete file shared by several tasks is listed once), and tokens of further batches. Each distinct
    residual is written once (`Written`, module docstring; `texts`: residual JSON already made, by id); `files`:
    data files already made by `data_file` with these specs, schema and `stats_fields`, by id of the DataFile."""
    deletes: list[RESTDeleteFile] = []
    position: dict[tuple[str, str], int] = {}
    written: dict[int, Written] = {}
    file_tasks = []
    for task in tasks:
        references = []
        for delete in sorted(task.deletes, key=lambda d: d.file_path):
            key = delete.key if isinstance(delete, VectorRef) else (delete.file_path, "")  # a vector: per blob
            if key not in position:
                position[key] = len(deletes)
                deletes.append(delete_file(delete, specs, schema))
            references.append(position[key])
        if id(task.residual) not in written:
            text = texts[id(task.residual)] if texts and id(task.residual) in texts else residual_text(task.residual)
            written[id(task.residual)] = Written(text=text)
        file_tasks.append(
            RESTFileScanTask(  # type: ignore[call-arg]  # by field name
                data_file=made
                if files and (made := files.get(id(task.data_file))) is not None
                else data_file(task.data_file, specs, schema, stats_fields),
                delete_file_references=references or None,
                residual_filter=written[id(task.residual)],
            )
        )
    return ScanTasks(  # type: ignore[call-arg]  # by field name
        delete_files=deletes, file_scan_tasks=file_tasks, plan_tasks=list(plan_tasks)
    )


def task_bytes(task: Task, residual_bytes: int) -> int:
    """About what `task` takes in a response, its residual `residual_bytes` long (for batches bounded in bytes)."""
    paths = len(task.data_file.file_path) + sum(len(d.file_path) for d in task.deletes)
    return 400 * (1 + len(task.deletes)) + paths + residual_bytes
