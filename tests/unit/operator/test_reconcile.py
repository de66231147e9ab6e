"""The reconcile pass against an in-memory Kubernetes: idempotent, careful, explainable."""

from datetime import UTC, datetime
from typing import Any

import pytest

from gpufleet import reconcile as reconcile_module
from gpufleet.api.conditions import find
from gpufleet.api.status import InferencePoolStatus
from gpufleet.reconcile import NoMetrics, Reconciler
from tests.fakes import FakeKube
from tests.planners import minimum_plan
from tests.pools import load_example

pytestmark = pytest.mark.timeout(2)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def setup(**kube_options: Any) -> tuple[FakeKube, Reconciler]:
    kube = FakeKube(**kube_options)
    reconciler = Reconciler(kube, NoMetrics(), minimum_plan, kube.telemetry, lambda: NOW)
    kube.add_pool(load_example())
    return kube, reconciler


def run(kube: FakeKube, reconciler: Reconciler) -> Any:
    body = kube.get_pool("default", "llama3-8b")
    assert body is not None
    return reconciler.reconcile(body)


def status(kube: FakeKube) -> InferencePoolStatus:
    return InferencePoolStatus.model_validate(kube.pools[("default", "llama3-8b")]["status"])


def test_first_pass_creates_children_status_and_events() -> None:
    kube, reconciler = setup()
    result = run(kube, reconciler)
    ready = find(status(kube).conditions, "Ready")
    assert ready is not None and (ready.status, ready.reason) == ("False", "NoReadyReplicas")
    assert sorted(result.applied) == [
        "Deployment llama3-8b-h100",
        "Deployment llama3-8b-rtx4090",
        "HTTPRoute llama3-8b",
        "Service llama3-8b-h100",
        "Service llama3-8b-rtx4090",
    ]
    assert any("Created tier h100" in message for _, _, message in kube.events)
    run(kube, reconciler)  # the next pass sees the replicas the first one asked for
    s = status(kube)
    assert s.observed_generation == 1
    assert [(t.name, t.desired_replicas) for t in s.tiers] == [("h100", 1), ("rtx4090", 0)]
    ready = find(s.conditions, "Ready")
    assert ready is not None and ready.status == "True"
    metrics = find(s.conditions, "MetricsAvailable")
    assert metrics is not None and metrics.status == "False"
    assert s.tier_summary == "h100:1/1 rtx4090:0/0"


def test_pass_over_an_unchanged_world_writes_nothing() -> None:
    kube, reconciler = setup()
    run(kube, reconciler)
    run(kube, reconciler)
    before = len(kube.writes)
    registry = reconciler.telemetry.registry

    def skipped(resource: str) -> float:
        name = "gpufleet_api_writes_skipped_total"
        return registry.get_sample_value(name, {"resource": resource}) or 0.0

    counts = {r: skipped(r) for r in ("deployments", "services", "status")}
    result = run(kube, reconciler)
    assert kube.writes[before:] == []
    assert not result.status_written
    # Each child and the status counted as skipped once: 2 tiers' Deployment and Service.
    after = {r: skipped(r) for r in counts}
    assert after == {"deployments": counts["deployments"] + 2, "services": counts["services"] + 2,
                     "status": counts["status"] + 1}  # fmt: skip


def test_hand_edited_deployment_is_put_back() -> None:
    kube, reconciler = setup()
    run(kube, reconciler)
    run(kube, reconciler)
    kube.objects[("Deployment", "default", "llama3-8b-h100")]["spec"]["replicas"] = 5
    result = run(kube, reconciler)
    assert result.applied == ("Deployment llama3-8b-h100",)
    assert result.resized == {"h100"}  # what the queue watch is told the pass changed
    assert kube.objects[("Deployment", "default", "llama3-8b-h100")]["spec"]["replicas"] == 1
    assert run(kube, reconciler).resized == frozenset()


def test_removed_tier_is_pruned_but_foreign_objects_are_left() -> None:
    kube, reconciler = setup()
    run(kube, reconciler)
    kube.put(
        {
            "kind": "Deployment",
            "metadata": {
                "name": "someone-elses",
                "namespace": "default",
                "labels": {"gpufleet.dev/pool": "llama3-8b", "gpufleet.dev/tier": "x"},
            },
            "spec": {"replicas": 1},
        }
    )
    body = kube.pools[("default", "llama3-8b")]
    body["spec"]["tiers"] = body["spec"]["tiers"][:1]
    body["spec"]["trafficClasses"][1]["name"] = "batch"
    result = run(kube, reconciler)
    assert sorted(result.deleted) == ["Deployment llama3-8b-rtx4090", "Service llama3-8b-rtx4090"]
    assert ("Deployment", "default", "someone-elses") in kube.objects


