"""Status and Events from a pass's observation and plan (pure).

`build_status` computes the whole status a pass would write; the reconciler compares it
with the status the object has and writes only when they differ, so an idle pass writes
nothing. `events` lists what changed (replicas, weights, conditions) for Events, emitted
by the reconciler only after the status write succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from gpufleet.api.conditions import find, set_condition
from gpufleet.api.status import (
    ClassStatus,
    Condition,
    ConditionStatus,
    ConditionType,
    Decision,
    DemandForecast,
    InferencePoolStatus,
    Reason,
    Recommendation,
    TierStatus,
    TierWeight,
)
from gpufleet.api.types import InferencePool
from gpufleet.desired import health, manifests
from gpufleet.desired.health import PodProblem
from gpufleet.desired.leaving import Leaving
from gpufleet.planning import conditions as checks
from gpufleet.planning import forecast
from gpufleet.planning.conditions import RoutingState
from gpufleet.planning.records import ClassPlan, Observation, Plan, Verdict

__all__ = ["EventRecord", "RoutingState", "build_status", "events", "money"]


@dataclass(frozen=True)
class EventRecord:
    """An Event to emit on the pool: type is Normal or Warning."""

    type: str
    reason: str
    message: str


def _to_status(verdict: bool | None) -> ConditionStatus:
    if verdict is None:
        return ConditionStatus.UNKNOWN
    return ConditionStatus.TRUE if verdict else ConditionStatus.FALSE


def money(value: float | None) -> str | None:
    """Dollars with four significant digits: "0.02441", "12.50"."""
    if value is None:
        return None
    if value == 0:
        return "0"
    if value >= 100:
        return f"{value:.2f}"
    return f"{value:.4g}"


def _unservable(decided: ClassPlan | None, before: ClassStatus | None) -> int | None:
    """Percent of the class's prompts no tier prefills in time; the last known value when
    this pass did not plan for its prompts."""
    if decided is None or decided.unservable_share is None:
        return before.unservable_percent if before else None
    return round(decided.unservable_share * 100)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def build_status(
    pool: InferencePool,
    observation: Observation,
    plan: Plan,
    routing: RoutingState,
    previous: InferencePoolStatus,
    *,
    conflicts: Sequence[str] = (),
    problems: Mapping[str, Sequence[PodProblem]] | None = None,
    leaving: Mapping[str, Leaving] | None = None,
) -> InferencePoolStatus:
    """The status this pass writes. `routing` and `conflicts`: what applying did (the
    HTTPRoute's outcome, children names held by objects the pool does not own);
    `problems`: why a tier's pods do not run, by tier (gpufleet.desired.health)."""
    now = observation.now
    generation = pool.metadata.generation
    spec = pool.spec
    conditions: list[Condition] = list(previous.conditions)
    met = find(conditions, ConditionType.OBJECTIVES_MET)
    met_before = met is not None and met.status is ConditionStatus.TRUE
    verdicts: list[tuple[ConditionType, Verdict]] = [
        (ConditionType.READY, checks.ready(spec, observation, plan)),
        (
            ConditionType.OBJECTIVES_MET,
            checks.objectives(spec, observation, plan, met_before=met_before),
        ),
        (ConditionType.METRICS_AVAILABLE, checks.metrics(observation)),
        (
            ConditionType.DEGRADED,
            health.degraded(
                spec, checks.degraded(spec, observation, plan, conflicts), problems or {}
            ),
        ),
        (ConditionType.ROUTING_APPLIED, checks.routing(routing)),
    ]
    for type_, verdict in verdicts:
        conditions = set_condition(
            conditions,
            type_,
            _to_status(verdict.status),
            verdict.reason,
            verdict.message,
            now=now,
            observed_generation=generation,
        )

    tiers = []
    for tier in pool.spec.tiers:
        seen = observation.tiers.get(tier.name)
        decided = plan.tiers[tier.name]
        tokens = None
        if seen is not None and seen.prompt_tokens_per_second is not None:
            tokens = round(seen.prompt_tokens_per_second + (seen.generation_tokens_per_second or 0))
        tiers.append(
            TierStatus(
                name=tier.name,
                desired_replicas=decided.replicas,
                ready_replicas=seen.ready_replicas if seen else 0,
                unschedulable_replicas=seen.unschedulable_replicas if seen else 0,
                lost_replicas=decided.lost_replicas,
                leaving_replicas=(leaving or {}).get(tier.name, Leaving()).replicas,
                observed_ttft_p99_milliseconds=_ms(seen.ttft_p99_seconds) if seen else None,
                tokens_per_second=tokens,
                capacity_factor_percent=decided.capacity_factor_percent,
                scale_down_since=decided.scale_down_since,
                scale_down_to=decided.scale_down_to,
                recommendations=[
                    Recommendation(time=t, replicas=r) for t, r in decided.recommendations
                ],
                lead_time_seconds=None
                if decided.lead_time_seconds is None
                else round(decided.lead_time_seconds),
                lead_time_observed_at=decided.lead_time_observed_at,
                reserve_replicas=decided.reserve_replicas,
                tail_replicas=decided.tail_replicas,
                margin_replicas=decided.margin_replicas,
                node_loss=decided.node_loss,
                profile=decided.profile,
                profile_measured=decided.profile_measured,
            )
        )

    classes = []
    for traffic_class in pool.spec.traffic_classes:
        decided_class = plan.classes.get(traffic_class.name)
        weights = decided_class.weights if decided_class else {}
        demand = decided_class.demand_tokens_per_second if decided_class else None
        before = next((c for c in previous.classes if c.name == traffic_class.name), None)
        classes.append(
            ClassStatus(
                name=traffic_class.name,
                weights=[
                    TierWeight(tier=t.name, weight=weights.get(t.name, 0)) for t in pool.spec.tiers
                ],
                demand_tokens_per_second=None if demand is None else round(demand),
                predicted_ttft_p99_milliseconds=_ms(
                    decided_class.predicted_ttft_p99_seconds if decided_class else None
                ),
                observed_ttft_p99_milliseconds=_ms(
                    observation.class_ttft_p99_seconds.get(traffic_class.name)
                ),
                objective_ttft_p99_milliseconds=traffic_class.ttft_p99_objective_milliseconds,
                forecast=_forecast(decided_class, observation, previous, traffic_class.name),
                backlog_tokens=round(decided_class.backlog_tokens)
                if decided_class and decided_class.backlog_tokens > 0
                else None,
                unservable_percent=_unservable(decided_class, before),
                prompt_lengths=decided_class.prompt_lengths
                if decided_class
                else (before.prompt_lengths if before else None),
            )
        )

    decision = previous.last_decision
    if decision is None or _decision_changed(previous, tiers, classes, plan):
        decision = Decision(
            time=now.replace(microsecond=0), reason=plan.reason, message=plan.message
        )

    return InferencePoolStatus(
        observed_generation=generation,
        conditions=conditions,
        tiers=tiers,
        classes=classes,
        cost_per_hour=money(plan.cost_per_hour),
        cost_per_million_tokens=money(plan.cost_per_million_tokens),
        energy_kwh_per_million_tokens=_three(plan.energy_kwh_per_million_tokens),
        carbon_grams_per_million_tokens=_three(plan.carbon_grams_per_million_tokens),
        reserve_cost_per_hour=money(plan.reserve_cost_per_hour)
        if plan.reserve_cost_per_hour > 0
        else None,
        margin_cost_per_hour=money(plan.margin_cost_per_hour)
        if plan.margin_cost_per_hour > 0
        else None,
        last_decision=decision,
        sizing=plan.sizing,
        tier_summary=" ".join(f"{t.name}:{t.ready_replicas}/{t.desired_replicas}" for t in tiers),
        weight_summary="; ".join(
            f"{c.name}: " + ",".join(f"{w.tier}={w.weight}" for w in c.weights if w.weight)
            for c in classes
        ),
        ttft_summary=" ".join(_ttft_cell(c) for c in classes),
    )


def _forecast(
    decided: ClassPlan | None,
    observation: Observation,
    previous: InferencePoolStatus,
    name: str,
) -> DemandForecast | None:
    """The class's forecast as this pass updated it, else as the last pass left it."""
    if decided is not None and decided.forecast is not None:
        return forecast.to_status(decided.forecast)
    return next((c.forecast for c in previous.classes if c.name == name), None)


def _three(value: float | None) -> str | None:
    return None if value is None else f"{value:.3g}"


def _ttft_cell(c: ClassStatus) -> str:
    if c.observed_ttft_p99_milliseconds is not None:
        shown = f"{c.observed_ttft_p99_milliseconds}"
    elif c.predicted_ttft_p99_milliseconds is not None:
        shown = f"~{c.predicted_ttft_p99_milliseconds}"
    else:
        shown = "-"
    return f"{c.name}:{shown}/{c.objective_ttft_p99_milliseconds}ms"


def _decision_changed(
    previous: InferencePoolStatus,
    tiers: list[TierStatus],
    classes: list[ClassStatus],
    plan: Plan,
) -> bool:
    """A new decision: replicas or weights changed, or the planner's reason did."""
    before = {t.name: t.desired_replicas for t in previous.tiers}
    after = {t.name: t.desired_replicas for t in tiers}
    if before != after or _weights(previous.classes) != _weights(classes):
        return True
    return previous.last_decision is None or previous.last_decision.reason != plan.reason


def _weights(classes: list[ClassStatus]) -> dict[str, dict[str, int]]:
    return {c.name: {w.tier: w.weight for w in c.weights} for c in classes}


def events(
    pool: InferencePool,
    previous: InferencePoolStatus,
    current: InferencePoolStatus,
    plan: Plan,
    *,
    conflicted: Set[str] = frozenset(),
    leaving: Mapping[str, Leaving] | None = None,
) -> list[EventRecord]:
    """One Event per change of replicas or weights, and per condition that went bad or good.
    `conflicted`: children names held by objects the pool does not own; their tiers were
    not created, so no "Created tier" Event claims they were."""
    ref = f"{pool.metadata.namespace}/{pool.metadata.name}"
    records: list[EventRecord] = []
    before = {t.name: t.desired_replicas for t in previous.tiers}
    for tier in current.tiers:
        old = before.get(tier.name)
        if old is not None and old != tier.desired_replicas:
            records.append(
                EventRecord(
                    "Normal",
                    _scaled_reason(plan.reason, old, tier.desired_replicas),
                    f"Scaled tier {tier.name} of {ref} from {old} to {tier.desired_replicas}: "
                    f"{plan.message}",
                )
            )
        elif (
            old is None
            and previous.tiers == []
            and tier.desired_replicas
            and manifests.child_name(pool, tier.name) not in conflicted
        ):
            records.append(
                EventRecord(
                    "Normal",
                    plan.reason,
                    f"Created tier {tier.name} of {ref} with {tier.desired_replicas} replicas",
                )
            )
    was_leaving = {t.name: t.leaving_replicas for t in previous.tiers}
    for tier in current.tiers:
        if tier.leaving_replicas > was_leaving.get(tier.name, 0):
            nodes = (leaving or {}).get(tier.name, Leaving()).describe()
            records.append(
                EventRecord(
                    "Normal",
                    Reason.NODES_LEAVING,
                    f"Replacing {tier.leaving_replicas} replicas of tier {tier.name} of {ref} "
                    f"on nodes being removed: {nodes}; their traffic moves to Ready replicas",
                )
            )
    old_weights = _weights(previous.classes)
    for name, weights in _weights(current.classes).items():
        if name in old_weights and old_weights[name] != weights:
            shown = ", ".join(f"{tier}={w}" for tier, w in weights.items() if w) or "none"
            records.append(
                EventRecord(
                    "Normal",
                    Reason.TRAFFIC_MOVED,
                    f"Moved class {name} of {ref} to {shown}: {plan.message}",
                )
            )
    records += _condition_events(previous.conditions, current.conditions)
    return records


def _scaled_reason(decision: Reason, old: int, new: int) -> Reason:
    """The reason of one tier's scaling Event: the decision's, except that a tier's own
    direction names it where the decision is about demand (a pass that moves a class onto
    another tier grows that one and shrinks this one: "DemandIncreased ... from 8 to 7"
    read as the opposite of what the tier did)."""
    if decision in (Reason.DEMAND_INCREASED, Reason.DEMAND_DECREASED):
        return Reason.DEMAND_INCREASED if new > old else Reason.DEMAND_DECREASED
    return decision


# Conditions whose flip deserves an Event, and the status that is bad news.
_WATCHED: Mapping[str, ConditionStatus] = {
    ConditionType.DEGRADED: ConditionStatus.TRUE,
    ConditionType.METRICS_AVAILABLE: ConditionStatus.FALSE,
    ConditionType.OBJECTIVES_MET: ConditionStatus.FALSE,
    ConditionType.ROUTING_APPLIED: ConditionStatus.FALSE,
}


def _condition_events(before: list[Condition], after: list[Condition]) -> list[EventRecord]:
    records = []
    for type_, bad in _WATCHED.items():
        new = find(after, type_)
        old = find(before, type_)
        if new is None:
            continue
        flipped = old is None or old.status != new.status or old.reason != new.reason
        if not flipped:
            continue
        if new.status == bad:
            records.append(
                EventRecord("Warning", new.reason, f"{type_}={new.status}: {new.message}")
            )
        elif old is not None and old.status == bad:
            records.append(
                EventRecord("Normal", new.reason, f"{type_}={new.status}: {new.message}")
            )
    return records
