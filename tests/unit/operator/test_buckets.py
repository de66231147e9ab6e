"""vLLM 0.33's --custom-histogram-buckets: a TTFT bound at each class objective, so each
class's attainment is read exactly; an Event when a change of objectives rolls a tier."""

import itertools
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.desired import manifests
from gpufleet.desired.rollout import bucket_events, live_ttft_buckets
from gpufleet.desired.sli import VLLM_TTFT_BUCKETS
from gpufleet.reconcile import NoMetrics, Reconciler
from tests.fakes import FakeKube
from tests.planners import minimum_plan
from tests.pools import load_example

pytestmark = pytest.mark.timeout(2)

V033 = "vllm/vllm-openai:v0.33.0"


def body(image: str | None = V033, extra_args: list[str] | None = None) -> dict[str, Any]:
    b = load_example()  # realtime 100 ms, batch 2000 ms
    b["metadata"].update(namespace="llm", uid="uid-1")
    if image is None:
        b["spec"]["model"].pop("image", None)
    else:
        b["spec"]["model"]["image"] = image
    if extra_args is not None:
        b["spec"]["model"]["extraArgs"] = extra_args
    return b


def buckets_arg(pool: InferencePool) -> list[float] | None:
    args = manifests.vllm_args(pool, pool.spec.tiers[0])
    if manifests.BUCKETS_FLAG not in args:
        return None
    value = json.loads(args[args.index(manifests.BUCKETS_FLAG) + 1])
    assert list(value) == ["time_to_first_token"]
    bounds: list[float] = value["time_to_first_token"]
    return bounds


def test_vllm_033_gets_vllm_s_ttft_buckets_plus_each_objective() -> None:
    bounds = buckets_arg(parse_pool(body()))
    assert bounds is not None
    assert set(bounds) == set(VLLM_TTFT_BUCKETS) | {2.0}  # 0.1 is already a default bound
    # What vLLM's ObservabilityConfig accepts: positive, finite, strictly increasing.
    assert all(b > 0 and math.isfinite(b) for b in bounds)
    assert all(a < b for a, b in itertools.pairwise(bounds))


@pytest.mark.parametrize(
    "image",
    [
        pytest.param("vllm/vllm-openai:v0.11.0", id="vllm-0.11"),
        pytest.param("vllm/vllm-openai:v0.32.1", id="older-vllm"),
        pytest.param("registry.example.com/ml/server:1.4", id="not-a-vllm-tag"),
        pytest.param("vllm/vllm-openai:latest", id="no-version"),
    ],
)
def test_an_image_that_may_not_know_the_flag_does_not_get_it(image: str | None) -> None:
    assert buckets_arg(parse_pool(body(image))) is None


@pytest.mark.parametrize(
    "image", ["docker.io/vllm/vllm-openai:v0.34.2@sha256:" + "a" * 64, "ml/vllm:0.33.1-cu128"]
)
def test_newer_or_rebuilt_vllm_images_get_it(image: str) -> None:
    assert buckets_arg(parse_pool(body(image))) is not None


def test_the_default_image_is_the_vllm_release_the_flags_come_from() -> None:
    assert buckets_arg(parse_pool(body(None))) is not None


def test_extra_args_setting_the_buckets_win() -> None:
    mine = '--custom-histogram-buckets={"request_latency": [1, 2]}'
    pool = parse_pool(body(extra_args=[mine]))
    args = manifests.vllm_args(pool, pool.spec.tiers[0])
    assert manifests.BUCKETS_FLAG not in args and args[-1] == mine


def test_live_buckets_are_read_back_from_the_deployment() -> None:
    pool = parse_pool(body())
    deployment = manifests.deployment(pool, pool.spec.tiers[0], 1)
    assert live_ttft_buckets(deployment) == manifests.ttft_buckets(pool)
    old = manifests.deployment(
        parse_pool(body(image="vllm/vllm-openai:v0.11.0")), pool.spec.tiers[0], 1
    )
    assert live_ttft_buckets(old) is None


def test_an_objective_change_rolls_each_tier_with_an_event() -> None:
    kube = FakeKube()
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    reconciler = Reconciler(kube, NoMetrics(), minimum_plan, kube.telemetry, lambda: now)
    kube.add_pool(body())
    for _ in range(2):
        live = kube.get_pool("llm", "llama3-8b")
        assert live is not None
        first = reconciler.reconcile(live)
    assert not any(e.reason == "HistogramBucketsChanged" for e in first.events)
    live = kube.get_pool("llm", "llama3-8b")
    assert live is not None
    live["spec"]["trafficClasses"][1]["ttftP99Milliseconds"] = 3000
    live["metadata"]["generation"] = live["metadata"].get("generation", 1) + 1
    result = reconciler.reconcile(live)
    rolled = [e for e in result.events if e.reason == "HistogramBucketsChanged"]
    assert [e.message for e in rolled] == [
        f"Rolling tier {t} of llm/llama3-8b: its TTFT histogram buckets changed with the class "
        "objectives (added 3 s; removed 2 s)"
        for t in ("h100", "rtx4090")
    ]
    deployment = kube.objects[("Deployment", "llm", "llama3-8b-h100")]
    assert 3.0 in (live_ttft_buckets(deployment) or [])


def test_no_event_when_the_deployment_was_not_applied() -> None:
    pool = parse_pool(body())
    old = manifests.deployment(
        parse_pool(body(image="vllm/vllm-openai:v0.11.0")), pool.spec.tiers[0], 1
    )
    assert bucket_events(pool, {"llama3-8b-h100": old}, applied=[]) == []
