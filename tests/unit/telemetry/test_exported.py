"""The operator's /metrics after real reconcile passes: values a person charts, and a
rendering `promtool check metrics` accepts (names, units, HELP)."""

import shutil
import subprocess

import pytest
from prometheus_client import generate_latest

from gpufleet.planning import memo
from gpufleet.planning.records import MetricsReading, MetricsState, Plan
from gpufleet.telemetry import Telemetry
from tests.exported import AVAILABLE, NOW, Readings, run_passes
from tests.fakes import FakeKube

pytestmark = pytest.mark.timeout(10)

_passes = run_passes


def _value(kube: FakeKube, name: str, **labels: str) -> float | None:
    value = kube.telemetry.registry.get_sample_value(
        name, {"namespace": "default", "pool": "llama3-8b", **labels}
    )
    return value


def test_a_pass_exports_objective_observed_attainment_and_fleet_per_class_and_tier() -> None:
    kube, _ = _passes(AVAILABLE)
    cls = "gpufleet_pool_class_"
    assert _value(kube, cls + "objective_ttft_seconds", traffic_class="realtime") == 0.1
    assert _value(kube, cls + "objective_ttft_seconds", traffic_class="batch") == 2.0
    # The plan sends every class to h100: realtime's share within 100 ms is exact.
    assert _value(kube, cls + "attainment_ratio", traffic_class="realtime") == pytest.approx(0.996)
    assert _value(kube, cls + "attainment_exact", traffic_class="realtime") == 1.0
    assert _value(kube, cls + "attainment_ratio", traffic_class="batch") == pytest.approx(1.0)
    assert _value(kube, "gpufleet_pool_replicas", tier="h100", state="desired") == 1
    assert _value(kube, "gpufleet_pool_replicas", tier="rtx4090", state="starting") == 0
    assert _value(kube, "gpufleet_pool_tier_capacity_factor_ratio", tier="h100") is not None
    assert _value(kube, "gpufleet_pool_objective_cost_per_million_tokens_dollars") == 0.10
    assert _value(kube, "gpufleet_pool_objective_cost_per_hour_dollars") == 40.0
    assert _value(kube, "gpufleet_pool_metrics_available") == 1.0
    assert _value(kube, cls + "demand_tokens_per_second", traffic_class="batch") == 500
    assert _value(kube, "gpufleet_pool_cost_per_million_tokens_dollars") == pytest.approx(0.5556)
    assert _value(kube, "gpufleet_pool_tier_lead_time_seconds", tier="h100") == 76
    assert _value(kube, "gpufleet_pool_condition", type="MetricsAvailable", reason="MetricsFound")


def test_metrics_gone_remove_attainment_and_say_so() -> None:
    kube, reconciler = _passes(AVAILABLE)
    reconciler.metrics = Readings(MetricsReading(MetricsState.UNREACHABLE, "down"))
    body = kube.get_pool("default", "llama3-8b")
    assert body is not None
    reconciler.reconcile(body)
    assert _value(kube, "gpufleet_pool_class_attainment_ratio", traffic_class="realtime") is None
    assert _value(kube, "gpufleet_pool_metrics_available") == 0.0
    assert (
        _value(kube, "gpufleet_pool_condition", type="MetricsAvailable", reason="MetricsFound")
        is None
    )
    reason = "PrometheusUnreachable"
    assert _value(kube, "gpufleet_pool_condition", type="MetricsAvailable", reason=reason) == 0.0


def test_a_deleted_pool_leaves_no_series() -> None:
    kube, _ = _passes(AVAILABLE)
    kube.telemetry.forget_pool("default", "llama3-8b")
    assert b'pool="llama3-8b"' not in generate_latest(kube.telemetry.registry)


@pytest.mark.prometheus
def test_promtool_accepts_the_rendered_metrics() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    kube, _ = _passes(AVAILABLE)
    text = generate_latest(kube.telemetry.registry)
    assert b"gpufleet_pool_class_attainment_ratio{" in text
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()
    assert checked.stdout.decode().strip() == "", checked.stdout.decode()


def _sample(kube: FakeKube, name: str, **labels: str) -> float | None:
    return kube.telemetry.registry.get_sample_value(name, labels)


def test_each_pass_times_its_plan_and_a_repeated_pass_is_planned_from_the_solver_cache() -> None:
    memo.clear_all()
    kube, reconciler = _passes(AVAILABLE, count=2)
    body = kube.get_pool("default", "llama3-8b")
    assert body is not None
    reconciler.clock = lambda: NOW  # the same pool, status and time: the same program
    reconciler.reconcile(body)
    optimizer = {"cache": "optimizer"}
    hits = _sample(kube, "gpufleet_planner_cache_lookups_total", **optimizer, result="hit") or 0
    reconciler.reconcile(body)
    assert _sample(kube, "gpufleet_plan_duration_seconds_count") == 4
    assert (_sample(kube, "gpufleet_plan_duration_seconds_sum") or 0.0) > 0
    after = _sample(kube, "gpufleet_planner_cache_lookups_total", **optimizer, result="hit")
    assert after is not None and after > hits
    misses = _sample(kube, "gpufleet_planner_cache_lookups_total", **optimizer, result="miss")
    assert misses is not None and misses >= 2
    assert _sample(kube, "gpufleet_planner_cache_entries", **optimizer) == misses


def test_a_plan_that_fails_is_timed_too() -> None:
    def failing(*_: object) -> Plan:
        raise ValueError("no plan")

    kube, _ = _passes(AVAILABLE, count=1, planner=failing)
    assert _sample(kube, "gpufleet_plan_duration_seconds_count") == 1


def test_a_pool_s_series_are_replaced_without_touching_another_pool_s() -> None:
    telemetry = Telemetry()
    gauge = "lead_time"
    telemetry.replace_pool_series(
        gauge, "ns", "a", {("ns", "a", "h100"): 1.0, ("ns", "a", "rtx"): 2.0}
    )
    telemetry.replace_pool_series(gauge, "ns", "b", {("ns", "b", "h100"): 3.0})
    telemetry.replace_pool_series(gauge, "ns", "a", {("ns", "a", "rtx"): 4.0})  # h100 went away

    def value(pool: str, tier: str) -> float | None:
        return telemetry.registry.get_sample_value(
            "gpufleet_pool_tier_lead_time_seconds", {"namespace": "ns", "pool": pool, "tier": tier}
        )

    assert (value("a", "h100"), value("a", "rtx"), value("b", "h100")) == (None, 4.0, 3.0)
    telemetry.forget_pool("ns", "a")
    assert (value("a", "rtx"), value("b", "h100")) == (None, 3.0)
