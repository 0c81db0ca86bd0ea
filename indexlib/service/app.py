"""The HTTP surface: an Iceberg REST catalog (read side) over the configured pyiceberg catalog, whose scan planning
comes from planner.py. FastAPI for routing, uvicorn to serve (`skipindex serve`); TLS belongs to a reverse proxy.

Every route but `/health` needs exactly one `Authorization: Bearer <token>` header (the scheme in any case; two
such headers are a 400, never "the last one wins"); request bodies over `max_request_bytes` are refused with 413
before they are read whole; WebSocket upgrades are refused before any route (none is served). Paths are routed as
sent: a `%2F` inside a name is part of that name, never a '/' of the route (the path is decoded segment by segment,
once, and names are read as the catalog reads them: names.py). The work of a request (catalog calls, planning,
writing the answer, and an error's message) runs in worker threads, never on the event loop; `/health` has threads
of its own, so a flood of plans cannot queue it. How connections are served (timeouts, header size) is server.py. Writes (create, commit, drop, rename,
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
import math
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pyiceberg.catalog.rest import (
    Capability,
    ConfigResponse,
    ListNamespaceResponse,
    ListTableResponseEntry,
    ListTablesResponse,
    NamespaceResponse,
    TableResponse,
)
from pyiceberg.catalog.rest.scan_planning import FetchScanTasksRequest, PlanTableScanRequest
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.typedef import IcebergBaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from indexlib.config import Config
from indexlib.redaction import redact_namespace_properties
from indexlib.service import names
from indexlib.service.errors import READ_ONLY, ServiceError, body, classify
from indexlib.service.filters import RequestFilter
from indexlib.service.metrics import Metrics
from indexlib.service.planner import Planner
from indexlib.service.wire import Written, spliced

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
_REQUEST_FIELDS = {
    info.alias or name for name, info in PlanTableScanRequest.model_fields.items()
}  # a request naming anything else is refused: an ignored field could change what the client meant


class BodyTooLarge(Exception):
    pass


def _json(model: IcebergBaseModel, status: int = 200) -> Response:
    """`serialize_as_any`: a residual filter is typed as the abstract BooleanExpression in pyiceberg's task model,
    which would otherwise be written as `{}` (and fail the client's parse). Residuals are written once each and
    spliced in (wire.Written)."""
    text = model.model_dump_json(serialize_as_any=True)
    written = {id(t.residual_filter): t.residual_filter for t in getattr(model, "file_scan_tasks", ())}
    text = spliced(text, (r for r in written.values() if isinstance(r, Written)))
    return Response(text, status_code=status, media_type="application/json")


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


def create_app(config: Config, token: str, catalog: Any = None) -> ASGIApp:
    """The service over `config`'s catalog (or `catalog`), requiring `token`."""
    catalog = catalog if catalog is not None else config.load_catalog()
    planner = Planner(config, catalog)
    metrics = Metrics()
    secrets = config.secrets() | {token}
    app = FastAPI(title="skipindex planning service", docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    app.state.planner, app.state.metrics = planner, metrics
    index_namespace = planner.index_namespace
    limiters: dict[str, anyio.CapacityLimiter] = {}

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

    def guarded(work: Callable[[], Response]) -> Response:
        try:
            return work()
        except Exception as exc:  # every failure becomes an ErrorModel (errors.classify), written in this thread
            return error_response(exc)

    async def answer(work: Callable[[], Response], pool: str = "work") -> Response:
        """`work` in a worker thread; `pool` "health" has threads of its own (module docstring)."""
        if pool not in limiters:  # made on the event loop's first request (anyio needs a running loop)
            limiters[pool] = (
                anyio.CapacityLimiter(HEALTH_THREADS)
                if pool == "health"
                else anyio.to_thread.current_default_thread_limiter()
            )
        return await anyio.to_thread.run_sync(guarded, work, limiter=limiters[pool])

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
        def check() -> Response:
            catalog.list_namespaces()
            return JSONResponse({"status": "ok"})

        response = await answer(check, "health")
        return response if response.status_code == 200 else JSONResponse({"status": "unavailable"}, 503)

    @app.get("/metrics")
    async def metrics_text() -> Response:
        handles = f"# TYPE skipindex_handles_open gauge\nskipindex_handles_open {planner.handles_open}\n"
        return PlainTextResponse(metrics.text() + handles)

    @app.get("/v1/config")
    async def get_config() -> Response:
        # defaults, not overrides: a client that sets its own planning mode keeps it
        payload = {"defaults": PLANNING_DEFAULTS, "overrides": {}, "endpoints": [str(e) for e in SERVED]}
        ConfigResponse.model_validate(payload)  # the specification's shape, by pyiceberg's model
        return JSONResponse(payload)

    @app.get("/v1/namespaces")
    async def list_namespaces(parent: str | None = None) -> Response:
        def work() -> Response:
            found = catalog.list_namespaces(user_namespace(parent) if parent else ())
            visible = [tuple(n) for n in found if not names.within(tuple(n), index_namespace)]
            return _json(ListNamespaceResponse(namespaces=visible))

        return await answer(work)

    @app.get("/v1/namespaces/{namespace}")
    async def load_namespace(namespace: str) -> Response:
        def work() -> Response:
            ns = user_namespace(namespace)
            properties = redact_namespace_properties(catalog.load_namespace_properties(ns), secrets)
            return _json(NamespaceResponse(namespace=ns, properties=properties))

        return await answer(work)

    @app.head("/v1/namespaces/{namespace}")
    async def namespace_exists(namespace: str) -> Response:
        def work() -> Response:
            return Response(status_code=204 if catalog.namespace_exists(user_namespace(namespace)) else 404)

        return await answer(work)

    @app.get("/v1/namespaces/{namespace}/tables")
    async def list_tables(namespace: str) -> Response:
        def work() -> Response:
            ns = user_namespace(namespace)
            found = [t for t in catalog.list_tables(ns) if not names.within(tuple(t[:-1]), index_namespace, exact=True)]
            entries = [ListTableResponseEntry(namespace=tuple(t[:-1]), name=t[-1]) for t in found]
            return _json(ListTablesResponse(identifiers=entries))

        return await answer(work)

    @app.get("/v1/namespaces/{namespace}/tables/{table}")
    async def load_table(namespace: str, table: str) -> Response:
        def work() -> Response:
            loaded = planner.load(user_table(namespace, table))
            # no `config` and no storage credentials: clients read the data with their own
            return _json(TableResponse(metadata_location=loaded.metadata_location, metadata=loaded.metadata))

        return await answer(work)

    @app.head("/v1/namespaces/{namespace}/tables/{table}")
    async def table_exists(namespace: str, table: str) -> Response:
        def work() -> Response:
            try:
                planner.load(user_table(namespace, table))
            except NoSuchTableError:
                return Response(status_code=404)
            return Response(status_code=204)

        return await answer(work)

    @app.post("/v1/namespaces/{namespace}/tables/{table}/plan", openapi_extra=_body(PlanTableScanRequest))
    async def plan(namespace: str, table: str, request: Request) -> Response:
        raw = await request.body()

        def work() -> Response:
            started = time.perf_counter()
            name = user_table(namespace, table)
            parsed, row_filter = _plan_request(raw)
            planned = planner.plan(name, parsed, row_filter)
            response = planner.respond(name, planned)
            metrics.plan(planned.route, time.perf_counter() - started, len(planned.tasks), planned.files_total)
            log.info(
                "plan %s: %s, snapshot %s, %d file(s)%s%s",
                name,
                planned.route,
                planned.snapshot_id,
                len(planned.tasks),
                f" of {planned.files_total}" if planned.files_total is not None else "",
                f"; kept as might-match: {'; '.join(planned.unknown)}" if planned.unknown else "",
            )
            return _json(response)

        return await answer(work)

    @app.post("/v1/namespaces/{namespace}/tables/{table}/tasks", openapi_extra=_body(FetchScanTasksRequest))
    async def tasks(namespace: str, table: str, request: Request) -> Response:
        raw = await request.body()

        def work() -> Response:
            name = user_table(namespace, table)
            fields = _json_object(raw)
            if unknown := set(fields) - {"plan-task"}:
                raise ServiceError(
                    400, "BadRequestException", f"unknown request field(s): {', '.join(sorted(unknown))}"
                )
            token = FetchScanTasksRequest.model_validate(fields).plan_task
            batch = planner.store.batch(str(name), token)
            metrics.batch()
            return _json(batch)

        return await answer(work)

    async def read_only(request: Request) -> Response:
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


def _body(model: type[IcebergBaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads its body itself: the specification's model, by pyiceberg."""
    schema = model.model_json_schema(by_alias=True)
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of a double's range")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def _json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, strictly: NaN, Infinity and numbers beyond a double are not JSON (RFC 8259) and
    could not be written back as JSON in a residual."""
    try:
        body = json.loads(raw or b"{}", parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:
        raise ServiceError(400, "BadRequestException", f"invalid request: the body is not JSON: {exc}") from None
    except RecursionError:
        raise ServiceError(400, "BadRequestException", "invalid request: the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ServiceError(400, "BadRequestException", "invalid request: the body is not a JSON object")
    return body


def _plan_request(raw: bytes) -> tuple[PlanTableScanRequest, RequestFilter]:
    """The request's fields by pyiceberg's model, but its `filter` by ours (filters.py): pyiceberg's model refuses
    expressions the specification defines (transform terms, `{"type": "true"}`, ...). Fields the specification does
    not define are refused: an ignored field could change what the client meant."""
    body = _json_object(raw)
    if unknown := set(body) - _REQUEST_FIELDS:
        raise ServiceError(400, "BadRequestException", f"unknown request field(s): {', '.join(sorted(unknown))}")
    row_filter = RequestFilter.parse(body.pop("filter", None))
    return PlanTableScanRequest.model_validate(body), row_filter
