"""The real operator on the real plane: children, status, Events, bad input, changes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from gpufleet.adapters.kube import covers
from gpufleet.api.constants import GROUP, LABEL_POOL, PLURAL, VERSION
from gpufleet.api.parse import parse_pool
from gpufleet.desired import manifests
from tests.harness import (
    OperatorProcess,
    condition,
    create_pool,
    get_pool,
    kubectl,
    tier_status,
    wait_for,
)
from tests.pools import EXAMPLES, InvalidCase, invalid_cases, load_example, pool, tier

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def fast(body: dict[str, Any], interval: int = 5) -> dict[str, Any]:
    """The pool with a short decision interval, for tests."""
    body = copy.deepcopy(body)
    body["spec"].setdefault("scaling", {})["intervalSeconds"] = interval
    return body


def converged(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    """The pool once its status covers its generation and every desired replica is Ready."""
    found = get_pool(api, namespace, name)
    status = found.get("status", {})
    if status.get("observedGeneration") != found["metadata"]["generation"]:
        return None
    tiers = status.get("tiers", [])
    if not tiers or any(t.get("readyReplicas", 0) != t.get("desiredReplicas") for t in tiers):
        return None
    ready = condition(found, "Ready")
    return found if ready and ready["status"] == "True" else None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_gets_its_children_and_a_ready_status(
    path: Path, kube_api: Any, namespace: str, running_operator: OperatorProcess, plane: Any
) -> None:
    body = fast(yaml.safe_load(path.read_text()))
    body["metadata"]["namespace"] = namespace
    create_pool(kube_api, namespace, body)
    name = body["metadata"]["name"]
    found = wait_for(f"{name} to converge", lambda: converged(kube_api, namespace, name), 90)

    typed = parse_pool(found)
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    for t in typed.spec.tiers:
        want = tier_status(found, t.name)["desiredReplicas"]
        assert want >= t.min_replicas
        live = kube_api.sanitize_for_serialization(
            apps.read_namespaced_deployment(f"{name}-{t.name}", namespace)
        )
        assert covers(live, manifests.deployment(typed, t, want)), f"Deployment {t.name} differs"
        assert live["status"].get("readyReplicas", 0) == want
        svc = kube_api.sanitize_for_serialization(
            core.read_namespaced_service(f"{name}-{t.name}", namespace)
        )
        assert covers(svc, manifests.service(typed, t))
        # Every pod runs on a node of its tier's pool.
        pods = core.list_namespaced_pod(
            namespace, label_selector=f"{LABEL_POOL}={name},gpufleet.dev/tier={t.name}"
        ).items
        assert len(pods) == want
        for p in pods:
            node = core.read_node(p.spec.node_name)
            for key, value in t.node_selector.items():
                assert node.metadata.labels[key] == value

    route_wanted = bool(typed.spec.routing.parent_refs)
    if route_wanted:
        route = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", namespace, "httproutes", name
        )
        weights = manifests.route_weights(route, name)
        assert set(weights) == {c.name for c in typed.spec.traffic_classes}
        for c in typed.spec.traffic_classes:
            assert sum(weights[c.name].values()) == 100
    routing = condition(found, "RoutingApplied")
    assert routing is not None and routing["status"] == ("True" if route_wanted else "False")

    table = kubectl(plane, "get", "gpool", "-n", namespace)
    header, row = table.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "READY", "TIERS", "P99"]
    assert row.split()[:2] == [name, "True"]
    assert f"{typed.spec.tiers[0].name}:" in row
    wide = kubectl(plane, "get", "gpool", "-n", namespace, "-o", "wide")
    assert "WEIGHTS" in wide.splitlines()[0]
    described = kubectl(plane, "describe", "gpool", "-n", namespace, name)
    assert "Conditions:" in described and "Events:" in described
    assert "Created tier" in described


def test_a_pool_on_the_engine_model_plans_with_it_and_says_so(
    kube_api: Any, namespace: str, running_operator: OperatorProcess, plane: Any
) -> None:
    """spec.scaling.performanceModel: Engine through the real operator: every tier is sized
    on gpufleet.perf's engine at steady state, and status and describe say so."""
    body = fast(load_example())
    body["metadata"]["namespace"] = namespace
    body["spec"]["scaling"]["performanceModel"] = "Engine"
    create_pool(kube_api, namespace, body)
    name = body["metadata"]["name"]
    found = wait_for(f"{name} to converge", lambda: converged(kube_api, namespace, name), 120)
    for t in found["spec"]["tiers"]:
        status = tier_status(found, t["name"])
        assert status["profile"].startswith("gpufleet.perf at steady state"), status
        assert status["profileMeasured"] is False
    described = kubectl(plane, "describe", "gpool", "-n", namespace, name)
    assert "gpufleet.perf at steady state" in described


