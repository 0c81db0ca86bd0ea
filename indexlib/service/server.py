"""How the service is served: uvicorn, with bounds on what a client can hold without asking anything.

uvicorn closes a keep-alive connection idle between requests (`timeout_keep_alive`), but by itself it waits forever
for a connection's first request, and for a request that arrives a byte at a time (each byte re-arms nothing and
cancels its keep-alive timer). Served here with h11 (`LimitedH11Protocol`), every connection is bounded:

- `[serve] idle_timeout_seconds`: a connection with no request under way (before its first, or after a response)
  that sends nothing for this long is closed;
- `[serve] request_timeout_seconds`: from the first byte of a request, its head and body must have arrived whole
  within this; otherwise it is answered 408 (if no answer was started) and the connection is closed. The time to
  plan and to send the answer is not counted;
- `[serve] max_header_bytes`: a request line and headers longer than this are a 400 (h11's
  `max_incomplete_event_size`), before the application sees them: a path longer than it never reaches a log line;
- WebSocket upgrades are not served (`ws="none"`; app.py refuses them too).

So a client that opens a connection and sends nothing, or trickles its headers or its body, holds it at most
`idle_timeout_seconds + request_timeout_seconds`. How many connections one client may open is the reverse
proxy's to bound (docs/service-threat-model.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from indexlib.config import ServeSettings

log = logging.getLogger("indexlib.service")
_RECEIVING = (h11.IDLE, h11.SEND_BODY)  # the client's side of h11 while a request's head or body is still arriving
_TIMEOUT_BODY = b'{"error":{"message":"request not received in time","type":"RequestTimeoutException","code":408}}'


def protocol(settings: ServeSettings) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the idle and request deadlines of `settings` (module docstring)."""
    idle, request_timeout = settings.idle_timeout_seconds, settings.request_timeout_seconds

    class LimitedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # uvicorn's own keep-alive timer, armed before the first request too; any byte received cancels it
            self.timeout_keep_alive_task = self.loop.call_later(idle, self.timeout_keep_alive_handler)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                self._cancel_deadline()
            elif self.conn.their_state in _RECEIVING:
                if self._deadline is None:
                    self._deadline = self.loop.call_later(request_timeout, self._too_slow)
            else:
                self._cancel_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_deadline()
            super().connection_lost(exc)

        def _cancel_deadline(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self.cycle is None or not self.cycle.response_started:
                head = (
                    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n"
                )
                self.transport.write(head + _TIMEOUT_BODY)
            log.warning("closed a connection: its request did not arrive within %d s", request_timeout)
            self.transport.close()

    return LimitedH11Protocol


def uvicorn_options(settings: ServeSettings) -> dict[str, Any]:
    """The keyword arguments of `uvicorn.Config` / `uvicorn.run` that bound connections (module docstring)."""
    return {
        "http": protocol(settings),
        "ws": "none",
        "timeout_keep_alive": settings.idle_timeout_seconds,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "log_config": None,
        "server_header": False,
    }


def run(app: Any, host: str, port: int, settings: ServeSettings) -> None:
    """Serve `app` until SIGTERM / SIGINT."""
    uvicorn.run(app, host=host, port=port, **uvicorn_options(settings))
