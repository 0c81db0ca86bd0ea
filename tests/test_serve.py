"""`skipindex serve` end to end: a real uvicorn server on 127.0.0.1 (started here, stopped by pid) and a stock
pyiceberg `RestCatalog` with `scan-planning-mode = server`. Rows read through the service equal pyiceberg's own
scan of the upstream catalog (multiset, NULLs included) over a table with merge-on-read position deletes, schema
and partition evolution (tests/iceberg_tables.py); every response parses with pyiceberg's REST models and writes
back to the same JSON (no unknown or missing field); bad requests, bad tokens and oversized bodies get ErrorModels;
concurrent clients while builds commit see some committed state; a killed server gives errors, never wrong plans.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from iceberg_tables import batch, commit_equality_delete, make_lake, predicate, rows
from pydantic import TypeAdapter
from pyiceberg import expressions as ice
from pyiceberg.catalog.rest import ConfigResponse, ListNamespaceResponse, ListTablesResponse, RestCatalog, TableResponse
from pyiceberg.catalog.rest.response import ErrorResponse
from pyiceberg.catalog.rest.scan_planning import PlanningResponse, ScanTasks
from pyiceberg.exceptions import BadRequestError, NoSuchTableError, UnauthorizedError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from servers import HOST, Process, free_port

from indexlib.config import load_config
from indexlib.indexing.build import build_index

pytestmark = pytest.mark.servers

TOKEN = "test-token-0123456789abcdef"
SECRET = "NOT-FOR-ANY-RESPONSE-7f3a9c"  # a catalog credential in the configuration
PLANNING = TypeAdapter(PlanningResponse)


class Serve:
    """`skipindex serve` as a process on a free port of 127.0.0.1."""

    def __init__(self, conf: Path, port: int | None = None) -> None:
        self.conf, self.port = conf, port or free_port()
        self.log = conf.parent / f"serve-{self.port}.log"
        self.process: Process | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> Serve:
        env = {**os.environ, "SKIPINDEX_SERVE_TOKEN": TOKEN, "PYTHONPATH": str(Path(__file__).parents[1])}
        command = [sys.executable, "-m", "indexlib.cli", "serve", "--conf", str(self.conf), "--port", str(self.port)]
        self.process = Process("skipindex serve", command, self.log, env=env)
        self.process.wait_until(lambda: _status(f"{self.url}/health") == 200, 60, "an answer on /health")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None:
            self.process.stop(sig)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def call(
    server: Serve, method: str, path: str, body: Any = None, token: str | None = TOKEN, raw: bytes | None = None
) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(f"{server.url}{path}", data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text else None


def strictly(model: Any, payload: dict) -> Any:
    """Parse with pyiceberg's model and require the model to write back the same JSON: a field the model does not
    know would be dropped, a missing required one fails the parse."""
    adapter = model if isinstance(model, TypeAdapter) else TypeAdapter(model)
    parsed = adapter.validate_python(payload)
    again = json.loads(adapter.dump_json(parsed, by_alias=True, exclude_none=True, serialize_as_any=True))
    assert _formats(payload) <= {"avro", "parquet", "orc", "puffin"}, "file-format is the specification's lower case"
    assert _lower_formats(again) == payload, f"{payload} is not exactly a {model}"
    return parsed


def _formats(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["file-format"]} if isinstance(node.get("file-format"), str) else set()
        return own.union(*(_formats(v) for v in node.values()))
    return set().union(*(_formats(v) for v in node)) if isinstance(node, list) else set()


def _lower_formats(node: Any) -> Any:
    """pyiceberg's models write `file-format` in upper case; the specification's enum is lower case."""
    if isinstance(node, dict):
        return {k: v.lower() if k == "file-format" else _lower_formats(v) for k, v in node.items()}
    return [_lower_formats(v) for v in node] if isinstance(node, list) else node


def error_of(status: int, payload: Any, expected_status: int, expected_type: str) -> str:
    assert status == expected_status, payload
    error = strictly(ErrorResponse, payload).error
    assert (error.code, error.type) == (expected_status, expected_type), payload
    assert "\n" not in error.message and SECRET not in error.message and TOKEN not in error.message
    return error.message


def served_catalog(root: Path, extra: str = "", name: str = "test") -> tuple[Path, Any, Any]:
    """A configuration in `root` (a SQLite catalog `name` holding the namespace `db`, a catalog credential the service
    must never echo, and `extra` TOML), its loaded Config and its catalog."""
    conf = root / "conf.toml"
    conf.write_text(
        f'[catalog]\nname = "{name}"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'
        f'"s3.secret-access-key" = "{SECRET}"\n{extra}'
    )
    config = load_config(conf)
    catalog = config.load_catalog()
    catalog.create_namespace("db")
    return conf, config, catalog


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Path, Any]:
    conf, config, catalog = served_catalog(
        tmp_path_factory.mktemp("serve"), "[serve]\ntasks_per_batch = 3\nmax_request_bytes = 65536\n"
    )
    make_lake(config, catalog)
    return conf, catalog


@pytest.fixture(scope="module")
def server(lake) -> Serve:
    serve = Serve(lake[0]).start()
    yield serve
    serve.stop()
    log = serve.log.read_text()
    assert TOKEN not in log and SECRET not in log, "a secret reached the service's log"


def client(server: Serve) -> RestCatalog:
    return RestCatalog("served", uri=server.url, token=TOKEN, **{"scan-planning-mode": "server"})


def test_config_and_catalog_reads_match_the_specification(server, lake):
    status, payload = call(server, "GET", "/v1/config")
    assert status == 200
    assert set(payload) == {"defaults", "overrides", "endpoints"}  # pyiceberg's model writes endpoints as objects
    endpoints = ConfigResponse.model_validate(payload).endpoints
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan" in {str(e) for e in endpoints}
    strictly(ListNamespaceResponse, call(server, "GET", "/v1/namespaces")[1])
    tables = strictly(ListTablesResponse, call(server, "GET", "/v1/namespaces/db/tables")[1])
    assert [(t.namespace, t.name) for t in tables.identifiers] == [(("db",), "t")]
    loaded = strictly(TableResponse, call(server, "GET", "/v1/namespaces/db/tables/t")[1])
    upstream = lake[1].load_table("db.t")
    assert loaded.metadata_location == upstream.metadata_location and loaded.metadata == upstream.metadata
    assert SECRET not in json.dumps(payload)
    rest = client(server)
    assert rest.table_exists("db.t") and not rest.table_exists("db.nope") and rest.namespace_exists("db")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=predicate())
def test_rows_through_the_service_equal_the_upstream_scan(server, lake, drawn):
    _, expression = drawn
    served = client(server).load_table("db.t")
    upstream = lake[1].load_table("db.t")
    assert rows(served.scan(row_filter=expression).to_arrow()) == rows(upstream.scan(row_filter=expression).to_arrow())


def test_duckdb_and_deletes(server, lake):
    served, upstream = client(server).load_table("db.t"), lake[1].load_table("db.t")
    tasks = list(served.scan().plan_files())
    assert sum(len(t.delete_files) for t in tasks) >= 3, "the merge-on-read delete files reach the client"
    for expression in (ice.AlwaysTrue(), ice.GreaterThan("id", 100), ice.IsNull("k")):
        con = served.scan(row_filter=expression).to_duckdb("t")
        got = Counter(con.execute("SELECT * FROM t").fetchall())
        expected = Counter(tuple(r.values()) for r in upstream.scan(row_filter=expression).to_arrow().to_pylist())
        assert got == expected


def test_the_service_makes_server_side_planning_the_default(server):
    plain = RestCatalog("plain", uri=server.url, token=TOKEN)  # no scan-planning-mode of its own
    assert plain.supports_server_side_planning()
    chosen = RestCatalog("chosen", uri=server.url, token=TOKEN, **{"scan-planning-mode": "client"})
    assert not chosen.supports_server_side_planning()


def test_case_insensitive_filters(server, lake):
    served, upstream = client(server).load_table("db.t"), lake[1].load_table("db.t")
    expression = ice.Or(ice.EqualTo("ID", 505), ice.IsNull("Name"))
    got = served.scan(row_filter=expression, case_sensitive=False).to_arrow()
    assert rows(got) == rows(upstream.scan(row_filter=expression, case_sensitive=False).to_arrow())
    with pytest.raises(BadRequestError):
        list(served.scan(row_filter=expression).plan_files())


def test_the_index_prunes(server, lake):
    served = client(server).load_table("db.t")
    total = len(list(lake[1].load_table("db.t").scan().plan_files()))
    kept = list(served.scan(row_filter=ice.EqualTo("id", 505)).plan_files())
    assert 0 < len(kept) < total
    status, text = _metrics(server)
    assert status == 200 and 'skipindex_plans_total{route="index"}' in text


def _metrics(server: Serve) -> tuple[int, str]:
    request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read().decode()


def test_plans_pinned_to_older_snapshots(server, lake):
    served, upstream = client(server).load_table("db.t"), lake[1].load_table("db.t")
    for snapshot in upstream.snapshots():
        for expression in (ice.AlwaysTrue(), ice.LessThan("id", 250)):
            got = served.scan(row_filter=expression, snapshot_id=snapshot.snapshot_id).to_arrow()
            expected = upstream.scan(row_filter=expression, snapshot_id=snapshot.snapshot_id).to_arrow()
            assert rows(got) == rows(expected), snapshot.snapshot_id


def test_incremental_scan_is_pyiceberg_own(server, lake):
    upstream = lake[1].load_table("db.t")
    first, last = upstream.snapshots()[0].snapshot_id, upstream.current_snapshot().snapshot_id
    body = {"start-snapshot-id": first, "end-snapshot-id": last, "filter": {"type": "gt", "term": "id", "value": 5}}
    status, payload = call(server, "POST", "/v1/namespaces/db/tables/t/plan", body)
    assert status == 200
    plan = strictly(PLANNING, payload)
    paths = {t.data_file.file_path for t in plan.file_scan_tasks}
    for token in plan.plan_tasks:
        paths |= {t.data_file.file_path for t in _batch(server, token).file_scan_tasks}
    scan = upstream.incremental_append_scan(
        from_snapshot_id_exclusive=first, to_snapshot_id_inclusive=last, row_filter=ice.GreaterThan("id", 5)
    )
    assert paths == {t.file.file_path for t in scan.plan_files()}


def _batch(server: Serve, token: str) -> ScanTasks:
    status, payload = call(server, "POST", "/v1/namespaces/db/tables/t/tasks", {"plan-task": token})
    assert status == 200, payload
    return strictly(ScanTasks, payload)


def test_plan_and_task_responses_are_exactly_the_models(server):
    status, payload = call(
        server, "POST", "/v1/namespaces/db/tables/t/plan", {"filter": {"type": "not-null", "term": "k"}}
    )
    assert status == 200
    plan = strictly(PLANNING, payload)
    assert plan.status == "completed" and plan.plan_tasks, "8 files in batches of 3: further batches as plan tasks"
    batches = [plan, *(_batch(server, token) for token in plan.plan_tasks)]
    assert [len(b.file_scan_tasks) for b in batches] == [3, 3, 2]
    for b in batches:
        for task in b.file_scan_tasks:
            assert task.residual_filter == ice.NotNull("k")


def test_bad_requests_tokens_and_sizes(server):
    plan = "/v1/namespaces/db/tables/t/plan"
    error_of(*call(server, "GET", "/v1/config", token=None), 401, "NotAuthorizedException")
    error_of(*call(server, "POST", plan, {}, token="wrong-token-0123456789"), 401, "NotAuthorizedException")
    error_of(*call(server, "POST", plan, raw=b"{not json"), 400, "BadRequestException")
    error_of(*call(server, "POST", plan, {"snapshot-id": "x"}), 400, "BadRequestException")
    assert "frobnicate" in error_of(*call(server, "POST", plan, {"frobnicate": 1}), 400, "BadRequestException")
    missing = {"filter": {"type": "eq", "term": "no_such_column", "value": 1}}
    assert "no_such_column" in error_of(*call(server, "POST", plan, missing), 400, "BadRequestException")
    error_of(*call(server, "POST", plan, {"snapshot-id": 12345}), 400, "BadRequestException")
    error_of(*call(server, "POST", plan, {"select": ["nope"]}), 400, "BadRequestException")
    error_of(*call(server, "POST", "/v1/namespaces/db/tables/nope/plan", {}), 404, "NoSuchTableException")
    tasks = "/v1/namespaces/db/tables/t/tasks"
    error_of(*call(server, "POST", tasks, {"plan-task": "forged:1"}), 404, "NoSuchPlanTaskException")
    huge = {"filter": {"type": "in", "term": "id", "values": list(range(20000))}}
    error_of(*call(server, "POST", plan, huge), 413, "BadRequestException")
    error_of(*call(server, "POST", "/v1/namespaces/db/tables", {"name": "x"}), 501, "NotImplementedException")
    error_of(*call(server, "DELETE", "/v1/namespaces/db/tables/t"), 501, "NotImplementedException")
    with pytest.raises(UnauthorizedError):
        RestCatalog("bad", uri=server.url, token="wrong-token-0123456789")
    rest = client(server)
    with pytest.raises(NoSuchTableError):
        rest.load_table("db.nope")
    with pytest.raises(NotImplementedError):
        rest.drop_table("db.t")
    with pytest.raises(BadRequestError):
        list(rest.load_table("db.t").scan(row_filter=ice.EqualTo("nope", 1)).plan_files())
    assert _status(f"{server.url}/health") == 200


def test_a_plan_names_the_equality_deletes_that_apply_to_each_task(server, lake):
    """Equality delete files are planned as Iceberg plans them: each task names those that apply to its data file
    (a later data sequence number, the same partition or an unpartitioned spec), with their equality field ids,
    for the engine to apply (Iceberg Java does); a client that cannot apply them refuses them itself (pyiceberg's
    NotImplementedError), never reads the rows they delete."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    table = lake[1].create_table("db.upserts", schema=schema)
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}, schema=schema))
    commit_equality_delete(table, 2)
    table = lake[1].load_table("db.upserts")
    table.append(pa.table({"id": pa.array([2], pa.int64())}, schema=schema))  # after the delete: not deleted
    status, payload = call(server, "POST", "/v1/namespaces/db/tables/upserts/plan", {})
    assert status == 200, payload
    plan = strictly(PLANNING, payload)
    deletes = [d for d in plan.delete_files or [] if d.content == "equality-deletes"]
    assert len(deletes) == 1 and deletes[0].equality_ids == [1], "the equality delete, with its field ids"
    by_records = {t.data_file.record_count: t.delete_file_references or [] for t in plan.file_scan_tasks or []}
    assert set(by_records) == {3, 1}, "two data files"
    assert by_records[3] == [plan.delete_files.index(deletes[0])], "the delete applies to the older file"
    assert by_records[1] == [], "not to the file written after it"
    with pytest.raises(NotImplementedError, match="equality deletes"):
        list(client(server).load_table("db.upserts").scan().plan_files())


