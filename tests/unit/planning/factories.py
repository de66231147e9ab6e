"""Typed factories for planner tests: specs, observations and previous status."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gpufleet.api.status import (
    ClassStatus,
    Decision,
    InferencePoolStatus,
    Recommendation,
    TierStatus,
    TierWeight,
)
from gpufleet.api.types import InferencePoolSpec, ModelSpec, Tier
from gpufleet.planning.forecast import to_status
from gpufleet.planning.records import ClassDemand, MetricsState, Observation, Plan, TierObservation
from tests.pools import pool, tier, traffic_class

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
LLAMA_8B = ModelSpec(name="meta-llama/Meta-Llama-3-8B-Instruct")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def tier_spec(name: str = "t", accelerator: str = "RTX4090", **fields: Any) -> Tier:
    return Tier.model_validate(tier(name, accelerator, **fields))


def h100(**fields: Any) -> dict[str, Any]:
    return tier("h100", "H100-PCIe-80GB", **{"minReplicas": 1, **fields})


def rtx4090(**fields: Any) -> dict[str, Any]:
    return tier("rtx4090", "RTX4090", **{"maxReplicas": 16, **fields})


def realtime(ttft_ms: int = 100, **fields: Any) -> dict[str, Any]:
    return traffic_class("realtime", ttft_ms, header="realtime", **{"priority": 100, **fields})


def batch(ttft_ms: int = 2000, **fields: Any) -> dict[str, Any]:
    return traffic_class("batch", ttft_ms, **{"priority": 10, **fields})


def spec(
    tiers: list[dict[str, Any]] | None = None,
    classes: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> InferencePoolSpec:
    """The llama3-8b-mixed example's spec (h100 + rtx4090, realtime + batch), overridden."""
    body = pool(
        tiers=tiers if tiers is not None else [h100(), rtx4090()],
        classes=classes if classes is not None else [realtime(), batch()],
        **fields,
    )
    return InferencePoolSpec.model_validate(body["spec"])


def demand(tokens_per_second: float, prompt_share: float = 0.5) -> ClassDemand:
    return ClassDemand(
        prompt_tokens_per_second=tokens_per_second * prompt_share,
        generation_tokens_per_second=tokens_per_second * (1 - prompt_share),
    )


def observe(
    pool_spec: InferencePoolSpec,
    demands: Mapping[str, float | None] | None = None,
    *,
    now: float = 0.0,
    ready: Mapping[str, int] | None = None,
    tiers: Mapping[str, Mapping[str, Any]] | None = None,
    metrics: MetricsState = MetricsState.AVAILABLE,
    class_ttft: Mapping[str, float] | None = None,
) -> Observation:
    """An observation: `ready` replicas per tier (desired = ready), plus per-tier overrides."""
    ready = ready or {}
    tier_obs = {}
    for t in pool_spec.tiers:
        fields: dict[str, Any] = {
            "desired_replicas": ready.get(t.name, 0),
            "ready_replicas": ready.get(t.name, 0),
        }
        fields.update((tiers or {}).get(t.name, {}))
        tier_obs[t.name] = TierObservation(name=t.name, **fields)
    return Observation(
        now=at(now),
        tiers=tier_obs,
        metrics=metrics,
        demand={c.name: _demand_of(demands or {}, c.name) for c in pool_spec.traffic_classes},
        class_ttft_p99_seconds=dict(class_ttft or {}),
    )


def _demand_of(demands: Mapping[str, float | None], name: str) -> ClassDemand | None:
    value = demands.get(name, 0.0)
    return None if value is None else demand(value)


def previous(
    desired: Mapping[str, int] | None = None,
    weights: Mapping[str, Mapping[str, int]] | None = None,
    *,
    tiers: Mapping[str, Mapping[str, Any]] | None = None,
    decided_at: float = 0.0,
    demands: Mapping[str, int] | None = None,
) -> InferencePoolStatus:
    """A status as a previous pass left it (empty when nothing is given: a new pool)."""
    if desired is None and weights is None:
        return InferencePoolStatus()
    names = sorted(set(desired or {}) | set(tiers or {}))
    return InferencePoolStatus(
        tiers=[
            TierStatus(
                name=n,
                **{
                    "desired_replicas": (desired or {}).get(n, 0),
                    "ready_replicas": (desired or {}).get(n, 0),
                    **(tiers or {}).get(n, {}),
                },
            )
            for n in names
        ],
        classes=[
            ClassStatus(
                name=c,
                weights=[TierWeight(tier=t, weight=w) for t, w in ws.items()],
                demand_tokens_per_second=(demands or {}).get(c),
            )
            for c, ws in (weights or {}).items()
        ],
        last_decision=Decision(time=at(decided_at), reason="Initial", message=""),
    )


def status_from(plan: Plan, observation: Observation) -> InferencePoolStatus:
    """The status a reconciler writes after `plan` (what the next pass gets as previous)."""
    return InferencePoolStatus(
        tiers=[
            TierStatus(
                name=t.name,
                desired_replicas=t.replicas,
                ready_replicas=observation.tiers[t.name].ready_replicas,
                capacity_factor_percent=t.capacity_factor_percent,
                scale_down_since=t.scale_down_since,
                scale_down_to=t.scale_down_to,
                recommendations=[Recommendation(time=w, replicas=r) for w, r in t.recommendations],
                lead_time_seconds=None
                if t.lead_time_seconds is None
                else round(t.lead_time_seconds),
                lead_time_observed_at=t.lead_time_observed_at,
                margin_replicas=t.margin_replicas,
                node_loss=t.node_loss,
            )
            for t in plan.tiers.values()
        ],
        classes=[
            ClassStatus(
                name=c.name,
                weights=[TierWeight(tier=t, weight=w) for t, w in c.weights.items()],
                demand_tokens_per_second=None
                if c.demand_tokens_per_second is None
                else round(c.demand_tokens_per_second),
                forecast=None if c.forecast is None else to_status(c.forecast),
                backlog_tokens=round(c.backlog_tokens) if c.backlog_tokens > 0 else None,
                prompt_lengths=c.prompt_lengths,
            )
            for c in plan.classes.values()
        ],
        last_decision=Decision(time=observation.now, reason=plan.reason, message=plan.message),
        sizing=plan.sizing,
    )


def replicas(plan: Plan) -> dict[str, int]:
    return {n: t.replicas for n, t in plan.tiers.items()}


def weights(plan: Plan) -> dict[str, dict[str, int]]:
    return {n: {t: w for t, w in c.weights.items() if w} for n, c in plan.classes.items()}
