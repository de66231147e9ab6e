"""The fleet twin's metrics: vLLM's names and buckets per replica, a gateway's per route and class.

Written in the Prometheus text format by hand (no client library registry per pod): a
replica's series are exactly vLLM's, with its `model_name` label, and the histograms have
vLLM's buckets: TTFT (`gpufleet.sim.metrics.TTFT_BUCKETS`, or the ones the pod's command
line sets with `--custom-histogram-buckets`, as vLLM 0.33 does; the simulator reads the same
ones) and prompt tokens per finished request (`vllm:request_prompt_tokens`, vLLM's 1-2-5
series up to the context the pod's `--max-model-len` sets, `PROMPT_TOKEN_BUCKETS` without
one; the simulator's prompt shares). `gpufleet.dev.twinworld.pod_metrics` picks them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufleet.sim.metrics import PROMPT_TOKEN_BUCKETS, TTFT_BUCKETS


def _labels(labels: Mapping[str, str]) -> str:
    def esc(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


@dataclass
class Histogram:
    """A cumulative Prometheus histogram over `buckets` (upper bounds, +Inf implied)."""

    buckets: tuple[float, ...] = TTFT_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        index = next((i for i, b in enumerate(self.buckets) if value <= b), len(self.buckets))
        self.counts[index] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: Mapping[str, str]) -> list[str]:
        out = []
        cumulative = 0
        for bound, count in zip((*self.buckets, math.inf), self.counts, strict=True):
            cumulative += count
            le = _labels({**labels, "le": _number(bound)})
            out.append(f"{name}_bucket{{{le}}} {cumulative}")
        out.append(f"{name}_sum{{{_labels(labels)}}} {_number(self.total)}")
        out.append(f"{name}_count{{{_labels(labels)}}} {self.count}")
        return out


@dataclass
class PodMetrics:
    """The counters of one vLLM replica."""

    ttft: Histogram = field(default_factory=Histogram)
    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: int = 0
    # Prompt length of each finished request (vLLM observes it when the request finishes).
    request_prompt_tokens: Histogram = field(
        default_factory=lambda: Histogram(buckets=PROMPT_TOKEN_BUCKETS)
    )


def render_pod(
    metrics: PodMetrics, model_name: str, running: int, waiting: int, kv_usage: float
) -> str:
    """A replica's /metrics in the Prometheus text format, under vLLM's names."""
    labels = {"model_name": model_name}
    lab = _labels(labels)
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{lab}}} {running}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{lab}}} {waiting}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{lab}}} {_number(round(kv_usage, 4))}",
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{lab}}} {metrics.prompt_tokens}",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{lab}}} {metrics.generation_tokens}",
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        f"vllm:request_success_total{{{_labels({**labels, 'finished_reason': 'length'})}}} "
        f"{metrics.success}",
        "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        *metrics.ttft.lines("vllm:time_to_first_token_seconds", labels),
        "# HELP vllm:request_prompt_tokens Number of prefill tokens processed.",
        "# TYPE vllm:request_prompt_tokens histogram",
        *metrics.request_prompt_tokens.lines("vllm:request_prompt_tokens", labels),
    ]
    return "\n".join(lines) + "\n"


@dataclass
class GatewayClass:
    """What the gateway counted for one class of one pool."""

    tokens: int = 0
    requests: dict[tuple[str, str], int] = field(default_factory=dict)  # (tier, code) -> n
    ttft: Histogram = field(default_factory=Histogram)


def render_gateway(gateway: Mapping[tuple[str, str, str], GatewayClass]) -> str:
    """The gateway's /metrics: per route (pool) and class, keyed (namespace, pool, class)."""
    lines = [
        "# HELP gpufleet_dev_gateway_tokens_total Tokens offered per route and class "
        "(prompt plus requested output), counted at arrival.",
        "# TYPE gpufleet_dev_gateway_tokens_total counter",
    ]
    items = sorted(gateway.items())
    for (ns, pool, cls), g in items:
        labels = {"namespace": ns, "httproute": pool, "traffic_class": cls}
        lines.append(f"gpufleet_dev_gateway_tokens_total{{{_labels(labels)}}} {g.tokens}")
    lines += [
        "# HELP gpufleet_dev_gateway_requests_total Requests per route, class, "
        "backend tier and response code.",
        "# TYPE gpufleet_dev_gateway_requests_total counter",
    ]
    for (ns, pool, cls), g in items:
        for (tier, code), n in sorted(g.requests.items()):
            labels = {
                "namespace": ns,
                "httproute": pool,
                "traffic_class": cls,
                "backend_tier": tier,
                "code": code,
            }
            lines.append(f"gpufleet_dev_gateway_requests_total{{{_labels(labels)}}} {n}")
    lines += [
        "# HELP gpufleet_dev_gateway_ttft_seconds Time to first token per route and "
        "class, as clients saw it.",
        "# TYPE gpufleet_dev_gateway_ttft_seconds histogram",
    ]
    for (ns, pool, cls), g in items:
        labels = {"namespace": ns, "httproute": pool, "traffic_class": cls}
        lines += g.ttft.lines("gpufleet_dev_gateway_ttft_seconds", labels)
    return "\n".join(lines) + "\n"
