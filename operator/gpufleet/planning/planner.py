"""The planner: `plan(spec, observation, previous) -> Plan`. Pure and deterministic.

No I/O, no clock (time is `observation.now`), no state but what `previous` (the pool's
status) carries. One pass, each step a function of the values before it:

1. Replica models per tier (`profiles`), slowed by each tier's capacity factor, which
   feedback moves from what the tier showed (`feedback.capacity_factors`).
2. What each class needs from each tier (`classes.class_capacities`): eligibility, the
   utilization that holds its objective (over its learned prompt lengths: `waits`),
   head-of-line limits; a class no tier can serve is planned best effort.
3. The bounds each tier may plan on and ask for (`bounds.tier_bounds`): min/maxReplicas,
   capped at what runs when replicas are unschedulable, the budget over the minimums.
4. Metrics missing, stale or unreachable: keep the previous decision (same replicas and
   weights; a new pool gets minReplicas and initial weights). Otherwise the optimizer buys
   the cheapest replicas serving every class's demand with headroom, or the
   priority-ordered best it can (`optimizer`), or keeps its last answer (carried in
   status) where only demand moved, under a tolerance, and it still holds it (`reuse`); a
   preemptible tier adds the replicas it expects to lose within a lead time (`hedging`);
   the replica steps shape what each Deployment asks for (`replicas`, `stabilization`).
5. Weights: what the optimizer serves, overflow kept off higher-priority tiers, moved only
   onto Ready replicas, spread over the Ready replicas a class has to itself, as integers
   (`routing`).
6. Cost, $/Mtok, energy, predicted P99 per class (`predict`) and the reason and message
   (`explain`). The conditions are decided from the Plan by `conditions`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from gpufleet.api.status import InferencePoolStatus, Sizing
from gpufleet.api.types import InferencePoolSpec
from gpufleet.planning import contention, explain, forecast, hedging, needs, reuse, routing
from gpufleet.planning.bounds import TierBounds, tier_bounds
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.classes import ClassCapacity
from gpufleet.planning.feedback import capacity_factors
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.leadtime import LeadTime, lead_times
from gpufleet.planning.optimizer import Solution, optimize
from gpufleet.planning.predict import energy_kwh_per_million_tokens, predicted_p99
from gpufleet.planning.profiles import ProfileNotFound, pool_model
from gpufleet.planning.program import TierOption
from gpufleet.planning.prompts import ClassPrompts, for_pass, tier_distribution
from gpufleet.planning.records import ClassPlan, MetricsState, Observation, Plan, TierPlan
from gpufleet.planning.replicas import (
    asks,
    keep_serving,
    protect_traffic,
    undo_nothing_yet,
    within_budget,
)
from gpufleet.planning.routing import shed_overflow, weights_for
from gpufleet.planning.stabilization import (
    Load,
    ScaleDecision,
    hold_for_delay,
    integer_weights,
    route_on_ready,
)

# Grid carbon intensity for carbon per million tokens: a round world-average figure
# (IEA puts the 2023 global average near 450-480 gCO2/kWh; many cloud regions are lower).
CARBON_GRAMS_PER_KWH = 400.0


@dataclass(frozen=True)
class Fleet:
    """What a pass derives from its inputs before deciding (steps 1-3), computed once."""

    models: Mapping[str, ReplicaModel]  # tiers with a profile, capacity factor applied
    factors: Mapping[str, int]  # tier -> capacity factor percent
    missing_profile: Mapping[str, str]  # tier -> why it has no profile
    capacities: Mapping[str, ClassCapacity]
    bounds: TierBounds
    leads: Mapping[str, LeadTime]  # tier -> created-to-Ready time, learned or the prior
    losses: Mapping[str, hedging.TierLoss]  # preemptible tier -> node loss evidence
    prompts: ClassPrompts  # class -> its prompt lengths, learned, and what no tier reaches


def plan(spec: InferencePoolSpec, observation: Observation, previous: InferencePoolStatus) -> Plan:
    """Replicas per tier, weights per class, predicted cost and latency, and why."""
    inputs = Inputs(spec, observation, previous)
    fleet = derive_fleet(inputs)
    if observation.metrics is not MetricsState.AVAILABLE:
        return _initial(inputs, fleet) if inputs.is_new else _hold(inputs, fleet)
    return _decide(inputs, fleet)


def derive_fleet(inputs: Inputs) -> Fleet:
    profiled: dict[str, ReplicaModel] = {}
    missing: dict[str, str] = {}
    for tier in inputs.tiers:
        try:
            profiled[tier.name] = pool_model(tier, inputs.spec)
        except ProfileNotFound as why:
            missing[tier.name] = str(why)
    factors = capacity_factors(inputs, profiled)
    models = {n: m.with_capacity_factor(factors[n] / 100.0) for n, m in profiled.items()}
    prompts = for_pass(inputs, profiled)  # "even idle": at the profile's own speed
    return Fleet(
        models=models,
        factors=factors,
        missing_profile=missing,
        capacities=needs.capacities(inputs, models, prompts.for_sizing()),
        prompts=prompts,
        bounds=tier_bounds(inputs, models),
        leads=lead_times(inputs, models),
        losses=hedging.learn(inputs),
    )


# -- the three ways a pass decides -----------------------------------------------------------


def _decide(inputs: Inputs, fleet: Fleet) -> Plan:
    bounds, capacities = fleet.bounds, fleet.capacities
    names = inputs.names
    demand = {c.name: needs.demand_tokens(inputs, c.name) for c in inputs.classes}
    rates = {c.name: demand[c.name] / c.tokens_per_request for c in inputs.classes}
    forecasts = needs.forecasts(inputs, capacities, fleet.leads, demand)
    # Requests/s bought per class: the expected demand with headroom, or its planned
    # quantile when the demand's volatility asks for more (the burst reserve), plus what
    # drains the queues within a lead time (bought now, never held by the delay).
    expected = {
        c.name: needs.with_headroom(inputs, forecasts[c.name]) / c.tokens_per_request
        for c in inputs.classes
    }
    held = {
        c.name: max(expected[c.name], forecasts[c.name].planned / c.tokens_per_request)
        for c in inputs.classes
    }
    drain = needs.drain_rates(inputs, capacities, fleet.leads)
    bought = {c: held[c] + drain[c] for c in held}
    options = [
        TierOption(t.name, inputs.prices[t.name], bounds.lower[t.name], bounds.upper[t.name])
        for t in inputs.tiers
    ]

    def recommend(
        rps: Mapping[str, float], solution: Solution | None = None
    ) -> tuple[Solution, dict[str, int], dict[str, int]]:
        wants = [capacities[c.name].need(rps[c.name]) for c in inputs.classes]
        solution = solution or optimize(options, wants, inputs.budget)
        wanted = keep_serving(inputs, capacities, bounds, solution.replicas, demand)
        return solution, wanted, asks(inputs, bounds, wanted, options, wants)

    # The last answer where demand moved under reuse.TOLERANCE since it was solved for and
    # it still holds this demand (the status carries it); the optimizer's otherwise.
    wants = [capacities[c.name].need(bought[c.name]) for c in inputs.classes]
    previous = inputs.previous.sizing
    kept, sizing, reused = reuse.solve(options, wants, inputs.budget, previous, inputs.now)
    solution, wanted, asked = recommend(bought, kept)
    nodes_back = {n: asked[n] for n in bounds.capped}
    steady = recommend(held)[2] if any(drain.values()) else asked
    reserve = _reserve(steady, recommend(expected)[2] if held != expected else steady)
    # Preemptible tiers run the replicas they are expected to lose within a lead time on
    # top (held by the scale-down delay like the rest).
    leads = {n: fleet.leads[n].seconds for n in names}
    margin = hedging.margins(inputs, fleet.losses, leads, steady)
    margin = {n: max(min(margin[n], bounds.ask_upper[n] - steady[n]), 0) for n in names}
    steady = {n: steady[n] + margin[n] for n in names}
    asked = {n: min(asked[n] + margin[n], bounds.ask_upper[n]) for n in names}
    # Prompts that would wait behind another's prefill past their objective: replicas
    # on top where the plan's are too few (held by the delay like the rest).
    tail = contention.floors(
        fleet.models,
        fleet.prompts.lengths,
        {c: capacities[c].objective_seconds for c in held},
        {c: {t: expected[c] * s for t, s in solution.routing.get(c, {}).items()} for c in held},
        steady,
        bounds.ask_upper,
        {n: tier_distribution(inputs.seen(n)) for n in names},
    )
    extra = {n: max(tail[n].replicas - steady[n], 0) if n in tail else 0 for n in names}
    steady = {n: steady[n] + extra[n] for n in names}
    asked = {n: min(max(asked[n], steady[n]), bounds.ask_upper[n]) for n in names}
    decisions = _hold_for_delay(inputs, steady)
    target = {
        n: min(max(d.replicas, asked[n], bounds.ask_lower[n]), bounds.ask_upper[n])
        for n, d in decisions.items()
    }
    target = undo_nothing_yet(inputs, target, bounds.ask_upper)
    drained = {n: max(target[n] - decisions[n].replicas, 0) for n in names}
    target, protected = protect_traffic(
        inputs, bounds, target, _loads(inputs, capacities, rates, 1 + inputs.headroom)
    )
    target = within_budget(inputs, bounds, target, wanted, nodes_back)

    actual = _loads(inputs, capacities, rates, 1.0)
    ready = {n: min(inputs.seen(n).ready_replicas, target[n]) for n in names}
    cover = {c: bought[c] / rates[c] if rates[c] > 0 else 1 + inputs.headroom for c in rates}
    targets = {c: dict(s) for c, s in solution.routing.items() if rates.get(c, 0) > 0}
    stepping = frozenset(
        c for c, f in forecasts.items() if f.stepping_up(inputs.headroom) and rates[c] > 0
    )
    targets, kept_off = shed_overflow(inputs, targets, solution.served, cover, stepping)
    live = {
        c.name: {t: w / 100.0 for t, w in inputs.previous_weights(c.name).items()}
        for c in inputs.classes
    }
    coming = frozenset(n for n in names if ready[n] < target[n])
    priority = {c.name: c.priority for c in inputs.classes}
    routed = route_on_ready(targets, actual, ready, live, names, priority, coming)
    routed, spread = routing.spread(routed, targets, ready, capacities)
    routed, kept_off = routing.yield_to_steps(routed, live, stepping, priority, kept_off)
    weights = routing.settle(
        inputs,
        {
            c.name: weights_for(inputs, capacities[c.name], routed.get(c.name, {}), target)
            for c in inputs.classes
        },
        lambda split: reuse.fits(options, wants, ready, split),
    )
    waiting = [
        c
        for c in targets
        if set(targets[c]) & coming
        and integer_weights(targets[c], names) != {t: w for t, w in weights[c].items() if w > 0}
    ]
    return _finish(
        inputs,
        fleet,
        target=target,
        weights=weights,
        demand=demand,
        decisions=decisions,
        protected=protected,
        solution=solution,
        cover=cover,
        waiting=waiting,
        spread=spread,
        kept_off=kept_off,
        forecasts=forecasts,
        reserve={n: min(reserve[n], target[n]) for n in names},
        drained=drained,
        margin={n: min(margin[n], target[n]) for n in names},
        tail={n: (extra[n], tail[n]) for n in names if n in tail and extra[n] > 0},
        sizing=sizing,
        reused=reused,
    )


def _initial(inputs: Inputs, fleet: Fleet) -> Plan:
    bounds = fleet.bounds
    target = keep_serving(inputs, fleet.capacities, bounds, bounds.ask_lower, {}, initial=True)
    target = within_budget(inputs, bounds, target, target)
    weights = {
        c.name: weights_for(inputs, fleet.capacities[c.name], {}, target) for c in inputs.classes
    }
    return _finish(inputs, fleet, target=target, weights=weights, demand={}, initial=True)


def _hold(inputs: Inputs, fleet: Fleet) -> Plan:
    bounds = fleet.bounds
    kept = {}
    for tier in inputs.tiers:
        before = inputs.before(tier.name)
        count = before.desired_replicas if before else inputs.seen(tier.name).desired_replicas
        kept[tier.name] = min(max(count, bounds.ask_lower[tier.name]), bounds.ask_upper[tier.name])
    target = keep_serving(inputs, fleet.capacities, bounds, kept, {})
    target = within_budget(inputs, bounds, target, target, {n: kept[n] for n in bounds.capped})
    weights = {}
    for cls in inputs.classes:
        capacity = fleet.capacities[cls.name]
        still = {
            t: w
            for t, w in inputs.previous_weights(cls.name).items()
            if target.get(t, 0) > 0 and capacity.is_eligible(t)
        }
        # Not onto tiers without a Ready replica while another of its tiers has one (a new
        # pool whose first tier is up, a tier whose nodes went): those requests would fail.
        serving = {t: w for t, w in still.items() if inputs.seen(t).ready_replicas > 0}
        weights[cls.name] = weights_for(inputs, capacity, serving or still, target)
    demand = {c.name: inputs.previous_demand(c.name) for c in inputs.classes}
    sizing = inputs.previous.sizing  # nothing solved: what the kept plan was sized for
    return _finish(
        inputs, fleet, target=target, weights=weights, demand=demand, held=True, sizing=sizing
    )


# -- steps -----------------------------------------------------------------------------------


def _hold_for_delay(inputs: Inputs, asked: Mapping[str, int]) -> dict[str, ScaleDecision]:
    decisions = {}
    for tier in inputs.tiers:
        before = inputs.before(tier.name)
        window = [(r.time, r.replicas) for r in before.recommendations] if before else []
        decisions[tier.name] = hold_for_delay(
            current=inputs.seen(tier.name).desired_replicas,
            recommended=asked[tier.name],
            window=window,
            now=inputs.now,
            delay_seconds=inputs.spec.scaling.scale_down_delay_seconds,
        )
    return decisions


def _window(inputs: Inputs, tier: str) -> tuple[tuple[datetime, int], ...]:
    """The tier's scale-down window as the last pass left it (kept while nothing decides)."""
    before = inputs.before(tier)
    return tuple((r.time, r.replicas) for r in before.recommendations) if before else ()


