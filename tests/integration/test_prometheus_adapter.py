"""The Prometheus adapter against a real Prometheus scraping vLLM-named series.

The test starts Debian's prometheus (installed if missing; no skip: a missing binary fails)
on a free loopback port, and serves exporters that play vLLM pods: counters growing at
known rates, a TTFT histogram with a known P99 and a prompt-length histogram with known
shares, labelled as the scrape config's
relabeling would label real pods (gpufleet_dev_pool, gpufleet_dev_tier, namespace).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, start_http_server
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from gpufleet.adapters.prometheus import PrometheusMetrics
from gpufleet.api.types import InferencePool
from gpufleet.dev.prometheus import PrometheusServer, ScrapeGroup, free_port
from gpufleet.dev.tools import PROMETHEUS_MAJORS, prometheus_binary
from gpufleet.planning.observed import ClassObservations, observe_classes
from gpufleet.planning.records import MetricsReading, MetricsState
from tests.pools import pool, tier, traffic_class

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]

NAMESPACE = "llm"
BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
PROMPT_BUCKETS = (100.0, 500.0, 1000.0, 2000.0, 5000.0)  # a few of vLLM's 1-2-5 bounds


@dataclass(eq=False)  # collectors are registered by identity
class FakeVLLM:
    """One tier's pods as Prometheus sees them: rates per second, a TTFT distribution."""

    prompt_rate: float
    generation_rate: float
    request_rate: float
    ttft_share_below: Mapping[float, float]  # bucket upper bound -> share of requests
    prompt_share_at_most: Mapping[float, float] = field(default_factory=dict)  # as above
    prompt_mean: float = 800.0  # the prompt histogram's sum over its count
    waiting: float = 0.0
    kv_cache: float = 0.5
    old_kv_name: bool = False
    frozen_at: float | None = None  # serve samples stamped at this time (a stuck exporter)
    start: float = field(default_factory=time.time)

    def collect(self) -> Iterable[Metric]:
        now = time.time() if self.frozen_at is None else self.frozen_at
        stamp = self.frozen_at
        elapsed = max(now - self.start, 0.0) + 1000.0  # counters long past zero
        yield _counter("vllm:prompt_tokens", self.prompt_rate * elapsed, stamp)
        yield _counter("vllm:generation_tokens", self.generation_rate * elapsed, stamp)
        yield _counter("vllm:request_success", self.request_rate * elapsed, stamp)
        requests = self.request_rate * elapsed
        ttft = HistogramMetricFamily(
            "vllm:time_to_first_token_seconds", "TTFT", labels=["model_name"]
        )
        buckets = [(str(le), requests * self.ttft_share_below.get(le, 1.0)) for le in BUCKETS]
        ttft.add_metric(["m"], [*buckets, ("+Inf", requests)], requests * 0.1, timestamp=stamp)
        yield ttft
        prompts = HistogramMetricFamily(
            "vllm:request_prompt_tokens", "prompts", labels=["model_name"]
        )
        counts = [
            (str(le), requests * self.prompt_share_at_most.get(le, 1.0)) for le in PROMPT_BUCKETS
        ]
        total = requests * self.prompt_mean
        prompts.add_metric(["m"], [*counts, ("+Inf", requests)], total, timestamp=stamp)
        yield prompts
        for name, value in (
            ("vllm:num_requests_waiting", self.waiting),
            ("vllm:num_requests_running", 3.0),
            (
                "vllm:gpu_cache_usage_perc" if self.old_kv_name else "vllm:kv_cache_usage_perc",
                self.kv_cache,
            ),
        ):
            gauge = GaugeMetricFamily(name, name, labels=["model_name"])
            gauge.add_metric(["m"], value, timestamp=stamp)
            yield gauge


def _counter(name: str, value: float, stamp: float | None) -> Metric:
    counter = CounterMetricFamily(name, name, labels=["model_name"])
    counter.add_metric(["m"], value, timestamp=stamp)
    return counter


@dataclass(eq=False)
class Gateway:
    """A gateway's per-route token counter, for a class's demandQuery."""

    tokens_per_second: Mapping[str, float]
    start: float = field(default_factory=time.time)

    def collect(self) -> Iterable[Metric]:
        counter = CounterMetricFamily("gateway_route_tokens", "tokens", labels=["route"])
        for route, rate in self.tokens_per_second.items():
            counter.add_metric([route], rate * (time.time() - self.start + 1000.0))
        yield counter


