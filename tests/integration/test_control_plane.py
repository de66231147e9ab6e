"""The local control plane behaves as a GPU cluster would (tests/cluster, gpufleet.dev).

Real kube-apiserver, etcd, controller-manager and scheduler; kwok plays the kubelets of
the fake GPU nodes in tests/cluster/nodes.yaml. Every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from gpufleet.dev import nodes, tools
from gpufleet.dev.cluster import ControlPlane

pytestmark = pytest.mark.cluster

GPU = nodes.GPU_RESOURCE
T = TypeVar("T")


# ---- small factories and waits -------------------------------------------------------------
def gpu_deployment(
    name: str, *, accelerator: str, replicas: int, gpus: int, tolerate: bool = True
) -> dict[str, Any]:
    labels = {"app": name}
    pod_spec: dict[str, Any] = {
        "nodeSelector": {"gpufleet.dev/accelerator": accelerator},
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.33.0",
                "resources": {"limits": {GPU: str(gpus)}, "requests": {"cpu": "1"}},
            }
        ],
    }
    if tolerate:
        pod_spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def wait_for(
    what: str, probe: Callable[[], T | None], timeout_s: float, every_s: float = 0.25
) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout_s}s waiting for {what}")
        time.sleep(every_s)


def pods_of(core: client.CoreV1Api, namespace: str, app: str) -> list[Any]:
    return list(core.list_namespaced_pod(namespace, label_selector=f"app={app}").items)


def ready_replicas(apps: client.AppsV1Api, namespace: str, name: str) -> int:
    return apps.read_namespaced_deployment_status(name, namespace).status.ready_replicas or 0


def node_labels(core: client.CoreV1Api) -> dict[str, dict[str, str]]:
    return {n.metadata.name: n.metadata.labels or {} for n in core.list_node().items}


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def failed_scheduling_messages(core: client.CoreV1Api, namespace: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector="reason=FailedScheduling")
    return [e.message or "" for e in events.items]


# ---- scheduling onto GPU pools ------------------------------------------------------------
def test_gpu_deployment_lands_only_on_its_pool_and_becomes_ready(
    kube_api: Any, namespace: str
) -> None:
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    apps.create_namespaced_deployment(
        namespace, gpu_deployment("llama", accelerator="rtx4090", replicas=4, gpus=1)
    )

    wait_for("4 ready replicas", lambda: ready_replicas(apps, namespace, "llama") == 4, 60)

    labels = node_labels(core)
    pods = pods_of(core, namespace, "llama")
    assert len(pods) == 4
    for pod in pods:
        assert labels[pod.spec.node_name]["gpufleet.dev/accelerator"] == "rtx4090"
        assert labels[pod.spec.node_name]["nvidia.com/gpu.product"] == "NVIDIA-GeForce-RTX-4090"
        assert pod.status.phase == "Running"
        assert pod.status.pod_ip, "kwok gives every running pod an IP"


def test_gpu_pod_without_toleration_is_kept_off_tainted_gpu_nodes(
    kube_api: Any, namespace: str
) -> None:
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    apps.create_namespaced_deployment(
        namespace,
        gpu_deployment("untolerated", accelerator="h100", replicas=1, gpus=1, tolerate=False),
    )

    messages = wait_for("FailedScheduling", lambda: failed_scheduling_messages(core, namespace), 30)
    # Since 1.35 the scheduler no longer names the taint's key in this message.
    assert "10 node(s) had untolerated taint" in messages[0], messages
    assert all(p.spec.node_name is None for p in pods_of(core, namespace, "untolerated"))


def test_request_beyond_free_gpus_stays_pending_with_failed_scheduling(
    kube_api: Any, namespace: str
) -> None:
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    # The h100 pool has 2 nodes x 8 GPUs: two 8-GPU replicas fit, the third cannot.
    apps.create_namespaced_deployment(
        namespace, gpu_deployment("big", accelerator="h100", replicas=3, gpus=8)
    )

    wait_for("2 ready replicas", lambda: ready_replicas(apps, namespace, "big") == 2, 60)
    messages = wait_for(
        "a FailedScheduling event", lambda: failed_scheduling_messages(core, namespace), 30
    )

    assert any(f"Insufficient {GPU}" in m for m in messages), messages
    pending = [p for p in pods_of(core, namespace, "big") if p.status.phase == "Pending"]
    assert len(pending) == 1
    assert pending[0].spec.node_name is None
    unschedulable = [c for c in pending[0].status.conditions or [] if c.type == "PodScheduled"]
    assert unschedulable and unschedulable[0].reason == "Unschedulable"


# ---- consumer GPUs come and go ------------------------------------------------------------
def test_removed_pool_nodes_lose_their_pods_and_added_nodes_take_them_back(
    kube_api: Any, namespace: str, gpu_pools: dict[str, nodes.Pool]
) -> None:
    core, apps = client.CoreV1Api(kube_api), client.AppsV1Api(kube_api)
    rtx = gpu_pools["rtx4090"]
    apps.create_namespaced_deployment(
        namespace, gpu_deployment("spot", accelerator="rtx4090", replicas=4, gpus=1)
    )
    wait_for("4 ready replicas", lambda: ready_replicas(apps, namespace, "spot") == 4, 60)
    removed = [spec.name for spec in rtx.nodes]

    t0 = time.monotonic()
    nodes.remove_nodes(kube_api, removed)

    def on_removed_nodes() -> list[str]:
        return [
            p.metadata.name for p in pods_of(core, namespace, "spot") if p.spec.node_name in removed
        ]

    # Nothing evicts them at once: the pod garbage collector deletes pods bound to a node
    # that has been gone for its 40 s quarantine (checked every 20 s).
    assert on_removed_nodes(), "pods stay bound to a deleted node for a while"
    wait_for("pods on removed nodes deleted", lambda: not on_removed_nodes(), 150, every_s=1)
    gone_s = time.monotonic() - t0

    def all_pending() -> bool:
        pods = pods_of(core, namespace, "spot")
        return len(pods) == 4 and all(
            p.status.phase == "Pending" and not p.spec.node_name for p in pods
        )

    wait_for("4 replacement pods Pending", all_pending, 30)
    pending_s = time.monotonic() - t0
    assert ready_replicas(apps, namespace, "spot") == 0

    t1 = time.monotonic()
    nodes.add_nodes(kube_api, [rtx.node("rtx4090-new-0", 4), rtx.node("rtx4090-new-1", 2)])
    wait_for("4 ready replicas again", lambda: ready_replicas(apps, namespace, "spot") == 4, 60)
    back_s = time.monotonic() - t1
    assert {p.spec.node_name for p in pods_of(core, namespace, "spot")} <= {
        "rtx4090-new-0",
        "rtx4090-new-1",
    }
    print(
        f"\nPool rtx4090 removed: pods deleted by PodGC after {gone_s:.1f}s, replacements "
        f"Pending after {pending_s:.1f}s; 2 nodes added: all Ready after {back_s:.1f}s"
    )


# ---- the apiserver enforces CRD rules -----------------------------------------------------
CEL_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "celtests.example.gpufleet.dev"},
    "spec": {
        "group": "example.gpufleet.dev",
        "names": {"kind": "CelTest", "plural": "celtests", "singular": "celtest"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "minReplicas": {"type": "integer"},
                                    "maxReplicas": {"type": "integer"},
                                },
                                "x-kubernetes-validations": [
                                    {
                                        "rule": "self.minReplicas <= self.maxReplicas",
                                        "message": "minReplicas must not exceed maxReplicas",
                                    }
                                ],
                            }
                        },
                    }
                },
            }
        ],
    },
}


def test_crd_cel_rule_refuses_a_bad_object_with_its_message(kube_api: Any, namespace: str) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    try:
        ext.create_custom_resource_definition(CEL_CRD)
    except ApiException as exc:
        if exc.status != 409:
            raise

    def established() -> bool:
        crd = ext.read_custom_resource_definition(CEL_CRD["metadata"]["name"])
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    wait_for("CRD Established", established, 30)

    def create(name: str, lo: int, hi: int) -> Any:
        body = {
            "apiVersion": "example.gpufleet.dev/v1",
            "kind": "CelTest",
            "metadata": {"name": name},
            "spec": {"minReplicas": lo, "maxReplicas": hi},
        }
        return custom.create_namespaced_custom_object(
            "example.gpufleet.dev", "v1", namespace, "celtests", body
        )

    # Discovery of a brand-new CRD can lag a moment behind Established.
    wait_for("CRD served", lambda: _created(lambda: create("good", 1, 3)), 30)
    with pytest.raises(ApiException) as refused:
        create("bad", 5, 2)
    assert refused.value.status == 422
    assert "minReplicas must not exceed maxReplicas" in json.loads(refused.value.body)["message"]


def _created(make: Callable[[], Any]) -> bool:
    try:
        make()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


# ---- what the rest of the plane provides ---------------------------------------------------
def test_service_account_tokens_and_gateway_api_crds(plane: ControlPlane, kube_api: Any) -> None:
    token = plane.kubectl("create", "token", "default", "-n", "default").stdout.strip()
    assert token.count(".") == 2, "a signed JWT"
    crds = client.ApiextensionsV1Api(kube_api).list_custom_resource_definition().items
    names = {c.metadata.name for c in crds}
    assert {"gateways.gateway.networking.k8s.io", "httproutes.gateway.networking.k8s.io"} <= names


def test_garbage_collector_deletes_owned_objects(kube_api: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "child", "ownerReferences": [ref]}}
    )
    core.delete_namespaced_config_map("owner", namespace)

    def child_gone() -> bool:
        names = [c.metadata.name for c in core.list_namespaced_config_map(namespace).items]
        return "child" not in names

    wait_for("owned ConfigMap deleted", child_gone, 60)


def test_helm_is_the_v4_build() -> None:
    out = subprocess.run(
        [str(tools.helm()), "version", "--short"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("v4."), out.stdout


# ---- planes side by side, and nothing left behind ------------------------------------------
def test_second_plane_runs_beside_the_first_and_leaves_nothing(
    plane: ControlPlane, kube_api: Any
) -> None:
    second = ControlPlane()
    second.start()
    try:
        assert second.server != plane.server
        assert second.work_dir != plane.work_dir
        api = second.api_client()
        try:
            client.CoreV1Api(api).create_namespace({"metadata": {"name": "only-in-second"}})
            first_ns = {n.metadata.name for n in client.CoreV1Api(kube_api).list_namespace().items}
            assert "only-in-second" not in first_ns
            assert client.CoreV1Api(api).list_node().items == [], "nodes belong to one plane"
        finally:
            api.close()
        pids = list(second.pids.values())
        work_dir = second.work_dir
        print(f"\nSecond plane up in {second.timings['start_total_s']:.1f}s: {second.timings}")
    finally:
        second.stop()
    assert work_dir is not None and not work_dir.exists()
    assert [pid for pid in pids if alive(pid)] == []
    assert plane.running(), "stopping one plane leaves the other alone"


def test_cli_up_detach_status_down(tmp_path: Path) -> None:
    work = tmp_path / "plane"
    cli = [sys.executable, "-m", "gpufleet.commands.dev_cluster"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=240)

    up = run("up", "--detach", "--no-gateway-api", "--dir", str(work))
    try:
        assert up.returncode == 0, up.stderr
        assert f"export KUBECONFIG={work / 'kubeconfig'}" in up.stdout
        status = run("status", "--dir", str(work))
        assert status.returncode == 0 and "running" in status.stdout, status.stdout
        state = json.loads((work / "plane.json").read_text())
        probe = ControlPlane.from_state(work)
        nodes_out = probe.kubectl("get", "nodes", "-o", "name").stdout
        assert "node/h100-0" in nodes_out
    finally:
        down = run("down", "--dir", str(work))
    assert down.returncode == 0, down.stderr
    assert [pid for pid in state["pids"].values() if alive(pid)] == []
    assert run("status", "--dir", str(work)).returncode == 1