def test_existing_object_with_a_childs_name_is_never_taken_over() -> None:
    kube, reconciler = setup()
    kube.put(
        {
            "kind": "Service",
            "metadata": {"name": "llama3-8b-h100", "namespace": "default"},
            "spec": {},
        }
    )
    result = run(kube, reconciler)
    assert "Service llama3-8b-h100" not in result.applied
    assert kube.objects[("Service", "default", "llama3-8b-h100")]["spec"] == {}
    degraded = find(status(kube).conditions, "Degraded")
    assert degraded is not None and degraded.status == "True"
    assert degraded.reason == "ChildConflict"
    assert "Service llama3-8b-h100" in degraded.message


def test_without_gateway_api_the_pool_serves_and_says_routing_is_not_applied() -> None:
    kube, reconciler = setup(gateway=False)
    result = run(kube, reconciler)
    assert "HTTPRoute llama3-8b" not in result.applied
    routing = find(status(kube).conditions, "RoutingApplied")
    assert routing is not None and (routing.status, routing.reason) == (
        "False",
        "GatewayAPIMissing",
    )
    assert "Deployment llama3-8b-h100" in result.applied


def test_invalid_object_gets_a_condition_and_nothing_else() -> None:
    kube, reconciler = setup()
    kube.pools[("default", "llama3-8b")]["spec"]["tiers"][0]["minReplicas"] = 99
    result = run(kube, reconciler)
    assert result.applied == ()
    ready = find(status(kube).conditions, "Ready")
    assert ready is not None and ready.reason == "InvalidSpec"
    assert "minReplicas" in ready.message
    assert [e[1] for e in kube.events] == ["InvalidSpec"]
    before = len(kube.writes)
    run(kube, reconciler)
    assert kube.writes[before:] == [], "an invalid object is reported once, not every pass"


def test_unschedulable_replicas_are_counted() -> None:
    kube, reconciler = setup()
    kube.unschedulable["h100"] = 1
    run(kube, reconciler)
    run(kube, reconciler)
    h100 = status(kube).tiers[0]
    assert (h100.desired_replicas, h100.ready_replicas, h100.unschedulable_replicas) == (1, 0, 1)
    ready = find(status(kube).conditions, "Ready")
    assert ready is not None and ready.status == "False"


def refusal(message: str, status: int = 422) -> Any:
    import json

    from kubernetes.client.exceptions import ApiException

    error = ApiException(status=status, reason="Unprocessable Entity")
    error.body = json.dumps({"kind": "Status", "message": message})
    return error


ENV_REFUSED = (
    'Deployment.apps "llama3-8b-h100" is invalid: spec.template.spec.containers[0].env[1].name:'
    ' Invalid value: "A=B": a valid environment variable name must consist of ...'
)


def test_refused_child_is_a_condition_an_event_and_a_failure_not_a_new_generation() -> None:
    kube, reconciler = setup()
    run(kube, reconciler)
    run(kube, reconciler)
    assert status(kube).observed_generation == 1
    body = kube.pools[("default", "llama3-8b")]
    body["metadata"]["generation"] = 2
    body["spec"]["tiers"][0]["minReplicas"] = 2
    body["spec"]["tiers"][1]["minReplicas"] = 2
    kube.refuse["Deployment llama3-8b-h100"] = refusal(ENV_REFUSED)
    result = run(kube, reconciler)
    assert result.failure == "ChildApplyFailed"
    ready = find(status(kube).conditions, "Ready")
    assert ready is not None and (ready.status, ready.reason) == ("False", "ChildApplyFailed")
    assert "spec.template.spec.containers[0].env[1].name" in ready.message
    assert ready.observed_generation == 2
    assert status(kube).observed_generation == 1, "generation 2 was not acted on"
    # The tier the apiserver took is applied; the route is not touched.
    assert result.applied == ("Deployment llama3-8b-rtx4090",)
    assert [e[:2] for e in kube.events[-1:]] == [("Warning", "ChildApplyFailed")]
    before = len(kube.writes)
    again = run(kube, reconciler)
    assert again.failure == "ChildApplyFailed"
    assert kube.writes[before:] == [], "a failure is reported once, not every retry"
    # The cause goes away: the next pass acts on generation 2.
    del kube.refuse["Deployment llama3-8b-h100"]
    run(kube, reconciler)
    assert status(kube).observed_generation == 2
    ready = find(status(kube).conditions, "Ready")
    assert ready is not None and ready.reason != "ChildApplyFailed"


def test_api_outage_is_raised_for_the_loop_to_retry() -> None:
    kube, reconciler = setup()
    kube.refuse["Service llama3-8b-h100"] = refusal("etcd timeout", status=500)
    with pytest.raises(Exception, match="500"):
        run(kube, reconciler)