def expected_p99(shares: Mapping[float, float]) -> float:
    """What histogram_quantile(0.99) interpolates from these bucket shares."""
    lower, below = 0.0, 0.0
    for le in BUCKETS:
        share = shares.get(le, 1.0)
        if share >= 0.99:
            return lower + (le - lower) * (0.99 - below) / (share - below)
        lower, below = le, share
    raise AssertionError("P99 beyond the last bucket")


H100_TTFT = {0.01: 0.2, 0.05: 0.995}  # P99 in (0.01, 0.05]
RTX_TTFT = {0.01: 0.0, 0.05: 0.1, 0.1: 0.5, 0.25: 0.95}  # P99 in (0.25, 0.5]
H100_PROMPTS = {100.0: 0.3, 500.0: 0.9}  # short prompts: all at most 1000 tokens
RTX_PROMPTS = {100.0: 0.0, 500.0: 0.2, 1000.0: 0.6, 2000.0: 0.9, 5000.0: 0.98}  # 2% longer
# realtime: 1000 tok/s all on h100; batch: 5000 tok/s, 20% on h100, 80% on rtx4090.
TIERS = {
    "h100": FakeVLLM(1000.0, 1000.0, 5.0, H100_TTFT, H100_PROMPTS, waiting=1.0, kv_cache=0.25),
    "rtx4090": FakeVLLM(
        2000.0,
        2000.0,
        10.0,
        RTX_TTFT,
        RTX_PROMPTS,
        prompt_mean=1500.0,
        waiting=4.0,
        kv_cache=0.75,
        old_kv_name=True,
    ),
}
WEIGHTS = {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 20, "rtx4090": 80}}
# The queues' tokens, each class's share of them: a tier's waiting requests split by the
# classes' shares of its traffic (h100: realtime 1000 and batch 20% of 5000 tok/s, half
# each; rtx4090: batch alone), each priced at its class's mean size (200 + 200 tokens).
BACKLOG_TOKENS = {
    "realtime": TIERS["h100"].waiting * 0.5 * 400,
    "batch": TIERS["h100"].waiting * 0.5 * 400 + TIERS["rtx4090"].waiting * 400,
}


@dataclass
class Fleet:
    prometheus: PrometheusServer
    servers: list[Any]