@pytest.mark.parametrize("case", invalid_cases(), ids=lambda c: c.id)
def test_apiserver_refuses_invalid_pools_naming_the_field(
    case: InvalidCase, plane: Any, crd: None
) -> None:
    body = case.apply(load_example())
    body["metadata"]["namespace"] = "default"
    result = plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(body), check=False)
    assert result.returncode != 0, f"{case.id} was accepted"
    assert case.field in result.stderr, result.stderr


def test_too_few_gpus_shows_unschedulable_and_degraded(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    # Two H100 nodes with 8 GPUs each hold two 8-GPU replicas, not three.
    body = fast(
        pool(
            "big",
            namespace=namespace,
            tiers=[tier("h100", "H100-PCIe-80GB", gpusPerReplica=8, minReplicas=3, maxReplicas=3)],
        )
    )
    body["spec"]["model"]["name"] = "meta-llama/Meta-Llama-3-70B-Instruct"
    body["spec"]["objectives"] = {}  # no budget: minReplicas asks for all three
    create_pool(kube_api, namespace, body)

    def degraded() -> dict[str, Any] | None:
        found = get_pool(kube_api, namespace, "big")
        h100 = tier_status(found, "h100")
        cond = condition(found, "Degraded")
        if h100.get("unschedulableReplicas") == 1 and cond and cond["status"] == "True":
            return found
        return None

    found = wait_for("Degraded=True with one unschedulable replica", degraded, 90)
    h100 = tier_status(found, "h100")
    assert (h100["desiredReplicas"], h100["readyReplicas"]) == (3, 2)
    cond = condition(found, "Degraded")
    assert cond is not None and cond["reason"] == "Unschedulable"
    events = (
        client.CoreV1Api(kube_api)
        .list_namespaced_event(namespace, field_selector="involvedObject.name=big")
        .items
    )
    assert any(e.type == "Warning" and e.reason == "Unschedulable" for e in events)


def test_spec_update_rolls_hand_edit_is_undone_and_delete_cleans_up(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    body = fast(pool("roll", namespace=namespace))
    create_pool(kube_api, namespace, body)
    wait_for("roll to converge", lambda: converged(kube_api, namespace, "roll"), 90)
    apps = client.AppsV1Api(kube_api)

    # A spec change reaches the pod template (a rollout).
    custom = client.CustomObjectsApi(kube_api)
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "roll",
        {"spec": {"model": {"extraArgs": ["--max-model-len=4096"]}}},
    )  # fmt: skip

    def rolled() -> bool:
        d = apps.read_namespaced_deployment("roll-h100", namespace)
        return "--max-model-len=4096" in d.spec.template.spec.containers[0].args

    wait_for("the Deployment's pod template to change", rolled, 30)

    # A hand edit of an owned field is put back.
    apps.patch_namespaced_deployment("roll-h100", namespace, {"spec": {"replicas": 4}})
    wait_for(
        "replicas put back to 1",
        lambda: apps.read_namespaced_deployment("roll-h100", namespace).spec.replicas == 1,
        30,
    )

    # Deleting the pool deletes its children (garbage collection), and only them.
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "bystander", "labels": {LABEL_POOL: "roll"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "bystander"}},
                "template": {
                    "metadata": {"labels": {"app": "bystander"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "roll")

    def children_gone() -> bool:
        names = {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}
        services = client.CoreV1Api(kube_api).list_namespaced_service(namespace).items
        return names == {"bystander"} and not [
            s for s in services if s.metadata.name.startswith("roll-")
        ]

    wait_for("the pool's children to be garbage-collected", children_gone, 60)


def test_idle_passes_write_nothing(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    body = fast(pool("idle", namespace=namespace), interval=5)
    create_pool(kube_api, namespace, body)
    wait_for("idle to converge", lambda: converged(kube_api, namespace, "idle"), 90)
    # Let trailing watch events settle, then count writes over three intervals.
    wait_for("a quiet interval", lambda: _quiet(running_operator, 6), 60, 0)
    passes = running_operator.metric("gpufleet_reconcile_duration_seconds_count")
    writes = running_operator.pool_writes()
    import time

    time.sleep(16)
    assert running_operator.metric("gpufleet_reconcile_duration_seconds_count") >= passes + 3
    assert running_operator.pool_writes() == writes, "an idle pass wrote to the API"


def _quiet(process: OperatorProcess, seconds: float) -> bool:
    import time

    before = process.pool_writes()
    time.sleep(seconds)
    return process.pool_writes() == before


def test_kubectl_explain_describes_every_field(plane: Any, crd: None) -> None:
    text = kubectl(plane, "explain", "inferencepools.gpufleet.dev.spec.tiers.pricePerGPUHour")
    assert "Price of one GPU for one hour" in text
    recursive = kubectl(plane, "explain", "inferencepools.gpufleet.dev.spec", "--recursive")
    for field in ("ttftP99Milliseconds", "gpusPerReplica", "maxHourlyCost", "parentRefs"):
        assert field in recursive
