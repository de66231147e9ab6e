"""Which replica leaves on a scale-down: the idlest, by `pod-deletion-cost`.

The ReplicaSet controller removes pods that are unscheduled, pending or not Ready first;
among Ready pods it removes the ones with the lowest `controller.kubernetes.io/pod-deletion-
cost` first, before it looks at node spread or age. Without a cost it may remove the
busiest replica and cut (or make drain) the most requests. So before a tier shrinks, each
of its pods gets its number of requests in flight as its cost.

Pure: the costs to write from the pods' current annotations and what Prometheus reported.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# The annotation is an int32.
_MAX_COST = 2**31 - 1


def cost_of(in_flight: float) -> int:
    """A pod's deletion cost: its requests in flight, a whole number within int32."""
    if in_flight != in_flight or in_flight <= 0:  # NaN or idle
        return 0
    return min(_MAX_COST, round(in_flight))


# Below any pod's requests in flight: a pod on a node being removed goes first.
LEAVING_COST = -1


def costs_to_write(
    current: Mapping[str, str | None],
    in_flight: Mapping[str, float],
    leaving: Collection[str] = (),
) -> dict[str, str]:
    """pod -> the cost annotation to write, only where it differs from what the pod has.

    `current` names the tier's pods that are not terminating, each with its annotation
    (None when unset); a pod Prometheus has no series for (not scraped yet) counts as idle;
    a pod on a leaving node (`leaving`, gpufleet.desired.leaving) costs least of all.
    """
    wanted = {
        pod: str(LEAVING_COST if pod in leaving else cost_of(in_flight.get(pod, 0.0)))
        for pod in current
    }
    return {pod: cost for pod, cost in wanted.items() if current[pod] != cost}


def is_scale_down(live: Mapping[str, object] | None, replicas: int) -> bool:
    """Whether applying `replicas` to the live Deployment removes pods."""
    if live is None:
        return False
    spec = live.get("spec")
    before = spec.get("replicas") if isinstance(spec, Mapping) else None
    return isinstance(before, int) and before > replicas


def current_costs(
    pods: Sequence[Mapping[str, object]], tier_label: str
) -> dict[str, dict[str, str | None]]:
    """tier -> pod -> its cost annotation (None when unset), for pods not terminating."""
    out: dict[str, dict[str, str | None]] = {}
    for pod in pods:
        meta = pod.get("metadata")
        if not isinstance(meta, Mapping) or meta.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
        annotations = meta.get("annotations")
        tier = labels.get(tier_label) if isinstance(labels, Mapping) else None
        name = meta.get("name")
        if not isinstance(tier, str) or not isinstance(name, str):
            continue
        cost = annotations.get(DELETION_COST) if isinstance(annotations, Mapping) else None
        out.setdefault(tier, {})[name] = cost if isinstance(cost, str) else None
    return out
