"""A stand-in planner for component tests of the reconciler: minimum replicas, each class
on the first tier with replicas. The real planner is tested in tests/unit/planning."""

from __future__ import annotations

from gpufleet.api.status import InferencePoolStatus, Reason
from gpufleet.api.types import InferencePoolSpec
from gpufleet.planning.records import ClassPlan, Observation, Plan, TierPlan


def minimum_plan(
    spec: InferencePoolSpec, observation: Observation, previous: InferencePoolStatus
) -> Plan:
    replicas = {t.name: max(t.min_replicas, 1 if i == 0 else 0) for i, t in enumerate(spec.tiers)}
    first = next(name for name, n in replicas.items() if n)
    return Plan(
        tiers={name: TierPlan(name=name, replicas=n) for name, n in replicas.items()},
        classes={
            c.name: ClassPlan(
                name=c.name, weights={t.name: 100 if t.name == first else 0 for t in spec.tiers}
            )
            for c in spec.traffic_classes
        },
        reason=Reason.INITIAL,
        message="Minimum replicas",
        cost_per_hour=sum(t.price_per_replica_hour * replicas[t.name] for t in spec.tiers),
        cost_per_million_tokens=None,
        energy_kwh_per_million_tokens=None,
        carbon_grams_per_million_tokens=None,
        awaiting_metrics=True,
    )
