"""The replicas of one tier over time: cold starts, node loss, scale down, cost and energy.

A tier has as many node *slots* as its maxReplicas; a replica runs on a slot. The slots of
a preemptible tier go away at random (exponential up and down times, seeded per tier, the
same for every policy) and come back; the replica on a slot that goes away dies, its
waiting requests go back to the router and its decoding ones are cut (cause: node lost);
the Deployment still wants it, so it restarts on another slot (cold) or stays Pending
(unschedulable) until a slot comes back. With a notice (`Preemption.notice_seconds`), a
node is known to be leaving that long before it goes (as a node termination handler or an
interruption taint tells the cluster): its replica is evicted at the notice, takes no new
request and drains what it has until the node goes (or for the pool's drain time, if
shorter), while the Deployment starts its replacement at once on another node; what is
still decoding when the node goes is cut (cause: node lost), what is still waiting goes
back to the router.

A replica costs its tier's price and draws its board power from the moment it is started
on a node, not from Ready: the model loads for `model_load_seconds` before it takes
traffic. Scale down removes Pending replicas first, then starting ones, then the Ready
ones with the fewest requests in flight. A Ready one removed drains as the operator's pods
do (`gpufleet.desired.drain`): it takes no new request and runs the ones it has, waiting or
decoding, for the pool's drain time (still costing); whatever it holds when that runs out
is cut (cause: drain timeout), as vLLM's `--shutdown-timeout` aborts it. An engine step
that started before the deadline completes (vLLM stops between steps).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from gpufleet.api.types import Tier
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.sim.metrics import CutCause, Recorder
from gpufleet.sim.replica import EngineParams, Replica


@dataclass(frozen=True)
class Preemption:
    """How often a preemptible tier's nodes go away, and for how long."""

    mean_up_seconds: float = 2 * 3600.0
    mean_down_seconds: float = 600.0
    # How long before it goes a node is known to be leaving; 0: unnoticed.
    notice_seconds: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.mean_up_seconds > 0


def slot_events(
    slots: int, horizon: float, preemption: Preemption, generator: np.random.Generator
) -> list[tuple[float, int, bool]]:
    """(time, slot, up) changes of a preemptible tier's slots over [0, horizon), sorted."""
    events: list[tuple[float, int, bool]] = []
    if not preemption.enabled:
        return events
    for slot in range(slots):
        t = 0.0
        while True:
            t += float(generator.exponential(preemption.mean_up_seconds))
            if t >= horizon:
                break
            events.append((t, slot, False))
            t += float(generator.exponential(max(preemption.mean_down_seconds, 1e-9)))
            if t >= horizon:
                break
            events.append((t, slot, True))
    events.sort()
    return events


class NodeChange(IntEnum):
    """What happens to a slot's node; at the same instant, in this order."""

    UP = 0
    NOTICE = 1  # it will go away at the change's `down_at`
    DOWN = 2


def node_changes(
    events: list[tuple[float, int, bool]], notice_seconds: float
) -> list[tuple[float, int, NodeChange, float]]:
    """(time, slot, change, down_at) from `slot_events`, a notice `notice_seconds` before
    each loss (not before the node came up), sorted; down_at is the loss's time."""
    changes: list[tuple[float, int, NodeChange, float]] = []
    came_up: dict[int, float] = {}
    for when, slot, up in events:
        if up:
            came_up[slot] = when
            changes.append((when, slot, NodeChange.UP, math.inf))
            continue
        if notice_seconds > 0:
            told = max(came_up.get(slot, 0.0), when - notice_seconds)
            changes.append((told, slot, NodeChange.NOTICE, when))
        changes.append((when, slot, NodeChange.DOWN, when))
    changes.sort()
    return changes


@dataclass
class SimReplica:
    engine: Replica
    started: float  # on a node, paid for from here
    ready_at: float
    slot: int
    serial: int
    # When its pod was created, for the pod start times policies see: `started`, except for
    # the warm start's replicas, created a model load before t=0 as if already running.
    created: float = 0.0
    # Removed (a scale-down, a notice of its node's loss): what it still holds then is cut.
    deadline: float = math.inf
    noticed: bool = False  # evicted ahead of its node's loss (counted as preempted then)


