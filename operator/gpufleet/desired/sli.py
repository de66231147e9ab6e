"""Per traffic class service level indicators, from one pass's observation (pure).

A class's objective is a P99 time to first token: 99% of its first tokens within
`ttftP99Milliseconds`. Its attainment is the share of its first tokens that were within,
over the pass's metrics window; the error budget is the 1% that may be slower.

vLLM's TTFT histogram is per tier, not per class, so a class's share is the mean of the
shares of the tiers its live weights send it to, each weighted by the share of the class's
traffic it takes (tiers without data left out). A tier serving classes of several
objectives shows the same histogram to each: the class's share is read at its own bound.

Where the objective is a bucket bound the share is exact; between two bounds it is read on
an exponential tail between them (log-linear, as the planner's feedback does), and above
the last finite bound it is the share at that bound. `sli_buckets` gives the bounds that
make it exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpufleet.api.status import InferencePoolStatus
from gpufleet.api.types import InferencePoolSpec
from gpufleet.planning.feedback import brackets
from gpufleet.planning.records import TierObservation

# vLLM 0.33.0 `vllm/v1/metrics/buckets.py` TIME_TO_FIRST_TOKEN_BUCKETS (seconds).
VLLM_TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
# A P99 objective lets 1% of first tokens be slower.
OBJECTIVE_RATIO = 0.99


@dataclass(frozen=True)
class ClassSli:
    """One class's indicators; None where there was nothing to read."""

    name: str
    objective_seconds: float
    attainment_ratio: float | None
    exact: bool  # the objective is a bucket bound of every tier that had data


def share_slower(fraction_above: Mapping[float, float], objective_seconds: float) -> float | None:
    """Share of a tier's first tokens slower than the objective (None: no data)."""
    if not fraction_above:
        return None
    for bound, share in fraction_above.items():
        if math.isclose(bound, objective_seconds, rel_tol=1e-9):
            return share
    below, upper = brackets(fraction_above, objective_seconds)
    if upper is None:
        return fraction_above[max(fraction_above)]
    if below is None:
        return fraction_above[upper]
    at_below, at_upper = fraction_above[below], fraction_above[upper]
    if at_below <= 0 or at_upper <= 0:
        # No tail to follow in log space: linear between the bounds.
        position = (objective_seconds - below) / (upper - below)
        return at_below + (at_upper - at_below) * position
    position = (objective_seconds - below) / (upper - below)
    return at_below * math.pow(at_upper / at_below, position)


def class_slis(
    spec: InferencePoolSpec,
    status: InferencePoolStatus,
    tiers: Mapping[str, TierObservation],
) -> list[ClassSli]:
    """Attainment per class of the spec, from the tiers' TTFT shares and the live weights."""
    weights = {c.name: {w.tier: w.weight for w in c.weights} for c in status.classes}
    out = []
    for cls in spec.traffic_classes:
        objective = cls.objective_seconds
        total = 0.0
        within = 0.0
        exact = True
        for tier, weight in weights.get(cls.name, {}).items():
            seen = tiers.get(tier)
            slow = share_slower(seen.ttft_fraction_above, objective) if seen else None
            if weight <= 0 or slow is None or seen is None:
                continue
            exact = exact and any(
                math.isclose(b, objective, rel_tol=1e-9) for b in seen.ttft_fraction_above
            )
            total += weight
            within += weight * (1.0 - slow)
        attainment = min(max(within / total, 0.0), 1.0) if total > 0 else None
        out.append(ClassSli(cls.name, objective, attainment, exact and total > 0))
    return out


def sli_buckets(objectives_seconds: Iterable[float]) -> list[float]:
    """vLLM's TTFT bucket bounds plus a bound at each objective, sorted, no duplicates."""
    bounds = set(VLLM_TTFT_BUCKETS)
    for objective in objectives_seconds:
        if not any(math.isclose(objective, b, rel_tol=1e-9) for b in bounds):
            bounds.add(objective)
    return sorted(bounds)
