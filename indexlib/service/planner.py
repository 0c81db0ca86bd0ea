"""How a plan request is answered. The rule: a plan never leaves out a file the upstream's own planning would
return with a matching row; where the index cannot answer, pyiceberg's own planning does.

- The request's filter is pruned with as filters.py converts it (the parts neither pyiceberg nor the index can use
  are TRUE, "might match"), and goes back as each task's residual simplified by what the index proves about that
  file (pruning/residuals.py: an IN list keeps the values within the file's bounds, a leaf proven on every row is
  TRUE; AlwaysTrue, written `true`, for a file the index proves all-match): the client's reader filters the file's
  rows with it, and gets exactly the rows the whole filter selects. pyiceberg's own planning (below) sends the
  filter as the client sent it. On either route, the residual is then written for the client's reader
  (`ReaderResiduals`: zeros in Java's order, NaN-prone files widened, leaves the client cannot bind made TRUE), and
  pyiceberg's planning is given a filter that keeps the files NaN may match in (`_nan_kept`).
- Columns of the filter, `select` and `stats-fields` are bound in the schema the request names: the table's
  current schema, or with `use-snapshot-schema` the schema of the snapshot scanned (`snapshot-id`, else the current
  snapshot; an incremental scan's `end-snapshot-id`), as Iceberg Java's `useSnapshotSchema` scans do; the pruning
  filter names them by field id in the current schema, which the index and pyiceberg's planning bind to.
- The index answers a plan of the table's current snapshot (no `snapshot-id`, or the one the index's handle just
  read): the lookup's kept files (files committed after the last build judged by their manifest entries), each with its delete
  files; a deletion vector as its blob for that file (vectors.py), on either route.
- pyiceberg's own planning (`table.scan(...).plan_files()` here, in the service) answers a plan pinned to another
  snapshot, an incremental scan (`start-snapshot-id` / `end-snapshot-id`: `incremental_append_scan`, appends only,
  as pyiceberg and Java's IncrementalAppendScan define it), a request with `stats-fields` (the statistics come
  from the manifests, which the index does not copy), and a table the index cannot plan (a file whose partition
  values the index rows do not carry).

A planner (one per plan worker process, workers.py) keeps one `IndexHandle` per table, shared by its requests
(handles are thread-safe and cache by snapshot), for the `[serve] handles_kept` tables planned most recently (the
least recently used is dropped): tables are named as the catalog reads them (names.py), so another spelling of a name
is the same table, never one more handle. Every plan has an unguessable plan id and is written whole when made
(`respond`): a batch holds at most `tasks_per_batch` tasks and about `max_response_bytes` (a large residual makes
more batches, never a larger response), each residual's JSON is written once per plan. The further batches are kept
as text by the service's own process (`PlanStore`: the `[serve] plans_kept` most recent plans, at most
`plans_kept_bytes`): a `tasks` call after a restart, for a plan evicted as newer ones arrived, or for another table,
is answered 404, so a client fails rather than reads part of a plan.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.catalog.rest.scan_planning import PlanCompleted, PlanTableScanRequest, RESTDataFile
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.types import DoubleType, FloatType

from indexlib.config import Config
from indexlib.handle import IndexHandle
from indexlib.lookup import LookupResult, TableState
from indexlib.pruning.residuals import client_bindable, file_residuals, nan_widened, zero_widened
from indexlib.query.model import BoundColumn
from indexlib.scans.pushdown import files_with_nan
from indexlib.service.filters import RequestFilter
from indexlib.service.names import TableName, within
from indexlib.service.vectors import Vectors
from indexlib.service.wire import Task, Unplannable, data_file, residual_text, response_text, scan_tasks, task_bytes
from indexlib.sources.base import DataFileRef
from indexlib.sources.iceberg_deletes import data_file_of, data_file_ref


class NoSuchPlanTask(LookupError):
    """A plan-task token this process does not know (restarted, evicted, or never issued)."""


@dataclass(frozen=True)
class Plan:
    """What one plan request produced: its tasks, how (`route`: "index" or "upstream"), and the file counts."""

    tasks: list[Task]
    route: str
    files_total: int | None  # the live files the index chose from (None: upstream planning, not counted)
    snapshot_id: int | None
    metadata: Any  # the table metadata the plan was made from (its partition specs and schema)
    stats_fields: frozenset[int] = frozenset()  # field ids whose statistics the files carry (`stats-fields`)
    unknown: list[str] = field(default_factory=list)  # parts of the filter pruned with as "might match"
    files: dict[int, RESTDataFile] = field(default_factory=dict)  # tasks' data files written already, by id


@dataclass(frozen=True)
class Answered:
    """A plan written: its id, the `plan` response (the first batch, and a plan task per further batch), and the
    further batches' `tasks` responses, in order."""

    table: str  # the table planned (its further batches answer only for it)
    plan_id: str
    first: str
    further: list[str]


