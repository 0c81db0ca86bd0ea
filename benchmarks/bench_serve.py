"""The planning service (`skipindex serve`) against pyiceberg's client-side planning, side by side in one run.

A real `skipindex serve` process on a free port of 127.0.0.1 (started here, stopped by its pid), clients in
separate processes (forked, one per concurrent client, so a client's own parsing does not share the benchmark's
GIL), each with its own keep-alive connection.

1. **Plan latency at lake scale**: the tables of `bench_lookup_scale.py` (N small Parquet files registered with
   `add_files`, indexed with the build's own per-file indexer and index writer), at `--files` (default 10,000 and
   100,000). Per query (`=` on the sorted key; `IN` of 10 random-valued keys each held by one file), with 1 and 8
   concurrent clients, two kinds of client:
   - **pyiceberg**: a stock `RestCatalog` with `scan-planning-mode = server`, timing
     `table.scan(row_filter=...).plan_files()` (request, response parse, `FileScanTask`s: what a user pays);
   - **raw HTTP**: a POST of the exact body pyiceberg sends (`PlanTableScanRequest.model_dump_json(by_alias=True,
     exclude_none=True)`) on a persistent `http.client` connection, the response read whole (the service's part).
   Latencies are p50 / p99 over every request of every client after a warm-up, the clients released together.
   Against: pyiceberg's client-side `plan_files` on the same table through the upstream SQLite catalog (the median of
   `--plan-runs`, one client). The rows of both plans, read with `to_arrow`, must be equal (asserted).
2. **End to end**: pyiceberg `scan(row_filter=...).to_arrow()` with the table loaded through the service (server-side
   planning) against the same scan through the upstream catalog (client-side planning), on the tables of the query
   benchmark (`bench_query.py`: TPC-H lineitem SF 3 in 200 files by `l_shipdate`, the service-log table of 200
   shards; index built by `skipindex build` in a fresh process) and its seven queries; plan time alone both ways,
   and zero row differences (multiset, DuckDB `EXCEPT ALL` both ways; asserted).

    python benchmarks/bench_serve.py            # the issue's sizes (10,000 / 100,000 files; SF 3 and 200 shards)
    python benchmarks/bench_serve.py --quick    # toy sizes, a smoke run of about a minute

Prints Markdown tables for docs/benchmarks.md, and the load average before and after each part (the machine is
shared).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from bench_lookup_scale import _make_table
from bench_query import _build, _events, _lineitem, median_of
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest
from pyiceberg.expressions import BooleanExpression, In

from indexlib.config import load_config
from indexlib.handle import open_handle
from indexlib.pruning.iceberg_filter import to_iceberg_filter
from indexlib.query.binding import bind
from indexlib.query.normalize import normalize
from indexlib.query.sql import parse_where
from indexlib.scans.pyiceberg import row_filter

HOST = "127.0.0.1"
TOKEN = "bench-serve-token-0123456789abcdef"  # a throwaway token for the loopback server this script starts
REPO = Path(__file__).resolve().parents[1]
SCALE_TABLE = "bench.events"  # bench_lookup_scale's table
QUERY_TABLE = "bench.small"  # bench_query's tables
CLIENT_KINDS = ("pyiceberg", "raw HTTP")


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class Server:
    """`skipindex serve --conf conf` on a free loopback port, this checkout's `indexlib` first on the path."""

    def __init__(self, conf: Path) -> None:
        self.conf, self.port = conf, _free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = conf.parent / f"serve-{self.port}.log"
        env = {**os.environ, "SKIPINDEX_SERVE_TOKEN": TOKEN, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "indexlib.cli", "serve", "--conf", str(conf), "--port", str(self.port)]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=conf.parent
            )
        deadline = time.monotonic() + 120
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"skipindex serve did not answer on /health:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        """SIGTERM to its pid, SIGKILL to the same pid if it is still there after 20 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def catalog(self) -> RestCatalog:
        return RestCatalog("served", uri=self.url, token=TOKEN, **{"scan-planning-mode": "server"})


