"""One policy on one trace: requests routed to tiers and replicas, a decision every interval.

Time runs in decision intervals. Within one, arrivals and node changes are taken in time
order: each request goes to a tier by its class's integer weights (a seeded draw per
request, the same draws for every policy), then to the Ready replica of that tier with
the fewest requests in flight (or round robin). A tier without a Ready replica passes the
request to the class's other weighted tiers (a gateway retry); with none, it is dropped
(an SLO miss). At the end of the interval every engine is run up to that instant, the
policy sees what Prometheus would show for it and decides, and the fleet follows. What
Prometheus shows is a rate (or P99) over the operator's window: the last interval, or
more where the scrape is slower than a quarter interval (`SimConfig.scrape_interval_seconds`:
the last 60 s with a 15 s scrape and a 30 s interval, so a step shows at half its size at
the first pass after it; the last 40 s with a 10 s scrape, exactly). Queues are read as
they are at the pass. A policy that has early passes (the gpufleet planner) is also woken
between intervals where the operator's queue watch would wake it (`sim.early`), and its
next pass comes an interval after that one.

Every policy starts warm: before the trace starts it has decided on the demand of the
trace's first horizon (the pool's longest model load plus an interval: what a pass plans
for; one interval is a noisy sample: the Azure trace's first 30 s carry 59 requests, each of
the next ten 124-183) and its replicas are Ready, so no policy pays a start-up transient the
others do not.
"""

from __future__ import annotations

import math
import time as wallclock
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from gpufleet.api.types import InferencePool
from gpufleet.desired.drain import drain_seconds
from gpufleet.desired.manifests import ttft_buckets_in, vllm_args
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.records import MetricsState, Observation, PodStart, TierObservation
from gpufleet.sim.early import EARLY_PASS_DELAY_SECONDS, EarlyPasses, watch_window_seconds
from gpufleet.sim.fleet import (
    NodeChange,
    Preemption,
    TierFleet,
    TierTotals,
    least_loaded,
    node_changes,
    slot_events,
)
from gpufleet.sim.metrics import (
    TTFT_BUCKETS,
    Interval,
    Recorder,
    busy_share,
    exact_quantile,
    fraction_above,
    histogram_quantile,
    prompt_buckets_of,
    share_at_most,
    window_seconds,
)
from gpufleet.sim.policy import Decision, Policy, Seen, class_loads, demand_of
from gpufleet.sim.replica import engine_params
from gpufleet.sim.traces import STREAM_PREEMPTION, STREAM_ROUTING, Trace, rng


class Balance(StrEnum):
    LEAST_LOADED = "least-loaded"
    ROUND_ROBIN = "round-robin"


@dataclass(frozen=True)
class SimConfig:
    seed: int = 0
    preemption: Preemption = field(default_factory=Preemption)
    balance: Balance = Balance.LEAST_LOADED
    # Latency quantiles as Prometheus computes them from vLLM's buckets (what the operator
    # reads), or the exact sample quantile (what-if: perfect metrics).
    exact_quantiles: bool = False
    # How often Prometheus scrapes the pods: a pass's rates and P99s span an interval and
    # at least four scrapes (`planning.observed.metrics_window_seconds`). None: one
    # interval (a scrape of a quarter interval or less).
    scrape_interval_seconds: float | None = None
    # How often the queue watch checks for a surge that wakes an early pass of a policy
    # that has them (`sim.early`), as the operator's --queue-check-seconds. None: the
    # scrape interval (off without one); 0: off.
    queue_check_seconds: float | None = None

    @property
    def queue_check_period(self) -> float:
        """The queue watch's period in seconds; 0 when it is off."""
        period = self.queue_check_seconds
        return (self.scrape_interval_seconds or 0.0) if period is None else period


@dataclass
class Timeline:
    """Per interval (at its end): replicas, latency and cost so far."""

    time: list[float] = field(default_factory=list)
    desired: dict[str, list[int]] = field(default_factory=dict)
    ready: dict[str, list[int]] = field(default_factory=dict)
    class_p99: dict[str, list[float]] = field(default_factory=dict)  # exact, NaN: no request
    cost: list[float] = field(default_factory=list)  # dollars so far


@dataclass
class RunResult:
    """Everything one policy's run produced."""

    policy: str
    description: str
    classes: tuple[str, ...]
    class_of: NDArray[np.int64]
    ttft: NDArray[np.float64]
    fate: NDArray[np.int64]
    cut_cause: NDArray[np.int64]  # CutCause per request (NONE unless its fate is CUT)
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    tiers: dict[str, TierTotals]
    price_per_replica_hour: dict[str, float]
    watts: dict[str, float | None]
    duration_seconds: float
    timeline: Timeline
    wall_seconds: float
    decisions: int
    early_passes: int = 0  # passes the queue watch woke (`sim.early`)
    arrival_seconds: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


