"""The HTTP surface: an Iceberg REST catalog (read side) over the configured pyiceberg catalog, whose scan planning
comes from planner.py. FastAPI for routing, uvicorn to serve (`skipindex serve`); TLS belongs to a reverse proxy.

Every route but `/health` needs `Authorization: Bearer <token>` (`[serve]`); request bodies over
`max_request_bytes` are refused with 413 before they are read whole. Writes (create, commit, drop, rename,
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
import time
from collections.abc import Callable
from typing import Any

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
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from indexlib.config import Config
from indexlib.redaction import redact_properties
from indexlib.service.errors import READ_ONLY, ServiceError, body, classify
from indexlib.service.filters import Opaque, RequestFilter
from indexlib.service.metrics import Metrics
from indexlib.service.planner import Planner

log = logging.getLogger("indexlib.service")
NAMESPACE_SEPARATOR = "\x1f"  # the REST spec's default separator of namespace levels in a path (%1F)
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
    which would otherwise be written as `{}` (and fail the client's parse). A residual pyiceberg cannot model goes
    in as the JSON the client sent (filters.Opaque)."""
    text = model.model_dump_json(serialize_as_any=True)
    opaque = {id(t.residual_filter): t.residual_filter for t in getattr(model, "file_scan_tasks", ())}
    for residual in opaque.values():
        if isinstance(residual, Opaque):
            text = residual.splice(text)
    return Response(text, status_code=status, media_type="application/json")


def _namespace(text: str) -> tuple[str, ...]:
    parts = tuple(text.split(NAMESPACE_SEPARATOR))
    if not all(parts):
        raise ServiceError(400, "BadRequestException", f"invalid namespace {text!r}")
    return parts


class Guard:
    """ASGI middleware: the bearer token on every path but /health, and the request size limit."""

    def __init__(self, app: ASGIApp, token: str, limit: int, secrets: set[str], metrics: Metrics) -> None:
        self.app, self._expected, self.limit = app, f"Bearer {token}".encode(), limit
        self.secrets, self.metrics = secrets, metrics

    async def _refuse(self, send: Send, error: ServiceError) -> None:
        self.metrics.error(error.status)
        headers = [(b"content-type", b"application/json")]
        if error.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="skipindex"'))
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body(error, self.secrets)})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if scope["path"] != "/health" and not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            await self._refuse(send, ServiceError(401, "NotAuthorizedException", "missing or wrong bearer token"))
            return
        length = headers.get(b"content-length", b"0")
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
    app = FastAPI(title="skipindex planning service", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.planner, app.state.metrics = planner, metrics
    index_namespace = tuple(config.index_namespace.split("."))

    def user_namespace(text: str) -> tuple[str, ...]:
        """A namespace of the catalog's users: the index namespace (and any under it) does not exist here."""
        ns = _namespace(text)
        if _within(ns, index_namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ns)}")
        return ns

    def user_table(namespace: str, table: str) -> tuple[str, ...]:
        """A table of the catalog's users: the index tables do not exist here (module docstring)."""
        ns = _namespace(namespace)
        if _within(ns, index_namespace):
            raise NoSuchTableError(f"Table does not exist: {'.'.join((*ns, table))}")
        return (*ns, table)

    def error_response(exc: Exception) -> Response:
        error = classify(exc)
        if error.status >= 500 and not isinstance(exc, ServiceError):
            log.exception("request failed")
        metrics.error(error.status)
        return Response(body(error, secrets), status_code=error.status, media_type="application/json")

    async def answer(work: Callable[[], Response]) -> Response:
        try:
            return await run_in_threadpool(work)
        except Exception as exc:  # every failure becomes an ErrorModel (errors.classify)
            return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kinds = {404: "NoSuchResourceException", 405: "NotImplementedException"}
        status = 501 if exc.status_code == 405 else exc.status_code
        message = f"{request.method} {request.url.path}: {exc.detail}"
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

        response = await answer(check)
        return response if response.status_code == 200 else JSONResponse({"status": "unavailable"}, 503)

    @app.get("/metrics")
    async def metrics_text() -> Response:
        return PlainTextResponse(metrics.text())

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
            visible = [tuple(n) for n in found if not _within(tuple(n), index_namespace)]
            return _json(ListNamespaceResponse(namespaces=visible))

        return await answer(work)

    @app.get("/v1/namespaces/{namespace}")
    async def load_namespace(namespace: str) -> Response:
        def work() -> Response:
            ns = user_namespace(namespace)
            properties = redact_properties(catalog.load_namespace_properties(ns))
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
            entries = [ListTableResponseEntry(namespace=tuple(t[:-1]), name=t[-1]) for t in catalog.list_tables(ns)]
            return _json(ListTablesResponse(identifiers=entries))

        return await answer(work)

    @app.get("/v1/namespaces/{namespace}/tables/{table}")
    async def load_table(namespace: str, table: str) -> Response:
        def work() -> Response:
            loaded = catalog.load_table(user_table(namespace, table))
            # no `config` and no storage credentials: clients read the data with their own
            return _json(TableResponse(metadata_location=loaded.metadata_location, metadata=loaded.metadata))

        return await answer(work)

    @app.head("/v1/namespaces/{namespace}/tables/{table}")
    async def table_exists(namespace: str, table: str) -> Response:
        def work() -> Response:
            try:
                catalog.load_table(user_table(namespace, table))
            except NoSuchTableError:
                return Response(status_code=404)
            return Response(status_code=204)

        return await answer(work)

    @app.post("/v1/namespaces/{namespace}/tables/{table}/plan")
    async def plan(namespace: str, table: str, request: Request) -> Response:
        raw = await request.body()

        def work() -> Response:
            started = time.perf_counter()
            name = ".".join(user_table(namespace, table))
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

    @app.post("/v1/namespaces/{namespace}/tables/{table}/tasks")
    async def tasks(namespace: str, table: str, request: Request) -> Response:
        raw = await request.body()

        def work() -> Response:
            name = ".".join(user_table(namespace, table))
            token = FetchScanTasksRequest.model_validate_json(raw or b"{}").plan_task
            batch = planner.store.batch(name, token)
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

    limit = config.serve.max_request_bytes
    return Guard(app, token, limit, secrets, metrics)


def _within(namespace: tuple[str, ...], parent: tuple[str, ...]) -> bool:
    return namespace[: len(parent)] == parent


def _plan_request(raw: bytes) -> tuple[PlanTableScanRequest, RequestFilter]:
    """The request's fields by pyiceberg's model, but its `filter` by ours (filters.py): pyiceberg's model refuses
    expressions the specification defines (transform terms, `{"type": "true"}`, ...). Fields the specification does
    not define are refused: an ignored field could change what the client meant."""
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise ServiceError(400, "BadRequestException", "invalid request: the body is not JSON") from None
    if not isinstance(body, dict):
        raise ServiceError(400, "BadRequestException", "invalid request: the body is not a JSON object")
    if unknown := set(body) - _REQUEST_FIELDS:
        raise ServiceError(400, "BadRequestException", f"unknown request field(s): {', '.join(sorted(unknown))}")
    row_filter = RequestFilter.parse(body.pop("filter", None))
    return PlanTableScanRequest.model_validate(body), row_filter
