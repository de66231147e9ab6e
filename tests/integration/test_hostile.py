"""Strange and hostile pools on the real plane with the real operator (issue 19).

Every failure is visible (a condition naming the cause, a Warning Event, a growing backoff,
an honest observedGeneration), nothing hangs (pool, namespace and CRD deletion with the
operator up or down, pools that still carry the finalizer of older versions), drift on any
child reverts at once, and the vLLM pods run under the restricted Pod Security level.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.api.constants import CRD_NAME, FINALIZER, GROUP, LABEL_POOL, PLURAL, VERSION
from tests.harness import (
    OperatorProcess,
    condition,
    create_pool,
    get_pool,
    install_crd,
    reason_of,
    wait_for,
)
from tests.pools import ACCEPTED, InvalidCase, load_example, pool, tier

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

INTERVAL = 5  # seconds between passes of the pools here
ROUTES = ("gateway.networking.k8s.io", "v1", "httproutes")


def small(name: str, namespace: str, interval: int = INTERVAL, **spec: Any) -> dict[str, Any]:
    """One H100 replica, no rtx4090 tier: quick to converge on the shared plane."""
    body = pool(
        name,
        namespace=namespace,
        tiers=[tier("h100", "H100-PCIe-80GB", minReplicas=1, maxReplicas=2)],
        **spec,
    )
    body["spec"]["trafficClasses"] = [
        {"name": "realtime", "ttftP99Milliseconds": 100,
         "match": {"headers": [{"name": "x-request-class", "value": "realtime"}]}},
        {"name": "batch", "ttftP99Milliseconds": 2000},
    ]  # fmt: skip
    body["spec"]["scaling"]["intervalSeconds"] = interval
    return body


def ready_at(api: Any, namespace: str, name: str, generation: int) -> dict[str, Any] | None:
    found = get_pool(api, namespace, name)
    status = found.get("status", {})
    ready = condition(found, "Ready")
    if status.get("observedGeneration") == generation and ready and ready["status"] == "True":
        return found
    return None


def events(api: Any, namespace: str, name: str) -> list[Any]:
    found = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return list(found.items)


def patch_pool(api: Any, namespace: str, name: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, body
    )


def failed_passes(process: OperatorProcess) -> float:
    return process.metric("gpufleet_reconcile_duration_seconds_count", result="failed")


# The tests that stop an operator come first: the module's running_operator starts with
# the first test that asks for it and would otherwise still run.
# ---- nothing hangs -----------------------------------------------------------------------
def gone(read: Any) -> bool:
    try:
        read()
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def children_of(api: Any, namespace: str, name: str) -> list[str]:
    selector = f"{LABEL_POOL}={name}"
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    found = [
        d.metadata.name
        for d in apps.list_namespaced_deployment(namespace, label_selector=selector).items
    ]
    found += [
        s.metadata.name
        for s in core.list_namespaced_service(namespace, label_selector=selector).items
    ]
    found += [
        p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector=selector).items
    ]
    return found  # fmt: skip


@pytest.fixture
def own_operator(plane: Any, crd: None, tmp_path: Path) -> Iterator[OperatorProcess]:
    """An operator of this test's own, which the test may stop."""
    process = OperatorProcess(plane.kubeconfig, tmp_path / "operator.log", "--no-leader-election")
    process.start()
    yield process
    process.stop()


@pytest.mark.parametrize("operator_up", [True, False], ids=["operator-up", "operator-down"])
def test_pool_and_namespace_deletion_complete(
    operator_up: bool, kube_api: Any, own_operator: OperatorProcess
) -> None:
    core, custom = client.CoreV1Api(kube_api), client.CustomObjectsApi(kube_api)
    ns = f"del-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    for name in ("one", "two"):
        create_pool(kube_api, ns, small(name, ns))
    wait_for("one Ready", lambda: ready_at(kube_api, ns, "one", 1), 60)
    wait_for("two Ready", lambda: ready_at(kube_api, ns, "two", 1), 60)
    assert not get_pool(kube_api, ns, "one")["metadata"].get("finalizers")
    if not operator_up:
        own_operator.stop()

    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "one")
    read = custom.get_namespaced_custom_object
    wait_for("pool one gone", lambda: gone(lambda: read(GROUP, VERSION, ns, PLURAL, "one")), 10)
    wait_for("one's children collected", lambda: not children_of(kube_api, ns, "one"), 60)
    core.delete_namespace(ns)
    wait_for(f"namespace {ns} gone", lambda: gone(lambda: core.read_namespace(ns)), 90)


