"""Every PromQL query gpufleet sends, as pure builders (unit tested, no I/O).

Metric names are the ones vLLM's OpenAI server exports: the
`vllm:time_to_first_token_seconds` and `vllm:request_prompt_tokens` histograms (the latter's
buckets a 1-2-5 series up to the model's max_model_len, observed when a request finishes;
vLLM 0.33.0 `vllm/v1/metrics/loggers.py`), the `vllm:prompt_tokens_total`,
`vllm:generation_tokens_total` and `vllm:request_success_total` counters, the
`vllm:num_requests_waiting` / `vllm:num_requests_running` gauges and
`vllm:kv_cache_usage_perc` (`vllm:gpu_cache_usage_perc` before vLLM 0.10).

Series are selected and aggregated by the pod labels the operator puts on every vLLM pod,
`gpufleet.dev/pool` and `gpufleet.dev/tier`, **as Prometheus stores them**: a label name
cannot hold '.' or '/', so Kubernetes service discovery exposes them as
`__meta_kubernetes_pod_label_gpufleet_dev_pool` / `..._tier`, and the scrape config must
keep them as `gpufleet_dev_pool` and `gpufleet_dev_tier`, plus the pod's `namespace`:

    relabel_configs:
    - action: labelmap
      regex: __meta_kubernetes_pod_label_(gpufleet_dev_pool|gpufleet_dev_tier)
    - source_labels: [__meta_kubernetes_namespace]
      target_label: namespace
    - source_labels: [__meta_kubernetes_pod_name]   # only for the scale-down ranking
      target_label: pod

Metric names are matched as `vllm[:_]name`: prometheus_client (what vLLM exports with) has
written the ':' of metric names as '_' in its OpenMetrics output (0.26 does), and
Prometheus asks for OpenMetrics first, so the same pod may be stored under either spelling.

With the Prometheus Operator, the chart's `prometheus.vllmPodMonitor` PodMonitor does the
same, with these relabelings.
"""

from __future__ import annotations

from dataclasses import dataclass

POOL_LABEL = "gpufleet_dev_pool"
TIER_LABEL = "gpufleet_dev_tier"
NAMESPACE_LABEL = "namespace"
# The pod's name (`__meta_kubernetes_pod_name`; a PodMonitor adds it as `pod` itself): only
# the scale-down ranking (`in_flight_by_pod`) needs it.
POD_LABEL = "pod"

TTFT_BUCKET = "vllm:time_to_first_token_seconds_bucket"
PROMPT_BUCKET = "vllm:request_prompt_tokens_bucket"
PROMPT_SUM = "vllm:request_prompt_tokens_sum"
PROMPT_COUNT = "vllm:request_prompt_tokens_count"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUESTS = "vllm:request_success_total"
WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE = "vllm:kv_cache_usage_perc"
KV_CACHE_OLD = "vllm:gpu_cache_usage_perc"


def escape(value: str) -> str:
    """A label value inside double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def selector(namespace: str, pool: str) -> str:
    """Label matchers of one pool's series: `namespace="llm",gpufleet_dev_pool="llama3-8b"`."""
    return f'{NAMESPACE_LABEL}="{escape(namespace)}",{POOL_LABEL}="{escape(pool)}"'


def series(metric: str, sel: str) -> str:
    """A vLLM metric under either spelling of its name, for one pool's matchers."""
    name = metric.replace(":", "[:_]", 1)
    return f'{{__name__=~"{name}",{sel}}}'


def duration(seconds: int) -> str:
    return f"{max(int(seconds), 1)}s"


def ttft_p99(sel: str, window_seconds: int) -> str:
    """P99 time to first token per tier over the window (NaN where no request finished)."""
    return (
        f"histogram_quantile(0.99, sum by ({TIER_LABEL}, le) "
        f"(rate({series(TTFT_BUCKET, sel)}[{duration(window_seconds)}])))"
    )


def ttft_buckets(sel: str, window_seconds: int) -> str:
    """Per tier and bucket bound `le`, the rate of first tokens at most that slow.

    The share slower than a bound is exact (1 - bucket / +Inf bucket), unlike a quantile,
    which Prometheus interpolates linearly inside a bucket: with vLLM's buckets a 2 s
    objective sits inside (1, 2.5], where a true P99 of 1.0 s can read as 2.3 s.
    """
    return (
        f"sum by ({TIER_LABEL}, le) (rate({series(TTFT_BUCKET, sel)}[{duration(window_seconds)}]))"
    )