def _reserve(held: Mapping[str, int], expected: Mapping[str, int]) -> dict[str, int]:
    """Replicas per tier that the burst reserve adds to the expected demand's."""
    return {n: max(held[n] - expected.get(n, 0), 0) for n in held}


def _loads(
    inputs: Inputs,
    capacities: Mapping[str, ClassCapacity],
    rates: Mapping[str, float],
    factor: float,
) -> dict[str, Load]:
    return {
        c.name: Load(
            rates[c.name] * factor,
            capacities[c.name].service_seconds,
            capacities[c.name].max_utilization,
        )
        for c in inputs.classes
    }


def _finish(
    inputs: Inputs,
    fleet: Fleet,
    *,
    target: Mapping[str, int],
    weights: Mapping[str, Mapping[str, int]],
    demand: Mapping[str, float],
    decisions: Mapping[str, ScaleDecision] | None = None,
    protected: Mapping[str, int] | None = None,
    solution: Solution | None = None,
    cover: Mapping[str, float] | None = None,
    waiting: list[str] | None = None,
    spread: Mapping[str, tuple[str, ...]] | None = None,
    kept_off: Mapping[str, tuple[str, ...]] | None = None,
    initial: bool = False,
    held: bool = False,
    forecasts: Mapping[str, forecast.ClassForecast] | None = None,
    reserve: Mapping[str, int] | None = None,
    drained: Mapping[str, int] | None = None,
    margin: Mapping[str, int] | None = None,
    tail: Mapping[str, tuple[int, contention.Floor]] | None = None,
    sizing: Sizing | None = None,
    reused: bool = False,
) -> Plan:
    decisions = decisions or {}
    forecasts, reserve, drained = forecasts or {}, reserve or {}, drained or {}
    margin, tail = margin or {}, tail or {}
    runs = fleet.bounds.running(target)
    predicted = predicted_p99(inputs, fleet.models, fleet.capacities, runs, weights, demand)
    served = dict(solution.served) if solution else {}
    classes = {
        c.name: ClassPlan(
            name=c.name,
            weights=dict(weights[c.name]),
            demand_tokens_per_second=demand.get(c.name) if not initial else None,
            predicted_ttft_p99_seconds=_finite(predicted.get(c.name)),
            served_fraction=min(
                1.0, served.get(c.name, 1.0) * (cover or {}).get(c.name, 1 + inputs.headroom)
            ),
            overloaded=math.isinf(predicted.get(c.name) or 0.0),
            eligible_tiers=fleet.capacities[c.name].eligible,
            best_effort_ttft_p99_seconds=fleet.capacities[c.name].best_effort_seconds,
            forecast=forecasts.get(c.name),
            backlog_tokens=inputs.observation.class_backlog_tokens.get(c.name, 0.0),
            prompt_lengths=fleet.prompts.lengths.get(c.name),
            unservable_share=fleet.prompts.unservable.get(c.name),
        )
        for c in inputs.classes
    }
    tiers = {
        n: TierPlan(
            name=n,
            replicas=target[n],
            capacity_factor_percent=fleet.factors.get(n, 100),
            scale_down_since=decisions[n].scale_down_since if n in decisions else None,
            scale_down_to=decisions[n].scale_down_to if n in decisions else None,
            capped_at=fleet.bounds.capped.get(n),
            lost_replicas=fleet.bounds.lost.get(n, 0),
            recommendations=decisions[n].window if n in decisions else _window(inputs, n),
            lead_time_seconds=fleet.leads[n].seconds,
            lead_time_observed_at=fleet.leads[n].observed_at,
            reserve_replicas=reserve.get(n, 0),
            drain_replicas=drained.get(n, 0),
            margin_replicas=margin.get(n, 0),
            tail_replicas=min(tail[n][0], target[n]) if n in tail else 0,
            tail_class=tail[n][1].cls if n in tail else None,
            tail_misses=tail[n][1].misses if n in tail else 0.0,
            expected_losses=hedging.expected(
                fleet.losses.get(n), target[n] - margin.get(n, 0), fleet.leads[n].seconds
            ),
            node_loss=fleet.losses[n].state if n in fleet.losses else None,
            profile=fleet.models[n].source if n in fleet.models else fleet.missing_profile.get(n),
            profile_measured=fleet.models[n].measured if n in fleet.models else None,
        )
        for n in inputs.names
    }
    cost = inputs.cost(runs)  # pending replicas cost nothing
    total = sum(demand.values())
    per_million = cost / (total * 3600 / 1e6) if total > 0 else None
    energy = energy_kwh_per_million_tokens(inputs, fleet.models, runs, total)
    report = explain.Report(
        inputs=inputs,
        models=fleet.models,
        capacities=fleet.capacities,
        bounds=fleet.bounds,
        missing_profile=fleet.missing_profile,
        tiers=tiers,
        classes=classes,
        demand=demand,
        cost_per_hour=cost,
        cost_per_million_tokens=per_million,
        protected=dict(protected or {}),
        shortage=bool(solution and solution.shortage),
        given_way=frozenset(solution.given_way if solution else ()),
        apart_per_hour=solution.apart_per_hour if solution else 0.0,
        waiting=list(waiting or []),
        spread=spread or {},
        kept_off=kept_off or {},
        initial=initial,
        held=held,
        kept_since=sizing.time if reused and sizing else None,
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
        awaiting_metrics=initial or held,
        reserve_cost_per_hour=sum(inputs.prices[n] * reserve.get(n, 0) for n in inputs.names),
        margin_cost_per_hour=sum(inputs.prices[n] * margin.get(n, 0) for n in inputs.names),
        sizing=sizing,
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