def test_a_killed_server_gives_errors_never_wrong_plans(lake):
    conf, catalog = lake
    expected = rows(catalog.load_table("db.t").scan(row_filter=ice.GreaterThan("id", 20)).to_arrow())
    serve = Serve(conf).start()
    outcomes: Counter[str] = Counter()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                table = client(serve).load_table("db.t")
                got = rows(table.scan(row_filter=ice.GreaterThan("id", 20)).to_arrow())
            except Exception:  # refused connections, a plan task the restarted server never issued, ...
                outcomes["error"] += 1
                continue
            outcomes["right" if got == expected else "wrong"] += 1

    def answered(deadline_s: float = 300.0) -> None:
        """Wait (polling, a generous deadline for a loaded machine) until a reader got one more right answer."""
        before, deadline = outcomes["right"], time.monotonic() + deadline_s
        while outcomes["right"] == before and time.monotonic() < deadline:
            time.sleep(0.05)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    try:
        for thread in threads:
            thread.start()
        answered()  # the readers are being served
        serve.stop(signal.SIGKILL)
        time.sleep(0.5)  # requests meanwhile meet a dead port
        serve.start()  # the same port
        answered()  # and are served again by the new process
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        serve.stop()
    assert outcomes["wrong"] == 0 and outcomes["error"] > 0 and outcomes["right"] > 0, outcomes


