"""Hedging preemptible tiers: each one's node loss rate, learned online, and its margin.

A preemptible tier (consumer GPUs their owners take back, spot capacity) loses replicas
with their nodes. A lost replica is replaced, but its replacement serves a lead time later;
until then the tier is short and its traffic queues or overflows. So the planner runs, on
top of the plan, the replicas a tier is expected to lose within one lead time: the Poisson
quantile, at the pool's forecastPercentile, of R x rate x lead time, for the R replicas it
plans there (`margin`). The margin goes through the scale-down delay like any replica, is
priced in status, and can be turned off with `spec.scaling.hedgePreemptible: false`.

The rate (losses per replica-hour) is learned online, per tier, from what the operator
sees: a *loss* is one of the tier's pods on a node that went away, went NotReady, or is
leaving (cordoned, or tainted for removal); each is counted once, by pod name (status
keeps the names still seen). The *exposure* is the tier's Ready replica-time. Both decay
with a time constant of `WINDOW_SECONDS`, so a tier that calmed down is trusted again
within hours. The prior is `PRIOR_RATE_PER_REPLICA_HOUR`, worth `PRIOR_REPLICA_HOURS` of
evidence: a new tier is not assumed safe, and a few hours of its real losses outweigh it.

Status changes only when something happened (a loss, a pod gone, the Ready count changed):
the state is stored as of `since` with the Ready count since then, and each pass rolls it
forward to now for its decision without writing it, so an idle pass writes nothing.

A tier whose replicas are, together, expected to lose one within a lead time (R x rate x
lead time >= 1) loses nodes faster than it can start replicas: Degraded says so, with the
rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scipy.stats import poisson

from gpufleet.api.status import NodeLoss
from gpufleet.planning.inputs import Inputs

# Decay time constant of the loss evidence: losses of a day ago weigh e^-4 of one now.
WINDOW_SECONDS = 6 * 3600.0
# The prior: one loss per replica per day (spot interruption rates run from a few percent
# a month to several a day on consumer marketplaces), as much evidence as 8 replica-hours.
PRIOR_RATE_PER_REPLICA_HOUR = 1 / 24
PRIOR_REPLICA_HOURS = 8.0
# Status keeps at most this many counted pod names (a tier's lost pods still present).
MAX_LOST_PODS = 256


@dataclass(frozen=True)
class TierLoss:
    """A preemptible tier's loss evidence now, and the state status keeps."""

    losses: float  # decayed count of losses, as of now
    exposure_replica_hours: float  # decayed Ready replica-hours, as of now
    new_losses: int  # counted this pass
    state: NodeLoss  # what status keeps (unchanged when nothing happened)

    @property
    def rate_per_replica_hour(self) -> float:
        return _posterior(self.losses, self.exposure_replica_hours)

    def expected_losses(self, replicas: int, lead_seconds: float) -> float:
        """Losses expected among `replicas` within one lead time."""
        return replicas * self.rate_per_replica_hour * lead_seconds / 3600.0


def _roll(losses: float, exposure: float, replicas: int, seconds: float) -> tuple[float, float]:
    """Evidence `seconds` later with `replicas` Ready meanwhile: decayed, exposure added."""
    decay = math.exp(-max(seconds, 0.0) / WINDOW_SECONDS)
    added = replicas * WINDOW_SECONDS * (1.0 - decay) / 3600.0
    return losses * decay, exposure * decay + added


def learn(inputs: Inputs) -> dict[str, TierLoss]:
    """Each preemptible tier's loss evidence after this pass's observation."""
    result = {}
    now = inputs.now
    for tier in inputs.tiers:
        if not tier.preemptible:
            continue
        seen = inputs.seen(tier.name)
        before = inputs.before(tier.name)
        state = before.node_loss if before is not None else None
        lost = sorted(set(seen.lost_pods))[:MAX_LOST_PODS]
        if state is None:
            new = len(lost)
            losses, exposure = float(new), 0.0
        else:
            new = len(set(lost) - set(state.lost_pods))
            elapsed = (now - state.since).total_seconds()
            losses, exposure = _roll(
                state.losses, state.exposure_replica_hours, state.replicas, elapsed
            )
            losses += new
        ready = seen.ready_replicas
        if state is None or new or ready != state.replicas or lost != list(state.lost_pods):
            state = NodeLoss(
                losses=round(losses, 6),
                exposure_replica_hours=round(exposure, 6),
                replicas=ready,
                since=now,
                lost_pods=lost,
                rate_per_replica_hour=float(f"{_posterior(losses, exposure):.3g}"),
            )
        result[tier.name] = TierLoss(losses, exposure, new, state)
    return result


def _posterior(losses: float, exposure: float) -> float:
    """Losses per replica-hour: the prior's pseudo-evidence plus what was seen."""
    prior = PRIOR_RATE_PER_REPLICA_HOUR * PRIOR_REPLICA_HOURS
    return (prior + losses) / (PRIOR_REPLICA_HOURS + exposure)


def margins(
    inputs: Inputs,
    losses: Mapping[str, TierLoss],
    leads: Mapping[str, float],
    planned: Mapping[str, int],
) -> dict[str, int]:
    """Replicas each tier runs on top of `planned` for the losses expected within its lead
    time, at the pool's forecast quantile; 0 for tiers not hedged."""
    if not inputs.spec.scaling.hedge_preemptible:
        return dict.fromkeys(inputs.names, 0)
    quantile = inputs.spec.scaling.forecast_percentile / 100.0
    result = {}
    for name in inputs.names:
        loss = losses.get(name)
        replicas = planned.get(name, 0)
        if loss is None or replicas <= 0:
            result[name] = 0
            continue
        mean = loss.expected_losses(replicas, leads[name])
        result[name] = int(poisson.ppf(quantile, mean)) if mean > 0 else 0
    return result


def expected(loss: TierLoss | None, replicas: int, lead_seconds: float) -> float:
    """Losses expected among a tier's `replicas` within a lead time (0: not preemptible).
    At 1 or more the tier loses nodes faster than it can start replicas (Degraded)."""
    return 0.0 if loss is None or replicas <= 0 else loss.expected_losses(replicas, lead_seconds)
