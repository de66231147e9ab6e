"""Before a tier shrinks, mark its idlest pods to go first (`desired.deletion_cost`).

Runs only in a pass whose plan removes replicas from a tier, so a steady pool writes no
pod. Best effort: without an answer from Prometheus the scale-down goes ahead with the
ReplicaSet controller's own order (not Ready first, then youngest).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from gpufleet.api.types import InferencePool
from gpufleet.desired.deletion_cost import DELETION_COST, costs_to_write, is_scale_down

log = logging.getLogger(__name__)


class InFlightSource(Protocol):
    def requests_in_flight(self, pool: InferencePool, tier: str) -> dict[str, float] | None: ...


class PodAnnotator(Protocol):
    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None: ...


def rank_for_scale_down(
    kube: PodAnnotator,
    metrics: InFlightSource,
    pool: InferencePool,
    tier: str,
    current: Mapping[str, str | None],
    leaving: frozenset[str] = frozenset(),
) -> list[str]:
    """Write each pod's requests in flight as its deletion cost, and the lowest cost on pods
    of leaving or vanished nodes; returns the pods written. Without an answer from
    Prometheus only those pods are marked."""
    in_flight = metrics.requests_in_flight(pool, tier)
    costs = costs_to_write(current, in_flight or {}, leaving)
    if in_flight is None:
        costs = {pod: cost for pod, cost in costs.items() if pod in leaving}
    for pod, cost in sorted(costs.items()):
        kube.annotate_pod(pool.metadata.namespace, pod, {DELETION_COST: cost})
    if costs:
        log.info(
            "Ranked pods of tier %s of %s/%s for scale-down by requests in flight: %s",
            tier,
            pool.metadata.namespace,
            pool.metadata.name,
            ", ".join(f"{p}={c}" for p, c in sorted(costs.items())),
        )
    return sorted(costs)


@dataclass(frozen=True)
class ShrinkingTier:
    """A tier as a pass is about to apply it."""

    name: str
    live: Mapping[str, Any]  # its Deployment as read
    replicas: int  # what the pass applies
    costs: Mapping[str, str | None]  # its pods' current deletion costs
    leaving: frozenset[str] = frozenset()  # its pods on leaving or vanished nodes


def rank_if_shrinking(
    kube: PodAnnotator, metrics: InFlightSource, pool: InferencePool, tier: ShrinkingTier
) -> None:
    """Rank the tier's pods when the pass removes replicas; best effort: a refused
    annotation must not hold back the scale-down."""
    if not is_scale_down(tier.live, tier.replicas):
        return
    try:
        rank_for_scale_down(kube, metrics, pool, tier.name, tier.costs, tier.leaving)
    except ApiException as error:
        log.warning("Failed to rank pods of tier %s for scale-down: %s", tier.name, error.reason)
