"""The twin's deleted replicas: they drain like vLLM with `--shutdown-timeout`.

kwok deletes a pod at once (no kubelet honours its grace period), so the twin plays the
kubelet and vLLM: a deleted replica takes no new request and keeps running the ones it
has, waiting or decoding, for the pool's drain time (`gpufleet.desired.drain`); whatever is
left then is aborted, its streams cut. Each pool's book counts both, so a test or the demo
can read how many requests a scale-down drained and how many it cut; beside them, the
requests cut mid-decode because their replica's node vanished without notice.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from gpufleet.desired.drain import drain_seconds
from gpufleet.dev.twinledger import Ledger
from gpufleet.dev.twinworld import PoolView
from gpufleet.sim.replica import Replica

Key = tuple[str, str]  # namespace, pool


@dataclass(frozen=True)
class DrainOutcome:
    """Requests deleted replicas of a pool held: finished in the drain time, or cut; and
    requests lost mid-decode with a vanished node. `draining`: deleted replicas still
    finishing theirs, whose requests are in neither count yet."""

    drained: int = 0
    cut: int = 0
    lost: int = 0
    draining: int = 0


@dataclass
class _Draining:
    key: Key
    engine: Replica
    deadline: float
    held: int  # requests in the replica when it was deleted


class DrainBook:
    """Deleted replicas still finishing their requests, and what became of those."""

    def __init__(self) -> None:
        self._draining: list[_Draining] = []
        self._outcomes: dict[Key, DrainOutcome] = {}

    def add(self, key: Key, engine: Replica, at: float, view: PoolView | None) -> None:
        """A replica of `key` was deleted at `at`; it drains for its pool's drain time (with
        the pool gone too, until it is done)."""
        if engine.idle:
            return
        seconds = drain_seconds(view.pool) if view is not None else math.inf
        self._draining.append(_Draining(key, engine, at + seconds, engine.outstanding))

    def engines(self) -> Iterator[Replica]:
        for draining in self._draining:
            yield draining.engine

    def settle(self, now: float, ledger: Ledger) -> None:
        """Book the replicas that finished; abort those whose drain time is over."""
        still = []
        for d in self._draining:
            if d.engine.idle:
                self._book(d.key, drained=d.held)
            elif now >= d.deadline:
                waiting, running = d.engine.evict(d.deadline)
                for request in (*waiting, *running):
                    ledger.cut(request, d.deadline)
                cut = len(waiting) + len(running)
                self._book(d.key, drained=d.held - cut, cut=cut)
            else:
                still.append(d)
        self._draining = still

    def lose(self, key: Key, cut: int) -> None:
        """A replica of `key` vanished with its node, `cut` requests mid-decode."""
        self._book(key, lost=cut)

    def _book(self, key: Key, *, drained: int = 0, cut: int = 0, lost: int = 0) -> None:
        before = self._outcomes.get(key, DrainOutcome())
        self._outcomes[key] = DrainOutcome(
            before.drained + drained, before.cut + cut, before.lost + lost
        )

    def outcome(self, namespace: str, pool: str) -> DrainOutcome:
        key = (namespace, pool)
        booked = self._outcomes.get(key, DrainOutcome())
        draining = sum(1 for d in self._draining if d.key == key)
        return replace(booked, draining=draining)