@pytest.fixture
def fresh_crd(kube_api: Any, crd: None) -> Iterator[None]:
    """The session's CRD is deleted by the test: put it back for the tests after it."""
    yield
    ext = client.ApiextensionsV1Api(kube_api)
    wait_for(
        "the CRD gone", lambda: gone(lambda: ext.read_custom_resource_definition(CRD_NAME)), 90
    )
    install_crd(kube_api)


@pytest.mark.parametrize("operator_up", [True, False], ids=["operator-up", "operator-down"])
def test_crd_deletion_completes_even_for_pools_with_the_old_finalizer(
    operator_up: bool,
    kube_api: Any,
    plane: Any,
    own_operator: OperatorProcess,
    fresh_crd: None,
) -> None:
    core = client.CoreV1Api(kube_api)
    ext = client.ApiextensionsV1Api(kube_api)
    ns = f"crd-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    try:
        create_pool(kube_api, ns, small("served", ns))
        wait_for("served Ready", lambda: ready_at(kube_api, ns, "served", 1), 60)
        # A pool as gpufleet 0.1 left it: with its finalizer. The operator strips it.
        legacy = small("legacy", ns)
        legacy["metadata"]["finalizers"] = [FINALIZER]
        create_pool(kube_api, ns, legacy)
        wait_for(
            "the old finalizer removed",
            lambda: not get_pool(kube_api, ns, "legacy")["metadata"].get("finalizers"),
            30,
        )
        if not operator_up:
            own_operator.stop()
        ext.delete_custom_resource_definition(CRD_NAME)
        wait_for(
            "the CRD and every pool gone",
            lambda: gone(lambda: ext.read_custom_resource_definition(CRD_NAME)),
            60,
        )
        wait_for(
            "the pools' children collected",
            lambda: not children_of(kube_api, ns, "served") + children_of(kube_api, ns, "legacy"),
            60,
        )
        if operator_up:
            assert own_operator.running, own_operator.log_tail()
    finally:
        core.delete_namespace(ns)


def test_operator_removes_the_old_finalizer_on_resume(
    kube_api: Any, namespace: str, plane: Any, crd: None, tmp_path: Path
) -> None:
    legacy = small("upgraded", namespace)
    legacy["metadata"]["finalizers"] = [FINALIZER]
    create_pool(kube_api, namespace, legacy)  # no operator runs: as before an upgrade
    process = OperatorProcess(plane.kubeconfig, tmp_path / "op.log", "--no-leader-election")
    process.start()
    try:
        wait_for(
            "the old finalizer removed on resume",
            lambda: not get_pool(kube_api, namespace, "upgraded")["metadata"].get("finalizers"),
            30,
        )
        wait_for("upgraded Ready", lambda: ready_at(kube_api, namespace, "upgraded", 1), 60)
        annotations = get_pool(kube_api, namespace, "upgraded")["metadata"].get("annotations")
        assert not [k for k in annotations or {} if k.startswith(GROUP)], annotations
    finally:
        process.stop()
    print(json.dumps(process.log_tail(5)))


# ---- every failure visible ---------------------------------------------------------------
def deny_in_namespace(
    api: Any, namespace: str, rule: dict[str, Any], expression: str, message: str
) -> Callable[[], None]:
    """An administrator's ValidatingAdmissionPolicy bound to one namespace: what the CRD
    cannot know, the apiserver refuses when the operator applies a child. Returns its
    removal."""
    admission = client.AdmissionregistrationV1Api(api)
    name = f"deny-{rule['resources'][0]}-{namespace}"
    rule = {"apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], **rule}
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [{"expression": expression, "message": message}],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        }
    )

    def remove() -> None:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)

    return remove


def refused(create: Callable[[], Any]) -> bool:
    try:
        create()
    except ApiException as error:
        return error.status in (403, 422)
    return False


