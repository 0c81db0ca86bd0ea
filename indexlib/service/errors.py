"""Failures as the REST specification's ErrorModel (`{"error": {"message", "type", "code"}}`, pyiceberg's
`ErrorResponse`), with the status codes its clients map to exceptions (pyiceberg: 400 BadRequestError, 401
UnauthorizedError, 404 NoSuchTableError / NoSuchPlanTaskError, 409 CommitFailedException, 501 NotImplementedError);
our own failures carry theirs (indexlib/errors.py). Messages are one line and
go through the configured secrets' redaction; an unexpected failure says only "internal error" (the log has it).
"""

from __future__ import annotations

from pydantic import ValidationError
from pyiceberg.catalog.rest.response import ErrorResponse, ErrorResponseMessage
from pyiceberg.exceptions import NamespaceNotEmptyError, NoSuchNamespaceError, NoSuchTableError

from indexlib.errors import SkipIndexError
from indexlib.redaction import redact_text
from indexlib.service.planner import NoSuchPlanTask
from indexlib.service.wire import Unplannable


class ServiceError(Exception):
    """An error answered as it is: `status`, the ErrorModel `kind`, a one-line message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


READ_ONLY = (
    "this catalog is read-only: skipindex serve plans scans from the index and never writes; commit to the "
    "upstream catalog directly"
)


def classify(exc: Exception) -> ServiceError:
    """The status and ErrorModel type of a failure raised while answering a request."""
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, NoSuchTableError):
        return ServiceError(404, "NoSuchTableException", str(exc))
    if isinstance(exc, NoSuchNamespaceError | NamespaceNotEmptyError):
        return ServiceError(404, "NoSuchNamespaceException", str(exc))
    if isinstance(exc, NoSuchPlanTask):
        return ServiceError(404, "NoSuchPlanTaskException", str(exc))
    if isinstance(exc, Unplannable):
        return ServiceError(501, "NotImplementedException", f"cannot plan: {exc}")
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        return ServiceError(400, "BadRequestException", f"invalid request: {where}: {first['msg']}")
    if isinstance(exc, SkipIndexError):  # its kind says the status (errors.py)
        return ServiceError(exc.http_status, exc.rest_type, str(exc))
    if isinstance(exc, ValueError):
        return ServiceError(400, "BadRequestException", str(exc))
    return ServiceError(500, "InternalServerError", "internal error (the service's log has the details)")


MESSAGE_LIMIT = 1000  # characters of an error message: what it echoes of a request (a name, a token) is cut


def body(error: ServiceError, secrets: set[str]) -> bytes:
    message = " ".join(redact_text(str(error), secrets, MESSAGE_LIMIT).split())
    return (
        ErrorResponse(error=ErrorResponseMessage(message=message, type=error.kind, code=error.status))
        .model_dump_json()
        .encode()
    )
