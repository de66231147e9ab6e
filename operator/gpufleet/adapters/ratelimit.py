"""A client-side rate limit on Kubernetes API requests, as client-go's QPS and burst.

A token bucket: `burst` requests may go at once, then `qps` per second. It wraps the
kubernetes client's `ApiClient.call_api`, the one method every API call goes through, so
every read and write of the reconcilers and the shard keeper counts (Kopf's watches use
their own connection and are not limited). A request that finds the bucket empty waits;
the time waited is counted in `gpufleet_api_throttled_seconds_total`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


class TokenBucket:
    """`burst` tokens, refilled at `qps` per second; `take` blocks until one is there."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"qps must be above 0 and burst at least 1, got {qps} and {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Take one token, waiting for it if need be; the seconds waited."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # reserve it now: later callers queue behind
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


def limit(api_client: Any, bucket: TokenBucket, on_wait: Callable[[float], None]) -> None:
    """Make every request of `api_client` take a token from `bucket` first."""
    call_api = api_client.call_api

    def limited(*args: Any, **kwargs: Any) -> Any:
        waited = bucket.take()
        if waited > 0:
            on_wait(waited)
        return call_api(*args, **kwargs)

    api_client.call_api = limited
