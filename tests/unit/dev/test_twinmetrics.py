"""The fleet twin's exposition: vLLM's names, types and buckets, parsed as Prometheus would."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.dev.twinmetrics import PodMetrics, render_pod
from gpufleet.sim.metrics import PROMPT_TOKEN_BUCKETS, TTFT_BUCKETS

pytestmark = pytest.mark.timeout(2)


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
