"""The planner: `plan(spec, observation, previous) -> Plan`. Pure and deterministic.

No I/O, no clock (time is `observation.now`), no state but what `previous` (the pool's
status) carries. One pass:

1. Replica models per tier (`profiles`), slowed by each tier's capacity factor, which
   feedback updates from the observed P99 (`feedback`).
2. Per class and tier: eligibility and the highest utilization that holds the class's P99
   objective with the class's prompt and output lengths (`capacity`). A class no tier can
   serve is planned best effort on the tiers closest to its objective (NoEligibleTier).
3. Metrics missing, stale or unreachable: keep the previous decision (same replicas and
   weights; a new pool gets minReplicas and initial weights). Otherwise:
4. The optimizer buys the cheapest replicas serving every class's demand with headroom,
   within min/max replicas, reality caps (unschedulable replicas) and the budget, or the
   priority-ordered best it can (`optimizer`). Every class keeps at least one replica it
   can use unless it has a demand query that can see it wake (no scale to zero blind).
   A capped tier is planned at what it really has (Ready + starting: traffic and the other
   tiers' sizes take the overflow) but keeps asking for what it would need with its nodes
   back: its pending replicas cost nothing and schedule the moment nodes return. Shrinking
   its ask to the cap would make the pending pods, and so the cap, vanish and the next pass
   scale up again (a scale-up retried every other pass).
5. Stability: scale-down delay, traffic protection, make-before-break routing and integer
   weights (`stabilization`).
6. Cost, $/Mtok, energy and carbon, predicted P99 per class, the conditions and a one-line
   reason (`explain`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from gpufleet.api.status import InferencePoolStatus, TierStatus
from gpufleet.api.types import InferencePoolSpec, Tier, TrafficClass, decimal
from gpufleet.planning import explain
from gpufleet.planning.capacity import (
    MAX_UTILIZATION,
    MIN_ELIGIBLE_UTILIZATION,
    ReplicaModel,
    kwh_per_million_tokens,
)
from gpufleet.planning.feedback import (
    LOADED_AT_LEAST,
    LOADED_AT_MOST,
    Signal,
    next_capacity_factor,
    signal,
)
from gpufleet.planning.model import (
    ClassPlan,
    MetricsState,
    Observation,
    Plan,
    TierObservation,
    TierPlan,
)
from gpufleet.planning.optimizer import ClassNeed, Solution, TierOption, optimize
from gpufleet.planning.profiles import ProfileNotFound, replica_model
from gpufleet.planning.stabilization import (
    Load,
    ScaleDecision,
    delay_scale_down,
    integer_weights,
    replicas_for,
    route_on_ready,
)

# Grid carbon intensity for carbon per million tokens: a round world-average figure
# (IEA puts the 2023 global average near 450-480 gCO2/kWh; many cloud regions are lower).
CARBON_GRAMS_PER_KWH = 400.0
# A class no tier can serve is planned against this multiple of the best zero-load P99.
BEST_EFFORT_SLACK = 1.25


@dataclass
class Context:
    """Everything a pass derives from its inputs before deciding."""

    spec: InferencePoolSpec
    observation: Observation
    previous: InferencePoolStatus
    tiers: list[Tier]
    classes: list[TrafficClass]
    models: dict[str, ReplicaModel] = field(default_factory=dict)
    missing_profile: dict[str, str] = field(default_factory=dict)
    factors: dict[str, int] = field(default_factory=dict)
    service: dict[str, dict[str, float]] = field(default_factory=dict)  # class -> tier -> S
    rho: dict[str, dict[str, float]] = field(default_factory=dict)  # class -> tier -> rho*
    # class -> tier -> other class -> rho* when sharing the tier with it (head of line)
    shared: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    best_effort: dict[str, float] = field(default_factory=dict)  # class -> relaxed objective
    # Replicas the optimizer may plan on (capacity that runs: capped by reality).
    lower: dict[str, int] = field(default_factory=dict)
    upper: dict[str, int] = field(default_factory=dict)
    # Replicas the Deployment may ask for (min/maxReplicas; pending ones included).
    ask_lower: dict[str, int] = field(default_factory=dict)
    ask_upper: dict[str, int] = field(default_factory=dict)
    capped: dict[str, int] = field(default_factory=dict)  # tier -> cap (ready + starting)
    lost: dict[str, int] = field(default_factory=dict)
    min_over_budget: bool = False

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tiers]

    @property
    def now(self) -> datetime:
        return self.observation.now

    @property
    def headroom(self) -> float:
        return self.spec.scaling.headroom_percent / 100.0

    @property
    def budget(self) -> float | None:
        value = self.spec.objectives.max_hourly_cost
        return None if value is None else float(decimal(value))

    def price(self, tier: str) -> float:
        t = self.tier(tier)
        return float(decimal(t.price_per_gpu_hour)) * t.gpus_per_replica

    def tier(self, name: str) -> Tier:
        return next(t for t in self.tiers if t.name == name)

    def seen(self, tier: str) -> TierObservation:
        return self.observation.tiers.get(tier) or TierObservation(name=tier)

    def before(self, tier: str) -> TierStatus | None:
        return next((t for t in self.previous.tiers if t.name == tier), None)

    def previous_weights(self, cls: str) -> dict[str, int]:
        for c in self.previous.classes:
            if c.name == cls:
                return {w.tier: w.weight for w in c.weights if w.weight > 0}
        return {}

    def previous_demand(self, cls: str) -> float:
        for c in self.previous.classes:
            if c.name == cls and c.demand_tokens_per_second is not None:
                return float(c.demand_tokens_per_second)
        return 0.0

    def shape(self, cls: TrafficClass) -> tuple[float, float]:
        return float(cls.mean_prompt_tokens), float(cls.mean_output_tokens)

    def eligible(self, cls: str, tier: str) -> bool:
        return self.rho.get(cls, {}).get(tier, 0.0) > 0

    def cost_per_request(self, cls: str, tier: str) -> float:
        """Dollars per hour per request/s of this class on this tier at its objective."""
        return self.price(tier) * self.service[cls][tier] / self.rho[cls][tier]

    def cheapest(self, cls: str, among: Mapping[str, int]) -> str | None:
        """The eligible tier with replicas in `among` where the class is cheapest."""
        options = [t for t in self.names if among.get(t, 0) > 0 and self.eligible(cls, t)]
        return min(
            options,
            key=lambda t: (self.cost_per_request(cls, t), self.names.index(t)),
            default=None,
        )

    @property
    def is_new(self) -> bool:
        return self.previous.last_decision is None and not self.previous.tiers


def plan(spec: InferencePoolSpec, observation: Observation, previous: InferencePoolStatus) -> Plan:
    """Replicas per tier, weights per class, predicted cost and latency, and why."""
    ctx = _context(spec, observation, previous)
    if observation.metrics is not MetricsState.AVAILABLE:
        return _initial(ctx) if ctx.is_new else _hold(ctx)
    return _decide(ctx)


# -- context ---------------------------------------------------------------------------------


def _context(
    spec: InferencePoolSpec, observation: Observation, previous: InferencePoolStatus
) -> Context:
    ctx = Context(spec, observation, previous, list(spec.tiers), list(spec.traffic_classes))
    for tier in ctx.tiers:
        try:
            ctx.models[tier.name] = replica_model(tier, spec.model)
        except ProfileNotFound as missing:
            ctx.missing_profile[tier.name] = str(missing)
    _update_factors(ctx)
    for cls in ctx.classes:
        _class_capacity(ctx, cls)
    for cls in ctx.classes:
        _head_of_line(ctx, cls)
    _reality_caps(ctx)
    return ctx


def _update_factors(ctx: Context) -> None:
    fresh = ctx.observation.metrics is MetricsState.AVAILABLE
    for tier in ctx.tiers:
        before = ctx.before(tier.name)
        percent = before.capacity_factor_percent if before else 100
        model = ctx.models.get(tier.name)
        if fresh and model is not None:
            percent = _feedback(ctx, tier, model, percent)
        ctx.factors[tier.name] = percent
        if model is not None:
            ctx.models[tier.name] = model.with_capacity_factor(percent / 100.0)


def _feedback(ctx: Context, tier: Tier, model: ReplicaModel, percent: int) -> int:
    """This pass's capacity factor of a tier from what it showed (`feedback`)."""
    seen = ctx.seen(tier.name)
    served = [c for c in ctx.classes if ctx.previous_weights(c.name).get(tier.name, 0) > 0]
    if not served or seen.ready_replicas <= 0:
        return percent
    objectives = {c.name: c.ttft_p99_milliseconds / 1000.0 for c in served}
    requests = (
        None
        if seen.requests_per_second is None
        else seen.requests_per_second * ctx.spec.scaling.interval_seconds
    )
    evidence = signal(
        fraction_above=seen.ttft_fraction_above,
        p99_seconds=seen.ttft_p99_seconds,
        tightest_seconds=min(objectives.values()),
        loosest_seconds=max(objectives.values()),
        requests=requests,
    )
    if evidence is not Signal.SLOW:
        return next_capacity_factor(percent, evidence)
    return next_capacity_factor(
        percent, evidence, may_shrink=_may_shrink(ctx, tier, model, percent)
    )


