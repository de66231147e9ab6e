"""A pool's gauges on the operator's /metrics, set from one pass's status and observation.

Each pass replaces the pool's series of every gauge: a series whose tier, class, condition
reason or value went away this pass is removed rather than left at its last value, so a
chart or an alert never reads a ghost (a value the operator no longer stands behind).
"""

from __future__ import annotations

from gpufleet.api.status import ConditionStatus, InferencePoolStatus
from gpufleet.api.types import InferencePool
from gpufleet.desired.sli import class_slis
from gpufleet.planning.records import MetricsState, Observation
from gpufleet.telemetry import Telemetry

Labels = tuple[str, ...]


def export_pool(
    telemetry: Telemetry, pool: InferencePool, status: InferencePoolStatus, seen: Observation
) -> None:
    """Set every gauge of the pool from this pass (status written, observation read)."""
    ns, name = pool.metadata.namespace, pool.metadata.name
    replicas: dict[Labels, float] = {}
    tier_values: dict[str, dict[Labels, float]] = {
        "tier_ttft": {},
        "tier_tokens": {},
        "lead_time": {},
        "capacity_factor": {},
    }
    for tier in status.tiers:
        observed = seen.tiers.get(tier.name)
        states = {
            "desired": tier.desired_replicas,
            "ready": tier.ready_replicas,
            "starting": observed.starting_replicas if observed else 0,
            "unschedulable": tier.unschedulable_replicas,
            "lost": tier.lost_replicas,
            "reserve": tier.reserve_replicas,
            "margin": tier.margin_replicas,
            "tail": tier.tail_replicas,
        }
        for state, count in states.items():
            replicas[(ns, name, tier.name, state)] = count
        key = (ns, name, tier.name)
        if tier.observed_ttft_p99_milliseconds is not None:
            tier_values["tier_ttft"][key] = tier.observed_ttft_p99_milliseconds / 1000
        if tier.tokens_per_second is not None:
            tier_values["tier_tokens"][key] = tier.tokens_per_second
        if tier.lead_time_seconds is not None:
            tier_values["lead_time"][key] = tier.lead_time_seconds
        tier_values["capacity_factor"][key] = tier.capacity_factor_percent / 100
    telemetry.replace_pool_series("replicas", ns, name, replicas)
    for gauge, values in tier_values.items():
        telemetry.replace_pool_series(gauge, ns, name, values)

    telemetry.replace_pool_series(
        "weights",
        ns,
        name,
        {(ns, name, c.name, w.tier): w.weight for c in status.classes for w in c.weights},
    )
    _export_classes(telemetry, pool, status, seen)

    money = {
        "cost_per_mtok": status.cost_per_million_tokens,
        "reserve_cost": status.reserve_cost_per_hour,
        "target_per_mtok": pool.spec.objectives.max_cost_per_million_tokens,
        "target_per_hour": pool.spec.objectives.max_hourly_cost,
    }
    for gauge, value in money.items():
        telemetry.replace_pool_series(
            gauge, ns, name, {} if value is None else {(ns, name): float(value)}
        )
    cost = status.cost_per_hour
    telemetry.replace_pool_series(
        "cost", ns, name, {} if cost is None else {(ns, name): float(cost)}
    )
    available = 1.0 if seen.metrics is MetricsState.AVAILABLE else 0.0
    telemetry.replace_pool_series("metrics_available", ns, name, {(ns, name): available})
    telemetry.replace_pool_series(
        "condition",
        ns,
        name,
        {
            (ns, name, c.type, c.reason): 1.0 if c.status is ConditionStatus.TRUE else 0.0
            for c in status.conditions
        },
    )


def _export_classes(
    telemetry: Telemetry, pool: InferencePool, status: InferencePoolStatus, seen: Observation
) -> None:
    ns, name = pool.metadata.namespace, pool.metadata.name
    by_class = {c.name: c for c in status.classes}
    values: dict[str, dict[Labels, float]] = {
        "class_objective": {},
        "class_ttft": {},
        "class_attainment": {},
        "class_attainment_exact": {},
        "class_demand": {},
    }
    slis = (
        class_slis(pool.spec, status, seen.tiers) if seen.metrics is MetricsState.AVAILABLE else []
    )
    for sli in slis:
        key = (ns, name, sli.name)
        if sli.attainment_ratio is not None:
            values["class_attainment"][key] = sli.attainment_ratio
            values["class_attainment_exact"][key] = 1.0 if sli.exact else 0.0
    for cls in pool.spec.traffic_classes:
        key = (ns, name, cls.name)
        values["class_objective"][key] = cls.objective_seconds
        current = by_class.get(cls.name)
        if current is None:
            continue
        if current.observed_ttft_p99_milliseconds is not None:
            values["class_ttft"][key] = current.observed_ttft_p99_milliseconds / 1000
        if current.demand_tokens_per_second is not None:
            values["class_demand"][key] = current.demand_tokens_per_second
    for gauge, by_labels in values.items():
        telemetry.replace_pool_series(gauge, ns, name, by_labels)