def plan_workers(pid: int) -> set[int]:
    """The plan worker processes of the service `pid` (its spawned children; the resource tracker is not one)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):  # a process that ended while read
            continue
        if ppid == pid and b"spawn_main" in command:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_plan_workers_die_come_back_and_never_outlive_the_service(lake):
    """Plans run in `[serve] plan_workers` processes (2 by default). A worker killed (out of memory, kill -9)
    costs the requests it held a 503, never a wrong plan, and the workers start again; workers exit with the
    service, even one killed with SIGKILL (they watch their parent)."""
    conf, catalog = lake
    expression = ice.GreaterThan("id", 20)
    expected = rows(catalog.load_table("db.t").scan(row_filter=expression).to_arrow())
    serve = Serve(conf).start()
    try:
        pid = serve.process.pid
        _wait(lambda: len(plan_workers(pid)) == 2, 60, "two plan workers by default")
        first = plan_workers(pid)
        assert rows(client(serve).load_table("db.t").scan(row_filter=expression).to_arrow()) == expected
        for worker in first:
            os.kill(worker, signal.SIGKILL)
        _wait(lambda: not any(map(_alive, first)), 10, "the killed workers are gone")
        statuses = [call(serve, "POST", "/v1/namespaces/db/tables/t/plan", {})[0] for _ in range(3)]
        assert statuses[0] in (503, 200) and statuses[1:] == [200, 200], f"503 for the broken workers: {statuses}"
        assert rows(client(serve).load_table("db.t").scan(row_filter=expression).to_arrow()) == expected
        again = plan_workers(pid)
        assert len(again) == 2 and not again & first, "the workers were started again"
    finally:
        serve.stop(signal.SIGKILL)
    _wait(lambda: not any(map(_alive, again)), 10, "no plan worker outlives its service")


def test_one_process_service_when_plan_workers_is_zero(lake):
    """`plan_workers = 0`: the service plans in its own threads, with the same answers."""
    conf, catalog = lake
    single = conf.parent / "one-process.toml"
    single.write_text(conf.read_text() + "plan_workers = 0\n")  # the [serve] section is the file's last
    serve = Serve(single).start()
    try:
        for expression in (ice.GreaterThan("id", 20), ice.IsNull("k"), ice.AlwaysTrue()):
            upstream = catalog.load_table("db.t").scan(row_filter=expression).to_arrow()
            assert rows(client(serve).load_table("db.t").scan(row_filter=expression).to_arrow()) == rows(upstream)
        assert not plan_workers(serve.process.pid)
    finally:
        serve.stop()


def test_concurrent_clients_while_builds_commit(server, lake):
    """Readers plan and read while the table gets appends and the index is rebuilt: every answer equals the
    upstream's rows at one of the table's committed snapshots, and none fails."""
    conf, catalog = lake
    config = load_config(conf)
    expression = ice.GreaterThanOrEqual("id", 460)
    answers: list[Counter] = []
    failures: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        rest = client(server)
        while not stop.is_set():
            try:
                answers.append(rows(rest.load_table("db.t").scan(row_filter=expression).to_arrow()))
            except Exception as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        table = catalog.load_table("db.t")
        for n in range(3):
            data = batch(1000 + 100 * n, 10, 1)
            data = data.rename_columns(["id", "g", "k", "f", "name"]).cast(table.schema().as_arrow())
            table.append(data)
            build_index(config, "db.t")
            table = catalog.load_table("db.t")
            time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    table = catalog.load_table("db.t")
    committed = [
        rows(table.scan(row_filter=expression, snapshot_id=s.snapshot_id).to_arrow()) for s in table.snapshots()
    ]
    assert not failures, failures[:3]
    assert answers and all(answer in committed for answer in answers)
    assert len({tuple(sorted(a.items())) for a in answers}) > 1, "the readers saw the table change"


# --- the whole request: filters pyiceberg cannot parse, use-snapshot-schema, stats-fields, the index namespace ---


def _files_with_rows(table: Any, snapshot_id: int | None = None) -> dict[str, list[dict]]:
    """Brute force: every live file of the upstream's own unpruned scan with its rows (deletes applied), columns by
    the current schema's names."""
    from pyiceberg.io.pyarrow import ArrowScan

    scan = table.scan(snapshot_id=snapshot_id)
    reader = ArrowScan(table.metadata, table.io, table.schema(), ice.AlwaysTrue())
    return {task.file.file_path: reader.to_table([task]).to_pylist() for task in scan.plan_files()}


