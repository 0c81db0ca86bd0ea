"""The HTTP surface: an Iceberg REST catalog (read side) over the configured pyiceberg catalog, whose scan planning
comes from planner.py. FastAPI for routing, uvicorn to serve (`skipindex serve`); TLS belongs to a reverse proxy.

Every route but `/health` needs exactly one `Authorization: Bearer <token>` header (the scheme in any case; two
such headers are a 400, never "the last one wins"); request bodies over `max_request_bytes` are refused with 413
before they are read whole; WebSocket upgrades are refused before any route (none is served). Paths are routed as
sent: a `%2F` inside a name is part of that name, never a '/' of the route (the path is decoded segment by segment,
once, and names are read as the catalog reads them: names.py). The work of a request with the catalog (listing,
loading, planning, writing the answer) is routes.py's, run by the plan workers (workers.py: other processes, so a
plan never holds up this process's event loop), and a plan's further batches are kept here, written
(planner.PlanStore); `/health` asks this process's own catalog client in threads of its own, so a flood of plans
cannot queue it. How connections are served (timeouts, header size) is server.py. Writes (create, commit, drop, rename,
register, namespace changes) are answered 501 with a documented ErrorModel: the service holds read access only,
and a second write path in front of the upstream catalog would be one more thing a commit depends on. Failures are
ErrorModels (errors.py); an unexpected one is logged with its traceback (redacted by the CLI's log filter) and
answered "internal error".

The index namespace (`[index] namespace`, and any namespace under it) is not part of the catalog served: it is not
listed, and loading it or its tables answers 404 (NoSuchNamespace / NoSuchTable), as for a name that does not exist.
Its tables are the service's own data, not tables of the lake: an engine listing tables would otherwise show them
beside the user's, and a plan asked of one would index the index. Writes could not reach them anyway (read-only).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import unquote

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pyiceberg.catalog.rest import Capability, ConfigResponse
from pyiceberg.catalog.rest.scan_planning import FetchScanTasksRequest, PlanTableScanRequest
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.typedef import IcebergBaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from indexlib.config import Config
from indexlib.service import names
from indexlib.service.errors import READ_ONLY, ServiceError, body, classify
from indexlib.service.metrics import Metrics
from indexlib.service.planner import PlanStore
from indexlib.service.routes import Routes, json_object
from indexlib.service.workers import Workers, workers

log = logging.getLogger("indexlib.service")
HEALTH_THREADS = 2  # `/health`'s own worker threads (module docstring)
SERVED = (
    Capability.V1_LIST_NAMESPACES,
    Capability.V1_LOAD_NAMESPACE,
    Capability.V1_NAMESPACE_EXISTS,
    Capability.V1_LIST_TABLES,
    Capability.V1_LOAD_TABLE,
    Capability.V1_TABLE_EXISTS,
    Capability.V1_SUBMIT_TABLE_SCAN_PLAN,
    Capability.V1_TABLE_SCAN_PLAN_TASKS,
)
# server-side planning by default: pyiceberg's `scan-planning-mode`, Iceberg Java's `rest-scan-planning-enabled`
PLANNING_DEFAULTS = {"scan-planning-mode": "server", "rest-scan-planning-enabled": "true"}


class BodyTooLarge(Exception):
    pass


def routed_path(raw_path: bytes) -> str:
    """The path as routes see it: each segment percent-decoded once, with '%' and '/' inside a segment encoded
    again, so a route's parameters split where the client's '/' are and `unquote` gives each back exactly."""
    segments = raw_path.decode("latin-1").split("/")
    return "/".join(unquote(s).replace("%", "%25").replace("/", "%2F") for s in segments)


class Guard:
    """ASGI middleware: the bearer token on every path but /health, the request size limit, routing on the raw path,
    and no WebSocket (module docstring)."""

    def __init__(
        self, app: ASGIApp, token: str, limit: int, head_limit: int, secrets: set[str], metrics: Metrics
    ) -> None:
        self.app, self._token, self.limit, self.head_limit = app, token.encode(), limit, head_limit
        self.secrets, self.metrics = secrets, metrics

    async def _refuse(self, send: Send, error: ServiceError) -> None:
        self.metrics.error(error.status)
        headers = [(b"content-type", b"application/json")]
        if error.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="skipindex"'))
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body(error, self.secrets)})

    def _credentials(self, headers: list[tuple[bytes, bytes]]) -> ServiceError | None:
        """None when the request carries exactly one Authorization header with the token (RFC 9110: the scheme
        is case-insensitive); else the error to answer."""
        given = [value for name, value in headers if name == b"authorization"]
        if len(given) > 1:
            return ServiceError(400, "BadRequestException", "more than one Authorization header")
        scheme, _, credentials = given[0].strip().partition(b" ") if given else (b"", b"", b"")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self._token):
            return ServiceError(401, "NotAuthorizedException", "missing or wrong bearer token")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no route is a WebSocket: refused before the router (a 403 handshake)
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path") or scope["path"].encode()
        head = len(raw_path) + len(scope.get("query_string", b"")) + sum(len(k) + len(v) for k, v in scope["headers"])
        if head > self.head_limit:  # h11 refuses a longer head only when it arrives in pieces
            too_long = f"request line and headers over {self.head_limit} bytes ([serve] max_header_bytes)"
            await self._refuse(send, ServiceError(431, "BadRequestException", too_long))
            return
        scope = {**scope, "path": routed_path(raw_path)}
        if scope["path"] != "/health" and (refused := self._credentials(scope["headers"])) is not None:
            await self._refuse(send, refused)
            return
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.limit:
            too_large = f"request body over {self.limit} bytes ([serve] max_request_bytes)"
            await self._refuse(send, ServiceError(413, "BadRequestException", too_large))
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise BodyTooLarge
            return message

        await self.app(scope, limited, send)


def create_app(config: Config, token: str) -> ASGIApp:
    """The service over `config`'s catalog, requiring `token`."""
    routes = Routes(config, token)  # this process's own: `/health`, and every route with `plan_workers = 0`
    metrics = Metrics()
    store = PlanStore(config.serve.plans_kept, config.serve.plans_kept_bytes)
    secrets, index_namespace = routes.secrets, routes.index_namespace
    handles: dict[int, int] = {}  # index handles open, by the process that last said
    running: list[Workers] = []
    health_threads: list[anyio.CapacityLimiter] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        running.append(workers(config, token, routes))
        health_threads.append(anyio.CapacityLimiter(HEALTH_THREADS))  # made on the running event loop
        yield
        running.pop().close()

    app = FastAPI(
        title="skipindex planning service",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )

    def user_namespace(text: str) -> tuple[str, ...]:
        """A namespace of the catalog's users, as the catalog reads it: the index namespace (and any under it)
        does not exist here."""
        ns = names.namespace(unquote(text))
        if names.within(ns, index_namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ns)}")
        return ns

    def user_table(namespace: str, table: str) -> names.TableName:
        """A table of the catalog's users: the index tables do not exist here (module docstring)."""
        name = names.table(unquote(namespace), unquote(table))
        if names.within(name.namespace, index_namespace):
            raise NoSuchTableError(f"Table does not exist: {name}")
        return name

    def error_response(exc: Exception) -> Response:
        error = classify(exc)
        if error.status >= 500 and not isinstance(exc, ServiceError):
            log.exception("request failed")
        metrics.error(error.status)
        return Response(body(error, secrets), status_code=error.status, media_type="application/json")

    async def answer(route: str, arguments: Callable[[], tuple[Any, ...]]) -> Response:
        """`route` answered by the workers (workers.py), with the `arguments` read from the request here (names
        are read on the event loop: a few bytes of text)."""
        try:
            args = arguments()
        except Exception as exc:
            return error_response(exc)
        reply = await running[0].call(route, *args)
        handles[reply.worker] = reply.handles_open
        if reply.status >= 400:
            metrics.error(reply.status)
        if reply.plan is not None:
            metrics.plan(reply.plan.route, reply.plan.seconds, reply.plan.kept, reply.plan.total)
        if reply.further is not None:
            store.add(reply.further)
        if not reply.body:
            return Response(status_code=reply.status)
        return Response(reply.body, status_code=reply.status, media_type="application/json")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kinds = {404: "NoSuchResourceException", 405: "NotImplementedException"}
        status = 501 if exc.status_code == 405 else exc.status_code
        message = f"{request.method} {request.url.path[:200]}: {exc.detail}"
        return error_response(ServiceError(status, kinds.get(exc.status_code, "BadRequestException"), message))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
        where = ".".join(str(part) for part in first["loc"])
        return error_response(ServiceError(400, "BadRequestException", f"invalid request: {where}: {first['msg']}"))

    @app.exception_handler(BodyTooLarge)
    async def too_large(request: Request, exc: BodyTooLarge) -> Response:
        message = f"request body over {config.serve.max_request_bytes} bytes ([serve] max_request_bytes)"
        return error_response(ServiceError(413, "BadRequestException", message))

    @app.get("/health")
    async def health() -> Response:
        """This process's own catalog client, in threads of its own: no plan queues it (module docstring)."""
        reply = await anyio.to_thread.run_sync(routes.call, "health", limiter=health_threads[0])
        if reply.status != 200:
            return JSONResponse({"status": "unavailable"}, 503)
        return Response(reply.body, media_type="application/json")

    @app.get("/metrics")
    async def metrics_text() -> Response:
        lines = [f'skipindex_handles_open{{worker="{pid}"}} {n}' for pid, n in sorted(handles.items())]
        handles_open = "# TYPE skipindex_handles_open gauge\n" + "".join(f"{line}\n" for line in lines)
        return PlainTextResponse(metrics.text() + handles_open)

    @app.get("/v1/config")
    async def get_config() -> Response:
        # defaults, not overrides: a client that sets its own planning mode keeps it
        payload = {"defaults": PLANNING_DEFAULTS, "overrides": {}, "endpoints": [str(e) for e in SERVED]}
        ConfigResponse.model_validate(payload)  # the specification's shape, by pyiceberg's model
        return JSONResponse(payload)

    @app.get("/v1/namespaces")
    async def list_namespaces(parent: str | None = None) -> Response:
        return await answer("list_namespaces", lambda: (user_namespace(parent) if parent else (),))

    @app.get("/v1/namespaces/{namespace}")
    async def load_namespace(namespace: str) -> Response:
        return await answer("load_namespace", lambda: (user_namespace(namespace),))

    @app.head("/v1/namespaces/{namespace}")
    async def namespace_exists(namespace: str) -> Response:
        return await answer("namespace_exists", lambda: (user_namespace(namespace),))

    @app.get("/v1/namespaces/{namespace}/tables")
    async def list_tables(namespace: str) -> Response:
        return await answer("list_tables", lambda: (user_namespace(namespace),))

    @app.get("/v1/namespaces/{namespace}/tables/{table}")
    async def load_table(namespace: str, table: str) -> Response:
        return await answer("load_table", lambda: (user_table(namespace, table),))

    @app.head("/v1/namespaces/{namespace}/tables/{table}")
    async def table_exists(namespace: str, table: str) -> Response:
        return await answer("table_exists", lambda: (user_table(namespace, table),))

    @app.post("/v1/namespaces/{namespace}/tables/{table}/plan", openapi_extra=_body(PlanTableScanRequest))
    async def plan(namespace: str, table: str, request: Request) -> Response:
        raw = await request.body()
        return await answer("plan", lambda: (user_table(namespace, table), raw))

    @app.post("/v1/namespaces/{namespace}/tables/{table}/tasks", openapi_extra=_body(FetchScanTasksRequest))
    async def tasks(namespace: str, table: str, request: Request) -> Response:
        raw = await request.body()

        def batch() -> Response:
            """A further batch as written when planned (planner.PlanStore); the body parsed in a thread."""
            try:
                name = user_table(namespace, table)
                fields = json_object(raw)
                if unknown := set(fields) - {"plan-task"}:
                    listed = ", ".join(sorted(unknown))
                    raise ServiceError(400, "BadRequestException", f"unknown request field(s): {listed}")
                token = FetchScanTasksRequest.model_validate(fields).plan_task
                text = store.batch(str(name), token)
            except Exception as exc:
                return error_response(exc)
            metrics.batch()
            return Response(text, media_type="application/json")

        return await anyio.to_thread.run_sync(batch)

    async def read_only(request: Request) -> Response:
        delta = routes.delta.namespace
        named = _delta_named(request.path_params, await request.body(), delta) if delta else None
        if named is not None:  # a Delta table: the client asked for something it may never do here
            message = f"table {named} is a Delta table served read-only as Iceberg: write it with a Delta writer"
            return error_response(ServiceError(403, "ForbiddenException", message))
        return error_response(ServiceError(501, "NotImplementedException", READ_ONLY))

    writes: list[tuple[str, str]] = [
        ("/v1/namespaces", "POST"),
        ("/v1/namespaces/{namespace}", "DELETE"),
        ("/v1/namespaces/{namespace}/properties", "POST"),
        ("/v1/namespaces/{namespace}/tables", "POST"),
        ("/v1/namespaces/{namespace}/register", "POST"),
        ("/v1/namespaces/{namespace}/tables/{table}", "POST"),
        ("/v1/namespaces/{namespace}/tables/{table}", "DELETE"),
        ("/v1/tables/rename", "POST"),
        ("/v1/transactions/commit", "POST"),
    ]
    for path, method in writes:
        app.add_api_route(path, read_only, methods=[method], include_in_schema=False)

    serve = config.serve
    return Guard(app, token, serve.max_request_bytes, serve.max_header_bytes, secrets, metrics)


