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
        self.early_passes = Counter(
            "gpufleet_early_passes_total",
            "Passes run before their interval because a queue surged (gpufleet.queuewatch).",
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
        # Every pool's series, read at scrape time from plain values (see PoolSeries).
        self.pool_series = PoolSeries()
        self.registry.register(self.pool_series)
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
        self, gauge: str, namespace: str, pool: str, values: Mapping[tuple[str, ...], float]
    ) -> None:
        """The pool's series of `gauge` (a key of POOL_GAUGES) become exactly `values`
        (label values in label order, namespace and pool first)."""
        self.pool_series.replace(gauge, namespace, pool, values)

    def forget_pool(self, namespace: str, pool: str) -> None:
        """Drop a deleted pool's gauges so /metrics does not show ghosts."""
        self.pool_series.forget(namespace, pool)


_POOL, _TIER, _CLASS = ("namespace", "pool"), ("namespace", "pool", "tier"), tuple(CLASS_LABELS)
# The pools' gauges: key, metric name, labels, help.
POOL_GAUGES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("replicas", "gpufleet_pool_replicas", (*_TIER, "state"),
     "Replicas per pool and tier, by state: desired, ready, starting (scheduled, not "
     "Ready), unschedulable, lost (with preemptible nodes), reserve (burst reserve), "
     "margin (for a preemptible tier's expected node losses), tail (so that long prompts "
     "do not wait past their objective behind another's prefill)."),
    ("weights", "gpufleet_pool_weight", (*_POOL, "traffic_class", "tier"),
     "Traffic weight per pool, class and tier (0-100)."),
    ("cost", "gpufleet_pool_cost_per_hour_dollars", _POOL,
     "Cost of the desired replicas per hour."),
    ("class_objective", "gpufleet_pool_class_objective_ttft_seconds", _CLASS,
     "The class's P99 time-to-first-token objective."),
    ("class_ttft", "gpufleet_pool_class_ttft_p99_seconds", _CLASS,
     "Observed P99 time to first token of the class (worst tier it is sent to)."),
    ("class_attainment", "gpufleet_pool_class_attainment_ratio", _CLASS,
     "Share of the class's first tokens within its objective over the last metrics "
     "window (0-1; the objective asks for 0.99)."),
    ("class_attainment_exact", "gpufleet_pool_class_attainment_exact", _CLASS,
     "1 when the attainment was read at a TTFT bucket bound equal to the objective, "
     "0 when it was interpolated between two bounds."),
    ("class_demand", "gpufleet_pool_class_demand_tokens_per_second", _CLASS,
     "Demand of the class the operator planned for (prompt plus generated)."),
    ("cost_per_mtok", "gpufleet_pool_cost_per_million_tokens_dollars", _POOL,
     "Cost per million tokens served at the desired replicas."),
    ("target_per_mtok", "gpufleet_pool_objective_cost_per_million_tokens_dollars", _POOL,
     "The pool's maxCostPerMillionTokens objective."),
    ("target_per_hour", "gpufleet_pool_objective_cost_per_hour_dollars", _POOL,
     "The pool's maxHourlyCost budget."),
    ("reserve_cost", "gpufleet_pool_reserve_cost_per_hour_dollars", _POOL,
     "Cost per hour of the replicas held as burst reserve."),
    ("tier_ttft", "gpufleet_pool_tier_ttft_p99_seconds", _TIER,
     "Observed P99 time to first token of the tier over the last metrics window."),
    ("tier_tokens", "gpufleet_pool_tier_tokens_per_second", _TIER,
     "Observed throughput of the tier, prompt plus generated tokens per second."),
    ("lead_time", "gpufleet_pool_tier_lead_time_seconds", _TIER,
     "Learned time from a replica's pod created to Ready: what a scale-up takes."),
    ("capacity_factor", "gpufleet_pool_tier_capacity_factor_ratio", _TIER,
     "A replica's estimated capacity over its profile's (feedback; 1 = the profile)."),
    ("metrics_available", "gpufleet_pool_metrics_available", _POOL,
     "1 when the pool's vLLM metrics were read and fresh this pass, else 0."),
    ("condition", "gpufleet_pool_condition", (*_POOL, "type", "reason"),
     "The pool's conditions: 1 when True, 0 when False or Unknown, with the reason."),
)  # fmt: skip


class PoolSeries(Collector):
    """Every pool's gauges as plain values, turned into metrics when scraped.

    A thousand pools set some 35,000 series; as prometheus_client Gauge children (an
    object and a lock each) they took some 40 MiB, as plain tuples a fraction of it. Each
    pass replaces its own pool's values whole, so a series the pool no longer has goes
    (no ghosts), at the cost of that pool's series only."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], dict[str, dict[tuple[str, ...], float]]] = {}

    def replace(
        self, gauge: str, namespace: str, pool: str, values: Mapping[tuple[str, ...], float]
    ) -> None:
        if gauge not in _KEYS:
            raise KeyError(f"no pool gauge {gauge!r}")
        held = self._values.setdefault((namespace, pool), {})
        held[gauge] = {tuple(labels): float(value) for labels, value in values.items()}

    def forget(self, namespace: str, pool: str) -> None:
        self._values.pop((namespace, pool), None)

    def collect(self) -> Iterator[Metric]:
        pools = list(self._values.values())  # passes replace values from other threads
        for key, name, labels, doc in POOL_GAUGES:
            family = GaugeMetricFamily(name, doc, labels=list(labels))
            for held in pools:
                for label_values, value in list(held.get(key, {}).items()):
                    family.add_metric(list(label_values), value)
            yield family


_KEYS = frozenset(key for key, *_ in POOL_GAUGES)


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