def _may_shrink(ctx: Context, tier: Tier, model: ReplicaModel, percent: int) -> bool:
    """Whether slow first tokens on this tier can be its capacity estimate's fault."""
    seen = ctx.seen(tier.name)
    before = ctx.before(tier.name)
    if seen.starting_replicas > 0:
        return False  # what last pass bought is not carrying load yet
    if before is not None and seen.ready_replicas > before.ready_replicas:
        return False  # became Ready within the last interval: not a full interval's load
    current = model.with_capacity_factor(percent / 100.0)
    served = [c for c in ctx.classes if ctx.previous_weights(c.name).get(tier.name, 0) > 0]
    planned = min(
        current.max_utilization(c.ttft_p99_milliseconds / 1000.0, *ctx.shape(c)) for c in served
    )
    if planned <= 0:
        return True  # the profile says it cannot hold its objective: no load to compare
    load = _utilization(seen, current, served, ctx)
    if load is None:
        return True
    return LOADED_AT_LEAST * planned <= load <= LOADED_AT_MOST * planned


def _utilization(
    seen: TierObservation, model: ReplicaModel, served: list[TrafficClass], ctx: Context
) -> float | None:
    """The tier's utilization per Ready replica by the model, from its token rates (or,
    without them, its request rate at the served classes' mean shape)."""
    if seen.prompt_tokens_per_second is not None and seen.generation_tokens_per_second is not None:
        work = seen.prompt_tokens_per_second * model.prefill_seconds_for(1.0)
        work += seen.generation_tokens_per_second * model.service_seconds(0.0, 1.0)
        return work / seen.ready_replicas
    if seen.requests_per_second is not None:
        seconds = max(model.service_seconds(*ctx.shape(c)) for c in served)
        return seen.requests_per_second * seconds / seen.ready_replicas
    return None


