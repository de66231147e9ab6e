"""What a pass buys for, per class: its demand, its forecast and the drain of its queue.

`planner._decide` reads these before it asks the optimizer (steps 4's inputs): the demand
measured or inferred (`demand_tokens`, with what the queues grew or drained by when
inferred), the forecast over the lead time of the tiers that may serve the class
(`forecasts`) and the expected demand with headroom (`with_headroom`), and the requests/s
that drain its backlog within a lead time (`drain_rates`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime

from gpufleet.planning import forecast
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.classes import ClassCapacity, class_capacities
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.leadtime import LeadTime
from gpufleet.planning.prompts import Distribution


def demand_tokens(inputs: Inputs, cls: str) -> float:
    """The class's arrivals in tokens/s. Measured by its demandQuery, that is what it says;
    inferred from what its tiers served, it is that plus what its queues grew by since the
    last pass (a saturated tier serves its capacity, not its demand), or less what they
    drained (replicas that clear a queue serve its tokens on top of the arrivals)."""
    measured = inputs.observation.demand.get(cls)
    if measured is None:  # not measurable this pass: plan for what was planned last time
        return inputs.previous_demand(cls)
    queried = next(c for c in inputs.classes if c.name == cls).demand_query is not None
    growth = 0.0 if queried else queue_growth(inputs, cls)
    return max(max(measured.tokens_per_second, 0.0) + growth, 0.0)


def capacities(
    inputs: Inputs, models: Mapping[str, ReplicaModel], prompts: Mapping[str, Distribution]
) -> dict[str, ClassCapacity]:
    """What each class needs from each tier (`classes.class_capacities`), the classes in
    `prompts` sized over their learned lengths on the replicas this pass's demand needs."""
    result = class_capacities(inputs.classes, models, None, prompts, inputs.serving())
    if prompts:  # their limits grow with the replicas: those the demand needs, not the last's
        result = class_capacities(inputs.classes, models, None, prompts, servers(inputs, result))
    return result


def servers(inputs: Inputs, capacities: Mapping[str, ClassCapacity]) -> dict[str, int]:
    """Replicas each tier needs for this pass's demand where the last pass's weights send
    it, at these capacities; at least what it serves now (`Inputs.serving`). A class sized
    over its prompt lengths (`waits`) may run its replicas busier the more there are, so
    its limits are computed again for these, not for the last pass's replicas."""
    load = dict.fromkeys(inputs.names, 0.0)
    for cls in inputs.classes:
        capacity = capacities.get(cls.name)
        rate = demand_tokens(inputs, cls.name) / cls.tokens_per_request
        for tier, weight in inputs.previous_weights(cls.name).items():
            if capacity is None or weight <= 0 or not capacity.is_eligible(tier):
                continue
            share = rate * weight / 100.0 * capacity.service_seconds[tier]
            load[tier] = load.get(tier, 0.0) + share / capacity.max_utilization[tier]
    serving = inputs.serving()
    return {t: max(n, math.ceil(load.get(t, 0.0) - 1e-9)) for t, n in serving.items()}


def last_pass(inputs: Inputs) -> datetime | None:
    """The latest pass the status can date: the last decision, the optimizer's last answer
    or a class's forecast, whichever is newest. The status's backlog was read by that pass
    or a later one: a steady pool keeps its last decision for many passes, while the
    forecast moves every interval, so the decision's time alone would spread one
    interval's queue over all of them."""
    previous = inputs.previous
    times = [c.forecast.updated_at for c in previous.classes if c.forecast is not None]
    times += [x.time for x in (previous.last_decision, previous.sizing) if x is not None]
    return max(times, default=None)


