"""Feedback: the profile is a prior, the cluster the truth.

Each tier carries a capacity factor (TierStatus.capacityFactorPercent, 100 = the profile):
the replica's speed as a share of what its profile says (`ReplicaModel.with_capacity_factor`).
Each pass reads what the tier showed over the last interval (`signal`):

- SLOW: more than 1% of its first tokens were slower than the *upper* bracket of the
  loosest objective it serves (the smallest TTFT bucket bound at or above it), and at
  least two requests were. Every class on the tier has an objective at or below that
  bound, so some class surely missed its P99.
- Prompts too long to reach a bound on an idle replica (`prompts.beyond_reach`, from the
  tier's own prompt histogram) are slow whatever the capacity: their share is taken off the
  share slower than the bound before SLOW is judged, so long prompts never shrink the
  factor (which would buy replicas that cannot make them faster).
- FAST: under 1% were slower than the *lower* bracket of the tightest objective it serves
  (the largest bucket bound below it): every class is surely within, with margin.
- WITHIN: anything in between: hold.

Inside the objective's bucket the share slower than the objective itself is estimated on
an exponential tail (log-linear between the two bounds; none above the upper one counts
as half a request), and counts as SLOW above 2%, twice the allowance: a 2 s objective in
vLLM's (1, 2.5] bucket otherwise hides every miss between 2 and 2.5 s. The cases it must
get right (a heavy tail inside the bucket shrinks, a light one does not) are in
tests/unit/planning/test_planner.py.

Shares at bucket bounds are exact, where a quantile is not: Prometheus's
histogram_quantile interpolates inside a bucket, and with vLLM's buckets a 2 s objective
lies inside (1, 2.5], where a true P99 of 1.02 s reads as 2.3 s. Without bucket shares
the tier's P99 is used (SLOW above the loosest objective, FAST at or below 80% of the
tightest). A tier that serves classes of several objectives is judged by the loosest one
for SLOW because its histogram does not say whose requests were slow.

The factor then moves (`next_capacity_factor`) in gentle, bounded steps:
- SLOW shrinks it by 10%, never below 50%, and only when the violation can be capacity's
  fault (`_may_shrink`): not while replicas are starting or have just become
  Ready (the replicas last pass bought are not carrying load yet: shrinking again would buy
  twice for one problem), not when the tier carries more than was planned
  (under-provisioning, which the optimizer already fixes with replicas), and not when it
  carries under half of what was planned (at that load queueing is small, so slow first
  tokens come from the prompts themselves and more replicas would not make them faster).
- FAST grows it back by 5 points, up to 100.
- WITHIN, or no evidence (no traffic, no ready replica, no metrics), keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum

from gpufleet.api.types import Tier, TrafficClass
from gpufleet.planning import prompts
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.records import MetricsState, TierObservation

MIN_PERCENT = 50
MAX_PERCENT = 100
GROW_PERCENT = 5
SHRINK = 0.9  # per SLOW pass
TAIL = 0.01  # a P99 objective lets 1% of requests be slower
# Inside a bucket the share slower than the objective is an estimate: SLOW only above this.
INSIDE_TAIL = 0.02
MIN_SLOW_REQUESTS = 2.0  # one slow request in fewer than 100 is not a P99 violation
GROW_BELOW = 0.8  # P99 fallback: observed / tightest objective at or below which it grows
# Shrink only between these shares of the utilization the plan allows the tier.
LOADED_AT_LEAST = 0.5
LOADED_AT_MOST = 1.05


class Signal(StrEnum):
    SLOW = "Slow"
    FAST = "Fast"
    WITHIN = "Within"
    NONE = "None"


def brackets(
    bounds: Iterable[float], objective_seconds: float
) -> tuple[float | None, float | None]:
    """The bucket bounds around an objective: (largest below it, smallest at or above it)."""
    ordered = sorted(bounds)
    lower = max((b for b in ordered if b < objective_seconds), default=None)
    upper = min((b for b in ordered if b >= objective_seconds), default=None)
    return lower, upper


def signal(
    *,
    fraction_above: Mapping[float, float],
    p99_seconds: float | None,
    tightest_seconds: float,
    loosest_seconds: float,
    requests: float | None = None,
    beyond_reach: Callable[[float], float] | None = None,
) -> Signal:
    """What a tier's latency over the last interval says about its capacity estimate.

    `fraction_above`: bucket bound -> share of first tokens slower (may be empty);
    `requests`: how many first tokens the shares are over (None: unknown);
    `beyond_reach(seconds)`: the share of its requests whose prompt alone takes longer than
    that to first token on an idle replica; no capacity makes them faster, so SLOW counts
    only what is slow beyond them.
    """
    if fraction_above:
        below, upper = brackets(fraction_above, loosest_seconds)
        lower, _ = brackets(fraction_above, tightest_seconds)
        if upper is not None:
            allowed = beyond_reach(upper) if beyond_reach else 0.0
            slow = fraction_above[upper] - allowed
            if slow <= TAIL and below is not None:  # inside the bucket: the tail's estimate
                slow = _inside(fraction_above, below, upper, loosest_seconds, requests)
                slow -= beyond_reach(loosest_seconds) if beyond_reach else 0.0
                slow = slow if slow > INSIDE_TAIL else 0.0
            enough = requests is None or slow * requests >= MIN_SLOW_REQUESTS - 1e-9
            if slow > TAIL and enough:
                return Signal.SLOW
        if lower is not None and fraction_above[lower] < TAIL:
            return Signal.FAST
        return Signal.WITHIN
    if p99_seconds is None or math.isnan(p99_seconds):
        return Signal.NONE
    if p99_seconds > loosest_seconds:
        return Signal.SLOW
    if p99_seconds <= GROW_BELOW * tightest_seconds:
        return Signal.FAST
    return Signal.WITHIN


def _inside(
    fraction_above: Mapping[float, float],
    below: float,
    upper: float,
    objective_seconds: float,
    requests: float | None,
) -> float:
    """Share slower than an objective inside the bucket (below, upper], on an exponential
    tail: log-linear between the bucket's bounds (none above `upper`: half a request)."""
    at_below, at_upper = fraction_above[below], fraction_above[upper]
    if at_below <= 0:
        return 0.0
    if at_upper <= 0:
        if not requests:
            return 0.0
        at_upper = min(0.5 / requests, at_below)
    position = (objective_seconds - below) / (upper - below)
    return at_below * math.pow(at_upper / at_below, position)


