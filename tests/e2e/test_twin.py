"""The fleet twin without a cluster: a hand-made world, a clock driven by hand, real Prometheus.

The closed-loop scenarios (test_closed_loop.py) lean on the twin; these tests pin down what
it promises: vLLM's metric names and buckets, routing by the HTTPRoute's weights, a pod on a
vanished node serving nothing at once, and labels the operator's own PromQL finds.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.adapters.prometheus import PrometheusMetrics
from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.dev.demo import DemoConfig, merge, pool_body
from gpufleet.dev.loadstory import ClassLoad, PoissonLoad, Schedule, load_schedules, parse_phases
from gpufleet.dev.twin import FleetTwin
from gpufleet.dev.twindrain import DrainOutcome
from gpufleet.dev.twinworld import PodInfo, World
from gpufleet.planning.records import MetricsState
from gpufleet.sim.metrics import PROMPT_TOKEN_BUCKETS, TTFT_BUCKETS
from tests.pools import load_example

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
NS, NAME = "llm", "llama3-8b"
WEIGHTS = {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 0, "rtx4090": 100}}


def example_pool() -> InferencePool:
    body = load_example()
    body["metadata"].update(namespace=NS, uid="uid-1", generation=1)
    return parse_pool(body)


def pod(name: str, tier: str, node: str, *, ready: bool = True) -> PodInfo:
    return PodInfo(f"uid-{name}", NS, name, NAME, tier, node, ready, False)


def world(
    pods: list[PodInfo],
    nodes: set[str],
    weights: dict[str, dict[str, int]] | None = WEIGHTS,
) -> World:
    routes = {} if weights is None else {(NS, NAME): weights}
    return World(frozenset(nodes), {(NS, NAME): example_pool()}, tuple(pods), routes)


FLEET = [
    pod("h-0", "h100", "h100-0"),
    pod("r-0", "rtx4090", "rtx-0"),
    pod("r-1", "rtx4090", "rtx-1"),
]
NODES = {"h100-0", "rtx-0", "rtx-1"}


def run(twin: FleetTwin, start: float, seconds: float, step: float = 0.1) -> float:
    """Drive the twin's clock by hand from `start` for `seconds`; returns the end."""
    now = start
    for _ in range(round(seconds / step)):
        now += step
        twin.tick(now)
    return now


@pytest.fixture
def twin(tmp_path: Path) -> FleetTwin:
    return FleetTwin(None, targets_file=tmp_path / "targets" / "twin.json", seed=3)


def test_requests_follow_the_route_and_pods_export_vllm_metrics(twin: FleetTwin) -> None:
    twin.observe(world(FLEET, NODES))
    load = PoissonLoad({"realtime": ClassLoad(2000), "batch": ClassLoad(4000)}, seed=1)
    twin.set_load(NS, NAME, load)
    t0 = time.monotonic()
    end = run(twin, t0, 60)

    routed = twin.routed(NS, NAME)
    assert set(routed["realtime"]) == {"h100"}, routed
    assert set(routed["batch"]) == {"rtx4090"}, routed
    # 2000 tok/s of 400-token requests for 60 s: about 300 requests.
    assert 240 < routed["realtime"]["h100"] < 360
    assert twin.serving(NS, NAME) == {"h100": 1, "rtx4090": 2}

    text = twin.pod_metrics(NS, "r-0")
    assert text is not None
    families = {f.name: f for f in text_string_to_metric_families(text)}
    ttft = families["vllm:time_to_first_token_seconds"]
    bounds = [float(s.labels["le"]) for s in ttft.samples if s.name.endswith("_bucket")]
    assert bounds == [*TTFT_BUCKETS, float("inf")]
    assert all(s.labels["model_name"] == "llama3-8b" for s in ttft.samples)
    for name in ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success"):
        assert families[name].samples[0].value > 0, name
    # One prompt length per finished request, at vLLM's request_prompt_tokens buckets.
    prompts = families["vllm:request_prompt_tokens"]
    bounds = [float(s.labels["le"]) for s in prompts.samples if s.name.endswith("_bucket")]
    assert bounds == [*PROMPT_TOKEN_BUCKETS, float("inf")]
    finished = next(s.value for s in prompts.samples if s.name.endswith("_count"))
    assert finished == families["vllm:request_success"].samples[0].value
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        assert families[name].type == "gauge"
    assert 0.0 <= families["vllm:kv_cache_usage_perc"].samples[0].value <= 1.0

    # Both classes within their objectives at this light load (every request's exact TTFT).
    for cls, objective in (("realtime", 0.1), ("batch", 2.0)):
        window = twin.window(NS, NAME, cls, t0, end)
        assert window.requests > 100 and window.failed == 0
        assert window.p99_seconds is not None and window.p99_seconds < objective

    targets = json.loads(twin.targets_file.read_text())
    pods = {g["labels"].get("pod"): g["labels"] for g in targets}
    assert pods["r-1"] == {
        "__metrics_path__": f"/pods/{NS}/r-1/metrics",
        "namespace": NS,
        "pod": "r-1",
        "gpufleet_dev_pool": NAME,
        "gpufleet_dev_tier": "rtx4090",
    }
    assert pods[None]["__metrics_path__"] == "/gateway/metrics"

    gateway = {f.name: f for f in text_string_to_metric_families(twin.gateway_metrics())}
    tokens = {
        s.labels["traffic_class"]: s.value
        for s in gateway["gpufleet_dev_gateway_tokens"].samples
        if s.name.endswith("_total")
    }
    assert 0.8 * 4000 * 60 < tokens["batch"] < 1.2 * 4000 * 60