class PlanStore:
    """The further batches of recent plans for `tasks`, as written: at most `plans_kept` plans and `kept_bytes` of
    text, the oldest plans forgotten first (the newest is kept whatever its size, so a plan's client can always
    fetch it)."""

    def __init__(self, plans_kept: int, kept_bytes: int) -> None:
        self._plans: OrderedDict[str, tuple[str, list[str]]] = OrderedDict()
        self._kept, self._kept_bytes, self._bytes = plans_kept, kept_bytes, 0
        self._lock = threading.Lock()

    def add(self, answered: Answered) -> None:
        if not answered.further:
            return
        size = sum(map(len, answered.further))
        with self._lock:
            self._plans[answered.plan_id] = (answered.table, answered.further)
            self._bytes += size
            while len(self._plans) > 1 and (len(self._plans) > self._kept or self._bytes > self._kept_bytes):
                _, (_, forgotten) = self._plans.popitem(last=False)
                self._bytes -= sum(map(len, forgotten))

    def batch(self, table: str, token: str) -> str:
        plan_id, _, number = token.rpartition(":")
        with self._lock:
            found = self._plans.get(plan_id)
        if found is None or found[0] != table or not number.isdigit() or not 0 < int(number) <= len(found[1]):
            raise NoSuchPlanTask(f"no plan task {token!r} for table {table} (expired, or the service restarted)")
        return found[1][int(number) - 1]


class _MadeFiles:
    """The data files of one table state (a source snapshot and an index snapshot) as tasks carry them: pyiceberg's
    DataFile and its wire form (no statistics: the index route sends none), made the first time a plan keeps the
    file and reused by every later plan of the same state. Both are functions of the state's own file entry (its
    path, format, size, count, spec and partition) and the state's table metadata, so a reused one is what making it
    again gives; a new snapshot of either table is a new state, with its own files. A file the wire cannot carry
    has no wire form here (None): the batch that holds it makes it, and refuses the plan, as without this cache."""

    def __init__(self, state: TableState) -> None:
        self.state = state  # the state these files are of: a plan of another state makes a new cache
        self.metadata = state.source.table.metadata  # type: ignore[attr-defined]
        self.by_path: dict[str, tuple[DataFile, RESTDataFile | None]] = {}
        self.lock = threading.Lock()

    def get(self, ref: DataFileRef) -> tuple[DataFile, RESTDataFile | None]:
        found = self.by_path.get(ref.path)
        if found is None:
            made = data_file_of(ref)
            try:
                written: RESTDataFile | None = data_file(made, self.metadata.specs(), self.metadata.schema())
            except Unplannable:
                written = None
            found = made, written
            with self.lock:
                found = self.by_path.setdefault(ref.path, found)
        return found


