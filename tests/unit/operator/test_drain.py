"""A leaving replica drains: the drain time, the grace period and the pod fields that carry them."""

from typing import Any

import pytest

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import MAX_DRAIN_SECONDS, InferencePool
from gpufleet.desired import drain, manifests
from tests.pools import pool, traffic_class

pytestmark = pytest.mark.timeout(2)


def build(
    classes: list[dict[str, Any]], extra_args: list[str] | None = None, **scaling: Any
) -> InferencePool:
    body = pool(classes=classes)
    if extra_args is not None:
        body["spec"]["model"]["extraArgs"] = extra_args
    body["spec"].setdefault("scaling", {}).update(scaling)
    body["metadata"]["uid"] = "uid-1"
    return parse_pool(body)


def pod_of(p: InferencePool) -> dict[str, Any]:
    spec: dict[str, Any] = manifests.deployment(p, p.spec.tiers[0], 1)["spec"]["template"]["spec"]
    return spec


def arg(p: InferencePool, flag: str) -> str:
    args = manifests.vllm_args(p, p.spec.tiers[0])
    return args[args.index(flag) + 1]


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        # 2 s objective + 1000 tokens x 0.1 s = 102 s: the long class decides.
        pytest.param(
            [
                traffic_class("realtime", 100, header="rt", meanOutputTokens=50),
                traffic_class("batch", 2000, meanOutputTokens=1000),
            ],
            102,
            id="longest-class-decides",
        ),
        # 0.1 s + 5 x 0.1 s = 0.6 s: never below the floor.
        pytest.param([traffic_class("chat", 100, meanOutputTokens=5)], 10, id="floor"),
        # 0.25 s + 201 x 0.1 s = 20.35 s: whole seconds, rounded up.
        pytest.param([traffic_class("chat", 250, meanOutputTokens=201)], 21, id="rounds-up"),
    ],
)
def test_drain_is_the_longest_time_a_request_in_flight_needs(
    classes: list[dict[str, Any]], expected: int
) -> None:
    p = build(classes)
    assert drain.derived_drain_seconds(p) == expected
    assert drain.drain_seconds(p) == expected
    assert arg(p, "--shutdown-timeout") == str(expected)


def test_a_drain_longer_than_the_api_allows_is_capped() -> None:
    # A million output tokens (in a context of two million) would take a day: capped at
    # the API's maximum.
    classes = [traffic_class("long", 1000, meanOutputTokens=1_000_000)]
    p = build(classes, extra_args=["--max-model-len=2000000"])
    expected = MAX_DRAIN_SECONDS
    assert drain.derived_drain_seconds(p) == expected
    assert drain.drain_seconds(p) == expected
    assert arg(p, "--shutdown-timeout") == str(expected)


@pytest.mark.parametrize("chosen", [0, 45, MAX_DRAIN_SECONDS], ids=["zero", "45", "max"])
def test_spec_drain_seconds_overrides_the_derived_drain(chosen: int) -> None:
    p = build([traffic_class("batch", 2000, meanOutputTokens=1000)], drainSeconds=chosen)
    assert drain.drain_seconds(p) == chosen
    assert arg(p, "--shutdown-timeout") == str(chosen)
    assert pod_of(p)["terminationGracePeriodSeconds"] == (
        drain.PRESTOP_PAUSE_SECONDS + chosen + drain.TEARDOWN_SECONDS
    )


def test_grace_period_outlasts_the_pause_and_the_drain() -> None:
    p = build([traffic_class("batch", 2000, meanOutputTokens=1000)])
    pod = pod_of(p)
    hook = pod["containers"][0]["lifecycle"]["preStop"]
    # The kubelet's sleep action, not an exec: the vLLM image needs no shell.
    assert hook == {"sleep": {"seconds": drain.PRESTOP_PAUSE_SECONDS}}
    grace = pod["terminationGracePeriodSeconds"]
    assert grace > drain.PRESTOP_PAUSE_SECONDS + int(arg(p, "--shutdown-timeout"))
    assert grace == 10 + 102 + 15