def _plan_body(expression: BooleanExpression) -> bytes:
    """The body pyiceberg's RestCatalog sends for `table.scan(row_filter=expression).plan_files()`."""
    request = PlanTableScanRequest(filter=expression, case_sensitive=True)
    return request.model_dump_json(by_alias=True, exclude_none=True).encode()


def _client(
    kind: str,
    url: str,
    table: str,
    expression: BooleanExpression,
    warmup: int,
    requests: int,
    barrier: Any,
    out: Any,
) -> None:
    """One client process: `warmup` plans, then (all clients released together) `requests` timed plans; sends the
    latencies and the files of its last plan to `out`."""
    if kind == "pyiceberg":
        served = RestCatalog("served", uri=url, token=TOKEN, **{"scan-planning-mode": "server"}).load_table(table)

        def plan() -> int:
            return len(list(served.scan(row_filter=expression).plan_files()))

    else:
        namespace, name = table.split(".")
        path = f"/v1/namespaces/{namespace}/tables/{name}/plan"
        body = _plan_body(expression)
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        connection = http.client.HTTPConnection(HOST, int(url.rsplit(":", 1)[1]), timeout=120)

        def plan() -> int:
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            payload = response.read()
            if response.status != 200:
                raise RuntimeError(f"plan answered {response.status}: {payload[:500]!r}")
            return len(payload)

    for _ in range(warmup):
        plan()
    barrier.wait()
    latencies, answer = [], 0
    for _ in range(requests):
        started = time.perf_counter()
        answer = plan()
        latencies.append(time.perf_counter() - started)
    out.send((latencies, answer))
    out.close()


@dataclass
class Latency:
    files: int
    query: str
    kind: str
    clients: int
    p50: float
    p99: float
    throughput: float  # plans per second, all clients together


