"""The routing weights this operator process applied to each pool, and when.

A pass reads the tiers' token rates over a window that can hold an earlier pass's weights
(`planning.observed.window_weights`): the classes' demand is inferred with the weights the
window's tokens followed. The reconciler records here what each pass applied and hands the
pool's history to the next pass's observe step. It lives in memory only: after a restart,
or for a pool another replica acted on last, there is none and the live weights stand for
the whole window, as they did before a history was kept. Bounded (least recently used
pools go first) and locked: reconciles run on several threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime, timedelta

from gpufleet.api.status import InferencePoolStatus
from gpufleet.planning.observed import Routed, live_weights, routed_to

MAX_POOLS = 10_000


class WeightHistory:
    """Per pool (by key): the weights its passes applied, oldest first."""

    def __init__(self, max_pools: int = MAX_POOLS) -> None:
        self._pools: OrderedDict[str, tuple[Routed, ...]] = OrderedDict()
        self._max = max_pools
        self._lock = threading.Lock()

    def of(self, key: str) -> tuple[Routed, ...]:
        with self._lock:
            return self._pools.get(key, ())

    def applied(
        self, key: str, now: datetime, status: InferencePoolStatus, window_seconds: float
    ) -> None:
        """A pass routed as `status` says at `now`; what no window ending later can reach is
        dropped (all but the last entry from before `now - window_seconds`)."""
        plain = routed_to(live_weights(status))
        with self._lock:
            entries = list(self._pools.pop(key, ()))
            if not entries or entries[-1].weights != plain:
                entries.append(Routed(now, plain))
            start = now - timedelta(seconds=max(window_seconds, 0.0))
            while len(entries) > 1 and entries[1].since <= start:
                del entries[0]
            self._pools[key] = tuple(entries)
            while len(self._pools) > self._max:
                self._pools.popitem(last=False)