def next_capacity_factor(percent: int, seen: Signal, *, may_shrink: bool = True) -> int:
    """The tier's capacity factor for this pass, from last pass's and what was seen."""
    percent = min(max(percent, MIN_PERCENT), MAX_PERCENT)
    if seen is Signal.SLOW and may_shrink:
        return max(MIN_PERCENT, math.floor(percent * SHRINK))
    if seen is Signal.FAST:
        return min(MAX_PERCENT, percent + GROW_PERCENT)
    return percent


# -- a pool's capacity factors for one pass ------------------------------------------------


def capacity_factors(inputs: Inputs, models: Mapping[str, ReplicaModel]) -> dict[str, int]:
    """Each tier's capacity factor for this pass: last pass's, moved by what the tier
    showed when the metrics are current (kept as it was otherwise)."""
    fresh = inputs.observation.metrics is MetricsState.AVAILABLE
    factors = {}
    for tier in inputs.tiers:
        before = inputs.before(tier.name)
        percent = before.capacity_factor_percent if before else 100
        model = models.get(tier.name)
        if fresh and model is not None:
            percent = _tier_factor(inputs, tier, model, percent)
        factors[tier.name] = percent
    return factors


def _served(inputs: Inputs, tier: str) -> list[TrafficClass]:
    """The classes routed to a tier by the live weights."""
    return [c for c in inputs.classes if inputs.previous_weights(c.name).get(tier, 0) > 0]


def _tier_factor(inputs: Inputs, tier: Tier, model: ReplicaModel, percent: int) -> int:
    seen = inputs.seen(tier.name)
    served = _served(inputs, tier.name)
    if not served or seen.ready_replicas <= 0:
        return percent
    objectives = [c.objective_seconds for c in served]
    requests = (
        None
        if seen.requests_per_second is None
        else seen.requests_per_second * inputs.spec.scaling.interval_seconds
    )
    current = model.with_capacity_factor(percent / 100.0)
    evidence = signal(
        fraction_above=seen.ttft_fraction_above,
        p99_seconds=seen.ttft_p99_seconds,
        tightest_seconds=min(objectives),
        loosest_seconds=max(objectives),
        requests=requests,
        beyond_reach=lambda seconds: prompts.beyond_reach(seen, current, seconds),
    )
    if evidence is not Signal.SLOW:
        return next_capacity_factor(percent, evidence)
    return next_capacity_factor(
        percent, evidence, may_shrink=_may_shrink(inputs, tier, model, percent)
    )


def _may_shrink(inputs: Inputs, tier: Tier, model: ReplicaModel, percent: int) -> bool:
    """Whether slow first tokens on this tier can be its capacity estimate's fault."""
    seen = inputs.seen(tier.name)
    before = inputs.before(tier.name)
    if seen.starting_replicas > 0:
        return False  # what last pass bought is not carrying load yet
    if before is not None and seen.ready_replicas > before.ready_replicas:
        return False  # became Ready within the last interval: not a full interval's load
    current = model.with_capacity_factor(percent / 100.0)
    served = _served(inputs, tier.name)
    planned = min(current.max_utilization(c.objective_seconds, *c.shape) for c in served)
    if planned <= 0:
        return True  # the profile says it cannot hold its objective: no load to compare
    load = _utilization(seen, current, served)
    if load is None:
        return True
    return LOADED_AT_LEAST * planned <= load <= LOADED_AT_MOST * planned


def _utilization(
    seen: TierObservation, model: ReplicaModel, served: Sequence[TrafficClass]
) -> float | None:
    """The tier's utilization per Ready replica by the model, from its token rates (or,
    without them, its request rate at the served classes' mean shape)."""
    if seen.prompt_tokens_per_second is not None and seen.generation_tokens_per_second is not None:
        work = seen.prompt_tokens_per_second * model.prefill_seconds_for(1.0)
        work += seen.generation_tokens_per_second * model.service_seconds(0.0, 1.0)
        return work / seen.ready_replicas
    if seen.requests_per_second is not None:
        seconds = max(model.service_seconds(*c.shape) for c in served)
        return seen.requests_per_second * seconds / seen.ready_replicas
    return None
