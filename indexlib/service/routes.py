"""What each route of the service does with the catalog, as one object per process that plans: `Routes` holds the
catalog, the planner and its index handles, and answers a route's call with a `Reply` (a status and the response's
bytes), whatever fails (errors.py: every failure an ErrorModel, an unexpected one logged with its traceback).

The same object answers in a plan worker process (workers.py) or in the service's own threads (`[serve]
plan_workers = 0`): a reply is plain data, so app.py treats both alike. A reply says what the service's own process
keeps of it: a plan's metrics and its further batches (app.py's PlanStore), and how many index handles this process
holds open.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any

from pyiceberg.catalog.rest import (
    ListNamespaceResponse,
    ListTableResponseEntry,
    ListTablesResponse,
    NamespaceResponse,
    TableResponse,
)
from pyiceberg.catalog.rest.scan_planning import PlanTableScanRequest
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.typedef import IcebergBaseModel

from indexlib.config import Config
from indexlib.redaction import redact_namespace_properties
from indexlib.service import names
from indexlib.service.delta_tables import DeltaTables
from indexlib.service.errors import ServiceError, body, classify
from indexlib.service.filters import RequestFilter
from indexlib.service.planner import Answered, Planner
from indexlib.service.wire import response_text

log = logging.getLogger("indexlib.service")
_REQUEST_FIELDS = {
    info.alias or name for name, info in PlanTableScanRequest.model_fields.items()
}  # a request naming anything else is refused: an ignored field could change what the client meant


@dataclass(frozen=True)
class PlanMetrics:
    """What `/metrics` counts of one plan."""

    route: str  # "index" or "upstream"
    seconds: float
    kept: int
    total: int | None


@dataclass(frozen=True)
class Reply:
    """A route's answer, as plain data (it crosses from a plan worker to the service's process)."""

    status: int
    body: bytes = b""
    worker: int = 0  # the process that answered (its pid)
    handles_open: int = 0  # index handles that process holds
    plan: PlanMetrics | None = None
    further: Answered | None = None  # a plan's further batches, for `tasks` (its `first` is `body`)


class Routes:
    """The catalog's routes for one process (module docstring)."""

    def __init__(self, config: Config, token: str) -> None:
        self.catalog = config.load_catalog()
        self.planner = Planner(config, self.catalog)
        self.index_namespace = self.planner.index_namespace
        self.delta = DeltaTables(config, self.catalog)  # the Delta tables served as Iceberg (delta_tables.py)
        self.secrets = config.secrets() | {token}

    def call(self, route: str, *args: Any) -> Reply:
        """`route` (a method's name below) answered: every failure as its ErrorModel."""
        try:
            reply: Reply = getattr(self, route)(*args)
        except Exception as exc:  # every failure becomes an ErrorModel (errors.classify)
            error = classify(exc)
            if error.status >= 500 and not isinstance(exc, ServiceError):
                log.exception("request failed")
            reply = Reply(error.status, body(error, self.secrets))
        return replace(reply, worker=os.getpid(), handles_open=self.planner.handles_open)

    def health(self) -> Reply:
        self.catalog.list_namespaces()
        return Reply(200, b'{"status":"ok"}')

    def list_namespaces(self, parent: tuple[str, ...]) -> Reply:
        if self.delta.serves(parent):
            return _ok(ListNamespaceResponse(namespaces=[]))
        found = [tuple(n) for n in self.catalog.list_namespaces(parent)]
        if not parent and self.delta.namespace and self.delta.namespace not in found:
            found.append(self.delta.namespace)
        visible = [n for n in found if not names.within(n, self.index_namespace)]
        return _ok(ListNamespaceResponse(namespaces=visible))

    def load_namespace(self, ns: tuple[str, ...]) -> Reply:
        if self.delta.serves(ns):
            return _ok(NamespaceResponse(namespace=ns, properties={}))
        properties = redact_namespace_properties(self.catalog.load_namespace_properties(ns), self.secrets)
        return _ok(NamespaceResponse(namespace=ns, properties=properties))

    def namespace_exists(self, ns: tuple[str, ...]) -> Reply:
        if self.delta.serves(ns):
            return Reply(204)
        return Reply(204 if self.catalog.namespace_exists(ns) else 404)

    def list_tables(self, ns: tuple[str, ...]) -> Reply:
        if self.delta.serves(ns):
            served = [ListTableResponseEntry(namespace=ns, name=n) for n in self.delta.names()]
            return _ok(ListTablesResponse(identifiers=served))
        index = self.index_namespace
        found = [t for t in self.catalog.list_tables(ns) if not names.within(tuple(t[:-1]), index, exact=True)]
        entries = [ListTableResponseEntry(namespace=tuple(t[:-1]), name=t[-1]) for t in found]
        return _ok(ListTablesResponse(identifiers=entries))

    def load_table(self, name: names.TableName) -> Reply:
        if self.delta.serves(name.namespace):
            metadata = self.delta.table(name).metadata().metadata
            return _ok(TableResponse(metadata_location=None, metadata=metadata))  # type: ignore[call-arg]
        loaded = self.planner.load(name)
        # no `config` and no storage credentials: clients read the data with their own
        return _ok(
            TableResponse(  # type: ignore[call-arg]  # by field name: mypy knows the aliases (service/wire.py)
                metadata_location=loaded.metadata_location, metadata=loaded.metadata
            )
        )

    def table_exists(self, name: names.TableName) -> Reply:
        if self.delta.serves(name.namespace):
            return Reply(204 if name.name in self.delta.paths else 404)
        try:
            self.planner.load(name)
        except NoSuchTableError:
            return Reply(404)
        return Reply(204)

    def plan(self, name: names.TableName, raw: bytes) -> Reply:
        started = time.perf_counter()
        parsed, row_filter = _plan_request(raw)
        if self.delta.serves(name.namespace):
            planned = self.delta.table(name).plan(parsed, row_filter)
        else:
            planned = self.planner.plan(name, parsed, row_filter)
        answered = self.planner.respond(name, planned)
        metrics = PlanMetrics(planned.route, time.perf_counter() - started, len(planned.tasks), planned.files_total)
        log.info(  # what the client pushed (its filter's operators and columns, no values) and what it kept
            "plan %s: %s, snapshot %s, %d file(s)%s; filter %s%s",
            name,
            planned.route,
            planned.snapshot_id,
            len(planned.tasks),
            f" of {planned.files_total}" if planned.files_total is not None else "",
            row_filter.outline,
            f"; kept as might-match: {'; '.join(planned.unknown)}" if planned.unknown else "",
        )
        further = replace(answered, first="") if answered.further else None
        return Reply(200, answered.first.encode(), plan=metrics, further=further)