def prompt_buckets(sel: str, window_seconds: int) -> str:
    """Per tier and bucket bound `le`, the rate of finished requests with a prompt at most
    that long: over the +Inf bucket, the share of the window's prompts at most each bound."""
    return (
        f"sum by ({TIER_LABEL}, le) "
        f"(rate({series(PROMPT_BUCKET, sel)}[{duration(window_seconds)}]))"
    )


def prompt_mean(sel: str, window_seconds: int) -> str:
    """Per tier, the mean prompt of the requests that finished in the window, from the same
    histogram as `prompt_buckets` (NaN where none finished)."""
    total = rate_by_tier(PROMPT_SUM, sel, window_seconds)
    count = rate_by_tier(PROMPT_COUNT, sel, window_seconds)
    return f"{total} / {count}"


def rate_by_tier(metric: str, sel: str, window_seconds: int) -> str:
    """Per-second rate of a counter, summed per tier."""
    return f"sum by ({TIER_LABEL}) (rate({series(metric, sel)}[{duration(window_seconds)}]))"


def sum_by_tier(metric: str, sel: str) -> str:
    """A gauge summed over a tier's pods."""
    return f"sum by ({TIER_LABEL}) ({series(metric, sel)})"


def in_flight_by_pod(namespace: str, pool: str, tier: str) -> str:
    """Requests each pod of one tier holds: running on the GPU plus queued (both are lost or
    drained when the pod leaves)."""
    sel = f'{selector(namespace, pool)},{TIER_LABEL}="{escape(tier)}"'
    both = RUNNING.removesuffix("running") + "(running|waiting)"
    return f"sum by ({POD_LABEL}) ({series(both, sel)})"


def kv_cache_usage(sel: str) -> str:
    """Mean KV-cache usage (0..1) per tier, under either of vLLM's names for it."""
    return (
        f"avg by ({TIER_LABEL}) ({series(KV_CACHE, sel)}) "
        f"or avg by ({TIER_LABEL}) ({series(KV_CACHE_OLD, sel)})"
    )


def sample_age(sel: str) -> str:
    """Seconds since each tier's newest sample, as Prometheus's own clock sees it."""
    return f"time() - max by ({TIER_LABEL}) (timestamp({series(RUNNING, sel)}))"


def waiting_every_pool() -> str:
    """Across every pool at once, per namespace, pool and tier: the requests waiting. One
    query for the whole fleet, however many pools, for the queue watch between passes
    (`gpufleet.queuewatch`)."""
    return f"sum by ({_EVERY_POOL}) ({series(WAITING, _ANY_POOL)})"


def prompt_rate_every_pool(window_seconds: int) -> str:
    """Across every pool at once, per namespace, pool and tier: prompt tokens/s over the
    window (short: what a tier is sent now, for the queue watch)."""
    rate = f"rate({series(PROMPT_TOKENS, _ANY_POOL)}[{duration(window_seconds)}])"
    return f"sum by ({_EVERY_POOL}) ({rate})"


def requests_every_pool(window_seconds: int) -> str:
    """Across every pool at once, per namespace, pool and tier: requests completed over the
    window."""
    increase = f"increase({series(REQUESTS, _ANY_POOL)}[{duration(window_seconds)}])"
    return f"sum by ({_EVERY_POOL}) ({increase})"


def pods_every_pool() -> str:
    """Across every pool at once, per namespace, pool and tier: the pods reporting."""
    return f"count by ({_EVERY_POOL}) ({series(RUNNING, _ANY_POOL)})"


_EVERY_POOL = f"{NAMESPACE_LABEL}, {POOL_LABEL}, {TIER_LABEL}"
_ANY_POOL = f'{POOL_LABEL}!=""'


@dataclass(frozen=True)
class PoolQueries:
    """The queries of one pass for one pool."""

    sample_age: str
    ttft_p99: str
    ttft_buckets: str
    prompt_buckets: str
    prompt_mean: str
    prompt_tokens: str
    generation_tokens: str
    requests: str
    waiting: str
    kv_cache: str


def pool_queries(namespace: str, pool: str, window_seconds: int) -> PoolQueries:
    sel = selector(namespace, pool)
    return PoolQueries(
        sample_age=sample_age(sel),
        ttft_p99=ttft_p99(sel, window_seconds),
        ttft_buckets=ttft_buckets(sel, window_seconds),
        prompt_buckets=prompt_buckets(sel, window_seconds),
        prompt_mean=prompt_mean(sel, window_seconds),
        prompt_tokens=rate_by_tier(PROMPT_TOKENS, sel, window_seconds),
        generation_tokens=rate_by_tier(GENERATION_TOKENS, sel, window_seconds),
        requests=rate_by_tier(REQUESTS, sel, window_seconds),
        waiting=sum_by_tier(WAITING, sel),
        kv_cache=kv_cache_usage(sel),
    )
