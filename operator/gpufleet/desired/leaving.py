"""Nodes that are about to go, and the replacements asked for the replicas on them.

A node that is cordoned (`spec.unschedulable`) or carries an interruption taint (the
cluster autoscaler or Karpenter about to remove it, a spot interruption notice) still runs
its pods for a while, then they are evicted. Counting them as Ready until then means a
replacement starts only after the eviction, a model load later. So a Ready replica on a
leaving node is counted as leaving, not Ready: the planner routes as if it were gone, and
the Deployment asks for one more replica for each (recorded in the `replacing`
annotation, so the next pass reads the planner's own count back), as far as the tier's
maxReplicas and the pool's hourly budget allow (`surges`). When the node is gone, the
extra replicas are given back like any scale-down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.api.constants import GROUP

# Taint keys that announce a node's removal (the operator's --interruption-taints).
INTERRUPTION_TAINTS = (
    "ToBeDeletedByClusterAutoscaler",  # cluster-autoscaler, scale-down in progress
    "karpenter.sh/disrupted",  # Karpenter v1
    "karpenter.sh/disruption",  # Karpenter before v1 (value `disrupting`)
    "aws-node-termination-handler/spot-itn",  # spot interruption notice
    "aws-node-termination-handler/scheduled-maintenance",
    "aws-node-termination-handler/asg-lifecycle-termination",
)
# Replicas a Deployment carries on top of the plan, replacing those on leaving nodes.
REPLACING = f"{GROUP}/replacing"


@dataclass(frozen=True)
class Leaving:
    """A tier's Ready replicas on leaving nodes, and those nodes with why."""

    replicas: int = 0
    nodes: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return ", ".join(f"{node} ({why})" for node, why in sorted(self.nodes.items()))


def leaving_reason(node: Mapping[str, object], taints: Sequence[str]) -> str | None:
    """Why a node is leaving (`cordoned` or the taint key), None when it is not."""
    spec = node.get("spec")
    if not isinstance(spec, Mapping):
        return None
    for taint in spec.get("taints") or []:
        if isinstance(taint, Mapping) and taint.get("key") in taints:
            return str(taint["key"])
    return "cordoned" if spec.get("unschedulable") else None


def classify_nodes(
    nodes: Sequence[Mapping[str, Any]], taints: Sequence[str]
) -> tuple[set[str], dict[str, str]]:
    """Names of the Ready nodes, and the leaving nodes with why."""
    ready, leaving = set(), {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        conditions = (node.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            ready.add(name)
        why = leaving_reason(node, taints)
        if why is not None:
            leaving[name] = why
    return ready, leaving


def replacing(deployment: Mapping[str, object] | None) -> int:
    """Replicas the live Deployment carries for leaving ones (its `replacing` annotation)."""
    meta = (deployment or {}).get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(REPLACING) if isinstance(annotations, Mapping) else None
    try:
        return max(0, int(str(value))) if value is not None else 0
    except ValueError:
        return 0


def surges(
    pool: Any, planned: Mapping[str, int], leaving: Mapping[str, int], cost_per_hour: float
) -> dict[str, int]:
    """Replacements per tier for its Ready replicas on leaving nodes, within the pool's
    bounds: never past a tier's maxReplicas, and never past the hourly budget (what the
    plan spends plus the replacements, tiers in spec order). A replacement the bounds do
    not allow is not started early; the tier is replaced when the node is gone, as before."""
    budget = pool.spec.objectives.max_hourly_cost
    left = None if budget is None else float(budget) - cost_per_hour
    result = {}
    for tier in pool.spec.tiers:
        want = max(0, leaving.get(tier.name, 0))
        room = max(0, tier.max_replicas - planned.get(tier.name, 0))
        n = min(want, room)
        price = tier.price_per_replica_hour
        if left is not None and price > 0:
            n = min(n, max(0, int((left + 1e-9) // price)))
            left -= n * price
        result[tier.name] = n
    return result
