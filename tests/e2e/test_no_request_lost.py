"""No request lost: replicas leave the closed loop under load and the twin counts every request.

On the local control plane, with the real operator, a real Prometheus and the fleet twin
under load (the demo pool, tests/e2e/loop.py), replicas go in each of the ways a pool
loses them: a scale-down, a tier shift, a rollout, a node that gives notice before it
goes, and a node that vanishes without any. A pod that is deleted drains in the twin as
vLLM does with `--shutdown-timeout` (`gpufleet.dev.twindrain`): it takes no new request
and finishes the ones it holds for the pool's drain time, then the rest are cut. A node
that vanishes takes the requests mid-decode on its replicas with it.

The twin's books are the ground truth: every request the gateway took and its answer, and
for each replica that left, the requests it held, drained or cut. Each test prints the
numbers it saw so they can be quoted, and its timeline, pass or fail.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpufleet.dev import nodes
from tests.e2e.loop import Books, Loop, Timeline, closed_loop, settle
from tests.harness import ready_pods, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.prometheus, pytest.mark.timeout(300)]

TIER = "rtx4090"
QUIET = {"realtime": 1500.0, "batch": 6000.0}  # tokens/s: 1 H100 + ~3 RTX 4090
BUSY = {"realtime": 1500.0, "batch": 12000.0}
SCALE_DOWN_DELAY_SECONDS = 10
# The drain time a user gets by default: the demo's classes derive 22 s (a 2 s objective
# plus 200 output tokens at 0.1 s each, `gpufleet.desired.drain`).
OVERLAY: dict[str, Any] = {"spec": {"scaling": {"scaleDownDelaySeconds": SCALE_DOWN_DELAY_SECONDS}}}
# The noticed interruption: a floor of 4 RTX 4090s above what a light load asks for (2,
# 3 with the burst reserve its forecast holds), so that the planner's own count holds
# while the node leaves and every change is the node's doing. (At QUIET it asked for 4
# now and then, and its scale-down took the leaving replica first, as it should, before
# any replacement.)
LIGHT = {"realtime": 1500.0, "batch": 3000.0}
# Log levels the rollout test sets in turn, until a rollout deletes a replica holding requests.
ROLLS = ("debug", "info", "warning")
FLOOR: dict[str, Any] = {"spec": {**OVERLAY["spec"], "tiers": [{"name": TIER, "minReplicas": 4}]}}
SPOT_TAINT = "aws-node-termination-handler/spot-itn"


@pytest.fixture(scope="module")
def loop(plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    with closed_loop(plane, Path(tmp_path_factory.mktemp("no-request-lost"))) as running:
        yield running


@pytest.fixture
def pool(loop: Loop, namespace: str) -> Iterator[tuple[str, str]]:
    """The demo pool's name in a fresh namespace; its load stops when the test ends."""
    name = "llama3-8b"
    yield namespace, name
    loop.twin.set_load(namespace, name, None)


def drain_seconds(loop: Loop, namespace: str, name: str) -> int:
    """The pool's drain time, as its Deployments pass it to vLLM."""
    apps = client.AppsV1Api(loop.api)
    deployment = apps.read_namespaced_deployment(f"{name}-{TIER}", namespace)
    args = deployment.spec.template.spec.containers[0].args
    return int(args[args.index("--shutdown-timeout") + 1])


def quiet(loop: Loop, namespace: str, name: str, drain: int) -> Books:
    """The books once no replica of the pool is draining, every pod is Ready and the twin
    serves exactly those pods (by name: until its next poll it still serves the ones just
    deleted, whose drains it has not booked yet). A deleted replica drains at most `drain`
    s after the twin's next poll (0.5 s), then its rest is cut, so the wait is bounded by
    that plus the polls of the twin and of this wait."""
    core = client.CoreV1Api(loop.api)

    def done() -> Books | None:
        books = loop.books(namespace, name)
        pods = core.list_namespaced_pod(namespace, label_selector=f"gpufleet.dev/pool={name}")
        ready = {p.metadata.name for p in ready_pods(core, namespace, name)}
        serving = loop.twin.serving_pods(namespace, name)
        if books.draining or len(pods.items) != len(ready) or serving != ready:
            return None
        return books

    return wait_for("every replica that left to be drained", done, drain + 15, 0.5)


