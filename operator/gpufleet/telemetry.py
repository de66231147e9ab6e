"""The operator's own Prometheus metrics (prometheus_client), in one registry.

A registry of our own (not the global one) so tests can create several operators in one
process, and so /metrics shows only what gpufleet exports.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpufleet.planning import memo

CLASS_LABELS = ["namespace", "pool", "traffic_class"]


class Telemetry:
    """Counters, histograms and gauges the reconciler and the adapters update."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        # Per pool, the label values of the series it set in each gauge.
        self._pool_series: dict[tuple[str, str], dict[Gauge, set[tuple[str, ...]]]] = {}
        self.reconcile_seconds = Histogram(
            "gpufleet_reconcile_duration_seconds",
            "Time of one reconcile pass (observe, plan, apply, status).",
            ["result"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.plan_seconds = Histogram(
            "gpufleet_plan_duration_seconds",
            "Time of one plan() call: the planner alone, its solvers included.",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5),
            registry=self.registry,
        )
        self.registry.register(_SolverCaches())
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
        self.writes_skipped = Counter(
            "gpufleet_api_writes_skipped_total",
            "Writes a pass did not make because the live object already matched, by resource "
            "(deployments, services, httproutes, status).",
            ["resource"],
            registry=self.registry,
        )
        self.api_throttled = Counter(
            "gpufleet_api_throttled_seconds_total",
            "Seconds API requests waited for the client-side rate limit (--kube-api-qps).",
            registry=self.registry,
        )
        self.api_requests = Counter(
            "gpufleet_api_requests_total",
            "Requests this process made to the Kubernetes API through its clients (reads, "
            "writes, Leases; not Kopf's watches), by HTTP verb and status code (0: no answer).",
            ["verb", "code"],
            registry=self.registry,
        )
        self.loop_lag = Histogram(
            "gpufleet_event_loop_lag_seconds",
            "How late the event loop ran a timer that was due (the watch streams, the pools' "
            "loops and status writes all wait on this loop): planning in threads must not "
            "hold it up.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self.spec_to_reconcile = Histogram(
            "gpufleet_spec_change_to_reconcile_seconds",
            "From a pool's spec change seen on the watch to the start of the first pass "
            "that reads it.",
            buckets=(0.1, 0.25, 0.5, 0.6, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60, 120),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "gpufleet_reconcile_queue_depth",
            "Passes due now, waiting for a worker thread or running, by shard (0 when the "
            "operator is not sharded).",
            ["shard"],
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
            "Replicas per pool and tier, by state: desired, ready, starting (scheduled, not "
            "Ready), unschedulable, lost (with preemptible nodes), reserve (burst reserve), "
            "margin (for a preemptible tier's expected node losses).",
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
        pool, tier, cls = ["namespace", "pool"], ["namespace", "pool", "tier"], CLASS_LABELS
        gauges = (
            ("class_objective", "gpufleet_pool_class_objective_ttft_seconds", cls,
             "The class's P99 time-to-first-token objective."),
            ("class_ttft", "gpufleet_pool_class_ttft_p99_seconds", cls,
             "Observed P99 time to first token of the class (worst tier it is sent to)."),
            ("class_attainment", "gpufleet_pool_class_attainment_ratio", cls,
             "Share of the class's first tokens within its objective over the last metrics "
             "window (0-1; the objective asks for 0.99)."),
            ("class_attainment_exact", "gpufleet_pool_class_attainment_exact", cls,
             "1 when the attainment was read at a TTFT bucket bound equal to the objective, "
             "0 when it was interpolated between two bounds."),
            ("class_demand", "gpufleet_pool_class_demand_tokens_per_second", cls,
             "Demand of the class the operator planned for (prompt plus generated)."),
            ("cost_per_mtok", "gpufleet_pool_cost_per_million_tokens_dollars", pool,
             "Cost per million tokens served at the desired replicas."),
            ("target_per_mtok", "gpufleet_pool_objective_cost_per_million_tokens_dollars", pool,
             "The pool's maxCostPerMillionTokens objective."),
            ("target_per_hour", "gpufleet_pool_objective_cost_per_hour_dollars", pool,
             "The pool's maxHourlyCost budget."),
            ("reserve_cost", "gpufleet_pool_reserve_cost_per_hour_dollars", pool,
             "Cost per hour of the replicas held as burst reserve."),
            ("tier_ttft", "gpufleet_pool_tier_ttft_p99_seconds", tier,
             "Observed P99 time to first token of the tier over the last metrics window."),
            ("tier_tokens", "gpufleet_pool_tier_tokens_per_second", tier,
             "Observed throughput of the tier, prompt plus generated tokens per second."),
            ("lead_time", "gpufleet_pool_tier_lead_time_seconds", tier,
             "Learned time from a replica's pod created to Ready: what a scale-up takes."),
            ("capacity_factor", "gpufleet_pool_tier_capacity_factor_ratio", tier,
             "A replica's estimated capacity over its profile's (feedback; 1 = the profile)."),
            ("metrics_available", "gpufleet_pool_metrics_available", pool,
             "1 when the pool's vLLM metrics were read and fresh this pass, else 0."),
            ("condition", "gpufleet_pool_condition", [*pool, "type", "reason"],
             "The pool's conditions: 1 when True, 0 when False or Unknown, with the reason."),
        )  # fmt: skip
        self.pool_gauges: dict[str, Gauge] = {
            key: Gauge(name, doc, labels, registry=self.registry)
            for key, name, labels, doc in gauges
        }
        self.shards_held = Gauge(
            "gpufleet_shards_held",
            "Shards of the pools this process holds and reconciles (with --shards above 1).",
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

    def replace_pool_series(
        self,
        gauge: Gauge,
        namespace: str,
        pool: str,
        values: Mapping[tuple[str, ...], float],
    ) -> None:
        """The pool's series of `gauge` become exactly `values` (label values in label
        order): the ones it set before and not now are removed. The pool's series are
        kept in an index, so this costs the pool's own series, not every pool's (reading
        them back from the gauge would make each pass cost as much as the fleet)."""
        held = self._pool_series.setdefault((namespace, pool), {})
        for labels in held.get(gauge, set()) - values.keys():
            gauge.remove(*labels)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        held[gauge] = set(values)

    def forget_pool(self, namespace: str, pool: str) -> None:
        """Drop a deleted pool's gauges so /metrics does not show ghosts."""
        for gauge, series in self._pool_series.pop((namespace, pool), {}).items():
            for labels in series:
                gauge.remove(*labels)


class _SolverCaches(Collector):
    """The planner's solver caches, read at scrape time: their hits and misses tell how
    much of a quiet fleet's planning is answered without a solve."""

    def collect(self) -> Iterator[Metric]:
        stats = {cache.name: cache.stats() for cache in memo.caches()}
        lookups = CounterMetricFamily(
            "gpufleet_planner_cache_lookups",
            "Lookups in the planner's solver caches (this process), by cache and result.",
            labels=["cache", "result"],
        )
        size = GaugeMetricFamily(
            "gpufleet_planner_cache_entries",
            "Answers held by each of the planner's solver caches (at most its size).",
            labels=["cache"],
        )
        for name, s in stats.items():
            lookups.add_metric([name, "hit"], s.hits)
            lookups.add_metric([name, "miss"], s.misses)
            size.add_metric([name], s.size)
        yield lookups
        yield size
