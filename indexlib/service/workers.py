"""Where the routes' work runs (routes.py): in plan worker processes, so that no plan holds up the process that
accepts connections, reads requests and answers `/health`.

Why processes: a plan is CPU work in Python (parsing and binding the filter, the lookup, writing the tasks). In
threads of the service's own process it holds the interpreter's lock, and the event loop that reads every other
client's request waits for it: one client's plans of a 1 MB filter held `/health` 0.5-0.9 s at p99, all hostile
clients together 1.5 s (docs/benchmarks.md). In `[serve] plan_workers` processes the service's own process only
routes, checks tokens and copies bytes.

- Workers are started with `spawn` (the service's process runs threads: a fork would copy their locks in whatever
  state they were), and each builds its own `Routes`: its own catalog client, planner and index handles (so
  `[serve] handles_kept` is per worker). They start with the service, in the background: `/health` answers at once,
  and a plan that arrives first waits for a worker to be ready.
- A worker's startup heap (the modules, its catalog client) is moved out of the collector's sight (`gc.freeze`):
  it lives as long as the worker, and full collections traversed it every few plans.
- Their log records go through a queue to this process's handlers, and so through its redaction (cli.py).
- A worker that dies (killed, out of memory) fails the requests it held with a 503, and the workers are started
  again; a worker whose service process dies (even by SIGKILL) exits at once (it watches its parent's sentinel), so
  none is left behind.
- `plan_workers = 0`: the same `Routes` answers in this process's threads (the service as one process).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import logging.handlers
import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait
from typing import Any, Protocol, TypeGuard

import anyio

from indexlib.config import Config
from indexlib.service.errors import ServiceError, body
from indexlib.service.routes import Reply, Routes

log = logging.getLogger("indexlib.service")
WORKER_NICENESS = 5  # plans yield the CPU to the service's own process, which reads requests and answers /health
WORKER_DIED = ServiceError(503, "ServiceUnavailableException", "a plan worker died while answering; ask again")


class Workers(Protocol):
    async def call(self, route: str, *args: Any) -> Reply: ...

    def close(self) -> None: ...


class InThreads:
    """`plan_workers = 0`: the routes answered in this process's worker threads."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    async def call(self, route: str, *args: Any) -> Reply:
        return await anyio.to_thread.run_sync(self.routes.call, route, *args)

    def close(self) -> None:
        return None


class InProcesses:
    """`plan_workers` processes answering the routes (module docstring)."""

    def __init__(self, config: Config, token: str, count: int) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._queue: Any = self._context.Queue()
        root = logging.getLogger()
        self._listener = logging.handlers.QueueListener(self._queue, *root.handlers, respect_handler_level=True)
        self._listener.start()
        levels = {name: logger.level for name, logger in root.manager.loggerDict.items() if _set(logger)}
        self._initargs = (config, token, self._queue, {"": root.level, **levels})
        self._count = count
        self._lock = threading.Lock()
        self._pool = self._started()

    def _started(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(
            self._count, mp_context=self._context, initializer=_initialize, initargs=self._initargs
        )
        for _ in range(self._count):  # one submission per worker starts them all now, not at the first plans
            pool.submit(os.getpid)
        return pool

    async def call(self, route: str, *args: Any) -> Reply:
        pool = self._pool
        try:
            return await asyncio.wrap_future(pool.submit(_call, route, *args))
        except BrokenProcessPool:
            log.error("a plan worker died; starting the plan workers again")
            self._restart(pool)
            return Reply(WORKER_DIED.status, body(WORKER_DIED, set()))

    def _restart(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:  # once, however many requests saw it broken
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = self._started()

    def close(self) -> None:
        """The workers stopped, then the log queue closed and released here. Its locks are named semaphores that
        Python's resource tracker unlinks only when this process releases them; the service's process ends by the
        signal that stopped it (uvicorn raises it again once it has shut down), so no exit handler releases them
        later, and the queue's feeder thread (started by the listener's last message) still held two of them: the
        tracker then warned of leaked semaphores. Closed, its thread joined and every reference dropped, the queue
        releases them now."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._listener.stop()
        self._queue.close()
        self._queue.join_thread()
        del self._pool, self._listener, self._queue, self._initargs


def _set(logger: logging.Logger | logging.PlaceHolder) -> TypeGuard[logging.Logger]:
    return isinstance(logger, logging.Logger) and logger.level != logging.NOTSET


_routes: Routes | None = None  # a worker process's routes (built by _initialize)


def _initialize(config: Config, token: str, queue: Any, levels: dict[str, int]) -> None:
    """A worker's start: its log records to the service's process, its own Routes, and an exit when its parent
    exits (module docstring). SIGINT is the service's to handle (a terminal's Ctrl-C reaches the whole group)."""
    global _routes
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(WORKER_NICENESS)
    root = logging.getLogger()
    root.handlers = [logging.handlers.QueueHandler(queue)]
    for name, level in levels.items():
        logging.getLogger(name or None).setLevel(level)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True, name="parent-watch").start()
    _routes = Routes(config, token)
    gc.collect()
    gc.freeze()  # what the imports and the catalog made lives as long as the worker: full collections skip it


def _exit_with(sentinel: int) -> None:
    wait([sentinel])
    os._exit(1)


def _call(route: str, *args: Any) -> Reply:
    assert _routes is not None, "a worker's routes are built by its initializer"
    return _routes.call(route, *args)


def workers(config: Config, token: str, routes: Routes) -> Workers:
    """Where the routes run, as `[serve] plan_workers` says; `routes` is this process's own (module docstring)."""
    count = config.serve.plan_workers
    return InProcesses(config, token, count) if count else InThreads(routes)
