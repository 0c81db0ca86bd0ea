"""`skipindex serve` under hostile clients (issue 39): a real server on 127.0.0.1 (tests/test_serve.py's `Serve`),
clients that send what no well-behaved engine sends. Every attempt gets a bounded, correct answer or a clear 4xx,
and `/health`, asked from another client meanwhile, keeps answering within `HEALTH_BOUND` (the event loop is never
held). Loops are bounded in count and time; the rows read through the service are checked against pyiceberg's own
scan of the upstream catalog (as in test_serve.py).

Classes of attempt: path and name tricks (whitespace, case, Unicode, '.', `%2F`, `%1F`), oversized and deeply nested
bodies, long paths and headers, slow and silent clients, forged and replayed plan tasks, credentials repeated or
spelt differently, non-JSON numbers, WebSocket upgrades; then property-based fuzzing of every route of the
service's own OpenAPI document. Concurrent plans while builds commit, and a server killed with SIGKILL, are
test_serve.py's.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_tables import SCHEMA, batch, make_lake, rows
from pyiceberg import expressions as ice
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from servers import HOST
from test_serve import PLANNING, SECRET, TOKEN, Serve, call, client, error_of, strictly

from indexlib.config import load_config

pytestmark = pytest.mark.servers

HEALTH_BOUND = 1.0  # seconds: /health's latency while hostile requests run (a stalled loop took 10 s)
IDLE, REQUEST = 1, 2  # [serve] idle_timeout_seconds, request_timeout_seconds of this server
MAX_REQUEST, MAX_RESPONSE, HANDLES_KEPT = 65536, 262144, 2
RESPONSE_BOUND = MAX_RESPONSE + 64 * 1024  # no answer is larger (a batch's estimate may run over by a task)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("hostile")
    conf = root / "conf.toml"
    conf.write_text(
        '[catalog]\nname = "test"\ntype = "sql"\nuri = "sqlite:///catalog.db"\nwarehouse = "warehouse"\n'
        f'"s3.secret-access-key" = "{SECRET}"\n[serve]\ntasks_per_batch = 3\nmax_request_bytes = {MAX_REQUEST}\n'
        f"max_response_bytes = {MAX_RESPONSE}\nhandles_kept = {HANDLES_KEPT}\nidle_timeout_seconds = {IDLE}\n"
        f"request_timeout_seconds = {REQUEST}\nplan_workers = 1\n"  # one worker: /metrics shows its handle cache
    )
    config = load_config(conf)
    catalog = config.load_catalog()
    catalog.create_namespace("db", {"primary.key": "id", "owner": "lake-team", "password": SECRET})
    make_lake(config, catalog)
    for name in ("u", "v"):  # two more tables: more tables planned than handles kept
        catalog.create_table(f"db.{name}", SCHEMA).append(batch(0, 10, 1))
    return conf, catalog


@pytest.fixture(scope="module")
def server(lake) -> Iterator[Serve]:
    serve = Serve(lake[0]).start()
    yield serve
    serve.stop()
    log = serve.log.read_text()
    assert TOKEN not in log and SECRET not in log, "a secret reached the service's log"
    assert max(map(len, log.splitlines())) < 20_000, "a log line is bounded (16 KiB of message)"


def _health_seconds(server: Serve) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(f"{server.url}/health", timeout=30) as response:
        assert response.status == 200
    return time.perf_counter() - started


@contextmanager
def health_watched(server: Serve) -> Iterator[list[float]]:
    """/health asked every 50 ms from another client while the block runs; its latencies must stay under
    HEALTH_BOUND (asserted when the block ends)."""
    latencies: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            latencies.append(_health_seconds(server))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield latencies
    finally:
        stop.set()
        watcher.join(60)
    assert latencies and max(latencies) < HEALTH_BOUND, f"/health took {max(latencies):.2f} s: the loop was held"


def _raw(server: Serve, data: bytes, timeout: float = 30) -> bytes:
    """`data` sent on a fresh connection; everything the server answers until it closes or stays silent."""
    with socket.create_connection((HOST, server.port), timeout=timeout) as sock:
        received = b""
        try:
            sock.sendall(data)
            while chunk := sock.recv(65536):
                received += chunk
                if b"\r\n\r\n" in received and b"connection: close" not in received.lower():
                    head, _, rest = received.partition(b"\r\n\r\n")
                    length = [
                        int(v)
                        for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")[1:])
                        if k.lower() == b"content-length"
                    ]
                    if length and len(rest) >= length[0]:
                        break
        except (TimeoutError, ConnectionResetError, BrokenPipeError):  # refused while the request was still sent
            pass
    return received


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def test_long_paths_and_echoed_tokens_do_not_hold_the_loop(server):
    """The quadratic redaction of issue 39: a 65 KB path stalled /health 10 s, a 500 KB plan-task token 5 minutes.
    Now the path is refused before any route (a head over max_header_bytes: 431, or h11's 400), the token's 404
    message is cut to 1,000 characters, and /health answers throughout."""
    with health_watched(server):
        for length in (65_000, 300_000):
            answer = _raw(server, b"GET /" + b"a" * length + b" HTTP/1.1\r\nhost: x\r\n\r\n")
            assert _status(answer) in (400, 431), answer[:200]
        for token in ("a" * 500_000, "a:" * 30_000 + "@", "user:" + "p" * 60_000 + "@host"):
            status, payload = call(server, "POST", "/v1/namespaces/db/tables/t/tasks", {"plan-task": token[:60_000]})
            message = error_of(status, payload, 404, "NoSuchPlanTaskException")
            assert len(message) < 1_200, "an error message echoes at most 1,000 characters of the request"


HIDDEN_SPELLINGS = [
    ("skipindex%20", "trailing whitespace: pyiceberg's catalog strips each level"),
    ("%20skipindex", "leading whitespace"),
    ("skipindex%09", "a tab is whitespace too"),
    ("SKIPINDEX", "case: some catalogs fold it (the check folds it too)"),
    ("SkipIndex", "mixed case"),
    ("%EF%BD%93kipindex", "a full-width 's' (NFKC reads it as 's')"),
    ("skipindex.sub", "a level holding '.' is two levels to the catalog"),
    ("skipindex%1Fsub", "a namespace under the index namespace"),
]


@pytest.mark.parametrize("spelling, rule", HIDDEN_SPELLINGS)
def test_the_index_namespace_is_hidden_whatever_its_spelling(server, lake, spelling, rule):
    index_table = lake[1].list_tables("skipindex")[0][-1]
    for method, path, body in (
        ("GET", f"/v1/namespaces/{spelling}/tables", None),
        ("GET", f"/v1/namespaces/{spelling}", None),
        ("GET", f"/v1/namespaces/{spelling}/tables/{index_table}", None),
        ("POST", f"/v1/namespaces/{spelling}/tables/{index_table}/plan", {}),
    ):
        status, payload = call(server, method, path, body)
        assert status == 404, f"{method} {path}: {rule}: {payload}"
    listed = call(server, "GET", "/v1/namespaces")[1]["namespaces"]
    assert all(ns[0].strip().casefold() != "skipindex" for ns in listed)


def test_a_stock_client_cannot_load_an_index_table(server, lake):
    index_table = lake[1].list_tables("skipindex")[0][-1]
    rest = client(server)
    for namespace in ("skipindex ", " skipindex", "SKIPINDEX"):
        with pytest.raises(NoSuchTableError):
            rest.load_table((namespace, index_table))
        with pytest.raises(NoSuchNamespaceError):
            rest.list_tables((namespace,))


def _handles_open(server: Serve) -> int:
    request = urllib.request.Request(f"{server.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
    (count,) = [int(line.split()[1]) for line in text.splitlines() if line.startswith("skipindex_handles_open{")]
    return count  # of the one plan worker


def test_spellings_of_a_name_share_one_handle_and_handles_are_bounded(server, lake):
    """Issue 39 point 3: every spelling of `db` opened a handle (~1.5 MB) without bound. Names are read as the
    catalog reads them before the cache, and the cache keeps `handles_kept` tables."""
    expected = rows(lake[1].load_table("db.t").scan(row_filter=ice.EqualTo("id", 505)).to_arrow())
    for n in range(30):
        spelling = " " * (n % 5) + "db" + " " * (n // 5)
        status, _ = call(server, "POST", f"/v1/namespaces/{quote(spelling)}/tables/t/plan", {})
        assert status == 200
        assert _handles_open(server) == 1, f"{spelling!r} is db: one handle"
    served = RestCatalog("s", uri=server.url, token=TOKEN, **{"scan-planning-mode": "server"})
    assert rows(served.load_table(("db  ", "t")).scan(row_filter=ice.EqualTo("id", 505)).to_arrow()) == expected
    for table in ("u", "v", "t", "u"):
        assert call(server, "POST", f"/v1/namespaces/db/tables/{table}/plan", {})[0] == 200
    assert _handles_open(server) == HANDLES_KEPT, "the least recently used handle is dropped"


def test_a_large_filter_is_not_amplified_into_one_answer(server, lake):
    """Issue 39 point 4: a filter repeated as every task's residual made one answer of files x filter. Each answer
    now holds at most about max_response_bytes (further batches carry the rest), no task's residual is larger
    than the whole filter (each is simplified by its file's statistics), and the rows are pyiceberg's."""
    keys = list(range(0, 60_000, 7))  # ~55 KB of JSON, under max_request_bytes
    node = {
        "type": "or",
        "left": {"type": "in", "term": "id", "values": keys},
        "right": {"type": "gt", "term": "id", "value": 0},
    }
    body = json.dumps({"filter": node}).encode()
    assert len(body) < MAX_REQUEST
    request = urllib.request.Request(f"{server.url}/v1/namespaces/db/tables/t/plan", data=body, method="POST")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with health_watched(server), urllib.request.urlopen(request, timeout=60) as response:
        first = response.read()
    assert len(first) < RESPONSE_BOUND, f"one answer of {len(first)} bytes"
    plan = strictly(PLANNING, json.loads(first))
    assert plan.plan_tasks, "the other tasks are further batches"
    sizes = []
    for token in plan.plan_tasks:
        status, payload = call(server, "POST", "/v1/namespaces/db/tables/t/tasks", {"plan-task": token})
        assert status == 200
        sizes.append(len(json.dumps(payload)))
        for task in payload["file-scan-tasks"]:  # the filter simplified for its file (pruning/residuals.py)
            residual = task.get("residual-filter")
            assert residual is None or len(json.dumps(residual)) <= len(json.dumps(node))
    assert max(sizes) < RESPONSE_BOUND
    expression = ice.Or(ice.In("id", keys), ice.GreaterThan("id", 0))
    served = client(server).load_table("db.t")
    assert rows(served.scan(row_filter=expression).to_arrow()) == rows(
        lake[1].load_table("db.t").scan(row_filter=expression).to_arrow()
    )


def test_silent_and_slow_clients_are_disconnected(server):
    """Issue 39 point 5: 200 idle sockets were held 20 s. A connection that sends nothing is closed after
    idle_timeout_seconds; one that trickles its head or its body gets 408 after request_timeout_seconds."""
    started = time.monotonic()
    sockets = [socket.create_connection((HOST, server.port), timeout=IDLE + REQUEST + 5) for _ in range(50)]
    try:
        with health_watched(server):
            for sock in sockets:
                assert sock.recv(1) == b"", "an idle connection is closed by the server"
        assert time.monotonic() - started < IDLE + 3
    finally:
        for sock in sockets:
            sock.close()
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    for head, trickled in (
        (b"", b"GET /v1/config HTTP/1.1\r\nhost: x\r\n" + auth + b"\r\n"),  # the head, a byte at a time
        (
            b"POST /v1/namespaces/db/tables/t/plan HTTP/1.1\r\nhost: x\r\n" + auth + b"content-length: 100\r\n\r\n",
            b"{" * 100,
        ),
    ):
        with socket.create_connection((HOST, server.port), timeout=REQUEST + 5) as sock:
            sock.sendall(head)
            began, answer = time.monotonic(), b""
            try:
                for byte in trickled:
                    sock.sendall(bytes([byte]))
                    time.sleep(0.25)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                while chunk := sock.recv(4096):
                    answer += chunk
            except (ConnectionResetError, TimeoutError):
                pass
            assert time.monotonic() - began < REQUEST + 2, "a trickling request is cut at request_timeout_seconds"
            assert _status(answer) in (0, 408), answer[:200]


@pytest.mark.parametrize(
    "headers, expected, rule",
    [
        ([f"Bearer {TOKEN}", f"Bearer {TOKEN}"], 400, "two Authorization headers are refused, never the last wins"),
        ([f"Bearer {TOKEN}", "Bearer wrong-token-0123456789"], 400, "nor the first"),
        ([f"bearer {TOKEN}"], 200, "the scheme is case-insensitive (RFC 9110)"),
        ([f"BEARER {TOKEN}"], 200, "the scheme is case-insensitive (RFC 9110)"),
        ([f"Bearer  {TOKEN}"], 200, "spaces around the token"),
        ([f"Basic {TOKEN}"], 401, "another scheme"),
        ([TOKEN], 401, "no scheme"),
        ([f"Bearer {TOKEN}x"], 401, "a longer token"),
        ([], 401, "none"),
    ],
)
def test_credentials(server, headers, expected, rule):
    head = "".join(f"Authorization: {value}\r\n" for value in headers)
    answer = _raw(server, f"GET /v1/config HTTP/1.1\r\nhost: x\r\n{head}connection: close\r\n\r\n".encode())
    assert _status(answer) == expected, rule


def test_non_json_numbers_are_refused_and_answers_are_json(server):
    plan = "/v1/namespaces/db/tables/t/plan"
    for literal in ("NaN", "Infinity", "-Infinity", "1e999"):
        raw = f'{{"filter": {{"type": "eq", "term": "f", "value": {literal}}}}}'.encode()
        message = error_of(*call(server, "POST", plan, raw=raw), 400, "BadRequestException")
        assert "JSON" in message or "range" in message, literal


def test_every_completed_plan_names_its_plan_id(server):
    plan = "/v1/namespaces/db/tables/t/plan"
    for body, rule in (
        ({"filter": {"type": "eq", "term": "id", "value": -5}}, "an empty plan"),
        ({"filter": {"type": "eq", "term": "id", "value": 505}}, "a plan of one batch"),
        ({}, "a plan of several batches"),
    ):
        status, payload = call(server, "POST", plan, body)
        assert status == 200 and payload.get("plan-id"), rule
        assert strictly(PLANNING, payload).status == "completed"


def test_namespace_properties_hide_credentials_only(server):
    status, payload = call(server, "GET", "/v1/namespaces/db")
    assert status == 200
    properties = payload["properties"]
    assert properties["primary.key"] == "id", "a schema's key is not a credential"
    assert properties["owner"] == "lake-team"
    assert properties["password"] == "***", "a credential name is hidden"
    assert SECRET not in json.dumps(payload)


def test_an_encoded_slash_is_part_of_a_name(server):
    """`%2F` was decoded before routing: GET .../tables/t%2Fplan reached the plan route (501)."""
    status, payload = call(server, "GET", "/v1/namespaces/db/tables/t%2Fplan")
    assert "t/plan" in error_of(status, payload, 404, "NoSuchTableException")
    status, payload = call(server, "GET", "/v1/namespaces/db%2Fx/tables")
    error_of(status, payload, 404, "NoSuchNamespaceException")


def test_websocket_upgrades_are_refused(server):
    upgrade = (
        "GET /v1/config HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
        "sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    )
    for auth in ("", f"authorization: Bearer {TOKEN}\r\n"):
        answer = _raw(server, f"{upgrade}{auth}\r\n".encode(), timeout=5)
        assert _status(answer) != 101, "no WebSocket is served"
    assert _status(_raw(server, f"{upgrade}\r\n".encode(), timeout=5)) == 401


def test_forged_and_replayed_plan_tasks(server):
    status, payload = call(server, "POST", "/v1/namespaces/db/tables/t/plan", {})
    token = payload["plan-tasks"][0]
    plan_id = token.rpartition(":")[0]
    tasks = "/v1/namespaces/db/tables/t/tasks"
    assert call(server, "POST", tasks, {"plan-task": token}) == call(server, "POST", tasks, {"plan-task": token})
    for forged, rule in (
        (f"{plan_id}:0", "batch 0 went out with the plan"),
        (f"{plan_id}:-1", "not a batch number"),
        (f"{plan_id}:99", "past the last batch"),
        (f"{plan_id}x:1", "another plan id"),
        (":1", "no plan id"),
        ("", "empty"),
    ):
        status, payload = call(server, "POST", tasks, {"plan-task": forged})
        assert status == 404, f"{forged!r}: {rule}"
        error_of(status, payload, 404, "NoSuchPlanTaskException")
    error_of(
        *call(server, "POST", "/v1/namespaces/db/tables/u/tasks", {"plan-task": token}), 404, "NoSuchPlanTaskException"
    )
    for bad in ({}, {"plan-task": 1}, {"plan-task": token, "x": 1}):
        assert call(server, "POST", tasks, bad)[0] == 400


def test_oversized_and_deeply_nested_bodies(server):
    plan = "/v1/namespaces/db/tables/t/plan"
    with health_watched(server):
        error_of(*call(server, "POST", plan, raw=b"[" * (MAX_REQUEST + 1)), 413, "BadRequestException")
        for raw in (b"[" * 30_000 + b"]" * 30_000, b'{"filter":' * 5_000 + b"1" + b"}" * 5_000):
            status, payload = call(server, "POST", plan, raw=raw)
            assert status == 400, payload
        deep: Any = {"type": "eq", "term": "id", "value": 1}
        for _ in range(900):
            deep = {"type": "not", "child": deep}
        status, payload = call(server, "POST", plan, {"filter": deep})
        assert status in (200, 400), payload


# --- fuzzing from the service's own OpenAPI document ---


HOSTILE_TEXT = st.one_of(
    st.sampled_from(["db", "t", "skipindex", "SKIPINDEX", " skipindex", "db\x1fx", "a/b", "..", ".", "%2F", "\x00"]),
    st.text(min_size=0, max_size=40),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "a:", ":", "a@", " ", "%"]), st.integers(1, 3000)),
)
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        HOSTILE_TEXT,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(HOSTILE_TEXT, inner, max_size=4)),
    max_leaves=12,
)


def _operations(server: Serve) -> list[tuple[str, str, dict]]:
    status, document = call(server, "GET", "/openapi.json")
    assert status == 200
    return [
        (path, method.upper(), operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def _body(operation: dict) -> Any:
    """Bodies of the operation's schema's fields (some valid, most not) and arbitrary JSON."""
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return st.none()
    fields = list(schema.get("properties", {}))
    return st.one_of(JSON_VALUES, st.dictionaries(st.sampled_from(fields), JSON_VALUES, max_size=len(fields)))


def test_fuzzing_every_route_of_the_openapi_document(server, lake):
    """Drawn from /openapi.json: every operation, its path parameters from hostile text, its body from its schema's
    fields with arbitrary JSON values. No answer is a 5xx or larger than RESPONSE_BOUND, every one is JSON (or
    empty), and /health answers within HEALTH_BOUND meanwhile."""
    operations = _operations(server)
    assert {"/v1/namespaces/{namespace}/tables/{table}/plan", "/v1/namespaces/{namespace}/tables/{table}/tasks"} <= {
        path for path, _, _ in operations
    }

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        path, method, operation = data.draw(st.sampled_from(operations))
        for parameter in ("namespace", "table"):
            path = path.replace(f"{{{parameter}}}", quote(data.draw(HOSTILE_TEXT, parameter) or "x", safe=""))
        body = data.draw(_body(operation), "body")
        request = urllib.request.Request(
            f"{server.url}{path}", data=None if body is None else json.dumps(body).encode(), method=method
        )
        request.add_header("Authorization", f"Bearer {TOKEN}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read()
        assert status < 500, (method, path, body, text[:300])
        assert len(text) < RESPONSE_BOUND
        if text and path != "/metrics":
            json.loads(text)  # strict JSON: no NaN, no Infinity

    with health_watched(server):
        fuzz()
    expression = ice.GreaterThan("id", 20)  # and plans stay correct afterwards
    served, upstream = client(server).load_table("db.t"), lake[1].load_table("db.t")
    assert rows(served.scan(row_filter=expression).to_arrow()) == rows(upstream.scan(row_filter=expression).to_arrow())