def _delta_named(params: dict[str, Any], raw: bytes, delta: tuple[str, ...]) -> str | None:
    """The Delta table (or namespace) a write names, in its path or its body's identifiers (rename, multi-table
    commit, create, register); None when it names none."""
    if not delta:
        return None
    found: list[tuple[tuple[str, ...], str]] = []
    try:
        fields = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        fields = None
    if "namespace" in params:  # the table in the path, or the one a create or register names in its body
        named = fields.get("name") if isinstance(fields, dict) else None
        table = unquote(params.get("table", "")) or (named if isinstance(named, str) else "")
        with suppress(names.BadName):
            found.append((names.namespace(unquote(params["namespace"])), table))

    def identifiers(value: Any) -> None:  # every {"namespace": [...], "name": ...} in the body
        if isinstance(value, dict):
            if isinstance(value.get("namespace"), list) and isinstance(value.get("name"), str):
                found.append((tuple(str(level) for level in value["namespace"]), value["name"]))
            for inner in value.values():
                identifiers(inner)
        elif isinstance(value, list):
            for inner in value:
                identifiers(inner)

    with suppress(RecursionError):  # a body nested too deeply names nothing here (501 as any other write)
        identifiers(fields)
    if isinstance(fields, dict) and isinstance(fields.get("namespace"), list):  # creating the namespace itself
        found.append((tuple(str(level) for level in fields["namespace"]), ""))
    for namespace, table in found:
        if names.within(namespace, delta):
            return ".".join((*namespace, table)) if table else ".".join(namespace)
    return None


def _body(model: type[IcebergBaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads its body itself: the specification's model, by pyiceberg."""
    schema = model.model_json_schema(by_alias=True)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