class Planner:
    """Plans for every table of one catalog (module docstring)."""

    def __init__(self, config: Config, catalog: Any) -> None:
        self.config = config
        self.catalog = catalog
        self._handles: OrderedDict[TableName, IndexHandle] = OrderedDict()
        self._lock = threading.Lock()
        self.index_namespace = tuple(config.index_namespace.split("."))
        self.vectors = Vectors()  # deletion vectors' blobs, by Puffin file (vectors.py)
        self._made: OrderedDict[TableName, _MadeFiles] = OrderedDict()  # per table, the newest last

    def _made_files(self, table: TableName, state: TableState) -> _MadeFiles:
        """The cache of `state`'s data files (`_MadeFiles`): one per table, of the state it was last planned from,
        for the `[serve] handles_kept` tables planned most recently (a new state replaces its table's cache)."""
        with self._lock:
            made = self._made.get(table)
            if made is None or made.state is not state:
                made = self._made[table] = _MadeFiles(state)
            self._made.move_to_end(table)
            while len(self._made) > self.config.serve.handles_kept:
                self._made.popitem(last=False)
            return made

    def load(self, table: TableName) -> Any:
        """The table as the catalog loads it; NoSuchTableError for a table of the index namespace, by the name the
        catalog itself gives the table it loaded (names.py: the path's name was checked before)."""
        loaded = self.catalog.load_table(table.identifier)
        if within(tuple(loaded.name()[:-1]), self.index_namespace, exact=True):
            raise NoSuchTableError(f"Table does not exist: {table}")
        return loaded

    def handle(self, table: TableName) -> IndexHandle:
        with self._lock:
            handle = self._handles.get(table)
            if handle is not None:
                self._handles.move_to_end(table)
                return handle
        handle = IndexHandle.for_iceberg(
            self.load(table),  # NoSuchTableError: a 404
            index_namespace=self.config.index_namespace,
            time_zone=self.config.time_zone,
            dialect=self.config.dialect,
        )
        with self._lock:
            handle = self._handles.setdefault(table, handle)
            self._handles.move_to_end(table)
            while len(self._handles) > self.config.serve.handles_kept:
                self._handles.popitem(last=False)
        return handle

    @property
    def handles_open(self) -> int:
        with self._lock:
            return len(self._handles)

    def plan(self, table: TableName, request: PlanTableScanRequest, row_filter: RequestFilter) -> Plan:
        """The plan for `request` (its own `filter` field unused: `row_filter` is the request's filter)."""
        if request.start_snapshot_id is not None or request.end_snapshot_id is not None:
            return self._incremental(table, request, row_filter)
        if request.stats_fields:
            return self._upstream(table, request, row_filter)
        handle = self.handle(table)
        state = handle.current()
        if request.snapshot_id is not None and request.snapshot_id != state.source_version:
            return self._upstream(table, request, row_filter)
        metadata = state.source.table.metadata  # type: ignore[attr-defined]
        binding = binding_schema(metadata, state.source_version, request.use_snapshot_schema)
        _check_select(binding, request)
        pruning = row_filter.pruning(binding, state.source.schema, request.case_sensitive)
        # exact names of the current schema; bound there already where the request binds in it (filters.Pruning)
        result = handle.lookup(pruning.bound if pruning.bound is not None else pruning.expression, state=state)
        reading = ReaderResiduals(metadata, binding, request.case_sensitive)
        residuals = _file_residuals(result, row_filter.residual, reading)
        try:
            return self._from_index(table, result, residuals, pruning.unknown)
        except Unplannable:
            return self._upstream(table, request, row_filter)

    def _from_index(
        self, table: TableName, result: LookupResult, residuals: dict[str, BooleanExpression], unknown: list[str]
    ) -> Plan:
        tasks = []
        files: dict[int, RESTDataFile] = {}
        io = result.source.table.io  # type: ignore[union-attr]
        made = self._made_files(table, result.state) if result.state is not None else None
        for kept in result.kept_files:
            if kept.file.partition is None:  # the index rows did not carry it: plan as the upstream would
                raise Unplannable(f"{kept.file.path}: partition unknown")
            task_residual = AlwaysTrue() if kept.all_match else residuals[kept.file.path]
            deletes = self.vectors.resolve(io, kept.file.path, tuple(d.data_file for d in kept.deletes))
            if made is not None:
                data, written = made.get(kept.file)
                if written is not None:
                    files[id(data)] = written
            else:
                data = data_file_of(kept.file)
            tasks.append(Task(data, deletes, task_residual))
        metadata = result.source.table.metadata  # type: ignore[union-attr]
        return Plan(tasks, "index", result.files_total, result.source_version, metadata, unknown=unknown, files=files)

    def _upstream(self, table: TableName, request: PlanTableScanRequest, row_filter: RequestFilter) -> Plan:
        loaded = self.load(table)
        if request.snapshot_id is not None and loaded.metadata.snapshot_by_id(request.snapshot_id) is None:
            raise ValueError(f"table {table} has no snapshot {request.snapshot_id}")
        current = loaded.metadata.current_snapshot_id
        scanned = request.snapshot_id if request.snapshot_id is not None else current
        binding = binding_schema(loaded.metadata, scanned, request.use_snapshot_schema)
        _check_select(binding, request)
        stats = _stats_ids(binding, request)
        pruning = row_filter.pruning(binding, loaded.metadata.schema(), request.case_sensitive)
        # `select` does not change which files a plan holds (and may name the snapshot's schema's columns)
        scan = loaded.scan(
            row_filter=_nan_kept(pruning.expression, loaded.metadata.schema()),
            case_sensitive=True,
            snapshot_id=request.snapshot_id,
        )
        snapshot = scan.snapshot()
        snapshot_id = snapshot.snapshot_id if snapshot else None
        reading = ReaderResiduals(loaded.metadata, binding, request.case_sensitive)
        tasks, total = self._tasks(
            table, loaded.io, scan.plan_files(), row_filter.residual, pruning.expression, reading
        )
        return Plan(tasks, "upstream", total, snapshot_id, loaded.metadata, stats, pruning.unknown)

    def _incremental(self, table: TableName, request: PlanTableScanRequest, row_filter: RequestFilter) -> Plan:
        loaded = self.load(table)
        for snapshot_id in (request.start_snapshot_id, request.end_snapshot_id):
            if snapshot_id is not None and loaded.metadata.snapshot_by_id(snapshot_id) is None:
                raise ValueError(f"table {table} has no snapshot {snapshot_id}")
        binding = binding_schema(loaded.metadata, request.end_snapshot_id, request.use_snapshot_schema)
        _check_select(binding, request)
        stats = _stats_ids(binding, request)
        pruning = row_filter.pruning(binding, loaded.metadata.schema(), request.case_sensitive)
        scan = loaded.incremental_append_scan(
            from_snapshot_id_exclusive=request.start_snapshot_id,
            to_snapshot_id_inclusive=request.end_snapshot_id,
            row_filter=_nan_kept(pruning.expression, loaded.metadata.schema()),
            case_sensitive=True,
        )
        reading = ReaderResiduals(loaded.metadata, binding, request.case_sensitive)
        tasks, total = self._tasks(
            table, loaded.io, scan.plan_files(), row_filter.residual, pruning.expression, reading
        )
        return Plan(tasks, "upstream", total, request.end_snapshot_id, loaded.metadata, stats, pruning.unknown)

    def _tasks(
        self,
        table: TableName,
        io: Any,
        planned: Any,
        residual: BooleanExpression,
        pruning: BooleanExpression,
        reading: ReaderResiduals,
    ) -> tuple[list[Task], int]:
        """pyiceberg's own tasks, narrowed by the index, each with the request's filter as residual (pyiceberg's
        residuals are bound expressions of the pruning filter; the client's whole filter is always a valid residual)
        as the reader must get it; and how many pyiceberg planned.

        The index's entries are facts about data files, whatever snapshot holds them (a file is never rewritten;
        deletes only remove rows), so the lookup of `pruning` over the planned files, as if they were the live
        ones, drops those no row of which can match and simplifies the others' residuals, as on the index route; a
        file the index has no entry for is kept, and its delete files are pyiceberg's, of the snapshot planned."""
        tasks: list[FileScanTask] = list(planned)
        result = self._index_of(table, [t.file for t in tasks], pruning)
        resolve = self.vectors.resolve
        if result is None or result.state is None:
            made = [(t, reading.of(residual, t.file.spec_id, reading.nan_prone(t.file))) for t in tasks]
        else:
            residuals = _file_residuals(result, residual, reading)
            live = result.state.live_paths
            made = [(tasks[p], residuals[live[p]]) for p in result.kept_positions]
        found = [Task(t.file, resolve(io, t.file.file_path, tuple(t.delete_files)), r) for t, r in made]
        return found, len(tasks)

    def _index_of(self, table: TableName, files: list[DataFile], pruning: BooleanExpression) -> LookupResult | None:
        """The index's lookup of `pruning` (columns named as in the current schema) over `files`; None where the
        table has no index yet."""
        handle = self.handle(table)
        current = handle.current()
        if current.rows is None or not files:
            return None
        state = TableState(current.source, [data_file_ref(f) for f in files], current.rows, None, current.index_version)
        return handle.lookup(pruning, state=state)

    def respond(self, table: TableName, plan: Plan) -> Answered:
        """The plan written: the first batch inline, the others as plan tasks for `tasks` (module docstring); every
        completed plan names a plan id (the specification requires it)."""
        texts: dict[int, str] = {}
        chunks = self._chunks(plan.tasks, texts)
        plan_id = secrets.token_urlsafe(18)
        specs, schema, stats = plan.metadata.specs(), plan.metadata.schema(), plan.stats_fields
        batches = [scan_tasks(c, specs, schema, stats_fields=stats, texts=texts, files=plan.files) for c in chunks]
        first = PlanCompleted(  # type: ignore[call-arg]  # by field name: mypy knows the aliases (service/wire.py)
            plan_id=plan_id,
            delete_files=batches[0].delete_files,
            file_scan_tasks=batches[0].file_scan_tasks,
            plan_tasks=[f"{plan_id}:{n}" for n in range(1, len(chunks))],
        )
        return Answered(str(table), plan_id, response_text(first), [response_text(batch) for batch in batches[1:]])

    def _chunks(self, tasks: list[Task], texts: dict[int, str]) -> list[list[Task]]:
        """Batches of at most `tasks_per_batch` tasks and about `max_response_bytes` (a task alone may exceed it);
        `texts` gets each residual's JSON."""
        most, budget = self.config.serve.tasks_per_batch, self.config.serve.max_response_bytes
        chunks: list[list[Task]] = [[]]
        used = 0
        for task in tasks:
            if id(task.residual) not in texts:
                texts[id(task.residual)] = residual_text(task.residual)
            size = task_bytes(task, len(texts[id(task.residual)]))
            if chunks[-1] and (len(chunks[-1]) >= most or used + size > budget):
                chunks.append([])
                used = 0
            chunks[-1].append(task)
            used += size
        return chunks