def _class_capacity(ctx: Context, cls: TrafficClass) -> None:
    shape = ctx.shape(cls)
    objective = cls.ttft_p99_milliseconds / 1000.0
    ctx.service[cls.name] = {n: m.service_seconds(*shape) for n, m in ctx.models.items()}
    rho = {n: m.max_utilization(objective, *shape) for n, m in ctx.models.items()}
    if ctx.models and not any(r > 0 for r in rho.values()):
        floor = min(
            m.ttft_p99_at_utilization(MIN_ELIGIBLE_UTILIZATION, *shape) for m in ctx.models.values()
        )
        relaxed = floor * BEST_EFFORT_SLACK
        ctx.best_effort[cls.name] = relaxed
        rho = {n: m.max_utilization(relaxed, *shape) for n, m in ctx.models.items()}
    ctx.rho[cls.name] = {n: r for n, r in rho.items() if r > 0}


def _objective(ctx: Context, cls: TrafficClass) -> float:
    """The P99 a class is planned for: its objective, or its best-effort relaxation."""
    return ctx.best_effort.get(cls.name, cls.ttft_p99_milliseconds / 1000.0)


def _blocking(ctx: Context, tier: str, others: list[TrafficClass]) -> float:
    """Head-of-line wait on a tier behind the longest prompts of `others`."""
    model = ctx.models[tier]
    return max((model.head_of_line_seconds(ctx.shape(c)[0]) for c in others), default=0.0)


def _head_of_line(ctx: Context, cls: TrafficClass) -> None:
    """rho* of a class on each eligible tier when another class shares it, where lower."""
    shared: dict[str, dict[str, float]] = {}
    for tier, rho in ctx.rho[cls.name].items():
        for other in ctx.classes:
            if other is cls or not ctx.eligible(other.name, tier):
                continue
            blocking = _blocking(ctx, tier, [other])
            if blocking <= 0:
                continue
            model = ctx.models[tier]
            limited = model.max_utilization(
                _objective(ctx, cls), *ctx.shape(cls), blocking_seconds=blocking
            )
            if limited < rho - 1e-9:
                shared.setdefault(tier, {})[other.name] = limited
    ctx.shared[cls.name] = shared


