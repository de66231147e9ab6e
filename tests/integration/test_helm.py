"""`helm install`, `helm upgrade` and `helm uninstall` of charts/gpufleet on a real apiserver.

The chart's operator pods never really run here (kwok plays kubelets, and this plane has no
nodes): the tests check the API objects a user would look at. Uninstalling with
crds.keep=false deletes the CRD, so this module starts its own control plane rather than
pulling the shared one's CRD away from other tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.api.constants import CRD_NAME
from gpufleet.dev.cluster import ControlPlane
from gpufleet.dev.operator import OperatorProcess
from tests.pools import ROOT
from tests.unit.chart.helm import CHART, Helm, find_helm

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

RELEASE = "gpufleet"
NAMESPACE = "gpufleet-system"
POOLS_NAMESPACE = "llm"
EXAMPLE = ROOT / "examples" / "llama3-8b-mixed.yaml"


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout_s:.0f}s")


@pytest.fixture(scope="module")
def own_plane() -> Iterator[ControlPlane]:
    with ControlPlane() as cp:
        yield cp


@pytest.fixture(scope="module")
def helm(own_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(find_helm(), tmp_path_factory.mktemp("helm-home"), own_plane.kubeconfig)


@pytest.fixture
def pools_namespace(own_plane: ControlPlane) -> Iterator[str]:
    own_plane.kubectl("create", "namespace", POOLS_NAMESPACE)
    yield POOLS_NAMESPACE
    own_plane.kubectl("delete", "namespace", POOLS_NAMESPACE, "--wait=false", check=False)
    wait_until(
        f"namespace {POOLS_NAMESPACE} deleted",
        lambda: not exists(own_plane, "namespace", POOLS_NAMESPACE),
        timeout_s=90,
    )


def get(plane: ControlPlane, *args: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(plane.kubectl("get", *args, "-o", "json").stdout)
    return body


def exists(plane: ControlPlane, *args: str) -> bool:
    return plane.kubectl("get", *args, check=False).returncode == 0


def install(helm: Helm, chart: Path = CHART, *sets: str, command: str = "install") -> None:
    args = [command, RELEASE, str(chart), "--namespace", NAMESPACE]
    if command == "install":
        args.append("--create-namespace")
    # No image runs on this plane; a fixed tag keeps the objects deterministic.
    helm.run(*args, "--set", "image.tag=test", *(a for s in sets for a in ("--set", s)))


def apply_example(plane: ControlPlane, namespace: str) -> None:
    plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))


def chart_with_extra_printer_column(tmp_path: Path) -> Path:
    """A copy of the chart whose CRD shows one more column, as a new release's CRD would."""
    chart = tmp_path / "gpufleet"
    shutil.copytree(CHART, chart)
    crd = chart / "templates" / "crd.yaml"
    text = crd.read_text()
    anchor = "    additionalPrinterColumns:\n"
    assert text.count(anchor) == 1
    column = (
        "    - name: Model\n"
        "      type: string\n"
        "      jsonPath: .spec.model.servedModelName\n"
        "      description: The name clients put in the request's model field.\n"
    )
    crd.write_text(text.replace(anchor, anchor + column))
    return chart