def test_a_pod_refuses_a_prompt_of_its_context_and_stops_outputs_where_it_ends(
    twin: FleetTwin,
) -> None:
    """As vLLM with --max-model-len=1000: realtime's 1,000-token prompts are refused
    (HTTP 400, no first token), batch's 900-token prompts get 100 output tokens, not 300."""
    twin.observe(world([replace(p, max_model_len=1000) for p in FLEET], NODES))
    loads = {
        "realtime": ClassLoad(2000, prompt_tokens=1000, output_tokens=100),
        "batch": ClassLoad(4000, prompt_tokens=900, output_tokens=300),
    }
    twin.set_load(NS, NAME, PoissonLoad(loads, seed=2))
    t0 = time.monotonic()
    end = run(twin, t0, 30)
    refused = twin.window(NS, NAME, "realtime", t0, end)
    assert refused.requests > 20 and refused.failed == refused.requests
    assert twin.answered(NS, NAME).get("400") == twin.routed(NS, NAME)["realtime"]["h100"]
    served = twin.window(NS, NAME, "batch", t0, end)
    assert served.requests > 20 and served.failed == 0
    generated = 0.0
    for name in ("r-0", "r-1"):
        text = twin.pod_metrics(NS, name)
        assert text is not None
        families = {f.name: f for f in text_string_to_metric_families(text)}
        generated += families["vllm:generation_tokens"].samples[0].value
    assert 0 < generated <= 100 * twin.routed(NS, NAME)["batch"]["rtx4090"]


def test_a_pod_on_a_vanished_node_stops_serving_at_once(twin: FleetTwin) -> None:
    twin.observe(world(FLEET, NODES))
    twin.set_load(NS, NAME, PoissonLoad({"batch": ClassLoad(12000)}, seed=2))
    now = run(twin, time.monotonic(), 10)
    before = twin.routed(NS, NAME)["batch"]["rtx4090"]

    # rtx-1 is deleted; its pod object is still Ready (the pod GC takes a minute).
    twin.observe(world(FLEET, NODES - {"rtx-1"}))
    now = run(twin, now, 10)
    assert twin.serving(NS, NAME) == {"h100": 1, "rtx4090": 1}
    assert twin.pod_metrics(NS, "r-1") is None
    labels = [g["labels"].get("pod") for g in json.loads(twin.targets_file.read_text())]
    assert "r-1" not in labels and "r-0" in labels
    assert twin.routed(NS, NAME)["batch"]["rtx4090"] > before
    # What it held mid-decode is lost, and the gateway answered each of those with a 502.
    lost = twin.drained(NS, NAME)
    assert lost.lost > 0 and lost.drained == lost.cut == 0
    assert twin.answered(NS, NAME)["502"] == lost.lost

    # The node comes back before the pod GC deleted the pod: its kubelet runs it again.
    twin.observe(world(FLEET, NODES))
    run(twin, now, 1)
    assert twin.serving(NS, NAME) == {"h100": 1, "rtx4090": 2}
    text = twin.pod_metrics(NS, "r-1")
    assert text is not None and "vllm:request_success_total" in text


