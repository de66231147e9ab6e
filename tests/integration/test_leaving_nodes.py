"""A node about to be removed: its replicas are replaced at once, on the real plane.

The reconcile pass runs in-process with the real Kubernetes adapter (the planner asks for
each tier's minimum); the scheduler and kwok place the replacement on another node.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from gpufleet.adapters.kube import KubeAdapter
from gpufleet.desired.leaving import REPLACING
from gpufleet.planning.hedging import PRIOR_RATE_PER_REPLICA_HOUR
from gpufleet.planning.planner import plan
from gpufleet.reconcile import NoMetrics, Reconciler
from gpufleet.telemetry import Telemetry
from tests.harness import create_pool, get_pool, ready_pods, tier_status, wait_for
from tests.planners import minimum_plan
from tests.pools import pool, tier, traffic_class

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

POOL = "leaving"
TAINT = "ToBeDeletedByClusterAutoscaler"
NODE_CACHE_SECONDS = 6  # KubeAdapter lists nodes at most every 5 s


def set_taint(core: client.CoreV1Api, name: str, present: bool) -> None:
    taints = [t for t in core.read_node(name).spec.taints or [] if t.key != TAINT]
    if present:
        taints.append(client.V1Taint(key=TAINT, effect="NoSchedule", value="1700000000"))
    core.patch_node(
        name, {"spec": {"taints": [core.api_client.sanitize_for_serialization(t) for t in taints]}}
    )


def test_replicas_on_a_node_being_removed_are_replaced_at_once(
    kube_api: Any, namespace: str, crd: None
) -> None:
    core = client.CoreV1Api(kube_api)
    apps = client.AppsV1Api(kube_api)
    telemetry = Telemetry()
    reconciler = Reconciler(
        KubeAdapter(kube_api, telemetry), NoMetrics(), minimum_plan, telemetry,
        lambda: datetime.now(UTC),
    )  # fmt: skip
    body = pool(
        POOL,
        namespace=namespace,
        tiers=[tier("rtx4090", minReplicas=2)],
        classes=[traffic_class("chat", 2000)],
    )
    create_pool(kube_api, namespace, body)

    def reconcile() -> Any:
        result = reconciler.reconcile(get_pool(kube_api, namespace, POOL))
        assert result.failure is None, result
        return result

    reconcile()
    wait_for("2 Ready pods", lambda: len(ready_pods(core, namespace, POOL)) == 2, 90)
    victim = ready_pods(core, namespace, POOL)[0]
    node = victim.spec.node_name
    set_taint(core, node, True)
    try:
        time.sleep(NODE_CACHE_SECONDS)
        result = reconcile()
        deployment = apps.read_namespaced_deployment(f"{POOL}-rtx4090", namespace)
        assert deployment.spec.replicas == 3, "a replacement is asked for at once"
        assert deployment.metadata.annotations[REPLACING] == "1"
        found = get_pool(kube_api, namespace, POOL)
        assert tier_status(found, "rtx4090")["leavingReplicas"] == 1
        assert tier_status(found, "rtx4090")["desiredReplicas"] == 2
        [event] = [e for e in result.events if e.reason == "NodesLeaving"]
        assert f"{node} ({TAINT})" in event.message

        # The replacement lands on another node; the next pass changes nothing.
        def replaced() -> bool:
            pods = ready_pods(core, namespace, POOL)
            return len(pods) == 3 and sum(p.spec.node_name != node for p in pods) >= 2

        wait_for("the replacement to be Ready elsewhere", replaced, 90)
        again = reconcile()
        assert not [e for e in again.events if e.reason == "NodesLeaving"]
        assert apps.read_namespaced_deployment(f"{POOL}-rtx4090", namespace).spec.replicas == 3

        # The notice is withdrawn (the autoscaler changed its mind): back to the plan.
        set_taint(core, node, False)
        time.sleep(NODE_CACHE_SECONDS)
        reconcile()
        deployment = apps.read_namespaced_deployment(f"{POOL}-rtx4090", namespace)
        assert deployment.spec.replicas == 2
        assert deployment.metadata.annotations[REPLACING] == "0"
        found = get_pool(kube_api, namespace, POOL)
        assert tier_status(found, "rtx4090").get("leavingReplicas", 0) == 0
    finally:
        set_taint(core, node, False)


def test_a_preemptible_tier_learns_each_leaving_pod_once_into_status(
    kube_api: Any, namespace: str, crd: None
) -> None:
    """The real planner over the real adapter: a pod on a node tainted for removal is a
    loss of the preemptible tier, in `nodeLoss` with its name; a later pass that still sees
    it does not count it again."""
    core = client.CoreV1Api(kube_api)
    telemetry = Telemetry()
    reconciler = Reconciler(
        KubeAdapter(kube_api, telemetry), NoMetrics(), plan, telemetry,
        lambda: datetime.now(UTC),
    )  # fmt: skip
    name = "hedged"
    body = pool(
        name,
        namespace=namespace,
        tiers=[tier("rtx4090", minReplicas=2, preemptible=True)],
        classes=[traffic_class("chat", 2000)],
    )
    create_pool(kube_api, namespace, body)

    def reconcile() -> Any:
        result = reconciler.reconcile(get_pool(kube_api, namespace, name))
        assert result.failure is None, result
        return result

    reconcile()
    wait_for("2 Ready pods", lambda: len(ready_pods(core, namespace, name)) == 2, 90)
    reconcile()
    before = tier_status(get_pool(kube_api, namespace, name), "rtx4090")["nodeLoss"]
    assert before["lostPods"] == [] and before["losses"] == 0
    assert before["ratePerReplicaHour"] == pytest.approx(PRIOR_RATE_PER_REPLICA_HOUR, rel=0.01)
    victim = ready_pods(core, namespace, name)[0]
    node = victim.spec.node_name
    set_taint(core, node, True)
    try:
        time.sleep(NODE_CACHE_SECONDS)
        reconcile()
        lost = tier_status(get_pool(kube_api, namespace, name), "rtx4090")["nodeLoss"]
        assert lost["lostPods"] == [victim.metadata.name]
        assert lost["losses"] == pytest.approx(1.0, abs=0.01)
        assert lost["ratePerReplicaHour"] > before["ratePerReplicaHour"]
        # Seen again while its node still runs it: not a second loss.
        reconcile()
        still = tier_status(get_pool(kube_api, namespace, name), "rtx4090")["nodeLoss"]
        assert still["losses"] == pytest.approx(1.0, abs=0.01)
        assert still["lostPods"] == [victim.metadata.name]
    finally:
        set_taint(core, node, False)
