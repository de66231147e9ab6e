"""The chart's pool admission policy on the real apiserver: a pool grants nothing its author
lacks. Users holding only some rights (impersonated) create pools; the apiserver refuses
what they could not have done themselves, or what the administrator's lists do not allow.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import wait_pools_admitted
from tests.pools import InvalidCase, load_example
from tests.unit.chart.helm import CHART, Helm, find_helm

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

RELEASE = "gpufleet-admission"
TENANT = "tenant-admission"
VALUES = [
    "replicaCount=0",
    "crds.enabled=false",
    "poolAdmission.allowedRegistries={registry.example.com/ml/}",
    "poolAdmission.allowedNodeSelectors={gpufleet.dev/accelerator=*}",
    "poolAdmission.allowedTolerations={nvidia.com/gpu:Exists::NoSchedule}",
]
# Who holds what in the tenant's namespace (besides creating InferencePools).
RIGHTS: dict[str, list[tuple[str, str, str]]] = {
    "alice": [],
    "bob": [("apps", "deployments", "")],
    "carol": [("apps", "deployments", ""), ("", "secrets", "hf-token")],
    "dave": [("apps", "deployments", ""), ("", "secrets", "hf-token"), ("", "pods", "")],
}


def rbac(user: str, rights: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [
        {"apiGroups": ["gpufleet.dev"], "resources": ["inferencepools"],
         "verbs": ["create", "get", "update", "patch"]},
    ]  # fmt: skip
    for group, resource, name in rights:
        verbs = ["get"] if resource == "secrets" else ["create"]
        rules.append(
            {"apiGroups": [group], "resources": [resource], "verbs": verbs,
             **({"resourceNames": [name]} if name else {})}
        )  # fmt: skip
    meta = {"name": user, "namespace": TENANT}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]  # fmt: skip


def create_as(plane: Any, user: str, changes: dict[str, Any]) -> tuple[bool, str]:
    """Whether the apiserver accepts the pool from `user` (a server-side dry run), and why."""
    body = InvalidCase("as", "", changes, []).apply(load_example())
    body["metadata"]["namespace"] = TENANT
    result = plane.kubectl(
        "create", "--dry-run=server", f"--as={user}", "-f", "-",
        input=yaml.safe_dump(body), check=False,
    )  # fmt: skip
    return result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def policy(plane: Any, crd: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = Path(tmp_path_factory.mktemp("admission"))
    helm = Helm(find_helm(), home / "helm", plane.kubeconfig)
    try:
        helm.run(
            "install", RELEASE, str(CHART), "--namespace", RELEASE, "--create-namespace",
            *(arg for value in VALUES for arg in ("--set", value)),
        )  # fmt: skip
        plane.kubectl("create", "namespace", TENANT)
        objects = [doc for user, rights in RIGHTS.items() for doc in rbac(user, rights)]
        plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
        # A new policy is enforced within a second or two.
        deadline = time.monotonic() + 30
        while create_as(plane, "alice", {})[0]:
            assert time.monotonic() < deadline, "the pool admission policy is not enforced"
            time.sleep(0.5)
        yield
    finally:
        helm.run("uninstall", RELEASE, "-n", RELEASE, "--wait", check=False)
        plane.kubectl("delete", "namespace", TENANT, RELEASE, "--wait=false", check=False)
        wait_pools_admitted(plane)


IMAGE = "spec.model.image"
CASES: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("pools-only", "alice", {}, "may not create Deployments in namespace"),
    ("secret-not-readable", "bob", {}, "may not get every Secret the env names (hf-token)"),
    ("all-rights-needed", "carol", {}, None),
    ("image-elsewhere", "carol", {IMAGE: "evil.example.com/vllm:1"}, "spec.model.image"),
    ("image-allowed", "carol", {IMAGE: "registry.example.com/ml/vllm:0.11"}, None),
    ("image-prefix-lookalike", "carol", {IMAGE: "registry.example.com/ml-x/v:1"}, IMAGE),
    (
        "toleration-of-everything",
        "carol",
        {"spec.tiers[0].tolerations": [{"operator": "Exists"}]},
        "spec.tiers[].tolerations: tier h100",
    ),
    (
        "node-picked-by-hostname",
        "carol",
        {"spec.tiers[1].nodeSelector": {"kubernetes.io/hostname": "rtx-1"}},
        "spec.tiers[].nodeSelector: tier rtx4090",
    ),
    (
        "trust-remote-code-without-pods",
        "carol",
        {"spec.model.extraArgs": ["--trust-remote-code"]},
        "--trust-remote-code runs any code",
    ),
    (
        "trust-remote-code-with-pods",
        "dave",
        {"spec.model.extraArgs": ["--trust-remote-code"]},
        None,
    ),
    (
        "token-without-token-rights",
        "dave",
        {"spec.pods": {"automountServiceAccountToken": True}},
        "spec.pods.automountServiceAccountToken",
    ),
]


@pytest.mark.parametrize(
    ("user", "changes", "refusal"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_pool_is_judged_by_its_authors_rights(
    user: str, changes: dict[str, Any], refusal: str | None, plane: Any, policy: None
) -> None:
    accepted, stderr = create_as(plane, user, changes)
    if refusal is None:
        assert accepted, stderr
    else:
        assert not accepted, f"{user} got a pool through: {changes}"
        assert refusal in stderr, stderr


def test_metadata_writes_and_status_pass_whoever_makes_them(plane: Any, policy: None) -> None:
    """Only a changed spec is judged: labelling a pool needs no Deployment rights."""
    accepted, stderr = create_as(plane, "carol", {})
    assert accepted, stderr
    body = load_example()
    body["metadata"]["namespace"] = TENANT
    plane.kubectl("create", "--as=carol", "-f", "-", input=yaml.safe_dump(body))
    plane.kubectl(
        "label", "--as=alice", "-n", TENANT, "inferencepools.gpufleet.dev",
        body["metadata"]["name"], "team=ml",
    )  # fmt: skip
    refused = plane.kubectl(
        "patch", "--as=alice", "-n", TENANT, "inferencepools.gpufleet.dev",
        body["metadata"]["name"], "--type=merge", "-p", '{"spec":{"model":{"extraArgs":[]}}}',
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "may not create Deployments" in refused.stderr