def _reality_caps(ctx: Context) -> None:
    for tier in ctx.tiers:
        seen = ctx.seen(tier.name)
        upper = tier.max_replicas
        if seen.unschedulable_replicas > 0:
            cap = seen.ready_replicas + seen.starting_replicas
            ctx.capped[tier.name] = cap
            upper = min(upper, cap)
            before = ctx.before(tier.name)
            if tier.preemptible and before is not None:
                had = before.ready_replicas - seen.ready_replicas - seen.starting_replicas
                ctx.lost[tier.name] = max(0, min(seen.unschedulable_replicas, had))
        ctx.upper[tier.name] = upper
        ctx.lower[tier.name] = min(tier.min_replicas, upper)
        ctx.ask_upper[tier.name] = tier.max_replicas
        ctx.ask_lower[tier.name] = tier.min_replicas
        if tier.name not in ctx.models:  # nothing to plan it for: keep its minimum
            ctx.upper[tier.name] = ctx.lower[tier.name]
            ctx.ask_upper[tier.name] = ctx.ask_lower[tier.name]
    budget = ctx.budget
    if budget is not None and sum(ctx.price(n) * ctx.lower[n] for n in ctx.names) > budget:
        ctx.min_over_budget = True
        ctx.lower = dict.fromkeys(ctx.names, 0)
        ctx.ask_lower = dict.fromkeys(ctx.names, 0)


# -- the three ways a pass decides -----------------------------------------------------------


def _decide(ctx: Context) -> Plan:
    demand = {c.name: _demand_tokens(ctx, c) for c in ctx.classes}
    rates = {c.name: demand[c.name] / sum(ctx.shape(c)) for c in ctx.classes}
    needs = [
        ClassNeed(
            name=c.name,
            priority=c.priority,
            rate_rps=rates[c.name] * (1 + ctx.headroom),
            tokens_per_request=sum(ctx.shape(c)),
            service_seconds={t: ctx.service[c.name][t] for t in ctx.rho[c.name]},
            max_utilization=ctx.rho[c.name],
            shared_utilization=ctx.shared[c.name],
        )
        for c in ctx.classes
    ]
    options = [
        TierOption(t.name, ctx.price(t.name), ctx.lower[t.name], ctx.upper[t.name])
        for t in ctx.tiers
    ]
    solution = optimize(options, needs, ctx.budget)
    wanted = _keep_serving(ctx, dict(solution.replicas), demand)
    asked = _asks(ctx, wanted, options, needs)

    decisions: dict[str, ScaleDecision] = {}
    for tier in ctx.tiers:
        before = ctx.before(tier.name)
        decisions[tier.name] = delay_scale_down(
            current=ctx.seen(tier.name).desired_replicas,
            recommended=asked[tier.name],
            since=before.scale_down_since if before else None,
            highest_lower=before.scale_down_to if before else None,
            now=ctx.now,
            delay_seconds=ctx.spec.scaling.scale_down_delay_seconds,
        )
    target = {
        n: min(max(d.replicas, ctx.ask_lower[n]), ctx.ask_upper[n]) for n, d in decisions.items()
    }
    headroomed = _loads(ctx, rates, 1 + ctx.headroom)
    protected = _protect_traffic(ctx, target, headroomed)
    target = _within_budget(ctx, target, wanted)

    actual = _loads(ctx, rates, 1.0)
    capacity = {n: min(ctx.seen(n).ready_replicas, target[n]) for n in ctx.names}
    targets = {c: dict(s) for c, s in solution.routing.items() if rates.get(c, 0) > 0}
    targets = _shed_overflow(ctx, targets, solution.served)
    live = {
        c.name: {t: w / 100.0 for t, w in ctx.previous_weights(c.name).items()} for c in ctx.classes
    }
    routed = route_on_ready(targets, actual, capacity, live, ctx.names)
    weights = {
        c.name: _weights_for(ctx, c.name, routed.get(c.name, {}), target) for c in ctx.classes
    }
    starting = {n for n in ctx.names if capacity[n] < target[n]}
    waiting = [
        c
        for c in targets
        if set(targets[c]) & starting
        and integer_weights(targets[c], ctx.names) != {t: w for t, w in weights[c].items() if w > 0}
    ]
    return _finish(
        ctx,
        target=target,
        weights=weights,
        demand=demand,
        decisions=decisions,
        protected=protected,
        solution=solution,
        waiting=waiting,
    )