def models_of(pool: InferencePool) -> dict[str, ReplicaModel]:
    from gpufleet.planning.profiles import pool_model

    return {t.name: pool_model(t, pool.spec) for t in pool.spec.tiers}


class _Run:
    def __init__(
        self,
        pool: InferencePool,
        models: Mapping[str, ReplicaModel],
        trace: Trace,
        config: SimConfig,
        interval: float,
    ) -> None:
        self.pool = pool
        self.trace = trace
        self.config = config
        self.interval = interval
        spec = pool.spec
        self.window = window_seconds(interval, config.scrape_interval_seconds)
        period = config.queue_check_period
        # Reported events are kept for every window read: a pass's (which may come between
        # intervals: early), an interval's for the timeline, and the queue watch's.
        keep = max(self.window, interval, watch_window_seconds(period) if period else 0.0)
        self.recorder = Recorder(trace, len(spec.tiers), keep)
        prompt, output = self.recorder.prompt, self.recorder.output
        # The drain time the operator writes into the pods (--shutdown-timeout), so a
        # scale-down here cuts what the same scale-down there would.
        drain = float(drain_seconds(pool))
        self.fleets = [
            TierFleet(
                i,
                t,
                models[t.name],
                engine_params(models[t.name]),
                self.recorder,
                prompt,
                output,
                drain_seconds=drain,
            )
            for i, t in enumerate(spec.tiers)
        ]
        self.by_name = {f.name: f for f in self.fleets}
        self.draws: list[float] = rng(config.seed, STREAM_ROUTING).random(len(trace)).tolist()
        self.n_intervals = max(1, math.ceil((trace.duration_seconds + 1e-9) / interval))
        self.end = self.n_intervals * interval
        events: list[tuple[float, int, int, NodeChange, float]] = []
        for i, t in enumerate(spec.tiers):
            if t.preemptible:
                generator = rng(config.seed, STREAM_PREEMPTION, i)
                slots = slot_events(t.max_replicas, self.end, config.preemption, generator)
                for when, slot, change, down_at in node_changes(
                    slots, config.preemption.notice_seconds
                ):
                    events.append((when, i, slot, change, down_at))
        events.sort()
        self.node_events = events
        self.weights: list[tuple[list[int], list[int]]] = []  # per class: tiers, cumulative
        self.order: list[list[int]] = []  # per class: tiers by weight, for the retry
        self.rr = [0] * len(self.fleets)
        # The buckets its pods export, read from the command line the operator writes for
        # them (the same flags on every tier): TTFT's (a bound at each class objective, or
        # the pool's own, or vLLM's defaults), and prompt lengths in vLLM's 1-2-5 series up
        # to the context it sets.
        args = vllm_args(pool, spec.tiers[0])
        self.ttft_bounds = tuple(ttft_buckets_in(args) or TTFT_BUCKETS)
        self.prompt_bounds = prompt_buckets_of(args)
        self.exact = config.exact_quantiles
        # Per fleet, (time, busy replica-seconds so far) at each pass: a window's busy share.
        self.busy_marks: list[list[tuple[float, float]]] = [[(0.0, 0.0)] for _ in self.fleets]

    # -- routing ---------------------------------------------------------------------------

    def set_weights(self, decision: Decision) -> None:
        tier_index = {f.name: f.index for f in self.fleets}
        self.weights, self.order = [], []
        for name in self.trace.classes:
            weights = decision.weights.get(name, {})
            tiers = [tier_index[t] for t, w in weights.items() if w > 0 and t in tier_index]
            cumulative = list(np.cumsum([weights[self.fleets[i].name] for i in tiers]).tolist())
            self.weights.append((tiers, cumulative))
            self.order.append(sorted(tiers, key=lambda i: -weights[self.fleets[i].name]))

    def route(self, request: int, now: float) -> None:
        tiers, cumulative = self.weights[self.recorder.class_of[request]]
        if not tiers:
            self.recorder.dropped(request)
            return
        x = self.draws[request] * cumulative[-1]
        pick = tiers[-1]
        for tier, bound in zip(tiers, cumulative, strict=True):
            if x < bound:
                pick = tier
                break
        candidates = [pick] + [t for t in self.order[self.recorder.class_of[request]] if t != pick]
        for tier in candidates:
            fleet = self.fleets[tier]
            ready = [r for r in fleet.replicas if r.ready_at <= now]
            if not ready:
                continue
            if self.config.balance is Balance.LEAST_LOADED:
                replica = least_loaded(ready, now)
            else:
                replica = ready[self.rr[tier] % len(ready)]
                self.rr[tier] += 1
            self.recorder.routed(request, tier)
            replica.engine.enqueue(request, now + fleet.params.overhead)
            return
        self.recorder.dropped(request)

    # -- the loop --------------------------------------------------------------------------

    def apply(self, decision: Decision, now: float, *, warm: bool = False) -> None:
        for fleet in self.fleets:
            fleet.advance(now)
            fleet.instant_restarts = decision.instant
            fleet.scale(
                decision.replicas.get(fleet.name, 0), now, instant=decision.instant, warm=warm
            )
        self.set_weights(decision)

    def run_span(self, start: float, end: float) -> None:
        """Arrivals and node changes in [start, end) taken in time order, every engine run
        up to `end`."""
        arrival = self.recorder.arrival
        lo, hi = np.searchsorted(self.trace.arrival_seconds, [start, end], side="left").tolist()
        i = lo
        events = self.node_events
        while i < hi or (events and events[0][0] < end):
            node_first = (
                bool(events) and events[0][0] < end and (i >= hi or events[0][0] <= arrival[i])
            )
            if node_first:
                when, tier, slot, change, down_at = events.pop(0)
                fleet = self.fleets[tier]
                if change is NodeChange.UP:
                    fleet.slot_up(slot, when)
                elif change is NodeChange.NOTICE:
                    fleet.slot_notice(slot, when, down_at)
                else:
                    for request in fleet.slot_down(slot, when):
                        self.route(request, when)
            else:
                self.route(i, arrival[i])
                i += 1
        for fleet in self.fleets:
            fleet.advance(end)

    def quantile(self, samples: list[float]) -> float | None:
        """The P99 the operator reads from the pods' histograms (or the exact one, what-if)."""
        if self.exact:
            return exact_quantile(0.99, samples)
        return histogram_quantile(0.99, samples, self.ttft_bounds)

    def seen(
        self, now: float, interval: Interval | None, loads_end: float, loads_span: float = 0.0
    ) -> Seen:
        """A pass at `now`: `interval`'s series, and demand over `loads_span` (0: its)."""
        span = self.interval if interval is None else interval.end - interval.start
        tiers = {}
        busy: dict[str, float] = {}
        for fleet in self.fleets:
            ready = fleet.ready(now)
            running = bool(fleet.replicas or fleet.draining)
            metrics = interval.tiers[fleet.index] if interval is not None else None
            rate = (lambda v: v / span) if (metrics is not None and running) else None
            tiers[fleet.name] = TierObservation(
                name=fleet.name,
                desired_replicas=fleet.desired,
                ready_replicas=len(ready),
                starting_replicas=fleet.starting(now),
                unschedulable_replicas=fleet.pending,
                ttft_p99_seconds=self.quantile(metrics.ttft_samples) if metrics else None,
                prompt_tokens_per_second=rate(metrics.prompt_tokens) if rate and metrics else None,
                generation_tokens_per_second=rate(metrics.generation_tokens)
                if rate and metrics
                else None,
                requests_per_second=rate(metrics.completed) if rate and metrics else None,
                requests_waiting=float(sum(r.engine.waiting for r in ready)) if running else None,
                ttft_fraction_above=fraction_above(metrics.ttft_samples, self.ttft_bounds)
                if metrics
                else {},
                prompt_share_at_most=share_at_most(metrics.completed_prompts, self.prompt_bounds)
                if metrics
                else {},
                prompt_mean_tokens=float(np.mean(metrics.completed_prompts))
                if metrics and metrics.completed_prompts
                else None,
                pod_starts=tuple(
                    PodStart(
                        created=self.trace.start + timedelta(seconds=r.created),
                        ready=self.trace.start + timedelta(seconds=r.ready_at),
                    )
                    for r in ready
                ),
                # A pod on a vanished node is seen until it is deleted: about an interval.
                lost_pods=tuple(n for t, n in fleet.lost if t > now - self.interval),
            )
            total = fleet.busy_seconds()
            marks = self.busy_marks[fleet.index]
            busy[fleet.name] = busy_share(marks, now - span, now, total)
            marks.append((now, total))
            while len(marks) > 2 and marks[1][0] <= now - self.window:
                del marks[0]  # no window reaches back past the next one
        loads = class_loads(self.trace, loads_end - (loads_span or span), loads_end)
        class_p99 = {
            name: self.quantile(interval.class_ttft_samples[ci]) if interval else None
            for ci, name in enumerate(self.trace.classes)
        }
        observation = Observation(
            now=self.trace.start + timedelta(seconds=now),
            tiers=tiers,
            metrics=MetricsState.AVAILABLE,
            demand=demand_of(loads),
            class_ttft_p99_seconds=class_p99,
            metrics_window_seconds=span,
        )
        return Seen(time=now, observation=observation, busy_replicas=busy)