@pytest.mark.parametrize(
    ("drain_seconds", "all_drained"), [(0, False), (600, True)], ids=["no-drain", "drain"]
)
def test_a_deleted_pod_drains_its_requests_for_the_drain_time_then_cuts_the_rest(
    twin: FleetTwin, drain_seconds: int, all_drained: bool
) -> None:
    body = load_example()
    body["metadata"].update(namespace=NS, uid="uid-1", generation=1)
    body["spec"].setdefault("scaling", {})["drainSeconds"] = drain_seconds
    pools = {(NS, NAME): parse_pool(body)}
    twin.observe(World(frozenset(NODES), pools, tuple(FLEET), {(NS, NAME): WEIGHTS}))
    twin.set_load(NS, NAME, PoissonLoad({"batch": ClassLoad(12000)}, seed=2))
    now = run(twin, time.monotonic(), 10)
    held = [int(s.value) for s in _gauges(twin, "r-1")]
    assert sum(held) > 0, "the pod holds requests when it is deleted"

    # r-1 is deleted (kwok removes the object at once): it takes no new request.
    rest = tuple(p for p in FLEET if p.name != "r-1")
    twin.observe(World(frozenset(NODES), pools, rest, {(NS, NAME): WEIGHTS}))
    run(twin, now, 60)
    outcome = twin.drained(NS, NAME)
    assert outcome.drained + outcome.cut == sum(held)
    if all_drained:
        assert outcome.cut == 0
    else:
        assert outcome.drained == 0 and outcome.cut == sum(held)


def test_a_pod_seen_terminating_drains_from_then(twin: FleetTwin) -> None:
    """The API still lists a deleted pod for a while (its deletionTimestamp set): its drain
    time runs from the first poll that saw that, not from when the object is gone."""
    body = load_example()
    body["metadata"].update(namespace=NS, uid="uid-1", generation=1)
    body["spec"].setdefault("scaling", {})["drainSeconds"] = 0
    pools = {(NS, NAME): parse_pool(body)}
    twin.observe(World(frozenset(NODES), pools, tuple(FLEET), {(NS, NAME): WEIGHTS}))
    twin.set_load(NS, NAME, PoissonLoad({"batch": ClassLoad(12000)}, seed=2))
    now = run(twin, time.monotonic(), 10)
    held = sum(int(s.value) for s in _gauges(twin, "r-1"))
    assert held > 0, "the pod holds requests when it is deleted"

    terminating = [replace(p, terminating=True) if p.name == "r-1" else p for p in FLEET]
    twin.observe(World(frozenset(NODES), pools, tuple(terminating), {(NS, NAME): WEIGHTS}))
    run(twin, now, 1)
    assert twin.drained(NS, NAME) == DrainOutcome(drained=0, cut=held)
    assert twin.serving(NS, NAME) == {"h100": 1, "rtx4090": 1}


def _gauges(twin: FleetTwin, pod_name: str) -> list[Any]:
    text = twin.pod_metrics(NS, pod_name)
    assert text is not None
    return [
        sample
        for family in text_string_to_metric_families(text)
        if family.name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
        for sample in family.samples
    ]


def test_a_weighted_tier_without_replicas_passes_requests_on_and_no_route_fails(
    twin: FleetTwin,
) -> None:
    split = {"realtime": {"h100": 100}, "batch": {"h100": 50, "rtx4090": 50}}
    twin.observe(world([FLEET[0]], {"h100-0"}, split))
    twin.set_load(NS, NAME, PoissonLoad({"batch": ClassLoad(2000)}, seed=4))
    t0 = time.monotonic()
    now = run(twin, t0, 20)
    assert set(twin.routed(NS, NAME)["batch"]) == {"h100"}  # the retry found h100

    twin.observe(world([FLEET[0]], {"h100-0"}, weights=None))  # the HTTPRoute is gone
    later = run(twin, now, 10)
    window = twin.window(NS, NAME, "batch", now + 0.5, later)
    assert window.requests > 0 and window.failed == window.requests


