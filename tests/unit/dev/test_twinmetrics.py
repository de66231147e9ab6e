"""The fleet twin's exposition: vLLM's names, types and buckets, parsed as Prometheus would."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.api.flags import max_model_len_in
from gpufleet.api.parse import parse_pool
from gpufleet.desired.manifests import (
    BUCKETS_FLAG,
    ttft_buckets,
    ttft_buckets_in,
    vllm_args,
)
from gpufleet.dev.twinmetrics import PodMetrics, render_pod
from gpufleet.dev.twinworld import PodInfo, pod_metrics, pod_ttft_buckets
from gpufleet.sim.metrics import PROMPT_TOKEN_BUCKETS, TTFT_BUCKETS
from tests.pools import ROOT, load_example

pytestmark = pytest.mark.timeout(2)

EXAMPLES_DIR = ROOT / "examples"


def test_a_pod_exports_the_prompt_length_histogram_at_vllm_s_buckets() -> None:
    metrics = PodMetrics()
    for prompt in (1, 150, 150, 1800, 9000):
        metrics.request_prompt_tokens.observe(prompt)
    metrics.ttft.observe(0.05)
    families = {
        f.name: f
        for f in text_string_to_metric_families(render_pod(metrics, "llama3-8b", 0, 0, 0.1))
    }
    prompts = families["vllm:request_prompt_tokens"]
    assert prompts.type == "histogram"
    buckets = {
        float(s.labels["le"]): s.value for s in prompts.samples if s.name.endswith("_bucket")
    }
    assert list(buckets) == [*PROMPT_TOKEN_BUCKETS, math.inf]
    assert (buckets[1.0], buckets[100.0], buckets[200.0], buckets[2000.0]) == (1, 1, 3, 4)
    assert buckets[5000.0] == 4 and buckets[math.inf] == 5  # 9000 > max_model_len's bound
    count = next(s.value for s in prompts.samples if s.name.endswith("_count"))
    total = next(s.value for s in prompts.samples if s.name.endswith("_sum"))
    assert (count, total) == (5, 1 + 150 + 150 + 1800 + 9000)
    assert all(s.labels["model_name"] == "llama3-8b" for s in prompts.samples)
    ttft = families["vllm:time_to_first_token_seconds"]
    ttft_bounds = [float(s.labels["le"]) for s in ttft.samples if s.name.endswith("_bucket")]
    assert ttft_bounds == [*TTFT_BUCKETS, math.inf]


def _pod(args: list[str]) -> Any:
    container = client.V1Container(name="vllm", image="vllm/vllm-openai:v0.33.0", args=args)
    return client.V1Pod(spec=client.V1PodSpec(containers=[container]))


def _ttft_bounds(metrics: PodMetrics) -> list[float]:
    families = {
        f.name: f
        for f in text_string_to_metric_families(render_pod(metrics, "llama3-8b", 0, 0, 0.0))
    }
    ttft = families["vllm:time_to_first_token_seconds"]
    return [float(s.labels["le"]) for s in ttft.samples if s.name.endswith("_bucket")]


def test_a_pod_exports_the_ttft_buckets_its_command_line_asks_for() -> None:
    # The operator's own flags for the example pool: vLLM's defaults plus the batch class's
    # 2 s objective (the realtime class's 100 ms is a default bound already).
    pool = parse_pool(load_example())
    args = vllm_args(pool, pool.spec.tiers[1])
    info = replace(_info(), ttft_buckets=pod_ttft_buckets(_pod(args)))
    assert info.ttft_buckets == tuple(ttft_buckets(pool) or ())
    assert _ttft_bounds(pod_metrics(info)) == sorted({*TTFT_BUCKETS, 2.0, math.inf})


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        '{"request_latency": [1, 2]}',  # another family: TTFT keeps its defaults
        '{"time_to_first_token": [0.5, 0.1]}',  # vLLM refuses bounds that fall
        '{"time_to_first_token": [0, 1]}',
        '{"time_to_first_token": ["a"]}',
        '{"time_to_first_token": []}',
    ],
)
def test_a_pod_without_usable_ttft_buckets_exports_vllm_s_defaults(value: str) -> None:
    info = replace(_info(), ttft_buckets=pod_ttft_buckets(_pod([BUCKETS_FLAG, value])))
    assert info.ttft_buckets is None
    assert _ttft_bounds(pod_metrics(info)) == [*TTFT_BUCKETS, math.inf]


def _info() -> PodInfo:
    return PodInfo("uid", "default", "pod", "llama3-8b", "rtx4090", "node-1", True, False)


def test_a_pod_exports_prompt_lengths_up_to_the_context_its_command_line_sets() -> None:
    # --max-model-len=4096 (the qwen14b example): vLLM's 1-2-5 series stops at 2000.
    body = load_example(EXAMPLES_DIR / "qwen14b-4x4090.yaml")
    pool = parse_pool(body)
    pod = _pod(vllm_args(pool, pool.spec.tiers[1]))
    info = replace(_info(), max_model_len=max_model_len_in(pod.spec.containers[0].args))
    assert info.max_model_len == 4096
    metrics = pod_metrics(info)
    metrics.request_prompt_tokens.observe(3000)
    families = {
        f.name: f for f in text_string_to_metric_families(render_pod(metrics, "qwen14b", 0, 0, 0.0))
    }
    prompts = families["vllm:request_prompt_tokens"]
    buckets = {
        float(s.labels["le"]): s.value for s in prompts.samples if s.name.endswith("_bucket")
    }
    assert max(b for b in buckets if math.isfinite(b)) == 2000.0
    assert (buckets[2000.0], buckets[math.inf]) == (0, 1)
    # Without the flag: the series up to MAX_MODEL_LEN, as before.
    assert pod_metrics(_info()).request_prompt_tokens.buckets == PROMPT_TOKEN_BUCKETS


@pytest.mark.parametrize(
    ("args", "tokens"),
    [
        (["--max-model-len=4096"], 4096),
        (["--max-model-len", "8k"], 8000),  # vLLM's human-readable integers
        (["--max_model_len=4K"], 4096),
        (["--max-model-len=25.6k"], 25600),
        (["--max-model-len=4096", "--max-model-len=2048"], 2048),  # the last one wins
        (["--max-model-len=auto"], None),  # the model's own context: unknown here
        (["--max-model-len=-1"], None),
        (["--max-model-len=1.5K"], None),  # vLLM refuses decimals with binary suffixes
        (["--max-model-len=4.5"], None),
        (["--max-model-len"], None),
        ([], None),
    ],
)
def test_the_context_a_command_line_sets(args: list[str], tokens: int | None) -> None:
    assert max_model_len_in(args) == tokens


@pytest.mark.parametrize(
    "args",
    [
        [BUCKETS_FLAG, '{"time_to_first_token": [0.5, 3]}'],
        [f'{BUCKETS_FLAG}={{"time_to_first_token": [0.5, 3]}}'],
        ['--custom_histogram_buckets={"time_to_first_token": [0.5, 3]}'],
        [
            BUCKETS_FLAG,
            '{"time_to_first_token": [9]}',
            BUCKETS_FLAG,
            '{"time_to_first_token": [0.5, 3]}',
        ],
    ],
)
def test_a_command_line_sets_ttft_buckets_in_any_form_vllm_takes(args: list[str]) -> None:
    assert ttft_buckets_in(args) == [0.5, 3.0]