def test_refused_route_keeps_the_generation_and_quotes_the_apiserver() -> None:
    kube, reconciler = setup()
    kube.refuse["HTTPRoute llama3-8b"] = refusal(
        'HTTPRoute.gateway.networking.k8s.io "llama3-8b" is invalid: spec.hostnames[0]: ...'
    )
    result = run(kube, reconciler)
    assert result.failure == "RouteApplyFailed"
    routing = find(status(kube).conditions, "RoutingApplied")
    assert routing is not None and routing.reason == "RouteApplyFailed"
    assert "spec.hostnames[0]" in routing.message
    assert status(kube).observed_generation == 0
    assert status(kube).tiers, "the tiers were acted on and their status is written"


def test_planner_that_raises_is_plan_failed_and_changes_nothing() -> None:
    kube = FakeKube()

    def broken(*_: Any) -> Any:
        raise ValueError("math domain error")

    reconciler = Reconciler(kube, NoMetrics(), broken, kube.telemetry, lambda: NOW)
    kube.add_pool(load_example())
    result = run(kube, reconciler)
    assert result.failure == "PlanFailed"
    assert result.applied == ()
    ready = find(status(kube).conditions, "Ready")
    assert ready is not None and ready.reason == "PlanFailed"
    assert "math domain error" in ready.message
    assert [e[:2] for e in kube.events] == [("Warning", "PlanFailed")]


def test_no_created_tier_event_for_a_tier_whose_name_is_taken() -> None:
    kube, reconciler = setup()
    kube.put({"kind": "Deployment", "metadata": {"name": "llama3-8b-h100", "namespace": "default"}})
    run(kube, reconciler)
    assert not any("Created tier h100" in message for _, _, message in kube.events)
    assert any(reason == "ChildConflict" for _, reason, _ in kube.events)


def test_budget_below_min_replicas_is_degraded() -> None:
    kube, reconciler = setup()
    body = kube.pools[("default", "llama3-8b")]
    body["spec"]["tiers"][0]["minReplicas"] = 3
    body["spec"]["objectives"]["maxHourlyCost"] = "1.00"
    run(kube, reconciler)
    degraded = find(status(kube).conditions, "Degraded")
    assert degraded is not None and (degraded.status, degraded.reason) == (
        "True",
        "BudgetBelowMinReplicas",
    )
    assert "maxHourlyCost $1.00/h" in degraded.message


def test_an_early_pass_says_why_in_its_decision() -> None:
    kube, reconciler = setup()
    body = kube.get_pool("default", "llama3-8b")
    assert body is not None
    reconciler.reconcile(body, early="12 requests waiting on h100 (0 at the last pass)")
    decision = status(kube).last_decision
    assert decision is not None
    assert decision.message.startswith(
        "Early pass, 12 requests waiting on h100 (0 at the last pass): "
    )


def test_a_pass_reports_the_prompt_tokens_its_weights_send_each_tier() -> None:
    from tests.exported import run_passes

    kube, reconciler = run_passes(count=2)
    body = kube.get_pool("default", "llama3-8b")
    assert body is not None
    result = reconciler.reconcile(body)
    weights = status(kube).classes
    sent_to = {w.tier for c in weights for w in c.weights if w.weight > 0}
    # The classes' demand is inferred from the one tier's 800 prompt tokens/s; every token
    # of it is sent somewhere, and only to tiers some class has a weight on.
    assert sum(result.sent.values()) == pytest.approx(800.0, rel=0.01)
    assert set(result.sent) == sent_to


def test_the_weights_a_pass_routes_are_kept_for_the_next_pass_s_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube, reconciler = setup()
    seen: list[tuple[Any, ...]] = []
    real = reconcile_module.observe

    def spy(*args: Any) -> Any:
        seen.append(args[4])
        return real(*args)

    monkeypatch.setattr(reconcile_module, "observe", spy)
    run(kube, reconciler)
    key = kube.pools[("default", "llama3-8b")]["metadata"].get("uid") or "default/llama3-8b"
    (kept,) = reconciler.weights.of(key)
    live = {c.name: {w.tier: w.weight for w in c.weights if w.weight} for c in status(kube).classes}
    assert (kept.since, kept.weights) == (NOW, live)
    run(kube, reconciler)
    assert seen == [(), (kept,)]  # the second pass's observe step got them


def test_weights_a_refused_route_did_not_apply_are_not_kept() -> None:
    kube, reconciler = setup()
    kube.refuse["HTTPRoute llama3-8b"] = refusal("spec.hostnames[0]: invalid")
    run(kube, reconciler)
    key = kube.pools[("default", "llama3-8b")]["metadata"].get("uid") or "default/llama3-8b"
    assert reconciler.weights.of(key) == ()
