"""Reads a pool's vLLM metrics from Prometheus (prometheus-api-client) for the planner.

`PrometheusMetrics(url).read(pool, now)` returns a `MetricsReading`: per tier P99 TTFT,
the share of first tokens slower than each TTFT bucket bound (exact where the P99 is
interpolated, for feedback), the share of finished requests whose prompt was at most each
`vllm:request_prompt_tokens` bucket bound, prompt and generated tokens/s, requests/s, queue
and KV-cache use; per class what its `demandQuery` answered; and whether any of it can be trusted
(`MetricsState`):
- Prometheus does not answer            -> UNREACHABLE
- it answers with no series for the pool -> NO_DATA (the message says what the scrape
  config must keep: see `gpufleet.adapters.promql`)
- the pool's newest sample is older than two decision intervals -> STALE
Never raises: bad answers are logged and read as missing values.

It reports what Prometheus said and nothing more: per-class demand and P99 are worked out
from these readings and the live weights by `gpufleet.planning.observed.observe_classes`
(in `gpufleet.reconcile.observe`), the same function the simulator uses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from gpufleet.adapters import promql
from gpufleet.api.types import InferencePool
from gpufleet.planning.observed import SCRAPES_PER_WINDOW, metrics_window_seconds
from gpufleet.planning.records import MetricsReading, MetricsState, TierMetrics

log = logging.getLogger(__name__)

STALE_INTERVALS = 2


# One tier's queue watch reading: requests waiting, pods, prompt tokens/s, requests done.
Queue = tuple[float, int, float | None, float | None]


class QueryClient(Protocol):
    """The part of PrometheusConnect the adapter uses (fakes implement it in tests)."""

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any: ...


class Unreachable(Exception):
    """Prometheus did not answer."""


class PrometheusMetrics:
    """A metrics source reading vLLM series from one Prometheus."""

    def __init__(
        self,
        url: str = "",
        *,
        client: QueryClient | None = None,
        scrape_interval_seconds: int = 15,
        timeout_seconds: float = 5.0,
    ) -> None:
        self.url = url
        self.scrape_interval_seconds = scrape_interval_seconds
        if client is None:
            client = PrometheusConnect(
                url=url,
                retry=Retry(total=1, backoff_factor=0, status_forcelist=[502, 503, 504]),
                timeout=timeout_seconds,
            )
        self.client = client

    def window_seconds(self, pool: InferencePool) -> int:
        """Rate window: a decision interval, and at least four scrapes."""
        return math.ceil(
            metrics_window_seconds(pool.spec.scaling.interval_seconds, self.scrape_interval_seconds)
        )

    def read(self, pool: InferencePool, now: datetime) -> MetricsReading:
        """The pool's metrics over the last window; never raises."""
        namespace, name = pool.metadata.namespace, pool.metadata.name
        queries = promql.pool_queries(namespace, name, self.window_seconds(pool))
        try:
            ages = self._by_tier(queries.sample_age)
        except Unreachable as failed:
            return MetricsReading(
                MetricsState.UNREACHABLE, f"Prometheus at {self.url} did not answer: {failed}"
            )
        if not ages:
            return MetricsReading(
                MetricsState.NO_DATA,
                f"No vLLM series with {promql.POOL_LABEL}={name} in namespace {namespace}: "
                f"the scrape config must keep the pod labels as {promql.POOL_LABEL} and "
                f"{promql.TIER_LABEL}, and namespace",
            )
        stale_after = STALE_INTERVALS * max(
            pool.spec.scaling.interval_seconds, self.scrape_interval_seconds
        )
        newest = min(ages.values())
        if newest > stale_after:
            return MetricsReading(
                MetricsState.STALE,
                f"The newest vLLM sample of the pool is {newest:.0f} s old (> {stale_after} s)",
            )
        fresh = {t for t, age in ages.items() if age <= stale_after}
        try:
            values = {
                field: self._by_tier(query)
                for field, query in (
                    ("ttft_p99_seconds", queries.ttft_p99),
                    ("prompt_tokens_per_second", queries.prompt_tokens),
                    ("prompt_mean_tokens", queries.prompt_mean),
                    ("generation_tokens_per_second", queries.generation_tokens),
                    ("requests_per_second", queries.requests),
                    ("requests_waiting", queries.waiting),
                    ("kv_cache_usage", queries.kv_cache),
                )
            }
            buckets = self._fraction_above(queries.ttft_buckets)
            prompts = self._share_at_most(queries.prompt_buckets)
        except Unreachable as failed:
            return MetricsReading(
                MetricsState.UNREACHABLE, f"Prometheus at {self.url} stopped answering: {failed}"
            )
        tiers = {
            t.name: TierMetrics(
                **_fields_of(t.name, values, fresh),
                ttft_fraction_above=buckets.get(t.name, {}) if t.name in fresh else {},
                prompt_share_at_most=prompts.get(t.name, {}) if t.name in fresh else {},
            )
            for t in pool.spec.tiers
        }
        window = self.window_seconds(pool)
        return MetricsReading(
            MetricsState.AVAILABLE,
            f"Read {len(fresh)} tier(s) of {name} from Prometheus: rates and P99 over the "
            f"last {window} s (the {pool.spec.scaling.interval_seconds} s interval, and at "
            f"least {SCRAPES_PER_WINDOW} scrapes of {self.scrape_interval_seconds} s)",
            tiers=tiers,
            demand_queries=self._demand_queries(pool),
            window_seconds=float(window),
        )

    def requests_in_flight(self, pool: InferencePool, tier: str) -> dict[str, float] | None:
        """pod -> requests it holds (running and queued) for one tier; None when Prometheus
        does not answer, so a scale-down goes ahead without a ranking."""
        query = promql.in_flight_by_pod(pool.metadata.namespace, pool.metadata.name, tier)
        try:
            return self._by_label(query, promql.POD_LABEL)
        except Unreachable:
            return None

    def queues(self, window_seconds: int) -> dict[tuple[str, str], dict[str, Queue]] | None:
        """(namespace, pool) -> tier -> (requests waiting, pods reporting, prompt tokens/s
        and requests completed over the window, each None when there is no rate yet), for
        every pool at once (the queue watch); None when Prometheus does not answer."""
        try:
            waiting = self._by_labels(promql.waiting_every_pool())
            pods = self._by_labels(promql.pods_every_pool())
            rates = self._by_labels(promql.prompt_rate_every_pool(window_seconds))
            done = self._by_labels(promql.requests_every_pool(window_seconds))
        except Unreachable:
            return None
        out: dict[tuple[str, str], dict[str, Queue]] = {}
        for (namespace, pool, tier), value in waiting.items():
            key = (namespace, pool, tier)
            row = (value, int(pods.get(key, 0)), rates.get(key), done.get(key))
            out.setdefault((namespace, pool), {})[tier] = row
        return out

    # -- queries -------------------------------------------------------------------------

    def _query(self, query: str) -> Any:
        try:
            return self.client.custom_query(query)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as failed:
            raise Unreachable(type(failed).__name__) from failed
        except PrometheusApiClientException as failed:
            if "HTTP Status Code 5" in str(failed):
                raise Unreachable(str(failed)[:200]) from failed
            log.warning("Prometheus refused query %s: %s", query, failed)
            return []
        except (requests.exceptions.RequestException, ValueError, KeyError) as failed:
            log.warning("Read no answer to %s from Prometheus: %s", query, failed)
            return []

    def _by_tier(self, query: str) -> dict[str, float]:
        """tier -> value of a query aggregated by tier (NaN and garbage left out)."""
        return self._by_label(query, promql.TIER_LABEL)

    def _by_label(self, query: str, label: str) -> dict[str, float]:
        """label value -> value of a query aggregated by that label (NaN and garbage left
        out); raises Unreachable when Prometheus does not answer."""
        return {key[0]: value for key, value in self._by(query, (label,)).items()}

    def _by_labels(self, query: str) -> dict[tuple[str, str, str], float]:
        """(namespace, pool, tier) -> value of a query aggregated by those labels."""
        labels = (promql.NAMESPACE_LABEL, promql.POOL_LABEL, promql.TIER_LABEL)
        return {(k[0], k[1], k[2]): v for k, v in self._by(query, labels).items()}

    def _by(self, query: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
        """The values of `labels` -> value of a query aggregated by them (NaN and garbage
        left out); raises Unreachable when Prometheus does not answer."""
        out: dict[tuple[str, ...], float] = {}
        result = self._query(query)
        for series in result if isinstance(result, list) else []:
            try:
                key = tuple(series["metric"][label] for label in labels)
                value = float(series["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                log.warning("Ignored a malformed series in the answer to %s", query)
                continue
            if math.isfinite(value):
                out[key] = value
        return out

    def _fraction_above(self, query: str) -> dict[str, dict[float, float]]:
        """tier -> {bucket bound: share of first tokens slower} from cumulative bucket rates.

        A tier with no +Inf bucket or no request in the window has no entry.
        """
        return {
            tier: {bound: 1.0 - share for bound, share in shares.items()}
            for tier, shares in self._share_at_most(query).items()
        }

    def _share_at_most(self, query: str) -> dict[str, dict[float, float]]:
        """tier -> {bucket bound: share of observations at most it} from cumulative bucket
        rates (each finite bound over the +Inf bucket, clamped to [0, 1]).

        A tier with no +Inf bucket or no observation in the window has no entry.
        """
        cumulative: dict[str, dict[float, float]] = {}
        result = self._query(query)
        if not isinstance(result, list):
            return {}
        for series in result:
            try:
                tier = series["metric"][promql.TIER_LABEL]
                bound = float(series["metric"]["le"])  # "+Inf" parses as inf
                value = float(series["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                log.warning("Ignored a malformed series in the answer to %s", query)
                continue
            if math.isfinite(value) and not math.isnan(bound):
                cumulative.setdefault(tier, {})[bound] = value
        out: dict[str, dict[float, float]] = {}
        for tier, counts in cumulative.items():
            total = counts.get(math.inf)
            if total is None or total <= 0:
                continue
            out[tier] = {
                bound: min(max(count / total, 0.0), 1.0)
                for bound, count in sorted(counts.items())
                if math.isfinite(bound)
            }
        return out

    def _scalar(self, query: str) -> float | None:
        """Sum of a user's query (vector or scalar); None when empty or unusable."""
        result = self._query(query)
        values: list[float] = []
        try:
            if isinstance(result, list) and result and not isinstance(result[0], dict):
                values = [float(result[1])]  # a scalar: [time, "value"]
            elif isinstance(result, list):
                values = [float(series["value"][1]) for series in result]
        except (KeyError, IndexError, TypeError, ValueError):
            log.warning("Ignored a malformed answer to demand query %s", query)
            return None
        finite = [v for v in values if math.isfinite(v)]
        return sum(finite) if finite else None

    # -- demand --------------------------------------------------------------------------

    def _demand_queries(self, pool: InferencePool) -> dict[str, float | None]:
        """class -> what its demandQuery answered (tokens/s; None: no usable answer)."""
        answers: dict[str, float | None] = {}
        for cls in pool.spec.traffic_classes:
            if cls.demand_query is not None:
                try:
                    answers[cls.name] = self._scalar(cls.demand_query)
                except Unreachable:
                    answers[cls.name] = None
        return answers


def _fields_of(
    tier: str, values: Mapping[str, Mapping[str, float]], fresh: set[str]
) -> dict[str, Any]:
    """TierMetrics' scalar fields of one tier (None where its series are stale or absent)."""
    return {
        field: (by_tier.get(tier) if tier in fresh else None) for field, by_tier in values.items()
    }