def _shed_overflow(
    ctx: Context,
    targets: Mapping[str, Mapping[str, float]],
    served: Mapping[str, float],
) -> dict[str, dict[str, float]]:
    """Where an under-served class's unserved traffic goes.

    The optimizer's routing splits what it *serves*; the router splits *all* of a class's
    traffic by the same weights. For a class served only in part, that would push its
    overflow onto tiers sized for higher-priority classes and break their objectives.
    Keep the planned load on those tiers and send the remainder to the class's tiers that
    no higher-priority class uses (when it has any): the shortage stays with the class the
    priorities say should bear it.
    """
    priority = {c.name: c.priority for c in ctx.classes}
    result = {c: dict(shares) for c, shares in targets.items()}
    for name, shares in targets.items():
        fraction = min(1.0, served.get(name, 1.0) * (1 + ctx.headroom))
        if fraction >= 1.0 - 1e-9 or not shares:
            continue
        guarded = {
            tier
            for other, other_shares in targets.items()
            if priority.get(other, 0) > priority.get(name, 0)
            for tier, share in other_shares.items()
            if share > 0
        }
        own = {t: v for t, v in shares.items() if t not in guarded and v > 0}
        if not own or not guarded & {t for t, v in shares.items() if v > 0}:
            continue
        own_total = sum(own.values())
        result[name] = {
            tier: share * fraction + (share / own_total * (1.0 - fraction) if tier in own else 0.0)
            for tier, share in shares.items()
        }
    return result


def _initial(ctx: Context) -> Plan:
    target = _keep_serving(ctx, dict(ctx.ask_lower), {}, initial=True)
    target = _within_budget(ctx, target, target)
    weights = {c.name: _weights_for(ctx, c.name, {}, target) for c in ctx.classes}
    return _finish(ctx, target=target, weights=weights, demand={}, initial=True)


def _hold(ctx: Context) -> Plan:
    kept = {}
    for tier in ctx.tiers:
        before = ctx.before(tier.name)
        count = before.desired_replicas if before else ctx.seen(tier.name).desired_replicas
        kept[tier.name] = min(max(count, ctx.ask_lower[tier.name]), ctx.ask_upper[tier.name])
    target = _keep_serving(ctx, kept, {})
    target = _within_budget(ctx, target, kept)
    weights = {}
    for cls in ctx.classes:
        still = {
            t: w
            for t, w in ctx.previous_weights(cls.name).items()
            if target.get(t, 0) > 0 and ctx.eligible(cls.name, t)
        }
        weights[cls.name] = _weights_for(ctx, cls.name, still, target)
    demand = {c.name: ctx.previous_demand(c.name) for c in ctx.classes}
    return _finish(ctx, target=target, weights=weights, demand=demand, held=True)


# -- steps -----------------------------------------------------------------------------------


def _demand_tokens(ctx: Context, cls: TrafficClass) -> float:
    measured = ctx.observation.demand.get(cls.name)
    if measured is None:  # not measurable this pass: plan for what was planned last time
        return ctx.previous_demand(cls.name)
    return max(measured.tokens_per_second, 0.0)


def _asks(
    ctx: Context,
    wanted: Mapping[str, int],
    options: list[TierOption],
    needs: list[ClassNeed],
) -> dict[str, int]:
    """What each tier's Deployment asks for: the plan, and for a capped tier what it would
    need with its nodes back (the optimizer without caps), so its pending replicas stay."""
    asked = dict(wanted)
    if not ctx.capped:
        return asked
    free = [
        TierOption(o.name, o.price_per_replica_hour, ctx.ask_lower[o.name], ctx.ask_upper[o.name])
        for o in options
    ]
    unbound = optimize(free, needs, ctx.budget)
    for name in ctx.capped:
        asked[name] = max(asked[name], unbound.replicas.get(name, 0))
    return asked


def running(ctx: Context, target: Mapping[str, int]) -> dict[str, int]:
    """Replicas that can run of those asked for: a capped tier's pending ones cannot."""
    return {n: min(target[n], ctx.capped.get(n, target[n])) for n in ctx.names}