def nodes_running(loop: Loop, namespace: str, name: str, tier: str) -> dict[str, list[str]]:
    """node -> the tier's Ready pods on it."""
    out: dict[str, list[str]] = {}
    for p in ready_pods(client.CoreV1Api(loop.api), namespace, name):
        if p.metadata.labels["gpufleet.dev/tier"] == tier:
            out.setdefault(p.spec.node_name, []).append(p.metadata.name)
    return out


def assert_none_lost(books: Books) -> None:
    assert books.cut == 0, books
    assert books.lost == 0, books
    assert not books.errors, books
    assert books.draining == 0, books


# -- a scale-down ----------------------------------------------------------------------------


def test_a_scale_down_cuts_no_request(loop: Loop, pool: tuple[str, str]) -> None:
    namespace, name = pool
    loop.serve(namespace, OVERLAY, **BUSY)
    with Timeline(loop, namespace, name) as timeline:
        before = settle(loop, timeline).tier(TIER).desired
        drain = drain_seconds(loop, namespace, name)
        at_drop = loop.books(namespace, name)
        t_drop = timeline.mark("batch 12000 -> 3000 tok/s")
        loop.load(namespace, name, realtime=BUSY["realtime"], batch=3000)
        # The demand window (10 s), the scale-down delay, and the decision after it.
        shrunk = timeline.wait(
            f"the {TIER} tier to shrink",
            lambda s: s.tier(TIER).desired < before,
            SCALE_DOWN_DELAY_SECONDS + 4 * loop.interval,
        )
        timeline.mark(f"{TIER} shrinks to {shrunk.tier(TIER).desired}")
        end = settle(loop, timeline)
        books = quiet(loop, namespace, name, drain)
        t_done = timeline.mark("every leaving replica drained")

    print(
        f"Scale-down of {TIER} {before} -> {end.tier(TIER).desired} replicas, "
        f"{shrunk.at - t_drop:.0f} s after demand dropped (delay {SCALE_DOWN_DELAY_SECONDS} s, "
        f"drain time {drain} s); settled and all drained {t_done - shrunk.at:.0f} s after the "
        "first went. "
        f"Whole test: {books}. Since the drop: {books.sent - at_drop.sent} sent, "
        f"{books.drained - at_drop.drained} drained, {books.cut - at_drop.cut} cut"
    )
    assert end.tier(TIER).desired < before
    assert books.held > at_drop.held, "the replicas that left held no request"
    assert_none_lost(books)


# -- a tier shift ----------------------------------------------------------------------------


