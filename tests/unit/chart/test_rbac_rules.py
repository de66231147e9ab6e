"""The chart grants exactly what `gpufleet run` uses: this table is that contract.

Change it only together with the operator's API calls (tests/integration/test_rbac.py runs
the real operator under these rules and fails on a 403).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.chart.helm import NAMESPACE, Helm, documents, find, write_values

pytestmark = pytest.mark.timeout(30)

Grants = dict[tuple[str, str], set[str]]
# Children: applied server-side; deleted only when their tier leaves a pool (reconcile._prune).
CHILDREN = {"get", "list", "watch", "create", "patch", "update", "delete"}
READ = {"get", "list", "watch"}

NAMESPACED: Grants = {
    ("gpufleet.dev", "inferencepools"): {"get", "list", "watch", "patch"},
    ("gpufleet.dev", "inferencepools/status"): {"get", "patch"},
    ("gpufleet.dev", "inferencepools/finalizers"): {"update"},
    ("apps", "deployments"): CHILDREN,
    ("", "services"): CHILDREN,
    ("gateway.networking.k8s.io", "httproutes"): CHILDREN,
    # patch: the pod-deletion-cost annotation before a scale-down (gpufleet.scaledown).
    ("", "pods"): READ | {"patch"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
}
CLUSTER: Grants = {
    ("", "nodes"): READ,
    ("apiextensions.k8s.io", "customresourcedefinitions"): READ,
}
# Only with watchNamespaces: Kopf lists and watches namespaces when not cluster-wide.
NAMESPACE_DISCOVERY: Grants = {("", "namespaces"): {"list", "watch"}}
LEASE: Grants = {("coordination.k8s.io", "leases"): {"create", "get", "update", "patch"}}


def grants(rules: Iterable[dict[str, Any]]) -> Grants:
    out: Grants = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def render(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> list[dict[str, Any]]:
    return documents(helm.template(write_values(tmp_path / "values.yaml", values)))


def test_cluster_wide_by_default(helm: Helm, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {})
    assert grants(find(docs, "ClusterRole")["rules"]) == CLUSTER | NAMESPACED
    binding = find(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == find(docs, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpufleet", "namespace": NAMESPACE}
    ]


def test_watch_namespaces_confines_pool_rights_to_roles(helm: Helm, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"watchNamespaces": ["llm", "batch"]})
    assert grants(find(docs, "ClusterRole")["rules"]) == CLUSTER | NAMESPACE_DISCOVERY
    pool_roles = [
        d for d in docs if d["kind"] == "Role" and not d["metadata"]["name"].endswith("election")
    ]
    assert sorted(r["metadata"]["namespace"] for r in pool_roles) == ["batch", "llm"]
    for role in pool_roles:
        assert grants(role["rules"]) == NAMESPACED
    bindings = [
        d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == "gpufleet"
    ]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["batch", "llm"]
    for binding in bindings:
        assert binding["subjects"][0] == {
            "kind": "ServiceAccount",
            "name": "gpufleet",
            "namespace": NAMESPACE,
        }


def test_lease_role_is_limited_to_the_release_namespace_and_its_lease(
    helm: Helm, tmp_path: Path
) -> None:
    docs = render(helm, tmp_path, {})
    role = find(docs, "Role", "gpufleet-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role["rules"]) == LEASE
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["gpufleet"],
            "verbs": ["get", "update", "patch"],
        }
    ]
    args = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--lease-name=gpufleet" in args
    find(docs, "RoleBinding", "gpufleet-leader-election")


def test_sharded_replicas_may_list_and_keep_the_shard_leases_in_the_release_namespace(
    helm: Helm, tmp_path: Path
) -> None:
    docs = render(helm, tmp_path, {"replicaCount": 3, "sharding": {"shards": 4}})
    role = find(docs, "Role", "gpufleet-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    unnamed = [r for r in role["rules"] if not r.get("resourceNames")]
    assert {v for r in unnamed for v in r["verbs"]} == {"create", "get", "list", "update", "delete"}
    assert all(r["resources"] == ["leases"] for r in role["rules"])
    assert not [d for d in docs if d["kind"] == "ClusterRole" and "leases" in str(d["rules"])]


def test_no_lease_rights_without_leader_election(helm: Helm, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"replicaCount": 1, "leaderElection": {"enabled": False}})
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]


@pytest.mark.parametrize(
    "values", [{}, {"watchNamespaces": ["llm"]}], ids=["cluster-wide", "namespaced"]
)
def test_never_secrets_configmaps_wildcards_or_dangerous_verbs(
    values: dict[str, Any], helm: Helm, tmp_path: Path
) -> None:
    docs = render(helm, tmp_path, values)
    rules = [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]
    assert rules
    for rule in rules:
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"]
        assert not {"secrets", "configmaps"} & set(rule["resources"])
        assert not {"deletecollection", "escalate", "bind", "impersonate"} & set(rule["verbs"])
        if "delete" in rule["verbs"]:
            assert set(rule["resources"]) <= {"deployments", "services", "httproutes"}


def test_rbac_create_false_renders_no_rbac(helm: Helm, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"rbac": {"create": False}, "serviceAccount": {"create": False}})
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert "ServiceAccount" not in kinds
    pod = find(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "default"
