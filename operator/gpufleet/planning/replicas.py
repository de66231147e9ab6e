"""The steps that turn the optimizer's replicas into what each Deployment asks for.

`planner._decide` runs them in this order, each a function of explicit values:

1. `keep_serving`: every class keeps a replica it can use (never scale to zero blind).
2. `asks`: a capped tier asks for what it would need with its nodes back.
3. `stabilization.delay_scale_down`: scale up at once, down only after the delay.
4. clamp to min/maxReplicas (`TierBounds.ask_lower`, `ask_upper`).
5. `protect_traffic`: keep what carries a tier's live weights until they have moved.
6. `within_budget`: trim what is held above the recommendation to fit the budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpufleet.planning.bounds import TierBounds
from gpufleet.planning.capacity import MAX_UTILIZATION
from gpufleet.planning.classes import ClassCapacity
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.optimizer import optimize
from gpufleet.planning.program import ClassNeed, TierOption
from gpufleet.planning.stabilization import Load, replicas_for


def keep_serving(
    inputs: Inputs,
    capacities: Mapping[str, ClassCapacity],
    bounds: TierBounds,
    replicas: Mapping[str, int],
    demand: Mapping[str, float],
    *,
    initial: bool = False,
) -> dict[str, int]:
    """At least one usable replica per class: never scale to zero on missing data.

    A class whose demand query reads zero may go without (the query sees it wake up);
    the cheapest eligible tier that fits under maxReplicas and the budget gets the one.
    """
    result = dict(replicas)
    classes = list(inputs.classes)
    by_priority = sorted(classes, key=lambda c: (-c.priority, classes.index(c)))
    budget = inputs.budget or math.inf  # as before: a zero budget is trimmed by within_budget
    for cls in by_priority:
        capacity = capacities[cls.name]
        idle = demand.get(cls.name, 0.0) <= 0
        if not initial and idle and cls.demand_query is not None:
            continue
        if any(result.get(t, 0) > 0 for t in capacity.eligible):
            continue
        room = {
            t: 1
            for t in capacity.eligible
            if bounds.upper[t] >= 1 and inputs.cost(result) + inputs.prices[t] <= budget
        }
        choice = capacity.cheapest(room, inputs.prices)
        if choice is not None:
            result[choice] = 1
    return result


def asks(
    inputs: Inputs,
    bounds: TierBounds,
    wanted: Mapping[str, int],
    options: list[TierOption],
    needs: list[ClassNeed],
) -> dict[str, int]:
    """What each tier's Deployment asks for: the plan, and for a capped tier what it would
    need with its nodes back (the optimizer without caps), so its pending replicas stay.
    Shrinking a capped tier's ask to its cap would make the pending pods, and so the cap,
    vanish, and the next pass would scale up again."""
    asked = dict(wanted)
    if not bounds.capped:
        return asked
    free = [
        TierOption(
            o.name, o.price_per_replica_hour, bounds.ask_lower[o.name], bounds.ask_upper[o.name]
        )
        for o in options
    ]
    unbound = optimize(free, needs, inputs.budget)
    for name in bounds.capped:
        asked[name] = max(asked[name], unbound.replicas.get(name, 0))
    return asked


def protect_traffic(
    inputs: Inputs,
    bounds: TierBounds,
    target: Mapping[str, int],
    loads: Mapping[str, Load],
) -> tuple[dict[str, int], dict[str, int]]:
    """Keep what carries each tier's live weights until they have moved away.

    Returns the target with protection applied, and the tiers held above it (with the
    count each keeps)."""
    result = dict(target)
    protected = {}
    for name in inputs.names:
        shares = {
            c.name: inputs.previous_weights(c.name).get(name, 0) / 100.0 for c in inputs.classes
        }
        current = inputs.seen(name).desired_replicas
        need = min(replicas_for(name, shares, loads, MAX_UTILIZATION), current, bounds.upper[name])
        if need > result[name]:
            protected[name] = need
            result[name] = need
    return result, protected


def within_budget(
    inputs: Inputs,
    bounds: TierBounds,
    target: Mapping[str, int],
    wanted: Mapping[str, int],
    nodes_back: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Trim replicas held above the recommendation, most expensive first, to fit the budget.

    The budget bounds what runs. A capped tier's Pending replicas run nothing, and up to
    `nodes_back` (what it asks for with its nodes back: `asks`' plan, which fits the budget
    on its own) they cost nothing: once they schedule, the next pass plans on them and lets
    the overflow they replace go. Priced, they were trimmed to the cap, the pending pods and
    so the cap vanished, and the next pass dropped the overflow to scale the tier up again:
    a budget that fits either fleet but not both flipped between them every pass. Pending
    replicas above `nodes_back` (held by the delay) are priced, and trimmed first. A
    Deployment scaled down loses its Pending pods before its running ones, so a capped tier
    with free asks keeps its running replicas too while held replicas elsewhere go."""
    budget = inputs.budget
    result = dict(target)
    if budget is None:
        return result
    free = {n: max(cap, (nodes_back or {}).get(n, 0)) for n, cap in bounds.capped.items()}

    def cost() -> float:
        running = bounds.running(result)
        return inputs.cost(
            {n: running[n] + max(result[n] - free.get(n, result[n]), 0) for n in result}
        )

    names = inputs.names
    order = sorted(names, key=lambda n: (-inputs.prices[n], names.index(n)))
    for name in order:  # pending replicas a capped tier asks beyond its nodes back first
        floor = max(free.get(name, result[name]), bounds.ask_lower[name])
        while cost() > budget + 1e-9 and result[name] > floor:
            result[name] -= 1
    for name in order:  # a capped tier keeps the asks that cost nothing over held replicas
        keep = free[name] if free.get(name, 0) > bounds.capped.get(name, 0) else 0
        while cost() > budget + 1e-9 and result[name] > max(
            wanted.get(name, 0), bounds.lower[name], keep
        ):
            result[name] -= 1
    for name in order:  # still over (budget lowered under what the optimizer could fit)
        while cost() > budget + 1e-9 and result[name] > 0:
            result[name] -= 1
    return result


def undo_nothing_yet(
    inputs: Inputs, target: Mapping[str, int], upper: Mapping[str, int]
) -> dict[str, int]:
    """A pass woken by an event within half an interval of the last decision does not delete
    the replicas that decision started, while they start (as the forecast's history moves
    once an interval): demand and queues read a second apart differ by noise, and a replica
    created and deleted within it serves nothing (seen in the demo's realtime surge: h100
    3->4, then 4->3 one second later)."""
    decided = inputs.previous.last_decision
    if decided is None:
        return dict(target)
    since = (inputs.now - decided.time).total_seconds()
    if not 0 <= since < inputs.spec.scaling.interval_seconds / 2:
        return dict(target)
    out = dict(target)
    for t in inputs.previous.tiers:
        if t.name in out and t.desired_replicas > inputs.seen(t.name).ready_replicas:
            out[t.name] = min(max(out[t.name], t.desired_replicas), upper[t.name])
    return out