def _serve(collector: Any, *, text_only: bool = False) -> tuple[str, Any]:
    """Serve a collector on a free loopback port.

    prometheus_client's own handler answers Prometheus in OpenMetrics, where (0.26) it
    writes "vllm:x" as "vllm_x"; `text_only` serves the classic text format, colons kept.
    The fleet has one of each, as real vLLM pods may be stored either way.
    """
    registry = CollectorRegistry()
    registry.register(collector)
    port = free_port()
    if not text_only:
        server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
        return f"127.0.0.1:{port}", server

    class Text(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    text_server = ThreadingHTTPServer(("127.0.0.1", port), Text)
    threading.Thread(target=text_server.serve_forever, daemon=True).start()
    return f"127.0.0.1:{port}", text_server


@pytest.fixture(scope="module", params=PROMETHEUS_MAJORS, ids=lambda m: f"prometheus{m}")
def fleet(request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """The fake fleet scraped by each Prometheus major (Debian's 2, our build of 3)."""
    servers = []
    groups = []
    for name, fake in TIERS.items():
        target, server = _serve(fake, text_only=name == "h100")
        servers.append(server)
        groups.append(ScrapeGroup([target], _labels("llama3-8b", name)))
    frozen = FakeVLLM(100.0, 100.0, 1.0, H100_TTFT, frozen_at=time.time() - 120)
    target, server = _serve(frozen)
    servers.append(server)
    groups.append(ScrapeGroup([target], _labels("frozen", "h100")))
    target, server = _serve(Gateway({"realtime": 1000.0, "batch": 5000.0}))
    servers.append(server)
    groups.append(ScrapeGroup([target], {"job_role": "gateway"}))
    prometheus = PrometheusServer(
        scrape_interval_seconds=1, binary=prometheus_binary(request.param)
    )
    prometheus.start()
    try:
        prometheus.set_targets(groups)
        # Rates need two scrapes inside the window of every series the tests read.
        for tier_name in TIERS:
            name = '__name__=~"vllm[:_]prompt_tokens_total"'
            prometheus.wait_for(f'rate({{{name},gpufleet_dev_tier="{tier_name}"}}[5s]) > 0')
        prometheus.wait_for("rate(gateway_route_tokens_total[5s]) > 0")
        prometheus.wait_for('{__name__=~"vllm[:_]num_requests_running",gpufleet_dev_pool="frozen"}')
        time.sleep(6)  # a full 5 s window of samples: rate() no longer extrapolates from less
        yield Fleet(prometheus, servers)
    finally:
        prometheus.stop()
        for server in servers:
            server.shutdown()


def _labels(pool_name: str, tier_name: str) -> dict[str, str]:
    return {"gpufleet_dev_pool": pool_name, "gpufleet_dev_tier": tier_name, "namespace": NAMESPACE}


def inference_pool(name: str = "llama3-8b", *, realtime_query: str | None = None) -> InferencePool:
    realtime: dict[str, Any] = {"priority": 100, "meanPromptTokens": 200, "meanOutputTokens": 200}
    if realtime_query is not None:
        realtime["demandQuery"] = realtime_query
    body = pool(
        name,
        namespace=NAMESPACE,
        tiers=[tier("h100", "H100-PCIe-80GB", minReplicas=1), tier("rtx4090")],
        classes=[
            traffic_class("realtime", 100, header="realtime", **realtime),
            traffic_class("batch", 2000),
        ],
        scaling={"intervalSeconds": 5},
    )
    body["status"] = {
        "classes": [
            {"name": c, "weights": [{"tier": t, "weight": w} for t, w in ws.items()]}
            for c, ws in WEIGHTS.items()
        ]
    }
    return InferencePool.model_validate(body)


def now() -> datetime:
    return datetime.now(UTC)


def classes_of(pool_: InferencePool, reading: MetricsReading) -> ClassObservations:
    """What the operator makes of the reading per class (as gpufleet.observe.observe)."""
    return observe_classes(pool_.spec, pool_.status, reading.tiers, reading.demand_queries)


def test_each_major_is_the_prometheus_it_says(fleet: Fleet, request: pytest.FixtureRequest) -> None:
    """The parametrization is real: the server answering is of the major in the test id."""
    major = request.node.callspec.params["fleet"]
    with urllib.request.urlopen(f"{fleet.prometheus.url}/api/v1/status/buildinfo") as answer:
        version = json.load(answer)["data"]["version"]
    assert version.split(".")[0] == str(major), version


def test_reads_every_tier_metric_by_the_relabelled_pod_labels(fleet: Fleet) -> None:
    metrics = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1)
    reading = metrics.read(inference_pool(), now())
    assert reading.state is MetricsState.AVAILABLE, reading.message
    h100, rtx = reading.tiers["h100"], reading.tiers["rtx4090"]
    assert h100.ttft_p99_seconds == pytest.approx(expected_p99(H100_TTFT), rel=0.02)
    assert rtx.ttft_p99_seconds == pytest.approx(expected_p99(RTX_TTFT), rel=0.02)
    assert h100.prompt_tokens_per_second == pytest.approx(1000.0, rel=0.05)
    assert rtx.generation_tokens_per_second == pytest.approx(2000.0, rel=0.05)
    assert rtx.requests_per_second == pytest.approx(10.0, rel=0.05)
    assert (h100.requests_waiting, rtx.requests_waiting) == (1.0, 4.0)
    assert h100.kv_cache_usage == pytest.approx(0.25)
    assert rtx.kv_cache_usage == pytest.approx(0.75)  # under vLLM's older metric name
    # The share of the window's requests with a prompt at most each bound, per tier.
    assert h100.prompt_share_at_most == pytest.approx(
        {le: H100_PROMPTS.get(le, 1.0) for le in PROMPT_BUCKETS}, abs=0.01
    )
    assert rtx.prompt_share_at_most == pytest.approx(RTX_PROMPTS, abs=0.01)
    # Their mean from the same histogram (sum over count), not prompt tokens/s over
    # requests/s (200 tokens on the 4090s here).
    assert h100.prompt_mean_tokens == pytest.approx(800.0, rel=0.01)
    assert rtx.prompt_mean_tokens == pytest.approx(1500.0, rel=0.01)


def test_class_demand_is_inferred_from_tier_rates_and_live_weights(fleet: Fleet) -> None:
    pool_ = inference_pool()
    reading = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1).read(pool_, now())
    seen = classes_of(pool_, reading)
    realtime, batch = seen.demand["realtime"], seen.demand["batch"]
    assert realtime is not None and batch is not None
    assert realtime.tokens_per_second == pytest.approx(1000.0, rel=0.05)
    # Served tokens are the demand; the queued requests are each class's backlog, drained
    # once by the planner rather than planned for every interval.
    assert batch.tokens_per_second == pytest.approx(5000.0, rel=0.05)
    assert seen.backlog_tokens == {c: pytest.approx(v, rel=0.05) for c, v in BACKLOG_TOKENS.items()}
    # Each class's worst tier: realtime sees the H100's P99, batch the 4090's.
    assert seen.ttft_p99_seconds["realtime"] == pytest.approx(expected_p99(H100_TTFT), rel=0.02)
    assert seen.ttft_p99_seconds["batch"] == pytest.approx(expected_p99(RTX_TTFT), rel=0.02)


