"""PromQL builders, and the Prometheus adapter on a fake client.

(The adapter against a real Prometheus: tests/integration/test_prometheus_adapter.py; what
the operator infers per class from its readings: tests/unit/planning/test_observed.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from gpufleet.adapters import promql
from gpufleet.adapters.prometheus import PrometheusMetrics
from gpufleet.api.types import InferencePool
from gpufleet.planning.observed import ClassObservations, observe_classes
from gpufleet.planning.records import MetricsState
from tests.pools import pool

pytestmark = pytest.mark.timeout(2)

SEL = promql.selector("llm", "llama3-8b")


# -- PromQL -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        pytest.param(SEL, 'namespace="llm",gpufleet_dev_pool="llama3-8b"', id="selector"),
        pytest.param(
            promql.selector('a"b', "c\\d"),
            'namespace="a\\"b",gpufleet_dev_pool="c\\\\d"',
            id="escaping",
        ),
        pytest.param(
            promql.ttft_p99(SEL, 60),
            'histogram_quantile(0.99, sum by (gpufleet_dev_tier, le) (rate({__name__=~"vllm[:_]'
            'time_to_first_token_seconds_bucket",namespace="llm",gpufleet_dev_pool="llama3-8b"}[60s])))',
            id="ttft-p99",
        ),
        pytest.param(
            promql.rate_by_tier(promql.PROMPT_TOKENS, SEL, 30),
            'sum by (gpufleet_dev_tier) (rate({__name__=~"vllm[:_]prompt_tokens_total",'
            'namespace="llm",gpufleet_dev_pool="llama3-8b"}[30s]))',
            id="prompt-tokens",
        ),
        pytest.param(
            promql.sum_by_tier(promql.WAITING, SEL),
            'sum by (gpufleet_dev_tier) ({__name__=~"vllm[:_]num_requests_waiting",'
            'namespace="llm",gpufleet_dev_pool="llama3-8b"})',
            id="waiting",
        ),
        pytest.param(
            promql.waiting_every_pool(),
            "sum by (namespace, gpufleet_dev_pool, gpufleet_dev_tier) "
            '({__name__=~"vllm[:_]num_requests_waiting",gpufleet_dev_pool!=""})',
            id="waiting-every-pool",
        ),
        pytest.param(
            promql.prompt_rate_every_pool(5),
            "sum by (namespace, gpufleet_dev_pool, gpufleet_dev_tier) "
            '(rate({__name__=~"vllm[:_]prompt_tokens_total",gpufleet_dev_pool!=""}[5s]))',
            id="prompt-rate-every-pool",
        ),
        pytest.param(
            promql.requests_every_pool(5),
            "sum by (namespace, gpufleet_dev_pool, gpufleet_dev_tier) "
            '(increase({__name__=~"vllm[:_]request_success_total",gpufleet_dev_pool!=""}[5s]))',
            id="requests-every-pool",
        ),
        pytest.param(
            promql.pods_every_pool(),
            "count by (namespace, gpufleet_dev_pool, gpufleet_dev_tier) "
            '({__name__=~"vllm[:_]num_requests_running",gpufleet_dev_pool!=""})',
            id="pods-every-pool",
        ),
        pytest.param(
            promql.kv_cache_usage(SEL),
            'avg by (gpufleet_dev_tier) ({__name__=~"vllm[:_]kv_cache_usage_perc",namespace="llm",'
            'gpufleet_dev_pool="llama3-8b"}) or avg by (gpufleet_dev_tier) ({__name__=~"vllm[:_]'
            'gpu_cache_usage_perc",namespace="llm",gpufleet_dev_pool="llama3-8b"})',
            id="kv-cache-both-names",
        ),
        pytest.param(
            promql.sample_age(SEL),
            "time() - max by (gpufleet_dev_tier) (timestamp("
            '{__name__=~"vllm[:_]num_requests_running",'
            'namespace="llm",gpufleet_dev_pool="llama3-8b"}))',
            id="sample-age",
        ),
    ],
)
def test_promql(built: str, expected: str) -> None:
    assert built == expected


def test_pool_queries_use_the_window_everywhere_a_rate_is_taken() -> None:
    queries = promql.pool_queries("llm", "llama3-8b", 45)
    rates = [
        queries.ttft_p99,
        queries.ttft_buckets,
        queries.prompt_buckets,
        queries.prompt_mean,
        queries.prompt_tokens,
        queries.generation_tokens,
        queries.requests,
    ]
    assert all("[45s]" in q for q in rates)
    assert "rate(" not in queries.waiting and "rate(" not in queries.kv_cache


# -- the adapter on a fake Prometheus ---------------------------------------------------------


class FakePrometheus:
    """Answers queries by the first matching key in `answers` (substring of the query)."""

    def __init__(self, answers: dict[str, Any] | Callable[[str], Any]) -> None:
        self.answers = answers
        self.queries: list[str] = []

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        self.queries.append(query)
        if callable(self.answers):
            return self.answers(query)
        for key, value in self.answers.items():
            if key in query:
                if isinstance(value, BaseException):
                    raise value
                return value
        return []


def vector(**by_tier: float | str) -> list[dict[str, Any]]:
    return [
        {"metric": {"gpufleet_dev_tier": t}, "value": [1.0, str(v)]} for t, v in by_tier.items()
    ]


def inference_pool(realtime_query: str | None = None) -> InferencePool:
    body = pool(namespace="llm", scaling={"intervalSeconds": 30})
    if realtime_query is not None:
        body["spec"]["trafficClasses"][0]["demandQuery"] = realtime_query
    body["status"] = {
        "classes": [
            {"name": "realtime", "weights": [{"tier": "h100", "weight": 100}]},
            {"name": "batch", "weights": [{"tier": "rtx4090", "weight": 100}]},
        ]
    }
    return InferencePool.model_validate(body)


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def read(answers: dict[str, Any] | Callable[[str], Any], realtime_query: str | None = None) -> Any:
    pool_ = inference_pool(realtime_query)
    return PrometheusMetrics(client=FakePrometheus(answers)).read(pool_, NOW)


def classes_of(reading: Any) -> ClassObservations:
    """What the operator makes of the reading per class (as gpufleet.observe.observe)."""
    pool_ = inference_pool()
    return observe_classes(pool_.spec, pool_.status, reading.tiers, reading.demand_queries)


def test_reads_tiers_and_infers_demand() -> None:
    reading = read(
        {
            "time() -": vector(h100=3, rtx4090=5),
            "histogram_quantile": vector(h100=0.03, rtx4090="NaN"),
            "prompt_tokens": vector(h100=500, rtx4090=3000),
            "generation_tokens": vector(h100=500, rtx4090=3000),
            "request_success": vector(h100=2.5, rtx4090=15),
            "waiting": vector(h100=0, rtx4090=7),
            "cache_usage": vector(h100=0.1, rtx4090=0.9),
        }
    )
    assert reading.state is MetricsState.AVAILABLE
    # What `kubectl describe` shows under MetricsAvailable: the window every rate spans
    # (the pool's 30 s interval, and four of the adapter's default 15 s scrapes).
    assert reading.message.endswith(
        "rates and P99 over the last 60 s (the 30 s interval, and at least 4 scrapes of 15 s)"
    )
    assert reading.window_seconds == 60.0  # the observe step reads the weights over it
    assert reading.tiers["h100"].ttft_p99_seconds == 0.03
    assert reading.tiers["rtx4090"].ttft_p99_seconds is None  # NaN: no request finished
    assert reading.demand_queries == {}  # no class has a demandQuery
    seen = classes_of(reading)
    realtime, batch = seen.demand["realtime"], seen.demand["batch"]
    assert realtime is not None and batch is not None
    assert realtime.tokens_per_second == pytest.approx(1000)
    # The 4090s served 6000 tokens/s and hold 7 waiting requests: batch's backlog, at its
    # mean request size (200 + 200 tokens), to drain once rather than demand to plan for.
    assert batch.tokens_per_second == pytest.approx(6000)
    assert seen.backlog_tokens == {"realtime": 0.0, "batch": pytest.approx(7 * 400)}
    assert seen.ttft_p99_seconds == {"realtime": 0.03, "batch": None}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(vector(h100=600, rtx4090=400), 1000.0, id="summed"),
        pytest.param([1.0, "-5"], -5.0, id="scalar-as-said"),
        pytest.param([], None, id="empty"),
        pytest.param(requests.exceptions.ConnectionError(), None, id="unreachable"),
    ],
)
def test_a_demand_query_is_returned_as_prometheus_answered_it(
    answer: Any, expected: float | None
) -> None:
    reading = read(
        {"time() -": vector(h100=1, rtx4090=1), "gateway_tokens": answer},
        realtime_query="sum(rate(gateway_tokens[30s]))",
    )
    assert reading.state is MetricsState.AVAILABLE
    assert reading.demand_queries == {"realtime": expected}


@pytest.mark.parametrize(
    ("answers", "state"),
    [
        pytest.param(
            {"time() -": requests.exceptions.ConnectionError()},
            MetricsState.UNREACHABLE,
            id="refused",
        ),
        pytest.param(
            {"time() -": requests.exceptions.Timeout()}, MetricsState.UNREACHABLE, id="timeout"
        ),
        pytest.param({"time() -": []}, MetricsState.NO_DATA, id="no-series"),
        pytest.param({"time() -": vector(h100=61, rtx4090=900)}, MetricsState.STALE, id="stale"),
        pytest.param(
            {"time() -": vector(h100=59, rtx4090=900)}, MetricsState.AVAILABLE, id="one-fresh-tier"
        ),
    ],
)
def test_states(answers: dict[str, Any], state: MetricsState) -> None:
    assert read(answers).state is state


def test_a_stale_tier_reads_as_no_data_while_the_others_count() -> None:
    reading = read(
        {"time() -": vector(h100=2, rtx4090=900), "prompt_tokens": vector(h100=10, rtx4090=99)}
    )
    assert reading.tiers["h100"].prompt_tokens_per_second == 10
    assert reading.tiers["rtx4090"].prompt_tokens_per_second is None


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param([{"metric": {}, "value": [1, "3"]}], id="no-tier-label"),
        pytest.param([{"metric": {"gpufleet_dev_tier": "h100"}, "value": "x"}], id="bad-value"),
        pytest.param({"unexpected": "shape"}, id="not-a-list"),
        pytest.param(ValueError("bad json"), id="bad-json"),
    ],
)
def test_bad_answers_degrade_to_missing_values_never_raise(garbage: Any) -> None:
    reading = read({"time() -": vector(h100=1, rtx4090=1), "prompt_tokens": garbage})
    assert reading.state is MetricsState.AVAILABLE
    assert reading.tiers["h100"].prompt_tokens_per_second is None


def buckets(tier: str, **by_le: float) -> list[dict[str, Any]]:
    return [
        {
            "metric": {
                "gpufleet_dev_tier": tier,
                "le": le.replace("_", ".").replace("inf", "+Inf"),
            },
            "value": [1.0, str(v)],
        }
        for le, v in by_le.items()
    ]


def test_the_bucket_query_sums_rates_by_tier_and_le() -> None:
    assert promql.ttft_buckets(SEL, 30) == (
        'sum by (gpufleet_dev_tier, le) (rate({__name__=~"vllm[:_]'
        'time_to_first_token_seconds_bucket",namespace="llm",gpufleet_dev_pool="llama3-8b"}[30s]))'
    )


def test_the_share_slower_than_each_bucket_bound_is_read_exactly() -> None:
    # 100 requests/s on the 4090s: 97 within 1 s, 99.5 within 2.5 s. histogram_quantile
    # would put the P99 at 1 + 1.5 * 2 / 2.5 = 2.2 s (inside the bucket); the shares say
    # exactly 3% are slower than 1 s and 0.5% slower than 2.5 s.
    series = buckets("rtx4090", **{"0_5": 60.0, "1_0": 97.0, "2_5": 99.5, "inf": 100.0})
    series += buckets("h100", **{"0_1": 0.0, "inf": 0.0})  # no request: no entry

    def answer(query: str) -> Any:
        if query.startswith("time() -"):
            return vector(h100=1, rtx4090=1)
        if query.startswith("sum by (gpufleet_dev_tier, le)"):
            return series
        return []

    reading = read(answer)
    shares = reading.tiers["rtx4090"].ttft_fraction_above
    assert shares == {0.5: pytest.approx(0.4), 1.0: pytest.approx(0.03), 2.5: pytest.approx(0.005)}
    assert reading.tiers["h100"].ttft_fraction_above == {}


def test_a_stale_tier_has_no_bucket_shares() -> None:
    series = buckets("rtx4090", **{"1_0": 9.0, "inf": 10.0})

    def answer(query: str) -> Any:
        if query.startswith("time() -"):
            return vector(h100=1, rtx4090=900)
        return series if query.startswith("sum by (gpufleet_dev_tier, le)") else []

    assert read(answer).tiers["rtx4090"].ttft_fraction_above == {}


def test_waiting_requests_are_a_backlog_priced_at_the_class_s_size() -> None:
    # The 4090s serve 3000 prompt tokens/s (2 req/s completed) with 60 requests waiting.
    # Tokens served per request completed (1500) over-count a queue's requests when
    # prefills run ahead of completions: they are priced at batch's mean size instead.
    answers = {
        "time() -": vector(h100=1, rtx4090=1),
        "prompt_tokens": vector(h100=0, rtx4090=3000),
        "generation_tokens": vector(h100=0, rtx4090=0),
        "request_success": vector(h100=0, rtx4090=2),
        "waiting": vector(h100=0, rtx4090=60),
    }
    seen = classes_of(read(answers))
    batch = seen.demand["batch"]
    assert batch is not None
    assert batch.tokens_per_second == pytest.approx(3000)
    assert seen.backlog_tokens["batch"] == pytest.approx(60 * 400)


def test_the_prompt_bucket_query_sums_rates_by_tier_and_le() -> None:
    assert promql.prompt_buckets(SEL, 30) == (
        'sum by (gpufleet_dev_tier, le) (rate({__name__=~"vllm[:_]'
        'request_prompt_tokens_bucket",namespace="llm",gpufleet_dev_pool="llama3-8b"}[30s]))'
    )


def test_the_prompt_mean_is_the_histogram_s_sum_over_its_count() -> None:
    sum_ = 'sum by (gpufleet_dev_tier) (rate({__name__=~"vllm[:_]request_prompt_tokens_sum",'
    count = 'sum by (gpufleet_dev_tier) (rate({__name__=~"vllm[:_]request_prompt_tokens_count",'
    pool_ = 'namespace="llm",gpufleet_dev_pool="llama3-8b"}[30s]))'
    assert promql.prompt_mean(SEL, 30) == f"{sum_}{pool_} / {count}{pool_}"


def _prompt_answers(
    series: list[dict[str, Any]], ages: dict[str, float], means: dict[str, float] | None = None
) -> Callable[[str], Any]:
    def answer(query: str) -> Any:
        if query.startswith("time() -"):
            return vector(**ages)
        if "request_prompt_tokens_bucket" in query:
            return series
        if "request_prompt_tokens_sum" in query:
            return vector(**(means or {}))
        return []

    return answer


def test_the_share_of_prompts_at_most_each_bucket_bound_is_read() -> None:
    # 10 requests/s finished on the 4090s: 5 with prompts of at most 500 tokens, 9 at most
    # 2000, 9.9 at most 5000; the last 0.1 only in +Inf (longer than the last bound).
    series = buckets("rtx4090", **{"500": 5.0, "2000": 9.0, "5000": 9.9, "inf": 10.0})
    series += buckets("h100", **{"100": 0.0, "inf": 0.0})  # nothing finished: no entry
    reading = read(_prompt_answers(series, {"h100": 1, "rtx4090": 1}))
    shares = reading.tiers["rtx4090"].prompt_share_at_most
    assert shares == {500.0: pytest.approx(0.5), 2000.0: pytest.approx(0.9), 5000.0: 0.99}
    assert reading.tiers["h100"].prompt_share_at_most == {}
    # TTFT shares come from their own query, untouched.
    assert reading.tiers["rtx4090"].ttft_fraction_above == {}


def test_the_prompt_mean_is_read_per_tier_and_left_out_where_stale() -> None:
    series = buckets("rtx4090", **{"1000": 9.0, "inf": 10.0})
    means = {"rtx4090": 812.5, "h100": 300.0}
    reading = read(_prompt_answers(series, {"h100": 900, "rtx4090": 1}, means))
    assert reading.tiers["rtx4090"].prompt_mean_tokens == pytest.approx(812.5)
    assert reading.tiers["h100"].prompt_mean_tokens is None  # its series are stale


def test_prompt_shares_are_clamped_and_skip_malformed_series() -> None:
    series = buckets("rtx4090", **{"1000": 10.5, "inf": 10.0})  # rates of counters read apart
    series.append({"metric": {"gpufleet_dev_tier": "rtx4090"}, "value": [1.0, "3"]})  # no le
    series.append({"metric": {"gpufleet_dev_tier": "rtx4090", "le": "x"}, "value": [1.0, "3"]})
    reading = read(_prompt_answers(series, {"h100": 1, "rtx4090": 1}))
    assert reading.tiers["rtx4090"].prompt_share_at_most == {1000.0: 1.0}


def test_a_stale_tier_has_no_prompt_shares() -> None:
    series = buckets("rtx4090", **{"1000": 9.0, "inf": 10.0})
    reading = read(_prompt_answers(series, {"h100": 1, "rtx4090": 900}))
    assert reading.tiers["rtx4090"].prompt_share_at_most == {}


def test_every_pools_queues_pair_the_waiting_sum_with_pods_and_rates_and_skip_garbage() -> None:
    def series(namespace: str, pool_: str, tier: str, value: str) -> dict[str, Any]:
        labels = {"namespace": namespace, "gpufleet_dev_pool": pool_, "gpufleet_dev_tier": tier}
        return {"metric": labels, "value": [1.0, value]}

    answers = {
        "sum by (namespace, gpufleet_dev_pool, gpufleet_dev_tier) (rate(": [
            series("llm", "a", "h100", "2500.5")
        ],
        "(increase(": [series("llm", "a", "h100", "31")],
        "sum by": [
            series("llm", "a", "h100", "12"),
            series("llm", "a", "rtx4090", "0"),
            series("team", "b", "h100", "NaN"),
            {"metric": {"namespace": "llm"}, "value": [1.0, "3"]},
        ],
        "count by": [series("llm", "a", "h100", "3"), series("llm", "a", "rtx4090", "2")],
    }
    prometheus = FakePrometheus(answers)
    queues = PrometheusMetrics(client=prometheus).queues(10)
    assert queues == {
        ("llm", "a"): {"h100": (12.0, 3, 2500.5, 31.0), "rtx4090": (0.0, 2, None, None)}
    }
    assert any("[10s]" in q for q in prometheus.queries)