def _planned(server: Serve, body: dict, table: str = "t") -> tuple[set[str], list[dict]]:
    """The files of a plan asked over raw HTTP (every batch) and its tasks as JSON."""
    status, payload = call(server, "POST", f"/v1/namespaces/db/tables/{table}/plan", body)
    assert status == 200, payload
    tasks = list(payload["file-scan-tasks"])
    for token in payload.get("plan-tasks", []):
        status, more = call(server, "POST", f"/v1/namespaces/db/tables/{table}/tasks", {"plan-task": token})
        assert status == 200, more
        tasks += more["file-scan-tasks"]
    return {t["data-file"]["file-path"] for t in tasks}, tasks


def _transform(name: str, value: Any) -> Any:
    from pyiceberg.transforms import parse_transform
    from pyiceberg.types import LongType

    return None if value is None else parse_transform(name).transform(LongType())(value)


def _truth(node: Any, row: dict, unknown: dict[str, bool]) -> bool | None:
    """The filter's value on `row` under SQL's three-valued logic, by the specification's meaning (transforms by
    pyiceberg's transform functions); a leaf of a type no one knows takes its value from `unknown`."""
    if isinstance(node, bool):
        return node
    kind = node["type"]
    if kind in ("true", "false"):
        return kind == "true"
    if kind == "future-op":
        return unknown[node["name"]]
    if kind == "not":
        child = _truth(node["child"], row, unknown)
        return None if child is None else not child
    if kind in ("and", "or"):
        left, right = _truth(node["left"], row, unknown), _truth(node["right"], row, unknown)
        decisive = kind == "or"
        if decisive in (left, right):
            return decisive
        return None if None in (left, right) else not decisive
    term = node["term"]
    value = row[term] if isinstance(term, str) else _transform(term["transform"], row[term["term"]])
    if kind == "is-null":
        return value is None
    if kind == "not-null":
        return value is not None
    if value is None:
        return None
    if kind in ("in", "not-in"):
        return (value in node["values"]) == (kind == "in")
    literal = node["value"]["value"] if isinstance(node["value"], dict) else node["value"]
    return {
        "eq": value == literal,
        "not-eq": value != literal,
        "lt": value < literal,
        "gt-eq": value >= literal,
    }[kind]