def test_a_tier_shift_cuts_no_request(loop: Loop, pool: tuple[str, str]) -> None:
    """The 4090s' price rises to the H100s' (a spot price spike): a batch token is now
    cheaper on an H100, so batch moves there and the 4090 tier shrinks."""
    namespace, name = pool
    loop.serve(namespace, OVERLAY, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        steady = settle(loop, timeline)
        before = steady.tier(TIER).desired
        batch_before = steady.weights.get("batch", {}).get(TIER, 0)
        drain = drain_seconds(loop, namespace, name)
        at_shift = loop.books(namespace, name)
        t_shift = timeline.mark(f"{TIER} price $0.25 -> $2.00 per GPU-hour")
        priced = {"name": TIER, "pricePerGPUHour": "2.00"}
        loop.apply_pool(namespace, {"spec": {**OVERLAY["spec"], "tiers": [priced]}})
        # Batch moves only onto H100 replicas that are Ready (make before break): at once
        # onto the one realtime leaves room on, later onto new ones.
        moved = timeline.wait(
            f"batch to move off {TIER}",
            lambda s: s.weights.get("batch", {}).get(TIER, 0) < batch_before,
            6 * loop.interval,
        )
        timeline.mark(f"batch moves: {moved.weights_text()}")
        shrunk = timeline.wait(
            f"the {TIER} tier to shrink",
            lambda s: s.tier(TIER).desired < before,
            SCALE_DOWN_DELAY_SECONDS + 4 * loop.interval,
        )
        timeline.mark(f"{TIER} shrinks to {shrunk.tier(TIER).desired}")
        end = settle(loop, timeline, check=lambda s: all(t.ready == t.desired for t in s.tiers))
        books = quiet(loop, namespace, name, drain)
        timeline.mark("every leaving replica drained")

    # When the twin's gateway started sending batch elsewhere, by its own clock.
    route_moved = min(
        c.time
        for c in loop.twin.route_changes(namespace, name)
        if c.time >= t_shift and c.weights.get("batch", {}).get(TIER, 0) < batch_before
    )
    print(
        f"Tier shift: batch on {TIER} {batch_before}% -> {end.weights_text()} "
        f"({moved.at - t_shift:.0f} s after the price change), {TIER} {before} -> "
        f"{end.tier(TIER).desired} replicas ({shrunk.at - route_moved:.0f} s after the gateway "
        f"moved batch), h100 {steady.tier('h100').desired} -> {end.tier('h100').desired} "
        f"(drain time {drain} s). Whole test: {books}. Since the change: "
        f"{books.sent - at_shift.sent} sent, {books.drained - at_shift.drained} drained, "
        f"{books.cut - at_shift.cut} cut"
    )
    assert end.tier(TIER).desired < before
    # Shift before shrink: the 4090s go only once the gateway sends them less batch.
    assert shrunk.at >= route_moved, (shrunk.at - route_moved, shrunk)
    assert books.held > at_shift.held, "the replicas that left held no request"
    assert_none_lost(books)


# -- a rollout -------------------------------------------------------------------------------


def test_a_rollout_cuts_no_request(loop: Loop, pool: tuple[str, str]) -> None:
    """A changed env var rolls every tier's Deployment: one new pod up (maxSurge 1), one
    old pod down (maxUnavailable 0), each old one draining as it goes.

    kwok makes a new pod Ready at once, so a rollout can pass in about a second; if it
    happens to delete only replicas that hold no request (seen once in several CI runs:
    3 pods replaced in 1.3 s, none holding a request), nothing was tested, and the pool
    rolls again with the next value of `ROLLS` (three rollouts at most)."""
    namespace, name = pool
    loop.serve(namespace, OVERLAY, **QUIET)
    core = client.CoreV1Api(loop.api)
    with Timeline(loop, namespace, name) as timeline:
        steady = settle(loop, timeline)
        drain = drain_seconds(loop, namespace, name)
        at_roll = loop.books(namespace, name)
        books, rolls = at_roll, []
        for level in ROLLS:
            old = {p.metadata.name for p in ready_pods(core, namespace, name)}
            before = loop.books(namespace, name)
            t_roll = timeline.mark(f"env LOG_LEVEL={level}: every Deployment rolls")
            env = [{"name": "LOG_LEVEL", "value": level}]
            loop.apply_pool(namespace, {"spec": {**OVERLAY["spec"], "model": {"env": env}}})

            def rolled(old: set[str] = old) -> set[str] | None:
                pods = core.list_namespaced_pod(
                    namespace, label_selector=f"gpufleet.dev/pool={name}"
                )
                names = {p.metadata.name for p in pods.items}
                return names if names and not names & old else None

            wait_for("every old pod to be replaced", rolled, 6 * loop.interval, 0.5)
            t_rolled = timeline.mark("every old pod replaced")
            books = quiet(loop, namespace, name, drain)
            rolls.append(
                f"LOG_LEVEL={level}: {len(old)} pods in {t_rolled - t_roll:.0f} s, "
                f"they held {books.held - before.held}"
            )
            if books.held > before.held:
                break
        end = timeline.after(time.monotonic(), "a last sample")

    print(
        f"Rollouts ({' '.join(map(str, steady.tiers))}): {'; '.join(rolls)} (drain time "
        f"{drain} s), now {' '.join(map(str, end.tiers))}. Whole test: {books}. Since the "
        f"first change: {books.sent - at_roll.sent} sent, "
        f"{books.drained - at_roll.drained} drained, {books.cut - at_roll.cut} cut"
    )
    assert books.held > at_roll.held, f"the old pods held no request in {len(rolls)} rollouts"
    assert_none_lost(books)


# -- a node that gives notice ----------------------------------------------------------------


def set_taint(core: client.CoreV1Api, node: str, key: str, present: bool) -> None:
    taints = [t for t in core.read_node(node).spec.taints or [] if t.key != key]
    if present:
        taints.append(client.V1Taint(key=key, effect="NoSchedule"))
    body = [core.api_client.sanitize_for_serialization(t) for t in taints]
    core.patch_node(node, {"spec": {"taints": body}})


def evict(core: client.CoreV1Api, namespace: str, pods: list[str]) -> None:
    """What the node's drainer (the termination handler, Karpenter, the cluster
    autoscaler) does after the notice: evict its pods, each with its grace period."""
    for pod in pods:
        core.create_namespaced_pod_eviction(
            pod,
            namespace,
            client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace)),
        )


