"""What the service did, for `/metrics` (Prometheus text format): plans served by route, files kept and total (the
pruning the index achieved), errors by status, and plan latency (a histogram, and recent quantiles)."""

from __future__ import annotations

import bisect
import threading
from collections import Counter, deque

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.plans: Counter[str] = Counter()  # by route: index, upstream
        self.errors: Counter[int] = Counter()  # by status code
        self.files_kept = 0
        self.files_total = 0
        self.task_batches = 0
        self._buckets = [0] * (len(_BUCKETS) + 1)
        self._latency_sum = 0.0
        self._recent: deque[float] = deque(maxlen=1000)

    def plan(self, route: str, seconds: float, kept: int, total: int | None) -> None:
        with self._lock:
            self.plans[route] += 1
            if total is not None:
                self.files_kept += kept
                self.files_total += total
            self._buckets[bisect.bisect_left(_BUCKETS, seconds)] += 1
            self._latency_sum += seconds
            self._recent.append(seconds)

    def batch(self) -> None:
        with self._lock:
            self.task_batches += 1

    def error(self, status: int) -> None:
        with self._lock:
            self.errors[status] += 1

    def quantile(self, q: float) -> float | None:
        with self._lock:
            recent = sorted(self._recent)
        return recent[min(len(recent) - 1, int(q * len(recent)))] if recent else None

    def text(self) -> str:
        with self._lock:
            lines = ["# TYPE skipindex_plans_total counter"]
            lines += [f'skipindex_plans_total{{route="{r}"}} {n}' for r, n in sorted(self.plans.items())]
            lines += [
                "# TYPE skipindex_plan_files_kept_total counter",
                f"skipindex_plan_files_kept_total {self.files_kept}",
                "# TYPE skipindex_plan_files_total counter",
                f"skipindex_plan_files_total {self.files_total}",
                "# TYPE skipindex_task_batches_total counter",
                f"skipindex_task_batches_total {self.task_batches}",
                "# TYPE skipindex_errors_total counter",
            ]
            lines += [f'skipindex_errors_total{{status="{s}"}} {n}' for s, n in sorted(self.errors.items())]
            lines.append("# TYPE skipindex_plan_seconds histogram")
            cumulative = 0
            for bound, count in zip((*map(str, _BUCKETS), "+Inf"), self._buckets, strict=True):
                cumulative += count
                lines.append(f'skipindex_plan_seconds_bucket{{le="{bound}"}} {cumulative}')
            lines.append(f"skipindex_plan_seconds_sum {self._latency_sum}")
            lines.append(f"skipindex_plan_seconds_count {cumulative}")
        return "\n".join(lines) + "\n"