def _futures(node: Any) -> list[str]:
    if not isinstance(node, dict):
        return []
    own = [node["name"]] if node["type"] == "future-op" else []
    return own + [n for key in ("left", "right", "child") if key in node for n in _futures(node[key])]


def _must_keep(files: dict[str, list[dict]], node: Any) -> set[str]:
    """Files with a row the filter may be TRUE for (every value of the unknown leaves tried)."""
    names = _futures(node)
    assignments = [dict(zip(names, bits, strict=True)) for bits in itertools.product((False, True), repeat=len(names))]
    return {
        path for path, found in files.items() if any(_truth(node, row, a) is True for row in found for a in assignments)
    }


def _filters() -> Any:
    from hypothesis import strategies as st

    ids = st.sampled_from([0, 15, 120, 250, 333, 455, 505, 529, 1000, 1205])
    ops = st.sampled_from(["eq", "not-eq", "lt", "gt-eq"])
    known = st.one_of(
        st.builds(lambda op, v: {"type": op, "term": "id", "value": v}, ops, ids),
        st.builds(lambda vs: {"type": "in", "term": "id", "values": vs}, st.lists(ids, min_size=1, max_size=3)),
        st.builds(lambda v: {"type": "eq", "term": "g", "value": v}, st.sampled_from([0, 1, 2])),
        st.just({"type": "is-null", "term": "k"}),
        st.builds(lambda op, v: {"type": op, "term": "id", "value": {"type": "literal", "value": v}}, ops, ids),
    )
    transformed = st.one_of(
        st.builds(
            lambda op, t, v: {"type": op, "term": {"type": "transform", "transform": t, "term": "id"}, "value": v},
            ops,
            st.sampled_from(["bucket[4]", "identity"]),
            st.sampled_from([0, 1, 2, 3, 505]),
        ),
        st.builds(
            lambda op, v: {
                "type": op,
                "term": {"type": "transform", "transform": "truncate[100]", "term": "id"},
                "value": v,
            },
            ops,
            st.sampled_from([0, 100, 400, 500]),
        ),
    )
    other = st.one_of(
        st.sampled_from([True, False, {"type": "true"}, {"type": "false"}]),
        st.builds(lambda n: {"type": "future-op", "name": f"u{n}", "term": "id"}, st.integers(0, 2)),
    )
    leaves = st.one_of(known, transformed, other)
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(lambda c: {"type": "not", "child": c}, inner),
            st.builds(lambda k, a, b: {"type": k, "left": a, "right": b}, st.sampled_from(["and", "or"]), inner, inner),
        ),
        max_leaves=6,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node=_filters())