def _latency(
    server: Server, files: int, label: str, expression: BooleanExpression, kind: str, clients: int, samples: int
) -> Latency:
    context = multiprocessing.get_context("fork")  # the imports are done: clients start in milliseconds
    barrier = context.Barrier(clients + 1)
    requests = max(samples // clients, 10)
    pipes, processes = [], []
    for _ in range(clients):
        receive, send = context.Pipe(duplex=False)
        process = context.Process(
            target=_client, args=(kind, server.url, SCALE_TABLE, expression, 3, requests, barrier, send)
        )
        process.start()
        send.close()
        pipes.append(receive)
        processes.append(process)
    barrier.wait(timeout=600)
    started = time.perf_counter()
    results = [pipe.recv() for pipe in pipes]
    wall = time.perf_counter() - started
    for process in processes:
        process.join(60)
        if process.exitcode != 0:
            raise RuntimeError(f"a {kind} client exited with {process.exitcode}")
    latencies = np.array([t for times, _ in results for t in times])
    p50, p99 = np.percentile(latencies, [50, 99])
    return Latency(files, label, kind, clients, float(p50), float(p99), len(latencies) / wall)


def _scale_queries(data: dict[str, pa.Table], files: int, rows: int) -> list[tuple[str, str]]:
    """`=` on the sorted key (one file), and `IN` of 10 `part_key`s (random values: min/max prunes nothing), each
    taken from a different file's rows."""
    rng = np.random.default_rng(29)
    tables = list(data.values())
    chosen = rng.choice(len(tables), 10, replace=False)
    keys = sorted(int(tables[n].column("part_key")[int(rng.integers(0, rows))].as_py()) for n in chosen)
    return [
        ("=", f"order_key = {files * rows // 2 + 3}"),
        ("IN 10", f"part_key IN ({', '.join(map(str, keys))})"),
    ]


def _rows_differ(a: pa.Table, b: pa.Table) -> int:
    """Rows in one table and not the other, as multisets (DuckDB `EXCEPT ALL` both ways; NULLs equal)."""
    con = duckdb.connect()
    con.register("a", a)
    con.register("b", b.select(a.column_names))
    return sum(
        con.execute(f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL SELECT * FROM {y})").fetchone()[0]
        for x, y in (("a", "b"), ("b", "a"))
    )


@dataclass
class ScaleRow:
    files: int
    query: str
    where: str
    client_plan: float
    client_kept: int
    served_kept: int
    rows: int
    latencies: list[Latency] = field(default_factory=list)


def plan_latency(
    root: Path, files: int, rows: int, samples: int, plan_runs: int, concurrency: list[int]
) -> list[ScaleRow]:
    directory = root / f"scale-{files}"
    directory.mkdir()
    started = time.perf_counter()
    conf, data, _ = _make_table(directory, files, rows, np.random.default_rng(7), None)
    print(f"\n{files:,} files: table and index made in {time.perf_counter() - started:,.0f} s", flush=True)
    upstream = load_config(conf).load_catalog().load_table(SCALE_TABLE)
    server = Server(conf)
    out = []
    try:
        served = server.catalog().load_table(SCALE_TABLE)
        for label, where in _scale_queries(data, files, rows):
            expression = to_iceberg_filter(bind(normalize(parse_where(where)), upstream.schema(), SCALE_TABLE))
            client_kept = len(list(upstream.scan(row_filter=expression).plan_files()))
            client_plan = median_of(plan_runs, lambda e=expression: list(upstream.scan(row_filter=e).plan_files()))
            served_kept = len(list(served.scan(row_filter=expression).plan_files()))
            got, expected = (t.scan(row_filter=expression).to_arrow() for t in (served, upstream))
            differ = _rows_differ(got, expected)
            assert differ == 0 and got.num_rows == expected.num_rows, f"{files} files, {where}: {differ} rows differ"
            row = ScaleRow(files, label, where, client_plan, client_kept, served_kept, got.num_rows)
            for clients in concurrency:
                for kind in CLIENT_KINDS:
                    row.latencies.append(_latency(server, files, label, expression, kind, clients, samples))
                    print(f"  {files} {label} {kind} x{clients}: done (load {_load()})", file=sys.stderr, flush=True)
            out.append(row)
    finally:
        server.stop()
    return out


@dataclass
class EndToEnd:
    table: str
    query: str
    where: str
    total_files: int
    client_s: float
    served_s: float
    client_plan_s: float
    served_plan_s: float
    client_files: int
    served_files: int
    rows: int


class Replay:
    """A loopback HTTP server that answers with the recorded answers of a real `skipindex serve` (its config, one
    table's load, one plan), instantly and whatever the request: what a stock pyiceberg client pays on its own side
    (the request, the answer's transfer and parse into tasks) when the service's part costs nothing."""

    def __init__(self, server: Server, table: str, plan_body: bytes) -> None:
        namespace, name = table.split(".")
        table_path = f"/v1/namespaces/{namespace}/tables/{name}"
        self.answers = {
            ("GET", "/v1/config"): _get(server, "/v1/config"),
            ("GET", table_path): _get(server, table_path),
            ("POST", f"{table_path}/plan"): json.dumps(_post(server, f"{table_path}/plan", plan_body)).encode(),
        }
        answers = self.answers

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the service's

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                found = answers.get((self.command, self.path.split("?")[0]))
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(found or b"")))
                self.end_headers()
                self.wfile.write(found or b"")

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def catalog(self) -> RestCatalog:
        return RestCatalog("replayed", uri=self.url, token=TOKEN, **{"scan-planning-mode": "server"})

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _get(server: Server, path: str) -> bytes:
    request = urllib.request.Request(f"{server.url}{path}")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read()


