"""The client-side rate limit: a burst at once, then qps per second, waits counted."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.adapters.ratelimit import TokenBucket, limit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_burst_goes_at_once_then_requests_wait_their_turn() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock.time, sleep=clock.sleep)
    assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take() == pytest.approx(0.1)  # the fourth waits one token's time
    assert bucket.take() == pytest.approx(0.1)
    clock.now += 10  # idle: the bucket refills, but only up to the burst
    assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take() > 0


def test_a_rate_of_n_per_second_holds_over_many_requests() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=50, burst=10, clock=clock.time, sleep=clock.sleep)
    for _ in range(510):
        bucket.take()
    # 10 at once, then 500 at 50/s.
    assert clock.now == pytest.approx(10.0)


def test_limit_wraps_every_request_and_reports_the_wait() -> None:
    clock = Clock()

    class Api:
        calls = 0

        def call_api(self, *args: Any, **kwargs: Any) -> str:
            Api.calls += 1
            return "ok"

    api = Api()
    waits: list[float] = []
    limit(api, TokenBucket(qps=1, burst=1, clock=clock.time, sleep=clock.sleep), waits.append)
    assert [api.call_api("GET", "/api") for _ in range(3)] == ["ok", "ok", "ok"]
    assert Api.calls == 3
    assert waits == [pytest.approx(1.0), pytest.approx(1.0)]


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 5), (5, 0)])
def test_nonsense_limits_are_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps must be above 0"):
        TokenBucket(qps, burst)


def test_the_kubernetes_client_goes_through_the_limit() -> None:
    """The real ApiClient: a typed API call is counted by the bucket (a refused connection
    to a closed loopback port answers it)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    clock = Clock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock.time, sleep=clock.sleep)
    waits: list[float] = []
    limit(api_client, bucket, waits.append)
    for _ in range(2):
        with pytest.raises(Exception):  # noqa: B017 (connection refused, any client error)
            client.CoreV1Api(api_client).list_namespace(_request_timeout=1)
    assert waits == [pytest.approx(1.0)], "the second call waited for its token"
