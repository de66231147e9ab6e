"""The closed loop: the real operator keeps a pool within its objectives as load and fleet change.

On the local control plane, a real Prometheus scrapes the fleet twin, whose replicas follow
the tier profiles and the load the HTTPRoute's weights send them; the real operator
(`gpufleet run --prometheus-url`) reads Prometheus and scales. The pool is the demo's
(examples/llama3-8b-mixed.yaml with examples/demo/demo.yaml's overlay: decisions every 10 s,
scale-down after 30 s, demand from the gateway's per-class token counter).

Each scenario asserts what a user would check (status and conditions, Events, Deployments,
Prometheus numbers) and prints the timeline it saw. The P99s asserted on come from
Prometheus: `histogram_quantile(0.99, ...)` over the gateway's per-class TTFT histogram.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpufleet.dev import nodes
from gpufleet.dev.fleetview import P99_WINDOW_SECONDS, Sample
from gpufleet.dev.tools import PROMETHEUS_MAJORS
from tests.e2e.loop import BATCH_MS, REALTIME_MS, Loop, Timeline, closed_loop, p99, settle, within
from tests.harness import get_pool, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.prometheus, pytest.mark.timeout(420)]

QUIET = {"realtime": 1500.0, "batch": 6000.0}  # tokens/s: 1 H100 + ~3 RTX 4090
# Stated bounds, in decision intervals (10 s) after the new replicas are Ready. The P99
# asserted on is over a 10 s window, so one interval of it is the window catching up.
RECOVERY_INTERVALS = 4
# "Back within the objective" is a P99 that stays within it for a whole P99 window, not one
# sample: a P99 read at first token leaves out the requests still queued, so it dips for a
# moment while a backlog drains, then rises as they get served.
HOLD_SECONDS = P99_WINDOW_SECONDS
LEAVING = ["rtx4090-0", "rtx4090-1", "rtx4090-2", "rtx4090-7"]  # 13 of the 19 RTX 4090s
PRICE = {"h100": 2.0, "rtx4090": 0.25}


@pytest.fixture(scope="module", params=PROMETHEUS_MAJORS, ids=lambda m: f"prometheus{m}")
def loop(
    plane: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Loop]:
    """The closed loop on each Prometheus major clusters run (Debian's 2, our build of 3)."""
    work = Path(tmp_path_factory.mktemp(f"loop-prometheus{request.param}"))
    with closed_loop(plane, work, prometheus_major=request.param) as running:
        yield running


@pytest.fixture
def pool(loop: Loop, namespace: str) -> Iterator[tuple[str, str]]:
    """The demo pool in a fresh namespace; its load stops when the test ends."""
    name = "llama3-8b"
    yield namespace, name
    loop.twin.set_load(namespace, name, None)


def grown_and_ready(loop: Loop, timeline: Timeline, tier: str, before: int) -> Sample:
    """The sample at which a tier's scale-up above `before` is whole and Ready.

    The planner reads demand over the demandQuery's rate window, so a step that the window
    has seen only in part at a decision is scaled for over two decisions. The bound is
    stated from the last of them: every desired replica Ready, and the next decision keeps
    the count.
    """
    deadline = time.monotonic() + 90
    while True:
        ready = timeline.wait(
            f"the new {tier} replicas to be Ready",
            lambda s: s.tier(tier).ready == s.tier(tier).desired > before,
            max(deadline - time.monotonic(), 1),
        )
        later = timeline.after(ready.at + loop.interval, "the next decision", loop.interval + 10)
        if later.tier(tier).desired == ready.tier(tier).desired:
            return ready
        if time.monotonic() > deadline:
            raise AssertionError(f"The {tier} tier kept growing for 90 s: {later}")


def prometheus_p99_ms(loop: Loop, namespace: str, cls: str, seconds: int) -> float:
    """A class's P99 over the last `seconds`, from the gateway histogram in Prometheus."""
    sel = f'namespace="{namespace}",traffic_class="{cls}"'
    result = loop.prometheus.query(
        "histogram_quantile(0.99, sum by (le) "
        f"(increase(gpufleet_dev_gateway_ttft_seconds_bucket{{{sel}}}[{seconds}s])))"
    )
    return float(result[0]["value"][1]) * 1000 if result else math.nan


def realtime_requests_on(loop: Loop, namespace: str, tier: str) -> float:
    sel = f'namespace="{namespace}",traffic_class="realtime",backend_tier="{tier}"'
    result = loop.prometheus.query(f"sum(gpufleet_dev_gateway_requests_total{{{sel}}})")
    return float(result[0]["value"][1]) if result else 0.0


def reasons(loop: Loop, namespace: str, name: str) -> list[tuple[str, str]]:
    return [(kind, reason) for kind, reason, _ in loop.events(namespace, name)]


# -- 1 -------------------------------------------------------------------------------------


def test_batch_demand_triples_and_the_rtx4090_tier_grows(loop: Loop, pool: tuple[str, str]) -> None:
    namespace, name = pool
    loop.apply_pool(namespace)
    loop.load(namespace, name, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        before = settle(loop, timeline).tier("rtx4090").desired
        timeline.mark("batch x3")
        loop.load(namespace, name, realtime=QUIET["realtime"], batch=3 * QUIET["batch"])
        timeline.wait(
            "the rtx4090 tier to grow",
            lambda s: s.tier("rtx4090").desired > before,
            4 * loop.interval,
        )
        ready = grown_and_ready(loop, timeline, "rtx4090", before)
        t_ready = ready.at
        timeline.mark(f"rtx4090 at {ready.tier('rtx4090').desired}, all Ready, and kept")
        back = timeline.wait(
            "batch P99 back within 2000 ms",
            lambda s: p99(s, "batch") <= BATCH_MS,
            max(t_ready + RECOVERY_INTERVALS * loop.interval - time.monotonic(), 1),
            since=t_ready,
            hold=HOLD_SECONDS,
        )
        timeline.mark("batch within objective")
        held = timeline.after(back.at + 2 * loop.interval, "two more intervals", 40)

    intervals = (back.at - t_ready) / loop.interval
    print(
        f"rtx4090 {before} -> {ready.tier('rtx4090').desired} replicas; batch P99 back within "
        f"{BATCH_MS:.0f} ms (and held {HOLD_SECONDS} s) {intervals:.1f} intervals after the "
        f"last of them were Ready (bound {RECOVERY_INTERVALS}); batch P99 over the next 20 s: "
        f"{prometheus_p99_ms(loop, namespace, 'batch', 20):.0f} ms"
    )
    assert held.tier("rtx4090").desired > before
    assert prometheus_p99_ms(loop, namespace, "batch", 20) <= BATCH_MS
    # Realtime (100 ms) never went to the tier that cannot hold it, by weight or by request.
    assert all(s.weights.get("realtime", {}).get("rtx4090", 0) == 0 for s in timeline.samples)
    assert realtime_requests_on(loop, namespace, "rtx4090") == 0
    assert realtime_requests_on(loop, namespace, "h100") > 0
    assert ("Normal", "DemandIncreased") in reasons(loop, namespace, name)


# -- 2 -------------------------------------------------------------------------------------


def test_realtime_surge_grows_the_h100_tier_onto_ready_replicas_only(
    loop: Loop, pool: tuple[str, str]
) -> None:
    namespace, name = pool
    loop.apply_pool(namespace)
    loop.load(namespace, name, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        before = settle(loop, timeline).tier("h100").desired
        t_surge = timeline.mark("realtime surge (16000 tok/s)")
        loop.load(namespace, name, realtime=16000, batch=QUIET["batch"])
        timeline.wait(
            "the h100 tier to grow", lambda s: s.tier("h100").desired > before, 4 * loop.interval
        )
        ready = grown_and_ready(loop, timeline, "h100", before)
        t_ready = ready.at
        timeline.mark(f"h100 at {ready.tier('h100').desired}, all Ready, and kept")
        back = timeline.wait(
            "realtime P99 within 100 ms",
            lambda s: p99(s, "realtime") <= REALTIME_MS,
            max(t_ready + RECOVERY_INTERVALS * loop.interval - time.monotonic(), 1),
            since=t_ready,
            hold=HOLD_SECONDS,
        )
        t_back = timeline.mark("realtime within objective")
        timeline.after(back.at + 3 * loop.interval, "three more intervals", 50)
        after = timeline.since(t_back)

    print(
        f"h100 {before} -> {ready.tier('h100').desired} replicas; realtime P99 within "
        f"{REALTIME_MS:.0f} ms (and held {HOLD_SECONDS} s) "
        f"{(back.at - t_ready) / loop.interval:.1f} intervals after the last of them were "
        "Ready; over the next 30 s: "
        f"{prometheus_p99_ms(loop, namespace, 'realtime', 30):.0f} ms"
    )
    # Stays within its objective once the replicas are Ready (Prometheus over the last 30 s).
    assert prometheus_p99_ms(loop, namespace, "realtime", 30) <= REALTIME_MS
    assert sum(p99(s, "realtime") <= REALTIME_MS for s in after) >= 0.9 * len(after)
    # Make before break: a weight is never put on a tier without Ready replicas, as status
    # says it and as the twin saw the pods the moment it started routing by new weights.
    for s in timeline.since(t_surge):
        for cls, weights in s.weights.items():
            for tier, weight in weights.items():
                assert weight == 0 or s.tier(tier).ready > 0, (cls, tier, s)
    changes = [c for c in loop.twin.route_changes(namespace, name) if c.time >= t_surge]
    assert changes, "the weights never changed"
    for change in changes:
        for cls, weights in change.weights.items():
            for tier, weight in weights.items():
                assert weight == 0 or change.serving.get(tier, 0) > 0, (cls, tier, change)


# -- 3 -------------------------------------------------------------------------------------


def test_half_the_rtx4090_nodes_leave_batch_overflows_and_recovers(
    loop: Loop, pool: tuple[str, str], gpu_pools: dict[str, nodes.Pool]
) -> None:
    namespace, name = pool
    loop.apply_pool(namespace)
    loop.load(namespace, name, **QUIET)
    specs = {spec.name: spec for spec in gpu_pools["rtx4090"].nodes}
    with Timeline(loop, namespace, name) as timeline:
        settle(loop, timeline)
        timeline.mark("batch 18000 tok/s")
        loop.load(namespace, name, realtime=QUIET["realtime"], batch=18000)
        steady = settle(loop, timeline)
        h100_before = steady.tier("h100").desired
        t_leave = timeline.mark(f"nodes leave: {', '.join(LEAVING)}")
        nodes.remove_nodes(loop.api, LEAVING)
        noticed = timeline.wait(
            "Degraded=True (CapacityLost)",
            lambda s: s.condition("Degraded") == ("True", "CapacityLost"),
            3 * loop.interval,
        )
        t_notice = timeline.mark("operator noticed")
        overflow = timeline.wait(
            "batch to overflow to h100",
            lambda s: s.weights.get("batch", {}).get("h100", 0) > 0,
            2 * loop.interval,
        )
        timeline.mark("batch overflows to h100")
        time.sleep(2 * loop.interval)
        t_return = timeline.mark("nodes return")
        nodes.add_nodes(loop.api, [specs[n] for n in LEAVING])
        timeline.wait(
            "Degraded=False", lambda s: s.condition("Degraded")[0] == "False", 6 * loop.interval
        )
        timeline.mark("Degraded=False")
        recovered = timeline.wait(
            "the h100 tier back down and both classes within objective",
            lambda s: (
                s.tier("h100").desired <= h100_before
                and all(t.ready == t.desired for t in s.tiers)
                and within(s)
            ),
            loop.config.overlay["spec"]["scaling"]["scaleDownDelaySeconds"] + 9 * loop.interval,
        )
        timeline.mark("recovered")

    print(
        f"Degraded=True {noticed.at - t_leave:.1f}s after the nodes left; batch on h100 "
        f"{(overflow.at - t_notice) / loop.interval:.1f} intervals after that "
        f"(weights {overflow.weights_text()}); recovered {recovered.at - t_return:.0f}s after "
        f"they returned: {' '.join(map(str, recovered.tiers))}"
    )
    assert overflow.at - t_notice <= loop.interval + 2, "batch overflowed later than an interval"
    assert ("Warning", "CapacityLost") in reasons(loop, namespace, name)
    assert recovered.tier("h100").desired <= h100_before
    assert recovered.tier("rtx4090").ready > 0


# -- 4 -------------------------------------------------------------------------------------


def test_prometheus_stopped_keeps_replicas_and_recovers(loop: Loop, pool: tuple[str, str]) -> None:
    namespace, name = pool
    loop.apply_pool(namespace)
    loop.load(namespace, name, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        steady = settle(loop, timeline)
        counts = {t.name: t.desired for t in steady.tiers}
        deployments = loop.deployment_replicas(namespace, name)
        t_stop = timeline.mark("Prometheus stopped; batch x3")
        loop.prometheus.stop()
        # Demand the operator cannot see now: it must not act on it, nor scale down.
        loop.load(namespace, name, realtime=QUIET["realtime"], batch=3 * QUIET["batch"])
        down = timeline.wait(
            "MetricsAvailable=False",
            lambda s: s.condition("MetricsAvailable") == ("False", "PrometheusUnreachable"),
            2 * loop.interval + 5,
        )
        timeline.after(down.at + 3 * loop.interval, "three intervals", 50)
        held = timeline.since(t_stop)
        held_deployments = loop.deployment_replicas(namespace, name)
        t_start = timeline.mark("Prometheus back")
        loop.restart_prometheus()
        back = timeline.wait(
            "MetricsAvailable=True",
            lambda s: s.condition("MetricsAvailable")[0] == "True",
            3 * loop.interval + 10,
        )
        grown = timeline.wait(
            "the rtx4090 tier to grow for the demand it missed",
            lambda s: s.tier("rtx4090").desired > counts["rtx4090"],
            4 * loop.interval,
        )

    print(
        f"MetricsAvailable=False {down.at - t_stop:.1f}s after Prometheus stopped; replicas "
        f"held at {counts} for {len(held)} samples; True again {back.at - t_start:.1f}s after "
        f"it came back; rtx4090 then {grown.tier('rtx4090').desired}"
    )
    assert all({t.name: t.desired for t in s.tiers} == counts for s in held)
    assert held_deployments == deployments
    kinds = reasons(loop, namespace, name)
    assert ("Warning", "PrometheusUnreachable") in kinds
    assert ("Normal", "MetricsFound") in kinds[kinds.index(("Warning", "PrometheusUnreachable")) :]


# -- 5 -------------------------------------------------------------------------------------


def test_operator_killed_during_scale_up_converges_without_duplicates(
    loop: Loop, pool: tuple[str, str]
) -> None:
    namespace, name = pool
    loop.apply_pool(namespace)
    loop.load(namespace, name, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        settle(loop, timeline)
        before = loop.deployment_replicas(namespace, name)["rtx4090"]
        timeline.mark("batch x3")
        loop.load(namespace, name, realtime=QUIET["realtime"], batch=3 * QUIET["batch"])

        def grown() -> int | None:
            replicas = loop.deployment_replicas(namespace, name)["rtx4090"]
            return replicas if replicas > before else None

        scaled = wait_for("the rtx4090 Deployment to scale up", grown, 6 * loop.interval, 0.1)
        loop.operator.kill()
        timeline.mark(f"operator killed (SIGKILL) at rtx4090 Deployment {scaled}")
        time.sleep(loop.interval)
        loop.operator.start()
        t_restart = timeline.mark("operator restarted")
        final = wait_for(
            "the pool to converge",
            lambda: converged(loop, namespace, name),
            12 * loop.interval,
            1.0,
        )
        timeline.mark("converged")
        batch_ok = timeline.wait("batch within its objective", within, 6 * loop.interval)

    print(
        f"rtx4090 {before} -> {final['rtx4090']} replicas; converged "
        f"{time.monotonic() - t_restart:.0f}s after the restart; {batch_ok.p99_text()}"
    )
    assert final["rtx4090"] > before


def converged(loop: Loop, namespace: str, name: str) -> dict[str, int] | None:
    """Desired per tier once status, Deployments and pods agree, with no duplicate child."""
    body = get_pool(loop.api, namespace, name)
    status = body.get("status", {})
    if status.get("observedGeneration") != body["metadata"]["generation"]:
        return None
    desired = {t["name"]: t["desiredReplicas"] for t in status.get("tiers", [])}
    ready = {t["name"]: t.get("readyReplicas", 0) for t in status.get("tiers", [])}
    if desired != ready or loop.deployment_replicas(namespace, name) != desired:
        return None
    selector = f"gpufleet.dev/pool={name}"
    apps, core = client.AppsV1Api(loop.api), client.CoreV1Api(loop.api)
    pods = [
        p
        for p in core.list_namespaced_pod(namespace, label_selector=selector).items
        if p.metadata.deletion_timestamp is None
    ]
    per_tier: dict[str, int] = {}
    for p in pods:
        tier = p.metadata.labels["gpufleet.dev/tier"]
        per_tier[tier] = per_tier.get(tier, 0) + 1
    if {t: n for t, n in per_tier.items() if n} != {t: n for t, n in desired.items() if n}:
        return None
    # One Deployment, one ReplicaSet and one Service per tier, one HTTPRoute: no duplicates.
    deployments = apps.list_namespaced_deployment(namespace, label_selector=selector).items
    assert sorted(d.metadata.name for d in deployments) == sorted(f"{name}-{t}" for t in desired)
    replica_sets = apps.list_namespaced_replica_set(namespace, label_selector=selector).items
    assert len(replica_sets) == len(deployments), [r.metadata.name for r in replica_sets]
    services = core.list_namespaced_service(namespace, label_selector=selector).items
    assert sorted(s.metadata.name for s in services) == sorted(f"{name}-{t}" for t in desired)
    routes = client.CustomObjectsApi(loop.api).list_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", namespace, "httproutes"
    )["items"]
    assert [r["metadata"]["name"] for r in routes] == [name]
    return desired


# -- 6 -------------------------------------------------------------------------------------


def test_budget_below_demand_serves_realtime_first_and_never_overspends(
    loop: Loop, pool: tuple[str, str]
) -> None:
    namespace, name = pool
    budget = 4.50  # 2 H100 for realtime ($4) leaves 2 RTX 4090s; batch would need ~8
    loop.apply_pool(namespace, {"spec": {"objectives": {"maxHourlyCost": f"{budget:.2f}"}}})
    loop.load(namespace, name, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        settle(loop, timeline)
        timeline.mark("demand above the budget")
        loop.load(namespace, name, realtime=6000, batch=20000)
        short = timeline.wait(
            "ObjectivesMet=False (InsufficientCapacity)",
            lambda s: (
                s.condition("ObjectivesMet") == ("False", "InsufficientCapacity")
                and all(t.ready == t.desired for t in s.tiers)
            ),
            12 * loop.interval,
        )
        t_short = timeline.mark("InsufficientCapacity")
        # Both classes stepped up at once, so the budget-limited plan may first lend batch
        # some of the h100 tier that realtime's rising demand then needs back: realtime is
        # back within its objective, and holds it, within the stated recovery bound.
        back = timeline.wait(
            "realtime P99 within 100 ms",
            lambda s: p99(s, "realtime") <= REALTIME_MS,
            RECOVERY_INTERVALS * loop.interval,
            since=short.at,
            hold=HOLD_SECONDS,
        )
        t_back = timeline.mark("realtime within objective")
        timeline.after(back.at + 3 * loop.interval, "three more intervals", 50)
        samples = list(timeline.samples)

    realtime = prometheus_p99_ms(loop, namespace, "realtime", 30)
    batch = prometheus_p99_ms(loop, namespace, "batch", 30)
    rt_truth = loop.twin.window(namespace, name, "realtime", t_back)
    batch_truth = loop.twin.window(namespace, name, "batch", t_short)
    print(
        f"Under a ${budget:.2f}/h budget: {' '.join(map(str, short.tiers))} at "
        f"${short.cost_per_hour}/h; realtime within objective {back.at - short.at:.0f} s after "
        f"InsufficientCapacity; P99 over the last 30 s realtime {realtime:.0f} ms, batch "
        f"{batch:.0f} ms; within objective: realtime {rt_truth.attainment:.1%} since it was "
        f"back, batch {batch_truth.attainment:.1%} since InsufficientCapacity"
    )
    for s in samples:  # the budget is never exceeded, by status or by what runs
        assert s.cost_per_hour is None or s.cost_per_hour <= budget + 1e-9, s
        assert sum(PRICE[t.name] * t.desired for t in s.tiers) <= budget + 1e-9, s
    # Realtime first: it keeps its objective on h100 while batch waits.
    assert realtime <= REALTIME_MS
    assert all(s.weights.get("realtime", {}).get("rtx4090", 0) == 0 for s in samples)
    assert rt_truth.attainment is not None and batch_truth.attainment is not None
    assert rt_truth.attainment >= 0.99 > batch_truth.attainment
    assert ("Warning", "InsufficientCapacity") in reasons(loop, namespace, name)


# -- 7 -------------------------------------------------------------------------------------


def test_a_surge_between_passes_two_minutes_apart_is_acted_on_within_seconds(
    loop: Loop, pool: tuple[str, str]
) -> None:
    """The queue watch: with passes 120 s apart, a sixfold realtime step starts an early
    pass that says why, and the H100s grow long before the next interval."""
    namespace, name = pool
    loop.apply_pool(namespace)
    loop.load(namespace, name, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        settle(loop, timeline)
        loop.apply_pool(namespace, {"spec": {"scaling": {"intervalSeconds": 120}}})

        def read_back() -> bool:
            body = get_pool(loop.api, namespace, name)
            return bool(body["status"].get("observedGeneration") == body["metadata"]["generation"])

        wait_for("the pass that reads intervalSeconds 120", read_back, 30)
        # The passes the change started (and any their children's updates woke) are over
        # once the replica counts hold for 10 s.
        steady = timeline.wait("the counts to hold", lambda s: True, 5)
        while True:
            later = timeline.after(steady.at + 10, "10 s on", 20)
            if [t.desired for t in later.tiers] == [t.desired for t in steady.tiers]:
                break
            steady = later
        before = later.tier("h100").desired
        seen = len(loop.events(namespace, name))
        t_surge = timeline.mark("realtime x6")
        loop.load(namespace, name, realtime=6 * QUIET["realtime"], batch=QUIET["batch"])
        grown = timeline.wait(
            "the h100 tier to grow", lambda s: s.tier("h100").desired > before, 30
        )
    waited = grown.at - t_surge
    early = [m for _, _, m in loop.events(namespace, name)[seen:] if "Early pass, " in m]
    print(f"h100 {before} -> {grown.tier('h100').desired} {waited:.1f} s after the step: {early}")
    assert waited < 30
    # The early pass acted (it scaled or moved traffic, so it posted Events); the H100s grew
    # in it or in the pass its own changes woke a moment later.
    assert any("on h100" in m for m in early), early
