"""Each tier's lead time: from "replica created" to "Ready and serving", learned online.

A scale-up helps only once its replicas are Ready: the pod is scheduled (on a node that
may have to be provisioned first), its image pulled, its model loaded. The prior is the
replica model's load time (the profile's `modelLoadSeconds`, or the weights read at disk
speed). Each pass learns from the tier's Ready pods that became Ready since the last
sample it used (`TierStatus.leadTimeObservedAt`): the mean of their created -> Ready times
moves the estimate halfway, so one slow node does not double it and a changed image or
node pool is learned within a few scale-ups.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.inputs import Inputs

LEARNING_RATE = 0.5
# A pod Ready within a second of its creation was not seen starting (a replica that was
# there before the operator, or a simulator's warm start): it says nothing of lead time.
MIN_SAMPLE_SECONDS = 1.0
# Without a model (no profile) and without pods seen, a replica is assumed to take this.
DEFAULT_SECONDS = 120.0


@dataclass(frozen=True)
class LeadTime:
    seconds: float
    observed_at: datetime | None  # newest Ready time learned from (None: the prior)
    learned: bool


def lead_times(inputs: Inputs, models: Mapping[str, ReplicaModel]) -> dict[str, LeadTime]:
    result = {}
    for tier in inputs.tiers:
        model = models.get(tier.name)
        prior = model.model_load_seconds if model is not None else DEFAULT_SECONDS
        before = inputs.before(tier.name)
        seconds = float(before.lead_time_seconds) if before and before.lead_time_seconds else prior
        since = before.lead_time_observed_at if before else None
        learned = since is not None
        fresh = [
            s
            for s in inputs.seen(tier.name).pod_starts
            if (since is None or s.ready > since) and s.seconds >= MIN_SAMPLE_SECONDS
        ]
        if fresh:
            sample = sum(s.seconds for s in fresh) / len(fresh)
            seconds = sample if not learned else seconds + LEARNING_RATE * (sample - seconds)
            since = max(s.ready for s in fresh)
            learned = True
        result[tier.name] = LeadTime(seconds, since, learned)
    return result
