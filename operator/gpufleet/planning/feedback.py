"""Feedback: the profile is a prior, the cluster the truth.

Each tier carries a capacity factor (TierStatus.capacityFactorPercent, 100 = the profile):
the replica's speed as a share of what its profile says (`ReplicaModel.with_capacity_factor`).
- Observed P99 TTFT above the tightest objective the tier serves, at a load the model says
  the tier should hold, shrinks the factor: by the ratio objective/observed, at least 10%
  and at most 50% per pass, never below 30%.
- Observed P99 at or below 80% of that objective grows it back by 5 points per pass, up to
  100: slowly, so it takes sustained headroom (14 passes from 30% to 100%).
- Anything else, or no observation (no traffic, no ready replica, no metrics), keeps it.
A P99 above objective at a load beyond what the model allows is under-provisioning, not a
wrong profile: the optimizer already buys more replicas for it, so the factor stays.
"""

from __future__ import annotations

import math

MIN_PERCENT = 30
MAX_PERCENT = 100
GROW_PERCENT = 5
GROW_BELOW = 0.8  # observed / objective at or below which the factor grows back
SHRINK_AT_LEAST = 0.9
SHRINK_AT_MOST = 0.5


def next_capacity_factor(
    percent: int,
    observed_p99_seconds: float | None,
    objective_seconds: float | None,
    *,
    load_within_capacity: bool = True,
) -> int:
    """The tier's capacity factor for this pass, from last pass's and what was observed."""
    percent = min(max(percent, MIN_PERCENT), MAX_PERCENT)
    if observed_p99_seconds is None or objective_seconds is None or objective_seconds <= 0:
        return percent
    if math.isnan(observed_p99_seconds):
        return percent
    ratio = observed_p99_seconds / objective_seconds
    if ratio > 1.0:
        if not load_within_capacity:
            return percent
        shrink = min(max(1.0 / ratio, SHRINK_AT_MOST), SHRINK_AT_LEAST)
        return max(MIN_PERCENT, math.floor(percent * shrink))
    if ratio <= GROW_BELOW:
        return min(MAX_PERCENT, percent + GROW_PERCENT)
    return percent