def wait_for_garbage_collector(plane: ControlPlane, namespace: str) -> None:
    """Until the garbage collector watches InferencePools (it picks up a new CRD at its next
    discovery, up to 30 s later), it misses a pool's deletion and keeps its dependents: a
    race of a CRD installed seconds ago, which a probe pool and a ConfigMap it owns rule out."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] = {"name": "gc-probe", "namespace": namespace}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
        uid = get(plane, "inferencepools.gpufleet.dev", "gc-probe", "-n", namespace)["metadata"][
            "uid"
        ]
        owned = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "gc-probe", "namespace": namespace, "ownerReferences": [
                {"apiVersion": "gpufleet.dev/v1alpha1", "kind": "InferencePool",
                 "name": "gc-probe", "uid": uid}]},
        }  # fmt: skip
        plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(owned))
        plane.kubectl("delete", "inferencepools.gpufleet.dev", "gc-probe", "-n", namespace)
        collected = time.monotonic() + 5
        while time.monotonic() < collected:
            if not exists(plane, "configmap", "gc-probe", "-n", namespace):
                return
            time.sleep(0.5)
        plane.kubectl("delete", "configmap", "gc-probe", "-n", namespace, check=False)
    raise AssertionError("the garbage collector never collected a pool's dependent")


def printer_columns(plane: ControlPlane) -> list[str]:
    version = get(plane, "crd", CRD_NAME)["spec"]["versions"][0]
    return [c["name"] for c in version["additionalPrinterColumns"]]


def test_install_upgrade_and_uninstall_keeping_the_pools(
    own_plane: ControlPlane, helm: Helm, pools_namespace: str, tmp_path: Path
) -> None:
    install(helm)

    crd = get(own_plane, "crd", CRD_NAME)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    own_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
    deployment = get(own_plane, "deployment", RELEASE, "-n", NAMESPACE)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == RELEASE
    for kind, name in [
        ("serviceaccount", RELEASE),
        ("service", f"{RELEASE}-metrics"),
        ("role", f"{RELEASE}-leader-election"),
        ("rolebinding", f"{RELEASE}-leader-election"),
    ]:
        assert exists(own_plane, kind, name, "-n", NAMESPACE), f"{kind}/{name} missing"
    for kind in ("clusterrole", "clusterrolebinding"):
        assert exists(own_plane, kind, RELEASE), f"{kind}/{RELEASE} missing"
    status = json.loads(helm.run("status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    assert "kubectl get gpool -A" in status["info"]["notes"]

    apply_example(own_plane, pools_namespace)
    listing = own_plane.kubectl("get", "gpool", "-A").stdout
    assert "llama3-8b" in listing
    assert "MODEL" not in listing.splitlines()[0]

    # A release with a changed CRD: `helm upgrade` applies it (a chart's crds/ would not).
    install(helm, chart_with_extra_printer_column(tmp_path), command="upgrade")
    assert "Model" in printer_columns(own_plane)
    wait_until(
        "kubectl get gpool shows the new column",
        lambda: "MODEL" in own_plane.kubectl("get", "gpool", "-n", pools_namespace).stdout,
    )
    assert "llama3-8b" in own_plane.kubectl("get", "gpool", "-n", pools_namespace).stdout

    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
    assert not exists(own_plane, "deployment", RELEASE, "-n", NAMESPACE)
    assert not exists(own_plane, "clusterrole", RELEASE)
    assert exists(own_plane, "crd", CRD_NAME), "crds.keep=true must leave the CRD"
    pool = get(own_plane, "inferencepools.gpufleet.dev", "llama3-8b", "-n", pools_namespace)
    assert pool["spec"]["model"]["servedModelName"] == "llama3-8b"


def test_uninstall_without_keep_removes_the_crd_and_the_pools(
    own_plane: ControlPlane, helm: Helm, pools_namespace: str, tmp_path: Path
) -> None:
    # Adopts a CRD an earlier release of the same name kept, or installs it afresh.
    install(helm, CHART, "crds.keep=false")
    crd = get(own_plane, "crd", CRD_NAME)
    assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})
    own_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
    wait_for_garbage_collector(own_plane, pools_namespace)
    # A real operator (out of cluster: no image runs here) gives the pool its children.
    operator = OperatorProcess(own_plane.kubeconfig, tmp_path / "op.log", "--no-leader-election")
    operator.start()
    try:
        apply_example(own_plane, pools_namespace)
        assert exists(own_plane, "inferencepools.gpufleet.dev", "llama3-8b", "-n", pools_namespace)
        wait_until(
            "the pool's Deployment",
            lambda: exists(own_plane, "deployment", "llama3-8b-h100", "-n", pools_namespace),
        )
        helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
        wait_until("the CRD is deleted", lambda: not exists(own_plane, "crd", CRD_NAME), 90)
        wait_until(
            "the pool's children collected",
            lambda: (
                not [
                    line
                    for kind in ("deployments", "services", "httproutes.gateway.networking.k8s.io")
                    for line in own_plane.kubectl(
                        "get", kind, "-n", pools_namespace, "-o", "name", check=False
                    ).stdout.split()
                ]
            ),
            90,
        )
        assert operator.running, operator.log_tail()
    finally:
        operator.stop()
    assert not exists(own_plane, "deployment", RELEASE, "-n", NAMESPACE)
    assert not exists(own_plane, "validatingadmissionpolicy", f"{RELEASE}-pools")
    result = own_plane.kubectl("get", "inferencepools.gpufleet.dev", "-A", check=False)
    assert result.returncode != 0
    assert "the server doesn't have a resource type" in result.stderr


# The Prometheus Operator release whose PodMonitor CRD checks the chart's, from the Go module
# cache (never a copy in git).
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
PODMONITOR_CRD = "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml"


@pytest.fixture(scope="module")
def podmonitor_crd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("gomod")
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-mod=mod"}
    found = subprocess.run(
        ["go", "mod", "download", "-json", PROMETHEUS_OPERATOR],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    path = Path(json.loads(found.stdout)["Dir"]) / PODMONITOR_CRD
    assert path.is_file(), f"{PODMONITOR_CRD} not in {PROMETHEUS_OPERATOR}"
    return path


def kept_whole(sent: Any, stored: Any) -> bool:
    """Whether every field of `sent` is in `stored` with the same value."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and kept_whole(v, stored[k]) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(sent) == len(stored)
            and all(kept_whole(a, b) for a, b in zip(sent, stored, strict=True))
        )
    return bool(sent == stored)


def test_the_vllm_pod_monitor_is_a_valid_podmonitor_at_the_operator_s_interval(
    own_plane: ControlPlane, helm: Helm, podmonitor_crd: Path, pools_namespace: str
) -> None:
    """The apiserver, with the Prometheus Operator's CRD, takes the chart's PodMonitor for
    the vLLM pods whole: every field survives (a structural schema prunes unknown ones)."""
    own_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(podmonitor_crd))
    own_plane.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/podmonitors.monitoring.coreos.com",
    )
    install(
        helm,
        CHART,
        "prometheus.vllmPodMonitor.enabled=true",
        "prometheus.scrapeIntervalSeconds=5",
        f"watchNamespaces={{{pools_namespace}}}",
    )
    try:
        monitor = get(own_plane, "podmonitor", f"{RELEASE}-vllm", "-n", NAMESPACE)
        rendered = next(
            d
            for d in yaml.safe_load_all(
                helm.run("get", "manifest", RELEASE, "-n", NAMESPACE).stdout
            )
            if d and d.get("kind") == "PodMonitor"
        )
        # Every rendered field is kept (the CRD's defaults, such as action: replace, added).
        assert kept_whole(rendered["spec"], monitor["spec"])
        assert monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][1]["action"] == "replace"
        endpoint = monitor["spec"]["podMetricsEndpoints"][0]
        assert endpoint["interval"] == "5s"
        assert endpoint["port"] == "http"
        assert [r.get("targetLabel") for r in endpoint["relabelings"]] == [None, "namespace", "pod"]
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [pools_namespace]}
    finally:
        helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")
    assert not exists(own_plane, "podmonitor", f"{RELEASE}-vllm", "-n", NAMESPACE)