def simulate(
    pool: InferencePool,
    trace: Trace,
    policy: Policy,
    config: SimConfig,
    *,
    models: Mapping[str, ReplicaModel] | None = None,
    on_interval: Callable[[], None] | None = None,
) -> RunResult:
    """Replay `trace` against the pool's fleet under `policy`."""
    started = wallclock.perf_counter()
    interval = float(pool.spec.scaling.interval_seconds)
    run = _Run(pool, models or models_of(pool), trace, config, interval)
    timeline = Timeline()
    for fleet in run.fleets:
        timeline.desired[fleet.name] = []
        timeline.ready[fleet.name] = []
    for name in trace.classes:
        timeline.class_p99[name] = []

    # Warm start: the first horizon's demand, as if it had been running before.
    load = max(f.model.model_load_seconds for f in run.fleets)
    horizon = max(min(load + interval, run.end), interval)
    decision = policy.warm(run.seen(0.0, None, horizon, horizon))
    run.apply(decision, 0.0, warm=True)
    decisions = 1
    period = config.queue_check_period if policy.early_passes else 0.0
    watch = EarlyPasses(period) if period > 0 else None
    if watch is not None:
        watch.passed(decision.sent, {}, {})
    # Stops: every interval's end (the timeline), every pass (an interval after the last
    # one, or sooner when the queue watch wakes one) and every check of the watch.
    t, next_pass, ticks, checks = 0.0, interval, 1, 1
    while t < run.end - _EPSILON:
        stop = min(ticks * interval, next_pass, checks * period if watch else math.inf, run.end)
        run.run_span(t, stop)
        run.recorder.report(stop)
        t = stop
        if t >= ticks * interval - _EPSILON:
            _record(run, timeline, run.recorder.window(t - interval, t), t)
            ticks += 1
            if on_interval is not None:
                on_interval()
        if t >= next_pass - _EPSILON and t < run.end - _EPSILON:
            span = interval if policy.foresight else run.window
            window = run.recorder.window(max(t - span, 0.0), t)
            seen = run.seen(t, window, t + interval if policy.foresight else t)
            before = {f.name: f.desired for f in run.fleets}
            decision = policy.decide(seen)
            run.apply(decision, t)
            decisions += 1
            next_pass = t + interval
            if watch is not None:
                watch.passed(decision.sent, before, decision.replicas)
        if watch is not None and t >= checks * period - _EPSILON:
            checks += 1
            if watch.check(run.fleets, run.recorder, t):
                next_pass = min(next_pass, t + EARLY_PASS_DELAY_SECONDS)
    for fleet in run.fleets:
        fleet.finish(run.end)
    recorder = run.recorder
    return RunResult(
        policy=policy.name,
        description=policy.description,
        classes=trace.classes,
        class_of=trace.class_index,
        ttft=recorder.ttft,
        fate=recorder.fate,
        cut_cause=recorder.cut_cause,
        prompt_tokens=trace.prompt_tokens,
        output_tokens=trace.output_tokens,
        tiers={f.name: f.totals for f in run.fleets},
        price_per_replica_hour={f.name: f.price_per_replica_hour for f in run.fleets},
        watts={f.name: f.model.watts for f in run.fleets},
        duration_seconds=run.end,
        timeline=timeline,
        wall_seconds=wallclock.perf_counter() - started,
        decisions=decisions,
        early_passes=watch.count if watch is not None else 0,
        arrival_seconds=trace.arrival_seconds,
    )


_EPSILON = 1e-9  # seconds: stops closer than this are one instant


def _record(run: _Run, timeline: Timeline, interval: Interval, now: float) -> None:
    timeline.time.append(now)
    for fleet in run.fleets:
        timeline.desired[fleet.name].append(fleet.desired)
        timeline.ready[fleet.name].append(len(fleet.ready(now)))
    for ci, name in enumerate(run.trace.classes):
        samples = interval.class_ttft_samples[ci]
        timeline.class_p99[name].append(float(np.percentile(samples, 99)) if samples else math.nan)
    timeline.cost.append(
        sum(f.replica_seconds(now) * f.price_per_replica_hour / 3600.0 for f in run.fleets)
    )
