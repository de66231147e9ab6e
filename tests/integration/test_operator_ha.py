"""Operator processes dying and competing: no duplicates, no orphans, one writer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpufleet.api.constants import GROUP, LABEL_POOL, PLURAL, VERSION
from tests.harness import OperatorProcess, create_pool, get_pool, wait_for
from tests.pools import pool

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def ready(api: Any, namespace: str, name: str) -> bool:
    found = get_pool(api, namespace, name)
    status = found.get("status", {})
    tiers = status.get("tiers", [])
    return bool(tiers) and all(t.get("readyReplicas") == t.get("desiredReplicas") for t in tiers)


def children(api: Any, namespace: str) -> list[tuple[str, str]]:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    found = [
        ("Deployment", d.metadata.name) for d in apps.list_namespaced_deployment(namespace).items
    ]
    found += [("Service", s.metadata.name) for s in core.list_namespaced_service(namespace).items]
    return sorted(found)


def delete_pools(api: Any, namespace: str, names: list[str]) -> None:
    custom = client.CustomObjectsApi(api)
    for name in names:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    wait_for(
        "pools to be deleted",
        lambda: (
            not custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
        ),
        60,
    )


def test_operator_killed_mid_reconcile_converges_without_duplicates(
    plane: Any, kube_api: Any, crd: None, namespace: str, tmp_path: Path
) -> None:
    names = [f"p{i}" for i in range(4)]
    first = OperatorProcess(
        plane.kubeconfig, tmp_path / "first.log", "--no-leader-election"
    ).start()
    for name in names:
        body = pool(name, namespace=namespace)
        body["spec"]["scaling"]["intervalSeconds"] = 5
        create_pool(kube_api, namespace, body)
    # Kill as soon as it has started writing children, before it can have finished.
    wait_for("the first child", lambda: children(kube_api, namespace), 30, 0.05)
    first.kill()
    partial = children(kube_api, namespace)

    second = OperatorProcess(
        plane.kubeconfig, tmp_path / "second.log", "--no-leader-election"
    ).start()
    try:
        for name in names:
            wait_for(
                f"{name} to converge after the restart",
                lambda n=name: ready(kube_api, namespace, n),
                90,
            )
        expected = sorted(
            (kind, f"{name}-{t}")
            for name in names
            for kind in ("Deployment", "Service")
            for t in ("h100", "rtx4090")
        )
        assert children(kube_api, namespace) == expected
        routes = client.CustomObjectsApi(kube_api).list_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", namespace, "httproutes"
        )["items"]
        assert sorted(r["metadata"]["name"] for r in routes) == names
        pods = client.CoreV1Api(kube_api).list_namespaced_pod(namespace).items
        per_tier = {}
        for p in pods:
            key = (p.metadata.labels[LABEL_POOL], p.metadata.labels["gpufleet.dev/tier"])
            per_tier[key] = per_tier.get(key, 0) + 1
        for name in names:
            status = get_pool(kube_api, namespace, name)["status"]
            for t in status["tiers"]:
                assert per_tier.get((name, t["name"]), 0) == t["desiredReplicas"]
        print(f"\nKilled after {len(partial)} of {len(expected)} children existed")
        delete_pools(kube_api, namespace, names)
    finally:
        second.stop()


def test_two_operators_only_the_leader_writes_and_the_other_takes_over(
    plane: Any, kube_api: Any, crd: None, namespace: str, tmp_path: Path
) -> None:
    lease = ["--leader-election", "--lease-namespace", namespace, "--lease-name", "gpufleet-test"]
    a = OperatorProcess(plane.kubeconfig, tmp_path / "a.log", *lease).start()
    wait_for("a to lead", lambda: a.metric("gpufleet_leader") == 1, 30)
    b = OperatorProcess(plane.kubeconfig, tmp_path / "b.log", *lease).start()
    try:
        body = pool("ha", namespace=namespace)
        body["spec"]["scaling"]["intervalSeconds"] = 5
        create_pool(kube_api, namespace, body)
        wait_for("ha to converge", lambda: ready(kube_api, namespace, "ha"), 90)
        time.sleep(6)
        assert a.pool_writes() > 0
        assert b.metric("gpufleet_leader") == 0
        assert b.metric("gpufleet_api_writes_total") == 0, "the standby wrote to the API"
        holder = client.CoordinationV1Api(kube_api).read_namespaced_lease(
            "gpufleet-test", namespace
        )
        assert holder.spec.holder_identity.endswith(str(a.proc.pid if a.proc else ""))

        a.kill()
        started = time.monotonic()
        wait_for("b to take over", lambda: b.metric("gpufleet_leader") == 1, 40)
        took = time.monotonic() - started
        client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "ha",
            [{"op": "replace", "path": "/spec/tiers/0/minReplicas", "value": 2}],
            _content_type="application/json-patch+json",
        )
        wait_for(
            "b to scale h100 to 2",
            lambda: (
                client.AppsV1Api(kube_api)
                .read_namespaced_deployment("ha-h100", namespace)
                .spec.replicas
                == 2
            ),
            30,
        )
        print(f"\nStandby took over {took:.1f}s after the leader was killed")
        delete_pools(kube_api, namespace, ["ha"])
    finally:
        a.stop()
        b.stop()