def test_filters_pyiceberg_cannot_parse_keep_every_file_with_a_matching_row(server, lake, node):
    """Transform terms, `{"type": "true"}`, literal objects and unknown expression types, under NOT, AND and OR, over
    raw HTTP: the plan keeps every file of the upstream's unpruned scan holding a row the filter is TRUE for (by the
    specification's meaning), and every task's residual is the client's filter as it was sent, or (simplified by the
    file's statistics, pruning/residuals.py) one TRUE on exactly the rows of that file the filter is TRUE on."""
    files = _files_with_rows(lake[1].load_table("db.t"))
    planned, tasks = _planned(server, {"filter": node})
    assert _must_keep(files, node) <= planned, node
    names = _futures(node)
    assignments = [dict(zip(names, bits, strict=True)) for bits in itertools.product((False, True), repeat=len(names))]
    for task in tasks:
        residual = task.get("residual-filter", True)  # none: TRUE (an unfiltered plan, or an all-match file)
        if residual == node:
            continue
        for row, unknown in itertools.product(files[task["data-file"]["file-path"]], assignments):
            assert (_truth(residual, row, unknown) is True) == (_truth(node, row, unknown) is True), (
                f"the residual {residual} selects other rows of its file than the filter {node}: {row}"
            )


def test_unparseable_filters_still_prune_with_what_they_say(server, lake):
    files = _files_with_rows(lake[1].load_table("db.t"))
    bucket = {"type": "eq", "term": {"type": "transform", "transform": "bucket[4]", "term": "id"}, "value": 1}
    point = {"type": "eq", "term": "id", "value": 505}
    for node, pruned in (
        ({"type": "and", "left": bucket, "right": point}, True),  # AND: the known half prunes
        ({"type": "not", "child": {"type": "or", "left": bucket, "right": {"type": "not", "child": point}}}, True),
        ({"type": "not", "child": bucket}, False),  # NOT (unknown) is unknown: every file
        ({"type": "or", "left": bucket, "right": point}, False),
        ({"type": "and", "left": {"type": "true"}, "right": point}, True),
        ({"type": "future-op", "name": "u0"}, False),
    ):
        planned, tasks = _planned(server, {"filter": node})
        assert _must_keep(files, node) <= planned
        assert (len(planned) < len(files)) == pruned, node
        assert all(t["residual-filter"] == node for t in tasks)