def queue_growth(inputs: Inputs, cls: str) -> float:
    """Tokens/s the class's queued backlog grew by since the last pass; negative when it
    drained, but only where every tier the class is sent to read its queue (a missing
    reading counts as an empty queue, and is no drain).

    Classes that share a tier share its queue, split between them by a guess (each one's
    share of the tokens the tier served, `demand.backlog_tokens`) that moves with the split
    of what it served, so a class's own backlog can shrink by what the guess moved to
    another class. A class drains at most its share (of their backlog over the two
    readings) of what the classes sent to exactly its tiers (`_sharing`) drained together.
    Without that, a flash crowd on H100s serving both classes read realtime's demand as
    zero the pass the guess moved 833k queued tokens to batch while the queue fell by a
    third, and the plan cut the H100s for batch's 4090s. Growth is the class's own: a burst
    shows there first."""
    then = last_pass(inputs)
    before = {c.name: c.backlog_tokens or 0 for c in inputs.previous.classes}
    if cls not in before or then is None or then >= inputs.now:
        return 0.0
    seconds = max((inputs.now - then).total_seconds(), float(inputs.spec.scaling.interval_seconds))
    now = inputs.observation.class_backlog_tokens
    grown = now.get(cls, 0.0) - before[cls]
    if grown >= 0:
        return grown / seconds
    group = _sharing(inputs, cls)
    tiers = {t for c in group for t, w in inputs.previous_weights(c).items() if w > 0}
    if not tiers or any(inputs.seen(t).requests_waiting is None for t in tiers):
        return 0.0  # a queue not read is no drain
    pooled = sum(now.get(c, 0.0) - before.get(c, 0) for c in group)
    total = sum(now.get(c, 0.0) + before.get(c, 0) for c in group)
    share = (now.get(cls, 0.0) + before[cls]) / total if total > 0 else 1.0
    return max(grown, min(pooled, 0.0) * share) / seconds


def _sharing(inputs: Inputs, cls: str) -> frozenset[str]:
    """The class and the classes its live weights send to exactly the same tiers: all of
    their queue is split between them by the guess. A class that also has tiers of its own
    drains there for real (nodes that leave take their queue with them), which a pooled
    drain would hide: in one run of the demo's nodes-leave phase, pooling batch (4090s and
    H100s) with realtime (H100s) bought H100s for a 4090 queue that was gone ($7.18/h
    without pooling, $9.78/h with it)."""
    sends = {
        c.name: frozenset(t for t, w in inputs.previous_weights(c.name).items() if w > 0)
        for c in inputs.classes
    }
    mine = sends.get(cls, frozenset())
    return frozenset(c for c, ts in sends.items() if ts == mine and mine) | {cls}


def forecasts(
    inputs: Inputs,
    capacities: Mapping[str, ClassCapacity],
    leads: Mapping[str, LeadTime],
    demand: Mapping[str, float],
) -> dict[str, forecast.ClassForecast]:
    """Each class's forecast over the lead time of the tiers that may serve it plus one
    interval (the slowest of them: the class may have to be served there)."""
    interval = float(inputs.spec.scaling.interval_seconds)
    result = {}
    for cls in inputs.classes:
        tiers = capacities[cls.name].eligible or tuple(inputs.names)
        lead = max((leads[t].seconds for t in tiers), default=0.0)
        before = next((c.forecast for c in inputs.previous.classes if c.name == cls.name), None)
        result[cls.name] = forecast.update(
            before,
            demand[cls.name],
            now=inputs.now,
            interval_seconds=interval,
            horizon_seconds=lead + interval,
            percentile=inputs.spec.scaling.forecast_percentile,
        )
    return result


def with_headroom(inputs: Inputs, expected: forecast.ClassForecast) -> float:
    """Tokens/s bought for a class's expected demand: with the spec's headroom, except
    during a burst met by the reserve for recurring ones (`rides_burst`), planned at most at
    their peak: headroom on it would buy replicas that serve only after it is over."""
    room = 0.0 if expected.rides_burst else inputs.headroom
    return expected.expected * (1 + room)


def drain_rates(
    inputs: Inputs, capacities: Mapping[str, ClassCapacity], leads: Mapping[str, LeadTime]
) -> dict[str, float]:
    """Requests/s per class that drain its queue within the lead time of the tiers that
    serve it plus its objective: the capacity a backlog asks for, once. The queue drained
    is the one new replicas will find: today's, grown for a lead time at its last pace."""
    rates = {}
    interval = float(inputs.spec.scaling.interval_seconds)
    for cls in inputs.classes:
        tokens = inputs.observation.class_backlog_tokens.get(cls.name, 0.0)
        if tokens <= 0:
            rates[cls.name] = 0.0
            continue
        tiers = [t for t, w in inputs.previous_weights(cls.name).items() if w > 0]
        lead = min((leads[t].seconds for t in tiers if t in leads), default=0.0)
        found = tokens + queue_growth(inputs, cls.name) * lead
        # No faster than one interval: nothing re-decides sooner, and a drain planned over
        # a lead time of seconds would buy a fleet for one queue.
        seconds = max(lead, interval) + capacities[cls.name].objective_seconds
        rates[cls.name] = found / cls.tokens_per_request / seconds
    return rates