def _file_residuals(
    result: LookupResult, residual: BooleanExpression, reading: ReaderResiduals
) -> dict[str, BooleanExpression]:
    """Per kept file (by path), the request's filter simplified by what the index proves about that file
    (pruning/residuals.py: an IN list keeps the values within the file's bounds), as the client's reader must get
    it (`ReaderResiduals`)."""
    state = result.state
    if state is None:
        return {}
    positions = list(result.kept_positions)
    binding = reading.binding
    found = file_residuals(
        residual, binding, state.source.schema, state.aligned.stats, positions, reading.case_sensitive
    )
    current = {f.field_id: f for f in state.source.schema.fields}
    floating = [f for f in binding.fields if isinstance(f.field_type, FloatType | DoubleType) and f.field_id in current]
    named = [BoundColumn(f.field_id, f.name, current[f.field_id].field_type) for f in floating]
    prone = files_with_nan(result, named)  # (unknown counts: prone)
    return {
        state.live_paths[p]: reading.of(r, state.live[p].spec_id, state.live_paths[p] in prone)
        for p, r in zip(positions, found, strict=True)
    }


class ReaderResiduals:
    """A task's residual as the client's reader must get it, on every route (index and upstream): its zeros written
    for Java's order (`zero_widened`), widened for NaN where the file may hold one (`nan_widened`), and, for a file
    of a partitioned spec, with no leaf naming a column the client cannot bind in both the current and the scanned
    schema (`client_bindable`); pruning/residuals.py has each rule's argument. Each distinct residual is made once per
    plan (the wire writes each distinct residual once)."""

    def __init__(self, metadata: Any, binding: Schema, case_sensitive: bool) -> None:
        self.binding, self.current, self.case_sensitive = binding, metadata.schema(), case_sensitive
        floating = [f for f in binding.fields if isinstance(f.field_type, FloatType | DoubleType)]
        self.floating = frozenset(f.name for f in floating)
        self.floating_ids = tuple(f.field_id for f in floating)
        self.partitioned = {spec_id: bool(spec.fields) for spec_id, spec in metadata.specs().items()}
        self._made: dict[tuple[int, bool, bool], BooleanExpression] = {}
        self._kept: list[BooleanExpression] = []  # the residuals keyed by id above, alive while this is

    def of(self, residual: BooleanExpression, spec_id: int, nan_prone: bool) -> BooleanExpression:
        partitioned = self.partitioned.get(spec_id, True)
        key = (id(residual), nan_prone, partitioned)
        found = self._made.get(key)
        if found is None:
            found = zero_widened(residual, self.floating, self.case_sensitive)
            if nan_prone:
                found = nan_widened(found, self.floating, self.case_sensitive)
            if partitioned:
                found = client_bindable(found, self.binding, self.current, self.case_sensitive)
            self._made[key] = found
            self._kept.append(residual)
        return found

    def nan_prone(self, data: DataFile) -> bool:
        """Whether the manifest's counts leave room for a NaN in a floating-point column (no count: unknown)."""
        counts = data.nan_value_counts or {}
        return any(counts.get(field_id, 1) != 0 for field_id in self.floating_ids)