def test_malformed_filters_are_bad_requests(server):
    plan = "/v1/namespaces/db/tables/t/plan"
    for node in (42, "id = 1", [], {"term": "id"}, {"type": "and", "left": True}, {"type": "not"}):
        assert "filter" in error_of(*call(server, "POST", plan, {"filter": node}), 400, "BadRequestException")
    missing = {"type": "eq", "term": {"type": "transform", "transform": "day", "term": "nope"}, "value": 1}
    assert "nope" in error_of(*call(server, "POST", plan, {"filter": missing}), 400, "BadRequestException")
    error_of(*call(server, "POST", plan, raw=b"[1]"), 400, "BadRequestException")
    deep: Any = {"type": "eq", "term": "id", "value": 505}
    for _ in range(400):  # a left-deep OR chain as engines push long OR lists down: deeper parts are unknown
        deep = {"type": "or", "left": deep, "right": {"type": "eq", "term": "id", "value": 1}}
    status, payload = call(server, "POST", plan, {"filter": deep})
    assert status in (200, 413), payload


def test_use_snapshot_schema_binds_names_of_the_snapshot_scanned(server, lake):
    """Column `s` was renamed `name`: a plan pinned to a snapshot before the rename with `use-snapshot-schema`
    (what Iceberg Java sends when time travelling) binds `s`; without it, `s` is not a column."""
    from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest

    upstream = lake[1].load_table("db.t")
    before = [s for s in upstream.snapshots() if "s" in upstream.schemas()[s.schema_id].column_names][-1]
    rest = client(server)
    files = _files_with_rows(upstream, before.snapshot_id)
    expression = ice.And(ice.EqualTo("s", "ab"), ice.EqualTo("id", 105))
    request = PlanTableScanRequest(
        snapshot_id=before.snapshot_id, filter=expression, use_snapshot_schema=True, select=["id", "s"]
    )
    planned = {t.file.file_path for t in rest.plan_scan(("db", "t"), request)}
    matching = {p for p, found in files.items() if any((r["name"], r["id"]) == ("ab", 105) for r in found)}
    assert matching and matching <= planned < set(files)
    with pytest.raises(BadRequestError):
        rest.plan_scan(("db", "t"), PlanTableScanRequest(snapshot_id=before.snapshot_id, filter=ice.EqualTo("s", "ab")))
    # the current snapshot's schema is the current one here: the index answers it either way
    current = upstream.current_snapshot().snapshot_id
    with_schema = PlanTableScanRequest(snapshot_id=current, filter=ice.EqualTo("name", "ab"), use_snapshot_schema=True)
    without = PlanTableScanRequest(filter=ice.EqualTo("name", "ab"))
    assert {t.file.file_path for t in rest.plan_scan(("db", "t"), with_schema)} == {
        t.file.file_path for t in rest.plan_scan(("db", "t"), without)
    }


