"""The chart's RBAC, proved on a real apiserver: the real operator, run out of cluster with
a token of the chart's ServiceAccount, reconciles every example to Ready without a single
403 (cluster-wide, and confined to watchNamespaces), and `kubectl auth can-i` shows what
that account may not do.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.api.constants import CRD_NAME
from gpufleet.dev.cluster import ControlPlane
from gpufleet.dev.operator import OperatorProcess
from tests.harness import wait_pools_admitted
from tests.pools import EXAMPLES, ROOT
from tests.unit.chart.helm import CHART, Helm, find_helm

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

CLUSTER_WIDE = "gpufleet-rbac"  # contains the chart name, so it also names every object
NAMESPACED = "gpufleet-rbac-ns"
WATCHED = "gpufleet-rbac-watched"
POOL = "gpufleet.dev"
READY_TIMEOUT_S = 240
# Every 403 the apiserver sends carries reason Forbidden ("... is forbidden: User ...",
# Kopf's APIForbiddenError); a bare 403 that follows a comma is a log timestamp's
# milliseconds ("08:03:43,403 INFO"), not a refusal.
FORBIDDEN = re.compile(r"forbidden|(?<![,.:])\b403\b", re.IGNORECASE)


def wait_until(
    what: str, check: Callable[[], bool], timeout_s: float, why: Callable[[], str] = str
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1)
    raise AssertionError(f"{what}: not within {timeout_s:.0f}s\n{why()}")


def get(plane: ControlPlane, *args: str) -> dict[str, Any] | None:
    result = plane.kubectl("get", *args, "-o", "json", check=False)
    if result.returncode != 0:
        return None
    body: dict[str, Any] = json.loads(result.stdout)
    return body


# ---- the chart's ServiceAccount and RBAC ----------------------------------------------------
@dataclass
class Release:
    plane: ControlPlane
    name: str  # also the ServiceAccount's, the Lease's and the namespace's name
    kubeconfig: Path  # the ServiceAccount's token, nothing else

    def can_i(self, verb: str, resource: str, *args: str) -> bool:
        result = self.plane.kubectl(
            f"--kubeconfig={self.kubeconfig}", "auth", "can-i", verb, resource, *args, check=False
        )
        answer = result.stdout.strip()
        assert answer in ("yes", "no"), result.stderr
        return answer == "yes"


def service_account_kubeconfig(plane: ControlPlane, user: str, token: str, path: Path) -> Path:
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "plane", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": "plane", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@contextmanager
def chart_release(plane: ControlPlane, home: Path, name: str, *sets: str) -> Iterator[Release]:
    """The chart installed with its Deployment at 0 replicas (the operator runs here, out of
    cluster, as the chart's ServiceAccount) and without the CRD (applied as crds/ has it, as
    the other tests on the shared plane do)."""
    helm = Helm(find_helm(), home / "helm", plane.kubeconfig)
    values = ["replicaCount=0", "crds.enabled=false", *sets]
    helm.run(
        "install", name, str(CHART), "--namespace", name, "--create-namespace",
        *(arg for value in values for arg in ("--set", value)),
    )  # fmt: skip
    try:
        token = plane.kubectl("create", "token", name, "-n", name, "--duration=1h").stdout
        yield Release(
            plane, name, service_account_kubeconfig(plane, name, token.strip(), home / "kube")
        )
    finally:
        helm.run("uninstall", name, "-n", name, "--wait", check=False)
        plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
        wait_pools_admitted(plane)


@pytest.fixture(scope="module")
def crd(plane: ControlPlane) -> None:
    plane.kubectl("apply", "--server-side", "-f", str(ROOT / "crds" / f"{CRD_NAME}.yaml"))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")


@pytest.fixture(scope="module")
def release(
    plane: ControlPlane, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    with chart_release(plane, tmp_path_factory.mktemp("cluster-wide"), CLUSTER_WIDE) as r:
        yield r


@pytest.fixture(scope="module")
def watched(plane: ControlPlane) -> Iterator[str]:
    plane.kubectl("create", "namespace", WATCHED)
    yield WATCHED
    plane.kubectl("delete", "namespace", WATCHED, "--wait=false", check=False)
    wait_until(f"namespace {WATCHED} deleted", lambda: get(plane, "ns", WATCHED) is None, 90)


@pytest.fixture(scope="module")
def namespaced_release(
    plane: ControlPlane, crd: None, watched: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    home = tmp_path_factory.mktemp("namespaced")
    with chart_release(plane, home, NAMESPACED, f"watchNamespaces={{{watched}}}") as r:
        yield r


# ---- what the accounts may and may not do -------------------------------------------------
CANNOT = [
    ("get", "secrets", "-A"),
    ("list", "secrets", "-n", CLUSTER_WIDE),
    ("get", "configmaps", "-n", "kube-system"),
    ("create", "pods", "-n", "default"),
    ("delete", "pods", "-n", "default"),
    ("delete", f"inferencepools.{POOL}", "-n", "default"),
    ("create", f"inferencepools.{POOL}", "-n", "default"),
    ("update", "nodes"),
    ("delete", "nodes"),
    ("create", "clusterrolebindings"),
    ("create", "serviceaccounts/token", "-n", CLUSTER_WIDE),
    ("create", "leases.coordination.k8s.io", "-n", "kube-system"),
    ("update", "leases.coordination.k8s.io/kube-controller-manager", "-n", "kube-system"),
    ("update", "leases.coordination.k8s.io/someone-else", "-n", CLUSTER_WIDE),
    ("delete", "customresourcedefinitions"),
    ("deletecollection", "deployments.apps", "-n", "default"),
    ("list", "namespaces"),  # only Kopf confined to namespaces needs that
]
CAN = [
    ("patch", f"inferencepools.{POOL}", "--subresource=status", "-n", "default"),
    ("watch", f"inferencepools.{POOL}", "-A"),
    ("patch", "deployments.apps", "-n", "default"),
    ("delete", "deployments.apps", "-n", "default"),
    ("create", "services", "-n", "default"),
    ("create", "httproutes.gateway.networking.k8s.io", "-n", "default"),
    ("list", "pods", "-A"),
    ("patch", "pods", "-n", "default"),
    ("watch", "nodes"),
    ("create", "events", "-n", "default"),
    ("create", "leases.coordination.k8s.io", "-n", CLUSTER_WIDE),
    ("update", f"leases.coordination.k8s.io/{CLUSTER_WIDE}", "-n", CLUSTER_WIDE),
]


def ids(check: tuple[str, ...]) -> str:
    return " ".join(check[:2] + tuple(a for a in check[2:] if a.startswith("--sub")))


@pytest.mark.parametrize("check", CANNOT, ids=ids)
def test_service_account_cannot(check: tuple[str, ...], release: Release) -> None:
    assert not release.can_i(*check)


@pytest.mark.parametrize("check", CAN, ids=ids)
def test_service_account_can(check: tuple[str, ...], release: Release) -> None:
    assert release.can_i(*check)


def test_token_is_the_service_account(release: Release) -> None:
    result = release.plane.kubectl(
        f"--kubeconfig={release.kubeconfig}", "auth", "whoami", "-o", "json"
    )
    username = json.loads(result.stdout)["status"]["userInfo"]["username"]
    assert username == f"system:serviceaccount:{CLUSTER_WIDE}:{CLUSTER_WIDE}"


def test_watch_namespaces_confines_the_account(namespaced_release: Release, watched: str) -> None:
    can = namespaced_release.can_i
    assert can("patch", f"inferencepools.{POOL}", "--subresource=status", "-n", watched)
    assert can("create", "deployments.apps", "-n", watched)
    assert can("watch", "nodes")
    assert can("watch", "namespaces")
    assert not can("list", f"inferencepools.{POOL}", "-A")
    assert not can("create", "deployments.apps", "-n", "default")
    assert not can("list", "pods", "-n", "default")
    assert not can("get", "secrets", "-n", watched)


# ---- the real operator under those rights ------------------------------------------------
@dataclass
class Operator:
    process: OperatorProcess
    log: Path

    @property
    def alive(self) -> bool:
        return self.process.running

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def refusals(self) -> list[str]:
        return [line for line in self.text().splitlines() if FORBIDDEN.search(line)]


@contextmanager
def operator(release: Release, log: Path, *flags: str) -> Iterator[Operator]:
    """`gpufleet run` with leader election on the chart's Lease, as the chart's
    ServiceAccount (its kubeconfig holds nothing but that token)."""
    process = OperatorProcess(
        release.kubeconfig,
        log,
        *flags,
        "--leader-election",
        f"--lease-name={release.name}",
        f"--lease-namespace={release.name}",
        "--log-format=text",
    )
    running = Operator(process, log)

    def leader() -> str | None:
        lease = get(release.plane, "lease", release.name, "-n", release.name) or {}
        holder: str | None = (lease.get("spec") or {}).get("holderIdentity")
        return holder

    try:
        process.start()
        wait_until("the operator holds the chart's Lease", lambda: bool(leader()), 60, running.tail)
        yield running
    finally:
        process.stop()


def pool(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any] | None:
    return get(plane, f"inferencepools.{POOL}", name, "-n", namespace)


def ready(body: dict[str, Any] | None) -> bool:
    conditions = ((body or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def apply_and_wait_ready(
    plane: ControlPlane, running: Operator, namespace: str, paths: list[Path]
) -> dict[str, dict[str, Any]]:
    pools = {}
    for path in paths:
        plane.kubectl("apply", "-n", namespace, "-f", str(path))
        body = yaml.safe_load(path.read_text())
        pools[body["metadata"]["name"]] = body

    def describe() -> str:
        states = {
            n: ((pool(plane, namespace, n) or {}).get("status") or {}).get("conditions")
            for n in pools
        }
        return f"conditions: {json.dumps(states, indent=1)}\noperator log:\n{running.tail()}"

    wait_until(
        f"{', '.join(pools)} Ready=True",
        lambda: running.alive and all(ready(pool(plane, namespace, n)) for n in pools),
        READY_TIMEOUT_S,
        describe,
    )
    return pools


def delete_pools(plane: ControlPlane, namespace: str) -> None:
    """Delete the pools (no finalizer holds them) and wait until they are gone."""
    plane.kubectl(
        "delete", f"inferencepools.{POOL}", "--all", "-n", namespace, "--timeout=60s",
        check=False, timeout_s=90,
    )  # fmt: skip


def test_operator_reconciles_every_example_to_ready_without_a_403(
    release: Release, namespace: str, tmp_path: Path
) -> None:
    plane = release.plane
    with operator(release, tmp_path / "operator.log") as running:
        try:
            pools = apply_and_wait_ready(plane, running, namespace, EXAMPLES)
            for name, body in pools.items():
                live = pool(plane, namespace, name)
                assert live is not None
                assert live["status"]["observedGeneration"] == live["metadata"]["generation"]
                for tier in body["spec"]["tiers"]:
                    child = f"{name}-{tier['name']}"
                    deployment = get(plane, "deployment", child, "-n", namespace)
                    assert deployment is not None, f"Deployment {child} missing"
                    owners = [o["uid"] for o in deployment["metadata"]["ownerReferences"]]
                    assert owners == [live["metadata"]["uid"]]
                    assert get(plane, "service", child, "-n", namespace) is not None

            # A tier removed from a live pool: its Deployment goes (the delete RBAC allows).
            name, body = next((n, b) for n, b in pools.items() if len(b["spec"]["tiers"]) > 1)
            last = len(body["spec"]["tiers"]) - 1
            dropped = f"{name}-{body['spec']['tiers'][last]['name']}"
            plane.kubectl(
                "patch", f"inferencepools.{POOL}", name, "-n", namespace, "--type=json",
                "-p", json.dumps([{"op": "remove", "path": f"/spec/tiers/{last}"}]),
            )  # fmt: skip
            wait_until(
                f"Deployment {dropped} deleted after its tier was removed",
                lambda: get(plane, "deployment", dropped, "-n", namespace) is None,
                READY_TIMEOUT_S,
                running.tail,
            )
        finally:
            delete_pools(plane, namespace)
        assert running.alive, f"the operator exited:\n{running.tail()}"
        assert running.refusals() == [], "the operator was refused:\n" + "\n".join(
            running.refusals()[:20]
        )


def test_namespaced_operator_reconciles_its_namespace_only(
    namespaced_release: Release, watched: str, namespace: str, tmp_path: Path
) -> None:
    plane = namespaced_release.plane
    example = ROOT / "examples" / "batch-budget.yaml"
    name = yaml.safe_load(example.read_text())["metadata"]["name"]
    with operator(namespaced_release, tmp_path / "operator.log", f"--namespace={watched}") as op:
        try:
            plane.kubectl("apply", "-n", namespace, "-f", str(example))  # not watched
            apply_and_wait_ready(plane, op, watched, [example])
            assert get(plane, "deployment", f"{name}-rtx4090", "-n", watched) is not None
            elsewhere = pool(plane, namespace, name)
            assert elsewhere is not None
            assert not elsewhere.get("status"), "a pool outside watchNamespaces was reconciled"
            assert get(plane, "deployment", f"{name}-rtx4090", "-n", namespace) is None
        finally:
            delete_pools(plane, watched)
        assert op.alive, f"the operator exited:\n{op.tail()}"
        assert op.refusals() == [], "the operator was refused:\n" + "\n".join(op.refusals()[:20])
