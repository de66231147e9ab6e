"""Feedback: the profile is a prior, the cluster the truth.

Each tier carries a capacity factor (TierStatus.capacityFactorPercent, 100 = the profile):
the replica's speed as a share of what its profile says (`ReplicaModel.with_capacity_factor`).
Each pass reads what the tier showed over the last interval (`signal`):

- SLOW: more than 1% of its first tokens were slower than the *upper* bracket of the
  loosest objective it serves (the smallest TTFT bucket bound at or above it), and at
  least two requests were. Every class on the tier has an objective at or below that
  bound, so some class surely missed its P99.
- FAST: under 1% were slower than the *lower* bracket of the tightest objective it serves
  (the largest bucket bound below it): every class is surely within, with margin.
- WITHIN: anything in between: hold.

Inside the objective's bucket the share slower than the objective itself is estimated on
an exponential tail (log-linear between the two bounds; none above the upper one counts
as half a request), and counts as SLOW above 2%, twice the allowance: a 2 s objective in
vLLM's (1, 2.5] bucket otherwise hides every miss between 2 and 2.5 s. On the 4090 tier
in three simulator runs of the Azure trace (gpufleet by size and by fraction, the HPA
baseline by size; 349 intervals), it flagged 1 interval whose true share above 2 s was
under 1%, and 71 of the 98 that were over it (the upper bracket alone: 51, none false).

Shares at bucket bounds are exact, where a quantile is not: Prometheus's
histogram_quantile interpolates inside a bucket, and with vLLM's buckets a 2 s objective
lies inside (1, 2.5], where a true P99 of 1.02 s reads as 2.3 s. Without bucket shares
the tier's P99 is used (SLOW above the loosest objective, FAST at or below 80% of the
tightest). A tier that serves classes of several objectives is judged by the loosest one
for SLOW because its histogram does not say whose requests were slow.

The factor then moves (`next_capacity_factor`) in gentle, bounded steps:
- SLOW shrinks it by 10%, never below 50%, and only when the violation can be capacity's
  fault (`may_shrink` in the planner): not while replicas are starting or have just become
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
from collections.abc import Iterable, Mapping
from enum import StrEnum

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
) -> Signal:
    """What a tier's latency over the last interval says about its capacity estimate.

    `fraction_above`: bucket bound -> share of first tokens slower (may be empty);
    `requests`: how many first tokens the shares are over (None: unknown).
    """
    if fraction_above:
        below, upper = brackets(fraction_above, loosest_seconds)
        lower, _ = brackets(fraction_above, tightest_seconds)
        if upper is not None:
            slow = fraction_above[upper]
            if slow <= TAIL and below is not None:  # inside the bucket: the tail's estimate
                slow = _inside(fraction_above, below, upper, loosest_seconds, requests)
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
