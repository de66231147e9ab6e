"""The per-pool loops: a pass every intervalSeconds, sooner when woken, later when failing.

Each pool gets one loop (an asyncio task this module owns, started by the pool's first
watch event and cancelled by its deletion), so passes of one pool never overlap; passes of
different pools run concurrently in worker threads (the kubernetes client is blocking).
Watch events on the pool or its children (Deployments, Services, the HTTPRoute) wake the
loop early, so a spec change or a hand edit is handled in about a second instead of at the
next interval. The queue watch (`gpufleet.queuewatch`) wakes it early too, when one of its
tiers surges (`wake_early`); that pass says so in its message.

The loops are ours rather than Kopf daemons because a Kopf daemon makes Kopf put a
finalizer on every pool, and a finalizer guards nothing here: the children go with the pool
through ownerReferences, and nothing else needs cleaning up. Without one, deleting a pool,
its namespace or the CRD completes whether the operator runs or not.

A pass that fails (a child the apiserver refuses, a plan that cannot be made, the API
unreachable) is retried after a backoff that doubles up to MAX_BACKOFF_SECONDS; while it
lasts only a change of the pool's spec wakes the loop, so a failing pool's own children
cannot drive it into a hot loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from gpufleet.reconcile import Reconciler

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 30.0
# Watch events come in bursts (a scale-up updates a Deployment's status many times):
# a woken loop waits this long so one pass handles the whole burst.
DEBOUNCE_SECONDS = 0.5
RETRY_SECONDS = 5.0
MAX_BACKOFF_SECONDS = 300.0

Key = tuple[str, str]
T = TypeVar("T")
R = TypeVar("R")


def backoff_seconds(failures: int, first: float = RETRY_SECONDS) -> float:
    """Seconds before the next try after `failures` failed passes in a row: 5, 10, 20, ..."""
    doublings = max(0, min(failures - 1, 16))
    return min(MAX_BACKOFF_SECONDS, first * float(2**doublings))


class Gate:
    """One pass's start, decided once under a lock: it runs, or it was called off before
    it began (then it never writes). Called off from the event loop, run in a thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = False
        self._shut = False

    def shut_unless_started(self) -> bool:
        """Call the pass off if it has not started; whether it was."""
        with self._lock:
            self._shut = not self._started
            return self._shut

    def run(self, work: Callable[[T], R], arg: T, held: Callable[[], bool]) -> R | None:
        """`work(arg)`, unless called off (None) or, as it would start, `held()` says the
        pool's shard Lease is no longer known to be ours (NotHeld)."""
        with self._lock:
            if self._shut:
                return None
            if not held():
                raise NotHeld
            self._started = True
        return work(arg)


class NotHeld(Exception):
    """The pass did not start: this process's hold on the pool's shard is not fresh."""


