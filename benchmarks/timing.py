"""The one timing rule of the benchmarks: best of several runs (the machines are shared and noisy)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(runs: int, action: Callable[[], object]) -> float:
    """Seconds of the fastest of `runs` calls of `action`."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best