def in_list(root: Path, files: int, rows: int, keys: int, runs: int) -> None:
    """An IN of `keys` keys on bench_lookup_scale's table of `files` files, two ways: `order_key` (sorted across the
    files: each file's bounds hold a few of the keys) and `part_key` (random: every file's bounds span every key,
    only the Bloom filters tell the files apart; keys taken from the rows of random files). pyiceberg `plan_files()`
    through the service (request, answer, parse: end to end) against client-side; the service's part alone (every
    batch asked over HTTP and read, not parsed into pyiceberg's tasks: the rest is the client's parse); the client's
    own part (the same answer replayed by a server that costs nothing, `Replay`: what the service's part must stay
    under to match client-side planning); and the answer's bytes against what they would be with the whole list as every task's residual. Rows asserted equal."""
    directory = root / f"in-list-{files}"
    directory.mkdir()
    conf, data, _ = _make_table(directory, files, rows, np.random.default_rng(7), None)
    upstream = load_config(conf).load_catalog().load_table(SCALE_TABLE)
    rng = np.random.default_rng(11)
    part_keys = pa.concat_tables(list(data.values())).column("part_key").to_numpy()
    expressions = {
        "order_key (sorted)": In("order_key", sorted(int(k) for k in rng.choice(files * rows, keys, replace=False))),
        "part_key (random)": In("part_key", sorted({int(k) for k in rng.choice(part_keys, keys, replace=False)})),
    }
    server = Server(conf)
    lines = []
    try:
        served = server.catalog().load_table(SCALE_TABLE)
        for name, expression in expressions.items():
            got, expected = (t.scan(row_filter=expression).to_arrow() for t in (served, upstream))
            assert _rows_differ(got, expected) == 0 and got.num_rows == expected.num_rows, "rows differ"
            client_kept = len(list(upstream.scan(row_filter=expression).plan_files()))
            kept = len(list(served.scan(row_filter=expression).plan_files()))
            client_s = median_of(runs, lambda e=expression: list(upstream.scan(row_filter=e).plan_files()))
            served_s = median_of(runs, lambda e=expression: list(served.scan(row_filter=e).plan_files()))
            raw_s = median_of(runs, lambda e=expression: _answer_bytes(server, e))
            sent, untrimmed = _answer_bytes(server, expression)
            replay = Replay(server, SCALE_TABLE, _plan_body(expression))
            try:
                replayed = replay.catalog().load_table(SCALE_TABLE)
                assert len(list(replayed.scan(row_filter=expression).plan_files())) == kept, "the replay differs"
                floor_s = median_of(runs, lambda e=expression, t=replayed: list(t.scan(row_filter=e).plan_files()))
            finally:
                replay.stop()
            lines.append(
                f"| {files:,} | {name} | {client_kept:,} / {kept:,} | {_ms(client_s)} ms | {_ms(served_s)} ms "
                f"| {_ms(raw_s)} ms | {_ms(floor_s)} ms | {_ms(max(client_s - floor_s, 0))} ms "
                f"| {client_s / served_s:.2f}x | {sent:,} | {untrimmed:,} | {got.num_rows:,} |"
            )
    finally:
        server.stop()
    print(f"\nIN of {keys:,} keys, {files:,} files of {rows} rows, median of {runs}:")
    print(
        "\n| files | column | files kept: client-side / service | plan_files() client-side | through the service "
        "| of which the service's part (raw HTTP) | the client's own part (an instant server) | what is left for the "
        "service to match client-side | speed-up | answer bytes | with the whole list per task | rows |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(lines))


def health_under_attack(root: Path, seconds: float) -> None:
    """/health's latency, asked every 20 ms by one client, first on a quiet service, then for `seconds` while hostile
    clients run at once (each in its own thread, in a loop): 65 KB paths without a token (the request line once
    held the loop 10 s), 1 MB plan filters with the token, plans of an IN of 1,000 keys, 200 idle sockets that never
    send a request, and clients trickling their headers a byte at a time. Issue 39's target: under 100 ms."""
    directory = root / "health"
    directory.mkdir()
    conf, _, _ = _make_table(directory, 400, 25, np.random.default_rng(7), None)
    server = Server(conf)
    base = f"/v1/namespaces/{SCALE_TABLE.replace('.', '/tables/')}"
    stop = threading.Event()
    done: dict[str, int] = {}

    def looping(name: str, action: Callable[[], object]) -> threading.Thread:
        def run() -> None:
            while not stop.is_set():
                # refused, timed out or cut: what a hostile client gets
                with contextlib.suppress(OSError, urllib.error.URLError, http.client.HTTPException):
                    action()
                done[name] = done.get(name, 0) + 1

        return threading.Thread(target=run, daemon=True)

    def long_path() -> None:
        urllib.request.urlopen(f"{server.url}/{'a' * 65_000}", timeout=30).read()

    big = _plan_body(In("order_key", list(range(0, 2_000_000, 17))[:110_000]))  # ~1 MB

    def big_filter() -> None:
        _post(server, f"{base}/plan", big)

    keys = _plan_body(In("order_key", sorted(int(k) for k in np.random.default_rng(3).choice(10_000, 1_000))))

    def in_1000() -> None:
        _post(server, f"{base}/plan", keys)

    def idle_sockets() -> None:
        held = [socket.create_connection((HOST, server.port), timeout=30) for _ in range(200)]
        stop.wait(5)
        for held_socket in held:
            held_socket.close()

    def trickle() -> None:
        with socket.create_connection((HOST, server.port), timeout=30) as slow:
            for byte in b"GET /health HTTP/1.1\r\nHost: x\r\n":
                if stop.is_set():
                    return
                slow.sendall(bytes([byte]))
                time.sleep(0.2)

    def latencies(for_seconds: float) -> list[float]:
        found = []
        deadline = time.monotonic() + for_seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            with urllib.request.urlopen(f"{server.url}/health", timeout=30) as response:
                response.read()
            found.append(time.perf_counter() - started)
            time.sleep(0.02)
        return found

    attacks = {
        "65 KB paths": long_path,
        "1 MB filters": big_filter,
        "IN 1,000 plans": in_1000,
        "200 idle sockets": idle_sockets,
        "trickled headers": trickle,
    }

    def attacked_by(names: list[str], for_seconds: float) -> list[float]:
        stop.clear()
        threads = [looping(name, attacks[name]) for name in names]
        for thread in threads:
            thread.start()
        found = latencies(for_seconds)
        stop.set()
        for thread in threads:
            thread.join(60)
        return found

    results: list[tuple[str, list[float]]] = []
    try:
        results.append(("quiet", latencies(min(seconds, 10))))
        for name in attacks:
            results.append((f"{name} alone", attacked_by([name], max(seconds / 5, 5))))
        results.append(("all at once", attacked_by(list(attacks), seconds)))
    finally:
        stop.set()
        server.stop()

    def row(name: str, found: list[float]) -> str:
        ordered = sorted(found)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return f"| {name} | {len(found):,} | {_ms(ordered[len(ordered) // 2])} | {_ms(p99)} | {_ms(ordered[-1])} |"

    counts = ", ".join(f"{k}: {v:,}" for k, v in done.items())
    print(f"\n/health every 20 ms: quiet, under each attack alone, then all at once for {seconds:.0f} s ({counts}):")
    print("\n| service | /health answers | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
    for name, found in results:
        print(row(name, found))


def _answer_bytes(server: Server, expression: BooleanExpression) -> tuple[int, int]:
    """Bytes of every batch of the plan, and the same with the whole filter as each task's residual."""
    base = f"/v1/namespaces/{SCALE_TABLE.replace('.', '/tables/')}"
    whole = len(expression.model_dump_json(serialize_as_any=True))
    sent = untrimmed = 0
    answers = [_post(server, f"{base}/plan", _plan_body(expression))]
    for token in answers[0].get("plan-tasks", []):
        answers.append(_post(server, f"{base}/tasks", json.dumps({"plan-task": token}).encode()))
    for answer in answers:
        size = len(json.dumps(answer, separators=(",", ":")))
        residuals = [
            len(json.dumps(t.get("residual-filter"), separators=(",", ":"))) for t in answer["file-scan-tasks"]
        ]
        sent, untrimmed = sent + size, untrimmed + size + whole * len(residuals) - sum(residuals)
    return sent, untrimmed


def _post(server: Server, path: str, body: bytes) -> dict:
    request = urllib.request.Request(f"{server.url}{path}", data=body, method="POST")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def _timed(runs: int, action: Callable[[], object]) -> float:
    """A warm-up, then the median of `runs` (3 when one takes over a second), as bench_query times."""
    started = time.perf_counter()
    action()
    return median_of(min(runs, 3) if time.perf_counter() - started > 1.0 else runs, action)


def end_to_end(name: str, directory: Path, make: Callable[[Path], tuple], runs: int) -> list[EndToEnd]:
    directory.mkdir()
    started = time.perf_counter()
    conf, paths, queries, _ = make(directory)
    made = time.perf_counter() - started
    build_s = _build(conf)
    print(f"\n{name}: {len(paths)} files; made in {made:.0f} s, indexed in {build_s:.0f} s", flush=True)
    config = load_config(conf)
    upstream = config.load_catalog().load_table(QUERY_TABLE)
    handle = open_handle(config, QUERY_TABLE)  # only to turn each WHERE into pyiceberg's exact row filter
    server = Server(conf)
    out = []
    try:
        served = server.catalog().load_table(QUERY_TABLE)
        for label, where in queries:
            expression = row_filter(handle.lookup(where))
            got = served.scan(row_filter=expression).to_arrow()
            expected = upstream.scan(row_filter=expression).to_arrow()
            differ = _rows_differ(got, expected)
            assert differ == 0 and got.num_rows == expected.num_rows, f"{name} {where}: {differ} rows differ"
            out.append(
                EndToEnd(
                    name,
                    label,
                    where,
                    len(paths),
                    client_s=_timed(runs, lambda e=expression: upstream.scan(row_filter=e).to_arrow()),
                    served_s=_timed(runs, lambda e=expression: served.scan(row_filter=e).to_arrow()),
                    client_plan_s=_timed(runs, lambda e=expression: list(upstream.scan(row_filter=e).plan_files())),
                    served_plan_s=_timed(runs, lambda e=expression: list(served.scan(row_filter=e).plan_files())),
                    client_files=len(list(upstream.scan(row_filter=expression).plan_files())),
                    served_files=len(list(served.scan(row_filter=expression).plan_files())),
                    rows=got.num_rows,
                )
            )
            print(f"  {name} {label}: done (load {_load()})", file=sys.stderr, flush=True)
    finally:
        server.stop()
    return out


def _print_latency(rows: list[ScaleRow], concurrency: list[int]) -> None:
    print("\n### Plan latency over HTTP against client-side `plan_files`\n")
    head = " | ".join(f"{kind} x{c}: p50 / p99 ms (plans/s)" for c in concurrency for kind in CLIENT_KINDS)
    print(f"| files | query | client-side plan_files ms | {head} | files kept: client-side / service | rows | target |")
    print("|---:|---|---:|" + "---:|" * (len(concurrency) * len(CLIENT_KINDS)) + "---:|---:|---|")
    for row in rows:
        cells = " | ".join(f"{c.p50 * 1e3:,.1f} / {c.p99 * 1e3:,.1f} ({c.throughput:,.0f})" for c in row.latencies)
        print(
            f"| {row.files:,} | {row.query} | {_ms(row.client_plan)} | {cells} | {row.client_kept:,} / "
            f"{row.served_kept:,} | {row.rows:,} | {_latency_target(row)} |"
        )
    print("\nQueries: " + "; ".join(dict.fromkeys(f"{r.query}: `{r.where}` ({r.files:,} files)" for r in rows)))


def _latency_target(row: ScaleRow) -> str:
    """Issue 29: at 100,000 files, `=` over HTTP at 8 clients p50 <= 50 ms and p99 <= 150 ms."""
    if row.query != "=" or row.files < 100_000:
        return ""
    at8 = [c for c in row.latencies if c.clients == 8]
    return ", ".join(f"{c.kind}: {'met' if c.p50 <= 0.050 and c.p99 <= 0.150 else 'MISSED'}" for c in at8)


def _print_end_to_end(rows: list[EndToEnd]) -> None:
    for name in dict.fromkeys(r.table for r in rows):
        print(f"\n### End to end: pyiceberg `scan(row_filter).to_arrow()`, {name}\n")
        print(
            "| query | client-side planning ms | through the service ms | speed-up | plan only: client-side / "
            "service ms | files planned: client-side / service | rows (0 differ) | target |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for r in (r for r in rows if r.table == name):
            print(
                f"| {r.query} | {_ms(r.client_s)} | {_ms(r.served_s)} | {r.client_s / r.served_s:,.1f}x | "
                f"{_ms(r.client_plan_s)} / {_ms(r.served_plan_s)} | {r.client_files:,} / {r.served_files:,} | "
                f"{r.rows:,} | {_e2e_target(r)} |"
            )
        print("\nQueries: " + "; ".join(f"{r.query}: `{_short(r.where)}`" for r in rows if r.table == name))


def selective(row: EndToEnd) -> bool:
    """A selective query, for the target: the service plans at most a tenth of the table's files."""
    return row.served_files <= row.total_files // 10


def _e2e_target(row: EndToEnd) -> str:
    """Issue 29: >= 10x faster through the service than with client-side planning on selective queries."""
    if not selective(row):
        return "(not selective)"
    return "10x met" if row.client_s >= 10 * row.served_s else "10x MISSED"


def _short(where: str) -> str:
    return where if len(where) < 90 else where[:60] + f"... ({len(where):,} chars)"


def main(argv: list[str] | None = None) -> tuple[list[ScaleRow], list[EndToEnd]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes for a smoke run (each flag below still wins)")
    parser.add_argument("--files", type=int, nargs="+", help="files of the plan-latency tables (10000 100000)")
    parser.add_argument("--rows", type=int, default=16, help="rows per file of the plan-latency tables")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8], help="concurrent clients (1 8)")
    parser.add_argument("--samples", type=int, help="timed plans per cell, split over the clients (400)")
    parser.add_argument("--plan-runs", type=int, help="client-side plan_files runs, the median shown (3)")
    parser.add_argument("--scale", type=float, help="TPC-H scale factor of lineitem (3)")
    parser.add_argument("--lineitem-files", type=int, help="files of the lineitem table (200)")
    parser.add_argument("--shards", type=int, help="shards of the service-log table (200)")
    parser.add_argument("--shard-rows", type=int, help="rows per service-log shard (25,000)")
    parser.add_argument("--runs", type=int, help="end-to-end repetitions per cell, the median shown (5)")
    parser.add_argument("--skip-latency", action="store_true", help="only the end-to-end part")
    parser.add_argument("--skip-end-to-end", action="store_true", help="only the plan-latency part")
    parser.add_argument(
        "--in-list", type=int, metavar="KEYS", help="only: an IN of KEYS keys on tables of --files files (issue 39)"
    )
    parser.add_argument(
        "--health", type=float, metavar="SECONDS", help="only: /health's latency under hostile clients (issue 39)"
    )
    args = parser.parse_args(argv)
    if args.health:
        with tempfile.TemporaryDirectory() as tmp:
            health_under_attack(Path(tmp), args.health)
        return [], []
    if args.in_list:
        for files in args.files or [400]:
            with tempfile.TemporaryDirectory() as tmp:
                in_list(Path(tmp), files, 25, args.in_list, args.runs or 5)
        return [], []
    full = {
        "files": [10_000, 100_000],
        "samples": 400,
        "plan_runs": 3,
        "scale": 3.0,
        "lineitem_files": 200,
        "shards": 200,
        "shard_rows": 25_000,
        "runs": 5,
    }
    quick = {
        "files": [200, 1_000],
        "samples": 40,
        "plan_runs": 1,
        "scale": 0.01,
        "lineitem_files": 4,
        "shards": 8,
        "shard_rows": 2_000,
        "runs": 1,
    }
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    print(f"load average (1 / 5 / 15 min) at the start: {_load()} on {os.cpu_count()} cores", flush=True)
    latency: list[ScaleRow] = []
    e2e: list[EndToEnd] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if not args.skip_latency:
            for files in args.files:
                latency += plan_latency(root, files, args.rows, args.samples, args.plan_runs, args.clients)
            print(f"\nload average after the plan-latency part: {_load()}")
            _print_latency(latency, args.clients)
        if not args.skip_end_to_end:
            tables = (
                (
                    f"TPC-H lineitem SF {args.scale:g}, {args.lineitem_files} files by l_shipdate",
                    lambda d: _lineitem(d, args.scale, args.lineitem_files),
                ),
                (
                    f"service logs, {args.shards} shards of {args.shard_rows:,} rows",
                    lambda d: _events(d, args.shards, args.shard_rows),
                ),
            )
            for n, (name, make) in enumerate(tables):
                e2e += end_to_end(name, root / f"query-{n}", make, args.runs)
            print(f"\nload average after the end-to-end part: {_load()}")
            _print_end_to_end(e2e)
    return latency, e2e


if __name__ == "__main__":
    main()
