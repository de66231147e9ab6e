"""The operator's own Prometheus metrics (prometheus_client), in one registry.

A registry of our own (not the global one) so tests can create several operators in one
process, and so /metrics shows only what gpufleet exports.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Telemetry:
    """Counters, histograms and gauges the reconciler and the adapters update."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reconcile_seconds = Histogram(
            "gpufleet_reconcile_duration_seconds",
            "Time of one reconcile pass (observe, plan, apply, status).",
            ["result"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.decisions = Counter(
            "gpufleet_decisions_total",
            "Decisions that changed replicas or weights, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.api_writes = Counter(
            "gpufleet_api_writes_total",
            "Writes to the Kubernetes API, by verb and resource.",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.api_errors = Counter(
            "gpufleet_api_errors_total",
            "Kubernetes API calls that failed, by verb, resource and HTTP status.",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.replicas = Gauge(
            "gpufleet_pool_replicas",
            "Replicas per pool and tier: desired, ready, unschedulable.",
            ["namespace", "pool", "tier", "state"],
            registry=self.registry,
        )
        self.weights = Gauge(
            "gpufleet_pool_weight",
            "Traffic weight per pool, class and tier (0-100).",
            ["namespace", "pool", "traffic_class", "tier"],
            registry=self.registry,
        )
        self.cost = Gauge(
            "gpufleet_pool_cost_per_hour_dollars",
            "Cost of the desired replicas per hour.",
            ["namespace", "pool"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "gpufleet_leader",
            "1 while this process holds the leader Lease and acts, 0 while it stands by.",
            registry=self.registry,
        )

    def writes_total(self) -> float:
        """All API writes so far (for tests and the benchmark)."""
        return sum(
            sample.value
            for metric in self.api_writes.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )

    def forget_pool(self, namespace: str, pool: str) -> None:
        """Drop a deleted pool's gauges so /metrics does not show ghosts."""
        for gauge in (self.replicas, self.weights, self.cost):
            for labels in list(_label_sets(gauge)):
                if labels.get("namespace") == namespace and labels.get("pool") == pool:
                    gauge.remove(*labels.values())


def _label_sets(gauge: Gauge) -> list[dict[str, str]]:
    seen = []
    for metric in gauge.collect():
        for sample in metric.samples:
            seen.append(dict(sample.labels))
    return seen
