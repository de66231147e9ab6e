"""Real reconcile passes over an in-memory Kubernetes and a given metrics reading: the
operator's registry as a scrape of a running operator would find it (tests of /metrics,
the alerts' inputs and the dashboard's queries)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from gpufleet.api.status import InferencePoolStatus
from gpufleet.api.types import InferencePool, InferencePoolSpec
from gpufleet.planning.planner import plan
from gpufleet.planning.records import MetricsReading, MetricsState, Observation, Plan, TierMetrics
from gpufleet.reconcile import Reconciler
from tests.fakes import FakeKube
from tests.pools import load_example

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Planner = Callable[[InferencePoolSpec, Observation, InferencePoolStatus], Plan]


class Readings:
    """A metrics source answering what the test sets (the Prometheus adapter's output type)."""

    def __init__(self, reading: MetricsReading) -> None:
        self.reading = reading

    def read(self, pool: InferencePool, now: datetime) -> MetricsReading:
        return self.reading


AVAILABLE = MetricsReading(
    MetricsState.AVAILABLE,
    tiers={
        "h100": TierMetrics(
            ttft_p99_seconds=0.09,
            prompt_tokens_per_second=800.0,
            generation_tokens_per_second=200.0,
            requests_per_second=4.0,
            requests_waiting=0.0,
            kv_cache_usage=0.3,
            ttft_fraction_above={0.08: 0.03, 0.1: 0.004, 2.0: 0.0},
        ),
    },
)


def run_passes(
    reading: MetricsReading = AVAILABLE, count: int = 2, planner: Planner = plan
) -> tuple[FakeKube, Reconciler]:
    """`count` passes over the base example, `planner` deciding, 30 s apart."""
    kube = FakeKube()
    clock = [NOW]
    reconciler = Reconciler(kube, Readings(reading), planner, kube.telemetry, lambda: clock[0])
    kube.add_pool(load_example())
    for _ in range(count):
        body = kube.get_pool("default", "llama3-8b")
        assert body is not None
        reconciler.reconcile(body)
        clock[0] += timedelta(seconds=30)
    return kube, reconciler
