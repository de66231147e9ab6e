"""observe.observe: the planner's view from the children and a metrics reading.

Per-class demand and P99 come from the reading's tiers and the live weights
(planning.observed, tested in tests/unit/planning/test_observed.py), and only from a
reading that can be trusted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.adapters.kube import Children, PodCounts
from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.observe import observe
from gpufleet.planning.records import MetricsReading, MetricsState, PodStart, TierMetrics
from tests.pools import pool

pytestmark = pytest.mark.timeout(2)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TIERS = {
    "h100": TierMetrics(
        ttft_p99_seconds=0.05, prompt_tokens_per_second=400.0, generation_tokens_per_second=600.0
    ),
    "rtx4090": TierMetrics(ttft_p99_seconds=1.5, prompt_tokens_per_second=3000.0),
}


def _pool() -> InferencePool:
    body = pool()
    body["status"] = {
        "classes": [
            {"name": "realtime", "weights": [{"tier": "h100", "weight": 100}]},
            {"name": "batch", "weights": [{"tier": "rtx4090", "weight": 100}]},
        ]
    }
    return parse_pool(body)


def test_class_demand_and_p99_are_inferred_from_an_available_reading() -> None:
    reading = MetricsReading(MetricsState.AVAILABLE, tiers=TIERS)
    seen = observe(_pool(), Children(), reading, NOW)
    realtime, batch = seen.demand["realtime"], seen.demand["batch"]
    assert realtime is not None and batch is not None
    assert realtime.tokens_per_second == pytest.approx(1000.0)
    assert batch.tokens_per_second == pytest.approx(3000.0)
    assert seen.class_ttft_p99_seconds == {"realtime": 0.05, "batch": 1.5}
    assert seen.tiers["h100"].prompt_tokens_per_second == 400.0


@pytest.mark.parametrize(
    "state", [s for s in MetricsState if s is not MetricsState.AVAILABLE], ids=str
)
def test_nothing_is_inferred_per_class_from_metrics_that_cannot_be_trusted(
    state: MetricsState,
) -> None:
    seen = observe(_pool(), Children(), MetricsReading(state, tiers=TIERS), NOW)
    assert seen.demand == {}
    assert seen.class_ttft_p99_seconds == {}


def test_ready_pods_start_times_and_prompt_shares_reach_the_tiers() -> None:
    start = PodStart(created=NOW - timedelta(seconds=100), ready=NOW - timedelta(seconds=24))
    children = Children(pods={"rtx4090": PodCounts(ready=1, starts=[start])})
    shares = {1000.0: 0.9, 2000.0: 0.99}
    tiers = {**TIERS, "rtx4090": TierMetrics(prompt_share_at_most=shares)}
    seen = observe(_pool(), children, MetricsReading(MetricsState.AVAILABLE, tiers=tiers), NOW)
    assert seen.tiers["rtx4090"].pod_starts == (start,)
    assert seen.tiers["rtx4090"].prompt_share_at_most == shares
    assert seen.tiers["h100"].pod_starts == ()
    assert seen.tiers["h100"].prompt_share_at_most == {}
