"""On a scale-down the idlest replica leaves: the real apiserver, ReplicaSet controller and
Prometheus.

The reconcile pass runs in-process with the real Kubernetes and Prometheus adapters; only
the planner is a fixed function (the replicas it asks for are the input under test). Each
pod's requests in flight are served by a small exporter per pod, labelled as the scrape
config labels real pods (pool, tier, namespace, pod).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import start_http_server
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric

from gpufleet.adapters.kube import KubeAdapter
from gpufleet.adapters.prometheus import PrometheusMetrics
from gpufleet.api.status import InferencePoolStatus
from gpufleet.api.types import InferencePoolSpec
from gpufleet.desired.deletion_cost import DELETION_COST
from gpufleet.dev.prometheus import PrometheusServer, ScrapeGroup, free_port
from gpufleet.planning.records import Observation, Plan, TierPlan
from gpufleet.reconcile import Reconciler
from gpufleet.telemetry import Telemetry
from tests.harness import create_pool, get_pool, ready_pods, wait_for
from tests.planners import minimum_plan
from tests.pools import pool, tier, traffic_class

pytestmark = [pytest.mark.cluster, pytest.mark.prometheus, pytest.mark.timeout(240)]

POOL = "order"
TIER = "rtx4090"


class PodLoad:
    """One vLLM pod's scheduler gauges, as vLLM 0.33 names them."""

    def __init__(self, running: float, waiting: float) -> None:
        self.running = running
        self.waiting = waiting

    def collect(self) -> Iterable[Metric]:
        for name, value in (
            ("vllm:num_requests_running", self.running),
            ("vllm:num_requests_waiting", self.waiting),
        ):
            gauge = GaugeMetricFamily(name, name, labels=["model_name", "engine"])
            gauge.add_metric(["m", "0"], value)
            yield gauge


class FixedReplicas:
    """A planner asking for `replicas` on the one tier (what is under test is the pass)."""

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def __call__(
        self, spec: InferencePoolSpec, observation: Observation, previous: InferencePoolStatus
    ) -> Plan:
        plan = minimum_plan(spec, observation, previous)
        tiers = {TIER: TierPlan(name=TIER, replicas=self.replicas)}
        return dataclasses.replace(plan, tiers=tiers)


@pytest.fixture
def prometheus() -> Iterator[PrometheusServer]:
    server = PrometheusServer(scrape_interval_seconds=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def costs(core: client.CoreV1Api, namespace: str) -> dict[str, str | None]:
    return {
        p.metadata.name: (p.metadata.annotations or {}).get(DELETION_COST)
        for p in ready_pods(core, namespace, POOL)
    }


def test_idlest_pod_leaves_and_costs_are_written_only_before_a_scale_down(
    kube_api: Any, namespace: str, crd: None, prometheus: PrometheusServer
) -> None:
    core = client.CoreV1Api(kube_api)
    telemetry = Telemetry()
    metrics = PrometheusMetrics(prometheus.url, scrape_interval_seconds=1)
    planner = FixedReplicas(3)
    reconciler = Reconciler(
        KubeAdapter(kube_api, telemetry), metrics, planner, telemetry, lambda: datetime.now(UTC)
    )
    body = pool(
        POOL,
        namespace=namespace,
        tiers=[tier(TIER, maxReplicas=8)],
        classes=[traffic_class("chat", 2000)],
        scaling={"intervalSeconds": 5, "scaleDownDelaySeconds": 0},
    )
    create_pool(kube_api, namespace, body)

    def reconcile() -> None:
        result = reconciler.reconcile(get_pool(kube_api, namespace, POOL))
        assert result.failure is None, result

    reconcile()
    wait_for("3 Ready pods", lambda: len(ready_pods(core, namespace, POOL)) == 3, 90)

    # The busiest, the idlest and one in between, each with its own exporter.
    names = sorted(p.metadata.name for p in ready_pods(core, namespace, POOL))
    loads = dict(zip(names, (PodLoad(7, 2), PodLoad(0, 0), PodLoad(2, 1)), strict=True))
    servers = []
    groups = []
    for name, load in loads.items():
        registry = CollectorRegistry()
        registry.register(load)
        port = free_port()
        server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
        servers.append(server)
        labels = {
            "gpufleet_dev_pool": POOL,
            "gpufleet_dev_tier": TIER,
            "namespace": namespace,
            "pod": name,
        }
        groups.append(ScrapeGroup([f"127.0.0.1:{port}"], labels))
    try:
        prometheus.set_targets(groups)
        for name in names:
            prometheus.wait_for(f'{{__name__=~"vllm[:_]num_requests_running",pod="{name}"}}')
        assert metrics.requests_in_flight(get_pool_model(kube_api, namespace), TIER) == {
            names[0]: 9.0,
            names[1]: 0.0,
            names[2]: 3.0,
        }

        # Steady passes at 3 replicas: no pod is touched.
        writes = pod_patches(telemetry)
        reconcile()
        reconcile()
        assert pod_patches(telemetry) == writes
        assert set(costs(core, namespace).values()) == {None}

        # A scale-down to 2: costs first, then the ReplicaSet removes the idlest pod.
        planner.replicas = 2
        reconcile()
        assert pod_patches(telemetry) == writes + 3
        wait_for(
            "the idlest pod to leave",
            lambda: (
                sorted(p.metadata.name for p in ready_pods(core, namespace, POOL))
                == sorted([names[0], names[2]])
            ),
            60,
        )
        assert costs(core, namespace) == {names[0]: "9", names[2]: "3"}

        # Steady again at 2: the next passes write no pod.
        time.sleep(1)
        writes = pod_patches(telemetry)
        reconcile()
        reconcile()
        assert pod_patches(telemetry) == writes
    finally:
        for server in servers:
            server.shutdown()


def pod_patches(telemetry: Telemetry) -> float:
    """Pod patches the adapter made so far (its own count of API writes)."""
    found = telemetry.registry.get_sample_value(
        "gpufleet_api_writes_total", {"verb": "patch", "resource": "pods"}
    )
    return found or 0.0


def get_pool_model(kube_api: Any, namespace: str) -> Any:
    from gpufleet.api.parse import parse_pool

    return parse_pool(get_pool(kube_api, namespace, POOL))