def test_a_noticed_interruption_cuts_no_request(
    loop: Loop, pool: tuple[str, str], gpu_pools: dict[str, nodes.Pool]
) -> None:
    """A spot interruption notice: the node is tainted, the operator starts a replacement
    at once; once it is Ready the node's pods are evicted and drain, and the node goes
    after their grace period."""
    namespace, name = pool
    loop.serve(namespace, FLOOR, **LIGHT)
    core = client.CoreV1Api(loop.api)
    apps = client.AppsV1Api(loop.api)
    with Timeline(loop, namespace, name) as timeline:
        steady = settle(loop, timeline)
        planned = steady.tier(TIER).desired
        drain = drain_seconds(loop, namespace, name)
        node, victims = sorted(nodes_running(loop, namespace, name, TIER).items())[0]
        victim = core.read_namespaced_pod(victims[0], namespace)
        grace = victim.spec.termination_grace_period_seconds
        at_notice = loop.books(namespace, name)
        t_notice = timeline.mark(f"{node} tainted {SPOT_TAINT}")
        set_taint(core, node, SPOT_TAINT, True)
        try:
            wanted = planned + len(victims)

            def replaced() -> bool:
                deployment = apps.read_namespaced_deployment(f"{name}-{TIER}", namespace)
                serving = loop.twin.serving(namespace, name).get(TIER, 0)
                return deployment.spec.replicas == wanted and serving == wanted

            # The operator lists nodes at most every 5 s, then decides in its next pass.
            wait_for("a replacement serving", replaced, loop.interval + 10, 0.5)
            t_replaced = timeline.mark(f"{len(victims)} replacement(s) serving: evict {victims}")
            evict(core, namespace, victims)
            t_evict = time.monotonic()

            # The node's replicas are gone: the replacements stay, the extra is given back.
            def given_back() -> bool:
                deployment = apps.read_namespaced_deployment(f"{name}-{TIER}", namespace)
                serving = loop.twin.serving(namespace, name).get(TIER, 0)
                return deployment.spec.replicas == serving == planned

            wait_for(f"the {TIER} tier back to {planned}", given_back, loop.interval + 10, 0.5)
            t_back = timeline.mark(f"{TIER} back to {planned}")
            time.sleep(max(0.0, t_evict + grace - time.monotonic()))
            at_delete = loop.books(namespace, name)
            timeline.mark(f"grace period ({grace} s) over: {node} deleted")
            nodes.remove_nodes(loop.api, [node])
        finally:
            if node in {n.metadata.name for n in core.list_node().items}:
                set_taint(core, node, SPOT_TAINT, False)
        books = quiet(loop, namespace, name, drain)
        timeline.mark("every leaving replica drained")
        samples = timeline.since(t_notice)

    fewest = min((s.serving.get(TIER, 0) for s in samples), default=0)
    print(
        f"Noticed interruption of {node} ({len(victims)} of {planned} {TIER} replicas): "
        f"replacement serving {t_replaced - t_notice:.0f} s after the taint; the evicted "
        f"replicas drained {at_delete.drained - at_notice.drained} requests and the extra "
        f"replica was given back {t_back - t_evict:.0f} s after the eviction; the node went "
        f"after the grace period ({grace} s, drain time {drain} s); fewest {TIER} replicas "
        f"serving meanwhile: {fewest}. Whole test: {books}. Since the notice: "
        f"{books.sent - at_notice.sent} sent, {books.drained - at_notice.drained} drained, "
        f"{books.cut - at_notice.cut} cut"
    )
    assert at_delete.draining == 0, "the evicted pods still drained at the grace period's end"
    assert at_delete.held > at_notice.held, "the evicted pods held no request"
    assert fewest >= planned, "the tier served with fewer replicas than planned"
    assert_none_lost(books)