def test_a_class_demand_query_is_used_when_set(fleet: Fleet) -> None:
    query = 'sum(rate(gateway_route_tokens_total{route="realtime"}[5s]))'
    pool_ = inference_pool(realtime_query=query)
    reading = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1).read(pool_, now())
    assert reading.demand_queries["realtime"] == pytest.approx(1000.0, rel=0.05)
    seen = classes_of(pool_, reading)
    realtime = seen.demand["realtime"]
    assert realtime is not None
    assert realtime.tokens_per_second == pytest.approx(1000.0, rel=0.05)
    assert realtime.prompt_tokens_per_second == pytest.approx(500.0, rel=0.05)
    batch = seen.demand["batch"]
    assert batch is not None
    assert batch.tokens_per_second == pytest.approx(5000.0, rel=0.05)
    assert seen.backlog_tokens == {c: pytest.approx(v, rel=0.05) for c, v in BACKLOG_TOKENS.items()}


def test_a_broken_demand_query_leaves_that_class_unknown_not_the_pool(fleet: Fleet) -> None:
    pool_ = inference_pool(realtime_query="sum(rate(")
    reading = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1).read(pool_, now())
    assert reading.state is MetricsState.AVAILABLE
    assert reading.demand_queries == {"realtime": None}
    # falls back to inference from the tiers
    assert classes_of(pool_, reading).demand["realtime"] is not None


def test_no_series_for_the_pool_is_no_data(fleet: Fleet) -> None:
    reading = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1).read(
        inference_pool("ghost"), now()
    )
    assert reading.state is MetricsState.NO_DATA
    assert "gpufleet_dev_pool" in reading.message


def test_series_that_stopped_updating_are_stale(fleet: Fleet) -> None:
    reading = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1).read(
        inference_pool("frozen"), now()
    )
    assert reading.state is MetricsState.STALE, reading.message


def test_prometheus_down_is_unreachable_and_quick() -> None:
    metrics = PrometheusMetrics(f"http://127.0.0.1:{free_port()}", timeout_seconds=2)
    started = time.monotonic()
    reading = metrics.read(inference_pool(), now())
    assert reading.state is MetricsState.UNREACHABLE
    assert time.monotonic() - started < 5


def test_every_pools_queues_come_from_four_queries(fleet: Fleet) -> None:
    """The queue watch's reading: requests waiting, pods reporting, and prompt tokens/s and
    requests completed over five seconds (five scrapes), per namespace, pool and tier, for
    every pool at once (the h100 pods expose `vllm:` names, the others `vllm_`, and both
    are read)."""
    metrics = PrometheusMetrics(fleet.prometheus.url, scrape_interval_seconds=1)
    queues = metrics.queues(5)
    assert queues is not None and set(queues) == {(NAMESPACE, "llama3-8b"), (NAMESPACE, "frozen")}
    h100, rtx = (
        queues[(NAMESPACE, "llama3-8b")]["h100"],
        queues[(NAMESPACE, "llama3-8b")]["rtx4090"],
    )
    assert (h100[:2], rtx[:2]) == ((1.0, 1), (4.0, 1))
    assert h100[2] == pytest.approx(1000.0, rel=0.1) and rtx[2] == pytest.approx(2000.0, rel=0.1)
    assert h100[3] == pytest.approx(5 * 5.0, rel=0.1) and rtx[3] == pytest.approx(5 * 10.0, rel=0.1)
    assert queues[(NAMESPACE, "frozen")]["h100"] == (0.0, 1, None, None)  # one old sample
    assert PrometheusMetrics("http://127.0.0.1:1", scrape_interval_seconds=1).queues(5) is None
