"""The per-pool loop the Kopf daemon runs: a pass every intervalSeconds, sooner when woken.

Each pool gets one loop, so passes of one pool never overlap; passes of different pools run
concurrently in worker threads (the kubernetes client is blocking). Watch events on the
pool or its Deployments wake the loop early, so a spec change or a hand edit is handled in
about a second instead of at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from gpufleet.reconcile import Reconciler

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 30.0
# Watch events come in bursts (a scale-up updates a Deployment's status many times):
# a woken loop waits this long so one pass handles the whole burst.
DEBOUNCE_SECONDS = 0.5
RETRY_SECONDS = 5.0


@dataclass
class Loops:
    """The loops of every pool this process reconciles."""

    reconciler: Reconciler
    debounce_seconds: float = DEBOUNCE_SECONDS
    retry_seconds: float = RETRY_SECONDS
    _wakeups: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    _generations: dict[tuple[str, str], int] = field(default_factory=dict)

    def wake(self, namespace: str, name: str) -> None:
        """Ask the pool's loop for a pass now (no-op for a pool without a loop)."""
        event = self._wakeups.get((namespace, name))
        if event is not None:
            event.set()

    def spec_changed(self, namespace: str, name: str, generation: int) -> None:
        """Wake the loop when the pool's generation moved (not for our own status writes)."""
        key = (namespace, name)
        if self._generations.get(key, generation) != generation:
            self.wake(namespace, name)
        self._generations[key] = generation

    async def run(self, namespace: str, name: str) -> None:
        """Reconcile the pool until cancelled (Kopf cancels it when the pool is deleted)."""
        key = (namespace, name)
        wakeup = self._wakeups[key] = asyncio.Event()
        try:
            while True:
                interval = await self._pass(namespace, name)
                if interval is None:  # the pool is gone
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), timeout=interval)
                    await asyncio.sleep(self.debounce_seconds)
                wakeup.clear()
        finally:
            if self._wakeups.get(key) is wakeup:
                del self._wakeups[key]
                self._generations.pop(key, None)
            self.reconciler.telemetry.forget_pool(namespace, name)

    async def _pass(self, namespace: str, name: str) -> float | None:
        """One pass; the seconds until the next one, or None when the pool is gone."""
        try:
            body = await asyncio.to_thread(self.reconciler.kube.get_pool, namespace, name)
            if body is None or body.get("metadata", {}).get("deletionTimestamp"):
                return None
            await asyncio.to_thread(self.reconciler.reconcile, body)
        except Exception:
            # Never crash the loop on a strange object or an API hiccup: log, retry soon.
            log.exception(
                "Failed to reconcile %s/%s; retrying in %ss", namespace, name, self.retry_seconds
            )
            return self.retry_seconds
        return interval_of(body)


def interval_of(body: dict[str, object]) -> float:
    """spec.scaling.intervalSeconds of a raw object, or the default."""
    spec = body.get("spec")
    scaling = spec.get("scaling") if isinstance(spec, dict) else None
    value = scaling.get("intervalSeconds") if isinstance(scaling, dict) else None
    return float(value) if isinstance(value, int) and value > 0 else DEFAULT_INTERVAL_SECONDS
