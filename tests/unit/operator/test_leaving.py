"""Replicas on nodes being removed: not Ready for planning, replaced at once, said so."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufleet.adapters.kube import count_pods
from gpufleet.api.status import InferencePoolStatus
from gpufleet.desired.leaving import (
    INTERRUPTION_TAINTS,
    REPLACING,
    classify_nodes,
    leaving_reason,
    replacing,
    surges,
)
from gpufleet.reconcile import NoMetrics, Reconciler
from tests.fakes import FakeKube
from tests.planners import minimum_plan
from tests.pools import pool, tier, traffic_class

pytestmark = pytest.mark.timeout(2)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def node(name: str, *, taints: tuple[str, ...] = (), cordoned: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]}
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.mark.parametrize(
    ("n", "why"),
    [
        (node("a"), None),
        (node("a", taints=("nvidia.com/gpu",)), None),
        (node("a", cordoned=True), "cordoned"),
        (node("a", taints=("ToBeDeletedByClusterAutoscaler",)), "ToBeDeletedByClusterAutoscaler"),
        (node("a", taints=("karpenter.sh/disrupted",)), "karpenter.sh/disrupted"),
        (
            node("a", taints=("aws-node-termination-handler/spot-itn",), cordoned=True),
            "aws-node-termination-handler/spot-itn",
        ),
    ],
    ids=["plain", "gpu-taint", "cordoned", "autoscaler", "karpenter-v1", "spot-notice"],
)
def test_a_node_is_leaving_when_cordoned_or_tainted_for_interruption(
    n: dict[str, Any], why: str | None
) -> None:
    assert leaving_reason(n, INTERRUPTION_TAINTS) == why


def test_the_taint_list_is_a_setting() -> None:
    tainted = node("a", taints=("example.com/reclaim",))
    assert leaving_reason(tainted, INTERRUPTION_TAINTS) is None
    assert leaving_reason(tainted, ("example.com/reclaim",)) == "example.com/reclaim"
    ready, leaving = classify_nodes([tainted, node("b")], ("example.com/reclaim",))
    assert ready == {"a", "b"} and leaving == {"a": "example.com/reclaim"}


def test_ready_pods_on_leaving_nodes_are_leaving_not_ready() -> None:
    def pod(name: str, node_name: str, ready: bool) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "labels": {"gpufleet.dev/tier": "t"}},
            "spec": {"nodeName": node_name},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }

    counts = count_pods(
        [
            pod("p1", "gone", True),
            pod("p2", "gone", False),
            pod("p3", "stays", True),
            pod("p4", "vanished", True),
        ],
        {"gone", "stays"},
        {"gone": "cordoned"},
    )["t"]
    assert (counts.ready, counts.leaving, counts.starting, counts.unschedulable) == (1, 1, 1, 1)
    assert counts.leaving_nodes == {"gone": "cordoned"}
    # A scale-down removes the pods on a leaving or vanished node first.
    assert counts.leaving_pods == ["p1", "p4"]


def body() -> dict[str, Any]:
    return pool(
        tiers=[tier("rtx4090", minReplicas=3)],
        classes=[traffic_class("chat", 2000)],
    )


def test_leaving_replicas_are_replaced_at_once_and_said_so_once() -> None:
    kube = FakeKube()
    reconciler = Reconciler(kube, NoMetrics(), minimum_plan, kube.telemetry, lambda: NOW)
    kube.add_pool(body())

    def run() -> Any:
        found = kube.get_pool("default", "llama3-8b")
        assert found is not None
        return reconciler.reconcile(found)

    run()
    deployment = kube.objects[("Deployment", "default", "llama3-8b-rtx4090")]
    assert deployment["spec"]["replicas"] == 3 and replacing(deployment) == 0

    kube.leaving["rtx4090"] = {"node-7": "ToBeDeletedByClusterAutoscaler"}
    result = run()
    deployment = kube.objects[("Deployment", "default", "llama3-8b-rtx4090")]
    assert deployment["spec"]["replicas"] == 4, "a replacement starts at once"
    assert deployment["metadata"]["annotations"][REPLACING] == "1"
    status = InferencePoolStatus.model_validate(kube.pools[("default", "llama3-8b")]["status"])
    assert status.tiers[0].desired_replicas == 3
    assert status.tiers[0].leaving_replicas == 1
    leaving_events = [e for e in result.events if e.reason == "NodesLeaving"]
    assert len(leaving_events) == 1
    assert "node-7 (ToBeDeletedByClusterAutoscaler)" in leaving_events[0].message

    # The next pass reads its own replacement back: no growth, no second Event.
    again = run()
    deployment = kube.objects[("Deployment", "default", "llama3-8b-rtx4090")]
    assert deployment["spec"]["replicas"] == 4
    assert not [e for e in again.events if e.reason == "NodesLeaving"]

    # The node is gone: back to the plan.
    kube.leaving.clear()
    run()
    deployment = kube.objects[("Deployment", "default", "llama3-8b-rtx4090")]
    assert deployment["spec"]["replicas"] == 3 and replacing(deployment) == 0
    status = InferencePoolStatus.model_validate(kube.pools[("default", "llama3-8b")]["status"])
    assert status.tiers[0].leaving_replicas == 0


def _parsed(**objectives: str) -> Any:
    from gpufleet.api.parse import parse_pool

    body = pool(
        tiers=[tier("h100", "H100-PCIe-80GB", maxReplicas=4), tier("rtx4090", maxReplicas=6)],
        objectives=objectives or {},
    )
    body["metadata"]["uid"] = "uid-1"
    return parse_pool(body)


def test_replacements_start_at_once_within_max_replicas() -> None:
    parsed = _parsed()
    got = surges(parsed, {"h100": 3, "rtx4090": 2}, {"h100": 2, "rtx4090": 3}, 7.0)
    assert got == {"h100": 1, "rtx4090": 3}  # h100 may reach 4, not 5


def test_replacements_never_take_the_fleet_past_the_hourly_budget() -> None:
    # Planned $6.50/h of an $8.00 budget: $1.50 left buys no H100 ($2) and six RTX 4090s
    # ($0.25 each), of which three are asked for.
    parsed = _parsed(maxHourlyCost="8.00")
    got = surges(parsed, {"h100": 3, "rtx4090": 2}, {"h100": 1, "rtx4090": 3}, 6.5)
    assert got == {"h100": 0, "rtx4090": 3}
    tight = surges(parsed, {"h100": 3, "rtx4090": 2}, {"h100": 0, "rtx4090": 3}, 7.5)
    assert tight == {"h100": 0, "rtx4090": 2}
