"""Events for changes to a tier's pods that no replica or weight change explains (pure).

A class objective added, removed or changed changes the TTFT histogram's buckets gpufleet
asks vLLM for (`manifests.ttft_buckets`): the flag changes the pod template, so the tier's
Deployment rolls its pods. The Event says so, so a rollout nobody asked for by name is not
a mystery in `kubectl describe`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from gpufleet.api.status import Reason
from gpufleet.api.types import InferencePool
from gpufleet.desired import manifests
from gpufleet.desired.status import EventRecord


def live_ttft_buckets(deployment: Mapping[str, Any]) -> list[float] | None:
    """The TTFT bounds a live Deployment's vLLM was given (None: vLLM's defaults)."""
    containers = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("containers")
    args: Sequence[str] = (containers or [{}])[0].get("args") or []
    return manifests.ttft_buckets_in(args)


def bucket_events(
    pool: InferencePool, live: Mapping[str, Mapping[str, Any]], applied: Collection[str]
) -> list[EventRecord]:
    """One Event per tier whose applied Deployment changed its TTFT buckets.

    `live`: the Deployments as read before this pass, by name; `applied`: what this pass
    applied ("Deployment <name>").
    """
    ref = f"{pool.metadata.namespace}/{pool.metadata.name}"
    wanted = manifests.ttft_buckets(pool)
    records = []
    for tier in pool.spec.tiers:
        name = manifests.child_name(pool, tier)
        before = live.get(name)
        if before is None or f"Deployment {name}" not in applied:
            continue
        old = live_ttft_buckets(before)
        if old == wanted:
            continue
        added = sorted(set(wanted or []) - set(old or []))
        removed = sorted(set(old or []) - set(wanted or []))
        change = "; ".join(
            part
            for part in (
                f"added {', '.join(f'{b:g}' for b in added)} s" if added else "",
                f"removed {', '.join(f'{b:g}' for b in removed)} s" if removed else "",
            )
            if part
        )
        what = change or ("vLLM's defaults" if wanted is None else "reordered")
        records.append(
            EventRecord(
                "Normal",
                Reason.HISTOGRAM_BUCKETS_CHANGED,
                f"Rolling tier {tier.name} of {ref}: its TTFT histogram buckets changed with "
                f"the class objectives ({what})",
            )
        )
    return records