@dataclass
class Loops:
    """The loops of every pool this process reconciles."""

    reconciler: Reconciler
    debounce_seconds: float = DEBOUNCE_SECONDS
    retry_seconds: float = RETRY_SECONDS
    # Whether this process reconciles the pool (sharded replicas: its shard is held here).
    owns: Callable[[str, str], bool] = lambda namespace, name: True
    # Checked as each pass starts to write: whether this process's hold on the pool is
    # fresh (sharded: its shard Lease renewed within the deadline). A stalled keeper must
    # not leave passes writing under a Lease that may have gone to another replica.
    held: Callable[[str, str], bool] = lambda namespace, name: True
    # The shard a pool is in, for the queue depth by shard (0 when not sharded).
    shard_of: Callable[[str, str], int] = lambda namespace, name: 0
    # Called after each pass that ran, with the prompt tokens/s its weights send each tier
    # and the tiers whose Deployment it changed (the queue watch's base, `QueueWatch.passed`).
    passed: Callable[[str, str, Mapping[str, float], frozenset[str]], None] = (
        lambda namespace, name, sent, resized: None
    )
    _tasks: dict[Key, asyncio.Task[None]] = field(default_factory=dict)
    _wakeups: dict[Key, asyncio.Event] = field(default_factory=dict)
    _generations: dict[Key, int] = field(default_factory=dict)
    _failures: dict[Key, int] = field(default_factory=dict)
    _retiring: set[Key] = field(default_factory=set)
    # Pools whose spec changed and no pass has read yet: the generation and when it was seen.
    _changed: dict[Key, tuple[int, float]] = field(default_factory=dict)
    _due: dict[int, int] = field(default_factory=dict)  # passes due or running, by shard
    _gates: dict[Key, Gate] = field(default_factory=dict)  # each pool's pass now
    # Pools woken for an early pass (`wake_early`) and why, until that pass reads it.
    _early: dict[Key, str] = field(default_factory=dict)
    # Worker threads for the passes (None: as many as the default executor has). Their
    # own pool, not the event loop's default one: with a backlog of passes queued there,
    # anything else sent to a thread (the Lease renewals) would wait behind all of them.
    workers: int | None = None
    _executor: ThreadPoolExecutor | None = None

    def ensure(self, namespace: str, name: str) -> None:
        """Start the pool's loop unless it runs or the pool is not this process's to
        reconcile (called from the running event loop)."""
        key = (namespace, name)
        if not self.owns(namespace, name):
            return
        task = self._tasks.get(key)
        if task is None or task.done():
            self._tasks[key] = asyncio.get_running_loop().create_task(
                self.run(namespace, name), name=f"gpufleet-{namespace}/{name}"
            )

    def stop(self, namespace: str, name: str) -> None:
        """Cancel the pool's loop (the pool is deleted or being deleted)."""
        task = self._tasks.pop((namespace, name), None)
        if task is not None:
            task.cancel()

    async def retire(self, which: Callable[[str, str], bool]) -> None:
        """Stop the loops of the pools `which` selects, each after its pass in flight (a
        pass runs in a thread that cancelling would not stop), and wait until they have:
        then nothing of this process writes to those pools any more.

        A pass still waiting for a worker thread is called off instead (its gate shut, so
        it cannot start writing later): with a backlog of passes queued for the threads,
        waiting for each retiring pool's turn would hold the shards' handover for
        minutes behind the pools this process keeps."""
        keys = [key for key in self._tasks if which(*key)]
        self._retiring.update(keys)
        tasks = [self._tasks[key] for key in keys]
        for key in keys:
            gate = self._gates.get(key)
            if gate is not None and gate.shut_unless_started():
                self._tasks[key].cancel()
            else:
                self._wake(*key)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._retiring.difference_update(keys)

    async def stop_all(self) -> None:
        """Cancel every loop and wait for them (the operator stops)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def running(self) -> set[Key]:
        return {key for key, task in self._tasks.items() if not task.done()}

    def wake(self, namespace: str, name: str) -> None:
        """A child changed: ask for a pass now, unless the pool is backing off a failure."""
        if self._failures.get((namespace, name), 0) == 0:
            self._wake(namespace, name)

    def wake_early(self, namespace: str, name: str, why: str) -> bool:
        """A tier surged (`gpufleet.queuewatch`): a pass now, saying why, unless the pool
        is not run here or is backing off a failure; whether it was woken."""
        key = (namespace, name)
        if key not in self._wakeups or self._failures.get(key, 0) or key in self._retiring:
            return False
        self._early[key] = why
        self._wake(namespace, name)
        return True

    def _wake(self, namespace: str, name: str) -> None:
        event = self._wakeups.get((namespace, name))
        if event is not None:
            event.set()

    def spec_changed(self, namespace: str, name: str, generation: int) -> None:
        """Wake the loop when the pool's generation moved (not for our own status writes);
        a new spec is worth a try at once, even during a backoff."""
        key = (namespace, name)
        if self._generations.get(key, generation) != generation:
            self._changed.setdefault(key, (generation, time.monotonic()))
            self._wake(namespace, name)
        self._generations[key] = generation

    def failures(self, namespace: str, name: str) -> int:
        """Failed passes of the pool in a row (0 when the last pass succeeded)."""
        return self._failures.get((namespace, name), 0)

    async def run(self, namespace: str, name: str) -> None:
        """Reconcile the pool until cancelled or the pool is gone."""
        key = (namespace, name)
        wakeup = self._wakeups[key] = asyncio.Event()
        try:
            while key not in self._retiring:
                interval = await self._pass(namespace, name)
                if interval is None or key in self._retiring:  # gone, or no longer ours
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), timeout=interval)
                    if key not in self._retiring:
                        await asyncio.sleep(self.debounce_seconds)
                wakeup.clear()
        finally:
            if self._wakeups.get(key) is wakeup:
                del self._wakeups[key]
                self._generations.pop(key, None)
                self._failures.pop(key, None)
                self._changed.pop(key, None)
                self._gates.pop(key, None)
                self._early.pop(key, None)
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]
            self.reconciler.telemetry.forget_pool(namespace, name)

    async def _pass(self, namespace: str, name: str) -> float | None:
        """One pass; the seconds until the next one, or None when the pool is gone."""
        shard = self.shard_of(namespace, name)
        self._count_due(shard, 1)
        try:
            return await self._reconcile(namespace, name)
        finally:
            self._count_due(shard, -1)

    async def _in_thread(self, work: Callable[..., R], *args: Any) -> R:
        if self._executor is None:
            workers = self.workers or min(32, (os.cpu_count() or 1) + 4)
            self._executor = ThreadPoolExecutor(workers, thread_name_prefix="gpufleet-pass")
        return await asyncio.get_running_loop().run_in_executor(self._executor, work, *args)

    def _count_due(self, shard: int, step: int) -> None:
        due = self._due[shard] = self._due.get(shard, 0) + step
        self.reconciler.telemetry.queue_depth.labels(str(shard)).set(due)

    def _read(self, key: Key, body: dict[str, object] | None) -> None:
        """A pass read the pool: time the spec change it is the first to see."""
        changed = self._changed.get(key)
        metadata = body.get("metadata") if body is not None else None
        generation = metadata.get("generation") if isinstance(metadata, dict) else None
        if changed is not None and isinstance(generation, int) and generation >= changed[0]:
            del self._changed[key]
            self.reconciler.telemetry.spec_to_reconcile.observe(time.monotonic() - changed[1])

    async def _reconcile(self, namespace: str, name: str) -> float | None:
        key = (namespace, name)
        gate = self._gates[key] = Gate()  # from here until it writes, it may be called off
        try:
            body = await self._in_thread(self.reconciler.kube.get_pool, namespace, name)
            self._read(key, body)
            if body is None or body.get("metadata", {}).get("deletionTimestamp"):
                return None
            held = partial(self.held, namespace, name)
            early = self._early.pop(key, None)
            if early is not None:
                self.reconciler.telemetry.early_passes.inc()
            work = partial(self.reconciler.reconcile, early=early)
            result = await self._in_thread(gate.run, work, body, held)
            if result is None:  # called off before it started: the pool is retired
                return None
            self.passed(namespace, name, result.sent, result.resized)
        except NotHeld:
            log.warning("Skipped a pass of %s/%s: its shard Lease is not fresh", namespace, name)
            return self.retry_seconds
        except Exception:
            # Never crash the loop on a strange object or an API hiccup: log, back off.
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            delay = backoff_seconds(failures, self.retry_seconds)
            log.exception("Failed to reconcile %s/%s; retrying in %.0fs", namespace, name, delay)
            return delay
        if result.failure is not None:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            delay = backoff_seconds(failures, self.retry_seconds)
            log.warning(
                "Failed to reconcile %s/%s (%s, %d in a row); retrying in %.0fs",
                namespace,
                name,
                result.failure,
                failures,
                delay,
            )
            return delay
        self._failures.pop(key, None)
        return interval_of(body)


async def measure_lag(observe: Callable[[float], None], period: float = 0.25) -> None:
    """Until cancelled: sleep `period` over and over and observe how late each wake-up
    came. The watch streams, the loops and their status writes all run on this event loop,
    so its lag is how long any of them waits behind work that holds the loop."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + period
        await asyncio.sleep(period)
        observe(max(0.0, loop.time() - due))


def interval_of(body: dict[str, object]) -> float:
    """spec.scaling.intervalSeconds of a raw object, or the default."""
    spec = body.get("spec")
    scaling = spec.get("scaling") if isinstance(spec, dict) else None
    value = scaling.get("intervalSeconds") if isinstance(scaling, dict) else None
    return float(value) if isinstance(value, int) and value > 0 else DEFAULT_INTERVAL_SECONDS
