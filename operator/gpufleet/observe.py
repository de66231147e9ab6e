"""The observe step of a pass: the planner's view of the world from what was read.

Pure: the pool's children as the Kubernetes adapter read them (Deployments, pods by tier)
and the Prometheus adapter's reading become one `Observation`. Class-level demand, P99 and
backlog come from `planning.observed.observe_classes`, the same function the simulator's
operator view calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime

from gpufleet.adapters.kube import Children
from gpufleet.api.types import InferencePool
from gpufleet.desired import manifests
from gpufleet.desired.leaving import replacing
from gpufleet.planning.observed import ClassObservations, Routed, observe_classes
from gpufleet.planning.records import (
    MetricsReading,
    MetricsState,
    Observation,
    TierMetrics,
    TierObservation,
)


def observe(
    pool: InferencePool,
    children: Children,
    reading: MetricsReading,
    now: datetime,
    routed: Sequence[Routed] = (),
) -> Observation:
    """The planner's view of the world from the pool's children and its metrics.

    `routed`: the weights this process's passes applied to the pool, oldest first
    (`planning.observed.window_weights`; empty: the live weights held over the window)."""
    tiers = {}
    for tier in pool.spec.tiers:
        deployment = children.deployments.get(manifests.child_name(pool, tier))
        pods = children.pods.get(tier.name)
        metrics = reading.tiers.get(tier.name, TierMetrics())
        spec = (deployment or {}).get("spec", {})
        status = (deployment or {}).get("status", {})
        tiers[tier.name] = TierObservation(
            name=tier.name,
            # What the planner asked for: without the replacements for leaving replicas.
            desired_replicas=max(0, int(spec.get("replicas") or 0) - replacing(deployment)),
            # Pods on vanished nodes still count as Ready in the Deployment for a minute.
            ready_replicas=min(int(status.get("readyReplicas") or 0), pods.ready)
            if pods
            else int(status.get("readyReplicas") or 0),
            starting_replicas=pods.starting if pods else 0,
            unschedulable_replicas=pods.unschedulable if pods else 0,
            pod_starts=tuple(pods.starts) if pods else (),
            lost_pods=tuple(sorted(pods.leaving_pods)) if pods else (),
            # Every Prometheus reading of the tier, field for field (TierObservation has them).
            **{f.name: getattr(metrics, f.name) for f in fields(TierMetrics)},
        )
    # Demand and P99 per class, from the tiers' readings and the weights they were routed
    # with; nothing to infer them from when the metrics cannot be trusted.
    classes = (
        observe_classes(
            pool.spec, pool.status, reading.tiers, reading.demand_queries,
            routed=routed, now=now, window_seconds=reading.window_seconds,
        )
        if reading.state is MetricsState.AVAILABLE
        else ClassObservations()
    )  # fmt: skip
    return Observation(
        now=now,
        tiers=tiers,
        metrics=reading.state,
        metrics_message=reading.message,
        demand=classes.demand,
        class_ttft_p99_seconds=classes.ttft_p99_seconds,
        class_backlog_tokens=classes.backlog_tokens,
        metrics_window_seconds=reading.window_seconds,
    )