def test_stats_fields_send_the_manifests_statistics_of_those_fields(server, lake):
    from pyiceberg.conversions import from_bytes

    upstream = lake[1].load_table("db.t")
    truth = {t.file.file_path: t.file for t in upstream.scan().plan_files()}
    body = {"filter": {"type": "gt-eq", "term": "id", "value": 400}, "stats-fields": ["id", "name"]}
    status, payload = call(server, "POST", "/v1/namespaces/db/tables/t/plan", body)
    assert status == 200
    tasks = strictly(PLANNING, payload).file_scan_tasks
    assert tasks
    schema = upstream.schema()
    for task in tasks:
        sent, manifest = task.data_file, truth[task.data_file.file_path]
        assert sent.value_counts.to_dict() == {k: v for k, v in manifest.value_counts.items() if k in (1, 5)}
        assert sent.null_value_counts.to_dict() == {k: v for k, v in manifest.null_value_counts.items() if k in (1, 5)}
        assert sent.column_sizes is None or set(sent.column_sizes.keys) <= {1, 5}
        lower = {k: from_bytes(schema.find_type(k), v) for k, v in manifest.lower_bounds.items() if k in (1, 5)}
        assert sent.lower_bounds.to_dict() == lower
    no_stats = call(server, "POST", "/v1/namespaces/db/tables/t/plan", {"filter": body["filter"]})[1]
    assert all("value-counts" not in t["data-file"] for t in no_stats["file-scan-tasks"])
    bad = {"stats-fields": ["nope"]}
    assert "nope" in error_of(*call(server, "POST", "/v1/namespaces/db/tables/t/plan", bad), 400, "BadRequestException")


def test_the_index_namespace_is_not_served(server, lake):
    from pyiceberg.exceptions import NoSuchNamespaceError

    index_tables = lake[1].list_tables("skipindex")
    assert index_tables, "the lake is indexed: the namespace exists upstream"
    rest = client(server)
    assert ("skipindex",) not in rest.list_namespaces() and ("db",) in rest.list_namespaces()
    assert not rest.namespace_exists("skipindex")
    with pytest.raises(NoSuchNamespaceError):
        rest.list_tables("skipindex")
    with pytest.raises(NoSuchNamespaceError):
        rest.load_namespace_properties("skipindex")
    name = ".".join(index_tables[0])
    assert not rest.table_exists(name)
    with pytest.raises(NoSuchTableError):
        rest.load_table(name)
    path = f"/v1/namespaces/skipindex/tables/{index_tables[0][-1]}/plan"
    error_of(*call(server, "POST", path, {}), 404, "NoSuchTableException")


def test_a_null_identity_partition_value_travels_as_json_null(server, lake):
    """A file whose identity partition value is NULL is planned with `null` in its partition tuple, which Iceberg
    Java's single-value parser reads as NULL (Spark SQL through the service): the service used to answer every plan of
    such a table with an error. (pyiceberg 0.12's own client model still refuses the null when it parses the plan.)"""
    conf, catalog = lake
    catalog.create_namespace("parts")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
    upstream = catalog.create_table(
        "parts.regions",
        schema=Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType())),
        partition_spec=PartitionSpec(
            PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
        ),
    )
    upstream.append(pa.table({"id": [1, 2, 3, 4], "region": ["eu", None, "us", None]}, schema=schema))
    build_index(load_config(conf), "parts.regions")
    plan = "/v1/namespaces/parts/tables/regions/plan"
    for body, expected in (
        ({}, [["eu"], [None], ["us"]]),
        ({"filter": {"type": "is-null", "term": "region"}}, [[None]]),
    ):
        status, payload = call(server, "POST", plan, body)
        assert status == 200, payload
        partitions = [task["data-file"]["partition"] for task in payload["file-scan-tasks"]]
        assert sorted(partitions, key=str) == sorted(expected, key=str), f"{body}: each file's partition, NULL as null"