def test_schedules_phases_and_the_demo_overlay() -> None:
    phases = parse_phases(
        [
            {"name": "a", "seconds": 10, "classes": [{"name": "batch", "tokensPerSecond": 100}]},
            {"name": "b", "seconds": 5, "classes": []},
        ]
    )
    schedule = Schedule(phases)
    assert [schedule.phase_at(t).name for t in (0, 9.9, 10, 14.9, 100)] == ["a", "a", "b", "b", "b"]
    assert Schedule(phases, hold_last=False).phase_at(15) is None

    config = DemoConfig.load(ROOT / "examples" / "demo" / "demo.yaml")
    body = pool_body(config, "ns-1", {"spec": {"objectives": {"maxHourlyCost": "3.00"}}})
    spec = parse_pool({**body, "metadata": {**body["metadata"], "uid": "u"}}).spec
    assert spec.scaling.interval_seconds == 10  # from the overlay, not a changed default
    assert spec.objectives.max_hourly_cost == "3.00"
    assert [t.name for t in spec.tiers] == ["h100", "rtx4090"]  # merged by name, not replaced
    for cls in spec.traffic_classes:
        assert cls.demand_query is not None
        assert f'namespace="ns-1",httproute="llama3-8b",traffic_class="{cls.name}"' in (
            cls.demand_query
        )
    assert merge([{"name": "a", "x": 1}], [{"name": "a", "y": 2}, {"name": "b"}]) == [
        {"name": "a", "x": 1, "y": 2},
        {"name": "b"},
    ]


def test_schedule_file(tmp_path: Path) -> None:
    path = tmp_path / "load.yaml"
    path.write_text(
        "pools:\n- namespace: llm\n  pool: llama3-8b\n  phases:\n"
        "  - {name: quiet, seconds: 30, classes: [{name: batch, tokensPerSecond: 6000}]}\n"
    )
    [item] = load_schedules(path)
    assert (item.namespace, item.pool, item.schedule.seconds) == ("llm", "llama3-8b", 30.0)


@pytest.mark.prometheus
def test_the_operators_own_queries_read_the_twin_through_real_prometheus(tmp_path: Path) -> None:
    from gpufleet.dev.prometheus import PrometheusServer

    with PrometheusServer(scrape_interval_seconds=1, work_dir=tmp_path / "prom") as prom:
        twin = FleetTwin(None, targets_file=prom.targets_file.parent / "twin.json", seed=5)
        twin.observe(world(FLEET, NODES))
        with twin:
            load = {"realtime": ClassLoad(2000), "batch": ClassLoad(6000)}
            twin.set_load(NS, NAME, PoissonLoad(load, seed=6))
            prom.wait_for('vllm:num_requests_running{gpufleet_dev_tier="rtx4090"}', 30)
            time.sleep(6)  # a few scrapes with traffic
            pool = example_pool()
            reading = _read_until_rates(
                PrometheusMetrics(prom.url, scrape_interval_seconds=1), pool
            )
    assert reading.state is MetricsState.AVAILABLE, reading.message
    rtx, h100 = reading.tiers["rtx4090"], reading.tiers["h100"]
    # Batch (rtx4090) offers three times realtime's (h100) tokens; the window is still filling.
    assert rtx.prompt_tokens_per_second and h100.prompt_tokens_per_second
    assert 2.0 < rtx.prompt_tokens_per_second / h100.prompt_tokens_per_second < 4.5
    assert h100.ttft_p99_seconds is not None and h100.ttft_p99_seconds < 0.1
    assert rtx.kv_cache_usage is not None
    # The share of prompts at most each of vLLM's bounds: batch (all on the 4090s) sends
    # its class's mean prompt every time, so none up to the bound below it, all from there.
    prompt = next(c.mean_prompt_tokens for c in pool.spec.traffic_classes if c.name == "batch")
    expected = {b: 1.0 if prompt <= b else 0.0 for b in PROMPT_TOKEN_BUCKETS}
    assert rtx.prompt_share_at_most == pytest.approx(expected), rtx.prompt_share_at_most
    # Their mean, from the same histogram's sum and count: that prompt.
    assert rtx.prompt_mean_tokens == pytest.approx(prompt), rtx.prompt_mean_tokens


def _read_until_rates(metrics: PrometheusMetrics, pool: InferencePool, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        reading = metrics.read(pool, datetime.now(UTC))
        tiers = reading.tiers
        if reading.state is MetricsState.AVAILABLE and all(
            tiers[t].prompt_tokens_per_second for t in ("h100", "rtx4090")
        ):
            return reading
        if time.monotonic() > deadline:
            return reading
        time.sleep(1)