def _loads(ctx: Context, rates: Mapping[str, float], factor: float) -> dict[str, Load]:
    return {
        c.name: Load(rates[c.name] * factor, ctx.service[c.name], ctx.rho[c.name])
        for c in ctx.classes
    }


def _keep_serving(
    ctx: Context,
    replicas: dict[str, int],
    demand: Mapping[str, float],
    *,
    initial: bool = False,
) -> dict[str, int]:
    """At least one usable replica per class: never scale to zero on missing data."""
    by_priority = sorted(ctx.classes, key=lambda c: (-c.priority, ctx.classes.index(c)))
    for cls in by_priority:
        idle = demand.get(cls.name, 0.0) <= 0
        if not initial and idle and cls.demand_query is not None:
            continue  # its demand query will see it wake up
        if any(replicas.get(t, 0) > 0 for t in ctx.rho[cls.name]):
            continue
        room = {
            t: 1
            for t in ctx.rho[cls.name]
            if ctx.upper[t] >= 1 and _cost(ctx, replicas) + ctx.price(t) <= (ctx.budget or math.inf)
        }
        choice = ctx.cheapest(cls.name, room)
        if choice is not None:
            replicas[choice] = 1
    return replicas


def _cost(ctx: Context, replicas: Mapping[str, int]) -> float:
    return sum(ctx.price(n) * replicas.get(n, 0) for n in ctx.names)


def _protect_traffic(
    ctx: Context, target: dict[str, int], loads: Mapping[str, Load]
) -> dict[str, int]:
    """Keep what carries each tier's current weights until they have moved away."""
    protected = {}
    for name in ctx.names:
        shares = {c.name: ctx.previous_weights(c.name).get(name, 0) / 100.0 for c in ctx.classes}
        current = ctx.seen(name).desired_replicas
        need = min(replicas_for(name, shares, loads, MAX_UTILIZATION), current, ctx.upper[name])
        if need > target[name]:
            protected[name] = need
            target[name] = need
    return protected


def _within_budget(
    ctx: Context, target: dict[str, int], wanted: Mapping[str, int]
) -> dict[str, int]:
    """Trim replicas held above the recommendation, most expensive first, to fit the budget."""
    budget = ctx.budget
    if budget is None:
        return target
    order = sorted(ctx.names, key=lambda n: (-ctx.price(n), ctx.names.index(n)))
    for name in order:  # pending replicas of capped tiers first: they carry nothing now
        floor = max(ctx.capped.get(name, target[name]), ctx.ask_lower[name])
        while _cost(ctx, target) > budget + 1e-9 and target[name] > floor:
            target[name] -= 1
    for name in order:
        while _cost(ctx, target) > budget + 1e-9 and target[name] > max(
            wanted.get(name, 0), ctx.lower[name]
        ):
            target[name] -= 1
    for name in order:  # still over (budget lowered under what the optimizer could fit)
        while _cost(ctx, target) > budget + 1e-9 and target[name] > 0:
            target[name] -= 1
    return target


def _weights_for(
    ctx: Context, cls: str, shares: Mapping[str, float], target: Mapping[str, int]
) -> dict[str, int]:
    """Integer weights for a class: its shares, else where it can go now (Ready first).

    A change of at most one point per tier is rounding, not a decision: the live weights
    stay (no HTTPRoute write, no Event, for a share that moved by a hair).
    """
    weights = integer_weights(shares, ctx.names)
    live = ctx.previous_weights(cls)
    if (
        weights
        and live
        and all(target.get(t, 0) > 0 and ctx.eligible(cls, t) for t in live)
        and max(abs(weights.get(t, 0) - live.get(t, 0)) for t in set(weights) | set(live)) <= 1
    ):
        weights = live
    if not weights:
        ready = {n: min(ctx.seen(n).ready_replicas, target.get(n, 0)) for n in ctx.names}
        still = {
            t: float(w)
            for t, w in ctx.previous_weights(cls).items()
            if ready.get(t, 0) > 0 and ctx.eligible(cls, t)
        }
        weights = integer_weights(still, ctx.names)
        if not weights:
            choice = ctx.cheapest(cls, ready) or ctx.cheapest(cls, target)
            if choice is None and not ctx.rho[cls]:  # no tier has a profile: any replica
                choice = next((n for n in ctx.names if target.get(n, 0) > 0), None)
            weights = {choice: 100} if choice else {}
    return {n: weights.get(n, 0) for n in ctx.names}