# -- a node that vanishes --------------------------------------------------------------------


def gateway_502s(loop: Loop, namespace: str) -> float:
    """Cut streams as a user's dashboard shows them: the gateway's 502s in Prometheus."""
    query = f'sum(gpufleet_dev_gateway_requests_total{{namespace="{namespace}",code="502"}})'
    result = loop.prometheus.query(query)
    return float(result[0]["value"][1]) if result else 0.0


def test_an_unnoticed_node_loss_reports_what_it_cut(
    loop: Loop, pool: tuple[str, str], gpu_pools: dict[str, nodes.Pool]
) -> None:
    namespace, name = pool
    loop.serve(namespace, OVERLAY, **QUIET)
    with Timeline(loop, namespace, name) as timeline:
        steady = settle(loop, timeline)
        node, victims = sorted(nodes_running(loop, namespace, name, TIER).items())[0]
        at_loss = loop.books(namespace, name)
        t_loss = timeline.mark(f"{node} deleted without notice")
        nodes.remove_nodes(loop.api, [node])

        def lost() -> Books | None:
            books = loop.books(namespace, name)
            return books if books.lost > at_loss.lost else None

        # The twin polls the API every 0.5 s.
        seen = wait_for("the twin to lose the node's replicas", lost, 10, 0.2)
        t_seen = time.monotonic()

        # Prometheus scrapes the gateway every second.
        def in_prometheus() -> float | None:
            value = gateway_502s(loop, namespace)
            return value if value == seen.errors.get("502", 0) else None

        reported = wait_for("Prometheus to report the twin's 502s", in_prometheus, 10, 0.5)
        books = loop.books(namespace, name)

    cut = books.lost - at_loss.lost
    print(
        f"Unnoticed loss of {node} ({len(victims)} of {steady.tier(TIER).desired} {TIER} "
        f"replicas) under load: {cut} requests cut mid-decode, seen by the twin "
        f"{t_seen - t_loss:.1f} s after the deletion; the gateway's 502s in Prometheus: "
        f"{reported:.0f}. Whole test: {books}"
    )
    assert cut > 0, "the lost replicas held no request mid-decode"
    # What a user sees is what the books say: every cut stream is one 502, no other error.
    assert books.lost == cut and books.cut == 0, books
    assert books.errors == {"502": cut}, books
    assert reported == cut