@pytest.fixture
def replicas_capped(kube_api: Any, namespace: str) -> Iterator[None]:
    """Deployments in the namespace may ask for one replica at most."""
    remove = deny_in_namespace(
        kube_api, namespace, {"apiGroups": ["apps"], "resources": ["deployments"]},
        "object.spec.replicas <= 1", "spec.replicas: at most 1 replica in this namespace",
    )  # fmt: skip
    probe = {
        "metadata": {"name": "probe"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {
                "metadata": {"labels": {"app": "probe"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    apps = client.AppsV1Api(kube_api)

    def create() -> Any:
        return apps.create_namespaced_deployment(namespace, probe, dry_run="All")

    wait_for("the replica cap to be enforced", lambda: refused(create), 30)
    yield
    remove()


@pytest.fixture
def hostnames_confined(kube_api: Any, namespace: str) -> Iterator[None]:
    """HTTPRoutes in the namespace may only claim hostnames under internal.example."""
    remove = deny_in_namespace(
        kube_api, namespace,
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["httproutes"]},
        "!has(object.spec.hostnames) "
        "|| object.spec.hostnames.all(h, h.endsWith('.internal.example'))",
        "spec.hostnames: only hostnames under internal.example in this namespace",
    )  # fmt: skip
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "probe"}, "spec": {"hostnames": ["x.example.com"]},
    }  # fmt: skip
    custom = client.CustomObjectsApi(kube_api)

    def create() -> Any:
        return custom.create_namespaced_custom_object(
            *ROUTES[:2], namespace, ROUTES[2], route, dry_run="All"
        )

    wait_for("the hostname rule to be enforced", lambda: refused(create), 30)
    yield
    remove()


def test_refused_route_quotes_the_apiserver_and_keeps_the_generation(
    kube_api: Any, namespace: str, running_operator: OperatorProcess, hostnames_confined: None
) -> None:
    body = small("claims", namespace)
    body["spec"]["routing"] = {"parentRefs": [{"name": "gw"}], "hostnames": ["login.example.com"]}
    create_pool(kube_api, namespace, body)

    refused = reason_of(kube_api, namespace, "claims", "RoutingApplied", "RouteApplyFailed")
    found, cond = wait_for("RoutingApplied=False RouteApplyFailed", refused, INTERVAL + 10)
    assert "spec.hostnames: only hostnames under" in cond["message"]
    assert "Unprocessable Entity" not in cond["message"]
    assert found["status"].get("observedGeneration", 0) == 0, "the route was not applied"
    # The tiers serve meanwhile, and a valid edit brings the route.
    patch_pool(
        kube_api,
        namespace,
        "claims",
        {"spec": {"routing": {"hostnames": ["llm.internal.example"]}}},
    )
    wait_for("claims Ready at generation 2", lambda: ready_at(kube_api, namespace, "claims", 2), 30)
    routing = condition(get_pool(kube_api, namespace, "claims"), "RoutingApplied")
    assert routing is not None and routing["status"] == "True"


def test_refused_child_is_visible_backs_off_and_recovers(
    kube_api: Any, namespace: str, running_operator: OperatorProcess, replicas_capped: None
) -> None:
    create_pool(kube_api, namespace, small("capped", namespace))
    wait_for("capped Ready", lambda: ready_at(kube_api, namespace, "capped", 1), 60)

    failed_before = failed_passes(running_operator)
    two = tier("h100", "H100-PCIe-80GB", minReplicas=2, maxReplicas=2)
    patch_pool(kube_api, namespace, "capped", {"spec": {"tiers": [two]}})

    # Within one interval: the condition names the cause, and the field.
    refused = reason_of(kube_api, namespace, "capped", "Ready", "ChildApplyFailed")
    found, ready = wait_for("Ready=False ChildApplyFailed", refused, INTERVAL + 5)
    assert ready["status"] == "False"
    assert "spec.replicas" in ready["message"] and "at most 1 replica" in ready["message"]
    assert found["metadata"]["generation"] == 2
    assert found["status"]["observedGeneration"] == 1, "generation 2 was not acted on"
    assert ready["observedGeneration"] == 2

    # No hot loop: over 25 s a 5 s retry would fail 5 times; the backoff (5, 10, 20 s) 3.
    time.sleep(25)
    failed = failed_passes(running_operator) - failed_before
    assert 1 <= failed <= 4, f"{failed} failed passes in 25 s"
    warnings = [e for e in events(kube_api, namespace, "capped") if e.reason == "ChildApplyFailed"]
    assert len(warnings) == 1 and warnings[0].type == "Warning"
    assert sum(e.count or 1 for e in warnings) == 1, "the failure was announced more than once"

    # A valid edit recovers at once, whatever the backoff.
    one = tier("h100", "H100-PCIe-80GB", minReplicas=1, maxReplicas=1)
    patch_pool(kube_api, namespace, "capped", {"spec": {"tiers": [one]}})
    wait_for("capped Ready at generation 3", lambda: ready_at(kube_api, namespace, "capped", 3), 15)


@pytest.mark.parametrize("case", list(ACCEPTED), ids=str)
def test_near_misses_of_the_new_rules_are_accepted(case: str, plane: Any, crd: None) -> None:
    body = InvalidCase(case, "", ACCEPTED[case], []).apply(load_example())
    body["metadata"]["namespace"] = "default"
    result = plane.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(body), check=False
    )
    assert result.returncode == 0, result.stderr


def test_tiers_nobody_measured_say_their_profile_is_derived(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    body = small("derived", namespace)
    body["spec"]["tiers"] = [
        tier("h200", "H200-SXM-141GB", minReplicas=1, maxReplicas=2),
        tier(
            "mi",
            "Custom",
            minReplicas=0,
            maxReplicas=1,
            gpu={
                "bf16TFLOPS": 1307,
                "memoryBandwidthGBps": 5300,
                "memoryGiB": 192,
                "boardPowerWatts": 750,
            },
        ),
    ]
    create_pool(kube_api, namespace, body)

    def profiles() -> dict[str, dict[str, Any]] | None:
        tiers = get_pool(kube_api, namespace, "derived").get("status", {}).get("tiers", [])
        seen = {t["name"]: t for t in tiers if "profileMeasured" in t}
        return seen if set(seen) == {"h200", "mi"} else None

    seen = wait_for("both tiers' profiles in status", profiles, INTERVAL + 30)
    for name, source in (("h200", "H100-PCIe-80GB"), ("mi", "H100-PCIe-80GB")):
        assert seen[name]["profileMeasured"] is False, seen[name]
        assert seen[name]["profile"].startswith("derived by gpufleet.perf from"), seen[name]
        assert source in seen[name]["profile"]
    assert "no runs of this GPU type: H100-PCIe's fitted efficiencies" in seen["mi"]["profile"]


def test_budget_below_min_replicas_says_so(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    body = small("poor", namespace)
    body["spec"]["tiers"][0].update(minReplicas=2, maxReplicas=3)
    body["spec"]["objectives"] = {"maxHourlyCost": "1.00"}
    create_pool(kube_api, namespace, body)

    degraded = reason_of(kube_api, namespace, "poor", "Degraded", "BudgetBelowMinReplicas")
    _, cond = wait_for("Degraded=True BudgetBelowMinReplicas", degraded, INTERVAL + 10)
    assert cond["status"] == "True" and "maxHourlyCost $1.00/h" in cond["message"]


def test_pods_refused_by_admission_name_the_refusal(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    client.CoreV1Api(kube_api).create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}
    )
    create_pool(kube_api, namespace, small("quota", namespace))

    refused = reason_of(kube_api, namespace, "quota", "Degraded", "PodsRefused")
    _, cond = wait_for("Degraded=True PodsRefused", refused, 60)
    assert "exceeded quota" in cond["message"], cond["message"]
    assert any(
        e.type == "Warning" and e.reason == "PodsRefused"
        for e in events(kube_api, namespace, "quota")
    )


def test_conflicting_tier_gets_no_created_event(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    client.CoreV1Api(kube_api).create_namespaced_service(
        namespace,
        {"metadata": {"name": "taken-h100"}, "spec": {"ports": [{"port": 80}]}},
    )
    create_pool(kube_api, namespace, small("taken", namespace))

    conflict = reason_of(kube_api, namespace, "taken", "Degraded", "ChildConflict")
    wait_for("Degraded=True ChildConflict", conflict, 30)
    time.sleep(2)  # Events follow the status write
    messages = [e.message for e in events(kube_api, namespace, "taken")]
    assert not [m for m in messages if "Created tier h100" in m], messages


# ---- drift on every child reverts at once -------------------------------------------------
def test_hand_edits_of_service_and_route_revert_at_once(
    kube_api: Any, namespace: str, running_operator: OperatorProcess
) -> None:
    # A long interval: only the watch can put the children back within seconds.
    body = small("drift", namespace, interval=600)
    body["spec"]["routing"] = {"parentRefs": [{"name": "gw"}]}
    create_pool(kube_api, namespace, body)
    wait_for("drift Ready", lambda: ready_at(kube_api, namespace, "drift", 1), 60)
    core, custom = client.CoreV1Api(kube_api), client.CustomObjectsApi(kube_api)

    core.patch_namespaced_service(
        "drift-h100", namespace, {"spec": {"selector": {"gpufleet.dev/tier": "hijacked"}}}
    )
    wait_for(
        "the Service's selector put back",
        lambda: (
            core.read_namespaced_service("drift-h100", namespace).spec.selector.get(
                "gpufleet.dev/tier"
            )
            == "h100"
        ),
        10,
    )

    route = custom.get_namespaced_custom_object(*ROUTES[:2], namespace, ROUTES[2], "drift")
    original = copy.deepcopy(route["spec"]["rules"])
    rules = copy.deepcopy(original)
    rules[0]["backendRefs"][0]["weight"] = 0
    custom.patch_namespaced_custom_object(
        *ROUTES[:2], namespace, ROUTES[2], "drift", {"spec": {"rules": rules}}
    )

    def route_restored() -> bool:
        live = custom.get_namespaced_custom_object(*ROUTES[:2], namespace, ROUTES[2], "drift")
        return [r["backendRefs"][0]["weight"] for r in live["spec"]["rules"]] == [
            r["backendRefs"][0]["weight"] for r in original
        ]

    wait_for("the HTTPRoute's weights put back", route_restored, 10)


# ---- Pod Security -------------------------------------------------------------------------
def test_restricted_namespace_admits_the_pods(
    kube_api: Any, running_operator: OperatorProcess
) -> None:
    core = client.CoreV1Api(kube_api)
    ns = f"restricted-{uuid.uuid4().hex[:6]}"
    core.create_namespace(
        {
            "metadata": {
                "name": ns,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            }
        }
    )
    try:
        # The level is enforced here: a pod with no securityContext is refused.
        bare = {"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        with pytest.raises(ApiException, match="violates PodSecurity"):
            core.create_namespaced_pod(ns, bare, dry_run="All")
        create_pool(kube_api, ns, small("secure", ns))
        found = wait_for("secure Ready", lambda: ready_at(kube_api, ns, "secure", 1), 90)
        degraded = condition(found, "Degraded")
        assert degraded is not None and degraded["status"] == "False", degraded
        [pod_] = core.list_namespaced_pod(ns, label_selector=f"{LABEL_POOL}=secure").items
        assert pod_.spec.automount_service_account_token is False
        assert not any(v.projected for v in pod_.spec.volumes or []), "a token was mounted"
    finally:
        core.delete_namespace(ns)


# The local plane's kwok plays these faults for these images (tests/cluster/kwok-stages.yaml).
@pytest.mark.parametrize(
    ("image", "reason", "words"),
    [
        ("fault.gpufleet.test/image-pull:1", "ImagePullFailed", "ImagePullBackOff"),
        ("fault.gpufleet.test/crash-loop:1", "CrashLooping", "CrashLoopBackOff"),
    ],
    ids=["image-pull", "crash-loop"],
)
def test_pod_faults_name_their_cause(
    image: str,
    reason: str,
    words: str,
    kube_api: Any,
    namespace: str,
    running_operator: OperatorProcess,
) -> None:
    body = small("faulty", namespace)
    body["spec"]["model"]["image"] = image
    create_pool(kube_api, namespace, body)

    degraded = reason_of(kube_api, namespace, "faulty", "Degraded", reason)
    _, cond = wait_for(f"Degraded=True {reason}", degraded, 60)
    assert cond["status"] == "True" and words in cond["message"], cond["message"]
    assert "h100: pod faulty-h100-" in cond["message"]