def _finish(
    ctx: Context,
    *,
    target: Mapping[str, int],
    weights: Mapping[str, Mapping[str, int]],
    demand: Mapping[str, float],
    decisions: Mapping[str, ScaleDecision] | None = None,
    protected: Mapping[str, int] | None = None,
    solution: Solution | None = None,
    waiting: list[str] | None = None,
    initial: bool = False,
    held: bool = False,
) -> Plan:
    decisions = decisions or {}
    runs = running(ctx, target)
    predicted = _predicted_p99(ctx, runs, weights, demand)
    served = dict(solution.served) if solution else {}
    classes = {
        c.name: ClassPlan(
            name=c.name,
            weights=dict(weights[c.name]),
            demand_tokens_per_second=demand.get(c.name) if not initial else None,
            predicted_ttft_p99_seconds=_finite(predicted.get(c.name)),
            served_fraction=min(1.0, served.get(c.name, 1.0) * (1 + ctx.headroom)),
        )
        for c in ctx.classes
    }
    tiers = {
        n: TierPlan(
            name=n,
            replicas=target[n],
            capacity_factor_percent=ctx.factors.get(n, 100),
            scale_down_since=decisions[n].scale_down_since if n in decisions else None,
            scale_down_to=decisions[n].scale_down_to if n in decisions else None,
            capped_at=ctx.capped.get(n),
            lost_replicas=ctx.lost.get(n, 0),
        )
        for n in ctx.names
    }
    cost = _cost(ctx, runs)  # pending replicas cost nothing
    total = sum(demand.values())
    per_million = cost / (total * 3600 / 1e6) if total > 0 else None
    energy = _energy(ctx, runs, total)
    report = explain.Report(
        ctx=ctx,
        tiers=tiers,
        classes=classes,
        demand=demand,
        cost_per_hour=cost,
        cost_per_million_tokens=per_million,
        protected=dict(protected or {}),
        shortage=bool(solution and solution.shortage),
        waiting=list(waiting or []),
        predicted=predicted,
        initial=initial,
        held=held,
    )
    return Plan(
        tiers=tiers,
        classes=classes,
        reason=report.reason(),
        message=report.message(),
        cost_per_hour=cost,
        cost_per_million_tokens=per_million,
        energy_kwh_per_million_tokens=energy,
        carbon_grams_per_million_tokens=None if energy is None else energy * CARBON_GRAMS_PER_KWH,
        objectives=report.objectives(),
        degraded=report.degraded(),
        metrics=report.metrics(),
    )


def _energy(ctx: Context, target: Mapping[str, int], tokens_per_second: float) -> float | None:
    if tokens_per_second <= 0:
        return None
    watts = 0.0
    for name in ctx.names:
        if target[name] == 0:
            continue
        model = ctx.models.get(name)
        if model is None or model.watts is None:
            return None
        watts += model.watts * target[name]
    return kwh_per_million_tokens(watts, tokens_per_second)


def _predicted_p99(
    ctx: Context,
    target: Mapping[str, int],
    weights: Mapping[str, Mapping[str, int]],
    demand: Mapping[str, float],
) -> dict[str, float | None]:
    """Per class: the P99 of the slowest tier it is routed to, at the planned load and
    behind the other classes' prompts there (inf: overloaded; None: routed nowhere)."""
    rho = {}
    for name in ctx.names:
        work = sum(
            demand.get(c.name, 0.0)
            / sum(ctx.shape(c))
            * weights[c.name].get(name, 0)
            / 100.0
            * ctx.service[c.name].get(name, 0.0)
            for c in ctx.classes
        )
        rho[name] = work / target[name] if target[name] > 0 else (math.inf if work > 0 else 0.0)
    predicted: dict[str, float | None] = {}
    for cls in ctx.classes:
        worst = None
        for name, weight in weights[cls.name].items():
            model = ctx.models.get(name)
            if weight <= 0 or model is None:
                continue
            others = [c for c in ctx.classes if c is not cls and weights[c.name].get(name, 0) > 0]
            p99 = model.ttft_p99_at_utilization(
                rho[name], *ctx.shape(cls), blocking_seconds=_blocking(ctx, name, others)
            )
            worst = p99 if worst is None else max(worst, p99)
        predicted[cls.name] = worst
    return predicted


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