@dataclass
class TierTotals:
    """What a tier cost over the run."""

    replica_seconds: float = 0.0
    cold_starts: int = 0
    preempted: int = 0
    # Replicas the decisions asked for beyond the tier's current ones (the warm start and
    # restarts after a node loss not included): the fleet's changes, for the cold-start bar.
    added: int = 0


@dataclass
class TierFleet:
    """The replicas of one tier in one run."""

    index: int
    tier: Tier
    model: ReplicaModel
    params: EngineParams
    recorder: Recorder
    prompt: list[int]
    output: list[int]
    replicas: list[SimReplica] = field(default_factory=list)  # starting or Ready
    draining: list[SimReplica] = field(default_factory=list)
    pending: int = 0  # wanted, no node to run on
    totals: TierTotals = field(default_factory=TierTotals)
    # (time, pod name) of replicas lost with their nodes: what the operator would see as
    # pods on vanished nodes until their pods are deleted.
    lost: list[tuple[float, str]] = field(default_factory=list)
    _slot_up: list[bool] = field(default_factory=list)
    _slot_used: list[bool] = field(default_factory=list)
    _serial: int = 0
    _busy_closed: float = 0.0
    instant_restarts: bool = False  # a replica lost with its node restarts Ready (the oracle)
    # How long a replica removed by a scale-down keeps serving what it has: the pool's
    # drain time (`gpufleet.desired.drain.drain_seconds`); inf finishes everything.
    drain_seconds: float = math.inf

    def __post_init__(self) -> None:
        self._slot_up = [True] * self.tier.max_replicas
        self._slot_used = [False] * self.tier.max_replicas

    @property
    def price_per_replica_hour(self) -> float:
        return self.tier.price_per_replica_hour

    @property
    def name(self) -> str:
        return self.tier.name

    @property
    def desired(self) -> int:
        return len(self.replicas) + self.pending

    def ready(self, now: float) -> list[SimReplica]:
        return [r for r in self.replicas if r.ready_at <= now]

    def starting(self, now: float) -> int:
        return sum(1 for r in self.replicas if r.ready_at > now)

    # -- scaling ---------------------------------------------------------------------------

    def scale(self, target: int, now: float, *, instant: bool = False, warm: bool = False) -> None:
        """Ask for `target` replicas; `instant`: new ones are Ready at once (oracle).

        `warm`: the run's start, replicas Ready at once as if started a model load earlier.
        """
        target = max(0, min(target, self.tier.max_replicas))
        if not warm:
            self.totals.added += max(target - self.desired, 0)
        while self.desired < target:
            if not self._start(now, instant=instant or warm, warm=warm):
                self.pending += 1
        surplus = self.desired - target
        if surplus <= 0:
            return
        dropped_pending = min(surplus, self.pending)
        self.pending -= dropped_pending
        surplus -= dropped_pending
        if surplus <= 0:
            return
        for victim in self._victims(now, surplus):
            self.replicas.remove(victim)
            self._slot_used[victim.slot] = False
            if victim.ready_at > now:  # still loading the model: gone at once
                self._close(victim, now)
            else:
                victim.deadline = now + self.drain_seconds
                self.draining.append(victim)

    def _victims(self, now: float, count: int) -> list[SimReplica]:
        starting = sorted((r for r in self.replicas if r.ready_at > now), key=lambda r: -r.ready_at)
        ready = self.ready(now)
        for r in ready:
            r.engine.advance(now)
        ready.sort(key=lambda r: (r.engine.outstanding, -r.serial))
        return (starting + ready)[:count]

    def _start(self, now: float, *, instant: bool, warm: bool = False) -> bool:
        slot = next(
            (s for s, up in enumerate(self._slot_up) if up and not self._slot_used[s]), None
        )
        if slot is None:
            return False
        self._slot_used[slot] = True
        self._serial += 1
        ready_at = now if instant else now + self.model.model_load_seconds
        engine = Replica(self.params, self.prompt, self.output, self.recorder, start=ready_at)
        created = now - self.model.model_load_seconds if warm else now
        self.replicas.append(SimReplica(engine, now, ready_at, slot, self._serial, created))
        if not instant:
            self.totals.cold_starts += 1
        return True

    # -- nodes coming and going ------------------------------------------------------------

    def slot_notice(self, slot: int, now: float, down_at: float) -> None:
        """The node of `slot` will go away at `down_at`: no new replica goes there, its
        replica is evicted now and drains until then, and its replacement starts now."""
        self._slot_up[slot] = False
        for victim in [r for r in self.replicas if r.slot == slot]:
            self.replicas.remove(victim)
            self._slot_used[slot] = False
            self.totals.preempted += 1
            # The operator counts a pod on a leaving node as lost when it sees it leaving.
            self.lost.append((now, f"{self.name}-{victim.serial}"))
            victim.noticed = True
            if victim.ready_at > now:  # still loading the model: nothing to drain
                self._close(victim, now)
            else:
                victim.engine.advance(now)
                victim.deadline = min(now + self.drain_seconds, down_at)
                self.draining.append(victim)
            if not self._start(now, instant=self.instant_restarts):
                self.pending += 1

    def slot_down(self, slot: int, now: float) -> list[int]:
        """The node of `slot` went away: the requests to route again."""
        self._slot_up[slot] = False
        reroute: list[int] = []
        for group in (self.replicas, self.draining):
            for victim in [r for r in group if r.slot == slot]:
                waiting, cut = victim.engine.evict(now)
                for request in cut:
                    self.recorder.cut(request, CutCause.NODE_LOST)
                reroute += waiting
                group.remove(victim)
                self._close(victim, now)
                if not victim.noticed:  # a noticed one was counted at its notice
                    self.totals.preempted += 1
                    self.lost.append((now, f"{self.name}-{victim.serial}"))
                if group is self.replicas:
                    self._slot_used[slot] = False
                    if not self._start(now, instant=self.instant_restarts):
                        self.pending += 1
        return reroute

    def slot_up(self, slot: int, now: float) -> None:
        self._slot_up[slot] = True
        if self.pending and self._start(now, instant=self.instant_restarts):
            self.pending -= 1

    # -- time and money --------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Run every engine up to `now`; drained replicas leave, and those whose drain time
        ran out before `now` stop there, cutting what they held."""
        for r in self.replicas:
            r.engine.advance(now)
        still: list[SimReplica] = []
        for r in self.draining:
            r.engine.advance(min(now, r.deadline))
            if r.engine.idle and r.engine.last_step_end <= now:
                self._close(r, max(r.engine.last_step_end, r.started))
            elif now >= r.deadline:
                self._cut_at_deadline(r)
                self._close(r, r.deadline)
            else:
                still.append(r)
        self.draining = still

    def finish(self, end: float) -> None:
        """End of the run: in-flight requests complete (a draining replica's up to its
        deadline), replicas are charged up to `end`."""
        for r in self.replicas:
            r.engine.drain()
            self._close(r, end)
        for r in self.draining:
            r.engine.advance(r.deadline)
            self._cut_at_deadline(r)
            self._close(r, end)
        self.replicas, self.draining, self.pending = [], [], 0

    def _cut_at_deadline(self, replica: SimReplica) -> None:
        """The drain time ran out: whatever the replica holds, waiting or decoding, is cut."""
        if replica.engine.idle:
            return
        waiting, running = replica.engine.evict(replica.deadline)
        for request in (*waiting, *running):
            self.recorder.cut(request, CutCause.DRAIN_TIMEOUT)

    def _close(self, replica: SimReplica, end: float) -> None:
        self.totals.replica_seconds += max(end - replica.started, 0.0)
        self._busy_closed += replica.engine.busy_seconds

    def replica_seconds(self, now: float) -> float:
        """Replica-seconds paid for up to `now`, open replicas included."""
        open_seconds = sum(max(now - r.started, 0.0) for r in self.replicas + self.draining)
        return self.totals.replica_seconds + open_seconds

    def busy_seconds(self) -> float:
        """Compute done so far by every replica this tier ever ran."""
        return self._busy_closed + sum(r.engine.busy_seconds for r in self.replicas + self.draining)


def least_loaded(replicas: list[SimReplica], now: float) -> SimReplica:
    """The Ready replica with the fewest requests in flight (oldest first on ties)."""
    best = replicas[0]
    best.engine.advance(now)
    best_load = best.engine.outstanding
    for r in replicas[1:]:
        r.engine.advance(now)
        load = r.engine.outstanding
        if load < best_load:
            best, best_load = r, load
    return best


def merged(*streams: list[tuple[float, int, bool]]) -> list[tuple[float, int, bool]]:
    return list(heapq.merge(*streams))