def _nan_kept(pruning: BooleanExpression, current: Schema) -> BooleanExpression:
    """The pruning filter for pyiceberg's own planning, keeping the files a NaN may match in: pyiceberg's manifest
    evaluator reads NaN as matching no comparison, where Spark SQL makes it greater than every number, so `x > c`
    goes to it as `x > c OR is_nan(x)` (`nan_widened`: which then keeps every file whose NaN count is not 0)."""
    floating = frozenset(f.name for f in current.fields if isinstance(f.field_type, FloatType | DoubleType))
    return nan_widened(pruning, floating)


def binding_schema(metadata: Any, snapshot_id: int | None, use_snapshot_schema: bool) -> Schema:
    """The schema a request's column names bind in: the table's current one, or with `use-snapshot-schema` the one
    snapshot `snapshot_id` was written with (Iceberg Java's `SnapshotUtil.schemaFor`: the current schema for a
    snapshot that records none)."""
    current: Schema = metadata.schema()
    snapshot = metadata.snapshot_by_id(snapshot_id) if use_snapshot_schema and snapshot_id is not None else None
    if snapshot is None or snapshot.schema_id is None or snapshot.schema_id == current.schema_id:
        return current
    for schema in metadata.schemas:
        if schema.schema_id == snapshot.schema_id:
            return schema
    raise ValueError(f"use-snapshot-schema: schema {snapshot.schema_id} of snapshot {snapshot_id} is not in the table")


def _check_select(schema: Schema, request: PlanTableScanRequest) -> None:
    """Unknown `select` columns are a bad request (the plan itself does not depend on the projection)."""
    if request.select:
        try:
            schema.select(*request.select, case_sensitive=request.case_sensitive)
        except ValueError as exc:
            raise ValueError(f"select: {exc}") from None


def _stats_ids(schema: Schema, request: PlanTableScanRequest) -> frozenset[int]:
    """The field ids `stats-fields` names (as Iceberg Java's `includeColumnStats(columns)` takes them)."""
    ids = set()
    for name in request.stats_fields or ():
        try:
            ids.add(schema.find_field(name, request.case_sensitive).field_id)
        except ValueError as exc:
            raise ValueError(f"stats-fields: {exc}") from None
    return frozenset(ids)