def _ok(model: IcebergBaseModel) -> Reply:
    return Reply(200, response_text(model).encode())


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of a double's range")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, strictly: NaN, Infinity and numbers beyond a double are not JSON (RFC 8259) and
    could not be written back as JSON in a residual."""
    try:
        parsed = json.loads(raw or b"{}", parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:
        raise ServiceError(400, "BadRequestException", f"invalid request: the body is not JSON: {exc}") from None
    except RecursionError:
        raise ServiceError(400, "BadRequestException", "invalid request: the body is nested too deeply") from None
    if not isinstance(parsed, dict):
        raise ServiceError(400, "BadRequestException", "invalid request: the body is not a JSON object")
    return parsed


def _plan_request(raw: bytes) -> tuple[PlanTableScanRequest, RequestFilter]:
    """The request's fields by pyiceberg's model, but its `filter` by ours (filters.py): pyiceberg's model refuses
    expressions the specification defines (transform terms, `{"type": "true"}`, ...). Fields the specification does
    not define are refused: an ignored field could change what the client meant."""
    fields = json_object(raw)
    if unknown := set(fields) - _REQUEST_FIELDS:
        raise ServiceError(400, "BadRequestException", f"unknown request field(s): {', '.join(sorted(unknown))}")
    row_filter = RequestFilter.parse(fields.pop("filter", None))
    return PlanTableScanRequest.model_validate(fields), row_filter
