"""The simulated Prometheus: histogram quantiles and intervals that only see the past."""

from __future__ import annotations

import pytest

from gpufleet.sim.metrics import CutCause, Fate, Recorder, histogram_quantile
from tests.unit.sim.factories import trace

pytestmark = pytest.mark.timeout(2)


def test_histogram_quantile_interpolates_inside_a_bucket_like_prometheus() -> None:
    # 100 samples: 98 in (0.06, 0.08], 2 in (0.25, 0.5]: rank 99 is the first of the two,
    # half way into the (0.25, 0.5] bucket.
    samples = [0.07] * 98 + [0.3, 0.3]
    assert histogram_quantile(0.99, samples) == pytest.approx(0.375)
    # Prometheus does not know the samples sit at 0.07: it interpolates in (0.06, 0.08].
    assert histogram_quantile(0.5, samples) == pytest.approx(0.06 + 0.02 * 50 / 98)


def test_histogram_quantile_of_nothing_is_none_and_of_inf_the_last_bound() -> None:
    assert histogram_quantile(0.99, []) is None
    assert histogram_quantile(0.99, [float("inf")] * 3) == 2560.0


def test_an_interval_reports_only_events_before_its_end() -> None:
    recorder = Recorder(trace([0.0, 1.0, 2.0], prompt=[100, 200, 300], output=[10, 20, 30]), 2)
    for request in range(3):
        recorder.routed(request, request % 2)
    recorder.first_token(0, 0.5)
    recorder.generated(0, 1, 0.5)
    recorder.first_token(1, 1.5)
    recorder.generated(0, 9, 5.0)
    recorder.completed(0, 5.0)
    recorder.generated(1, 4, 29.0)
    recorder.first_token(2, 31.0)  # after the interval's end: not seen yet
    recorder.generated(1, 6, 31.0)
    first = recorder.interval(0.0, 30.0)
    assert first.tiers[0].ttft_samples == [0.5]
    assert first.tiers[0].prompt_tokens == 100
    assert first.tiers[0].generation_tokens == 10
    assert first.tiers[1].generation_tokens == 4  # as generated, before request 1 ends
    assert first.tiers[0].completed == 1
    assert first.tiers[1].ttft_samples == [0.5]
    assert first.class_ttft_samples[1] == [0.5, 0.5]
    second = recorder.interval(30.0, 60.0)
    assert second.tiers[0].ttft_samples == [29.0]
    assert second.tiers[1].ttft_samples == []
    assert second.tiers[1].generation_tokens == 6


def test_fates_are_kept_per_request() -> None:
    recorder = Recorder(trace([0.0, 1.0, 2.0]), 1)
    recorder.routed(0, 0)
    recorder.first_token(0, 0.1)
    recorder.completed(0, 0.5)
    recorder.dropped(1)
    recorder.routed(2, 0)
    recorder.first_token(2, 2.1)
    recorder.cut(2, CutCause.NODE_LOST)
    assert recorder.fate.tolist() == [Fate.COMPLETED, Fate.DROPPED, Fate.CUT]
    assert recorder.cut_cause.tolist() == [CutCause.NONE, CutCause.NONE, CutCause.NODE_LOST]
    assert recorder.ttft[1] == float("inf")


def test_the_exact_quantile_is_the_sample_quantile() -> None:
    from gpufleet.sim.metrics import exact_quantile

    samples = [0.07] * 98 + [0.3, 0.3]
    assert exact_quantile(0.99, samples) == pytest.approx(0.3)
    assert exact_quantile(0.99, []) is None


def test_the_share_above_each_bucket_bound_is_exact_where_the_quantile_interpolates() -> None:
    from gpufleet.sim.metrics import fraction_above

    # 4% of requests at 1.02 s, the rest at 0.9 s: the true P99 is 1.02 s, but
    # histogram_quantile interpolates inside (1, 2.5] and reads 2.125 s, above a 2 s
    # objective. The shares are exact: 4% above 1 s, none above 2.5 s.
    samples = [0.9] * 96 + [1.02] * 4
    assert histogram_quantile(0.99, samples) == pytest.approx(2.125)
    shares = fraction_above(samples)
    assert shares[1.0] == pytest.approx(0.04)
    assert shares[2.5] == 0.0
    assert shares[0.75] == 1.0
    assert fraction_above([0.1])[0.1] == 0.0  # le is "at most": a sample on a bound is within
    assert fraction_above([]) == {}


def test_prompt_buckets_are_vllm_s_1_2_5_series_up_to_the_context() -> None:
    from gpufleet.sim.metrics import PROMPT_TOKEN_BUCKETS, request_tokens_buckets

    # vLLM 0.33.0: build_1_2_5_buckets(100) == [1, 2, 5, 10, 20, 50, 100].
    assert request_tokens_buckets(100) == (1, 2, 5, 10, 20, 50, 100)
    assert request_tokens_buckets(8192) == PROMPT_TOKEN_BUCKETS
    assert PROMPT_TOKEN_BUCKETS[-3:] == (1000, 2000, 5000)


def test_the_share_of_prompts_at_most_each_bound() -> None:
    from gpufleet.sim.metrics import share_at_most

    shares = share_at_most([100] * 50 + [1500] * 40 + [6000] * 10)
    assert shares[100.0] == pytest.approx(0.5)  # at most: a prompt on a bound is within
    assert shares[1000.0] == pytest.approx(0.5)
    assert shares[2000.0] == pytest.approx(0.9)
    assert shares[5000.0] == pytest.approx(0.9)  # beyond the last bound: only in +Inf
    assert share_at_most([]) == {}


def test_an_interval_lists_the_prompts_of_the_requests_it_completed() -> None:
    recorder = Recorder(trace([0.0, 1.0, 2.0], prompt=[10, 20, 30]), 1)
    for request in range(3):
        recorder.routed(request, 0)
        recorder.first_token(request, request + 0.5)
    recorder.completed(0, 5.0)
    recorder.completed(1, 15.0)
    assert recorder.interval(0.0, 10.0).tiers[0].completed_prompts == [10]
    assert recorder.interval(10.0, 20.0).tiers[0].completed_prompts == [20]


def test_a_window_reads_the_reported_events_of_its_exact_span() -> None:
    """A rate window longer than an interval (a slow scrape): the recorder keeps what it
    reported for `keep_seconds` and reads [start, end) from it, no more."""
    recorder = Recorder(trace([0.0, 1.0, 2.0, 3.0], prompt=[10, 20, 30, 40]), 1, keep_seconds=40.0)
    for request, time in enumerate([5.0, 25.0, 35.0, 55.0]):
        recorder.routed(request, 0)
        recorder.first_token(request, time)
        recorder.completed(request, time + 1.0)
    assert recorder.interval(0.0, 30.0).tiers[0].prompt_tokens == 30
    assert recorder.interval(30.0, 60.0).tiers[0].prompt_tokens == 70
    window = recorder.window(20.0, 60.0)  # 40 s: the first request is out, the rest in
    assert window.tiers[0].prompt_tokens == 90
    assert window.tiers[0].completed_prompts == [20, 30, 40]
    assert sum(len(samples) for samples in window.class_ttft_samples) == 3
    # Kept no longer than needed, a whole report at a time: after the report to 90 s, the
    # one to 30 s (every event in it older than 50 s) is gone; the one to 60 s stays whole.
    assert recorder.interval(60.0, 90.0).tiers[0].prompt_tokens == 0
    assert recorder.window(0.0, 90.0).tiers[0].prompt_tokens == 70
    assert recorder.window(50.0, 90.0).tiers[0].prompt_tokens == 40


def test_reports_between_intervals_read_like_one_interval() -> None:
    """The engine reports at every stop (passes, checks of the queue watch, interval ends):
    a window over several reports reads what one report over the same span would, and the
    queue watch's light count agrees with it."""
    times = [5.0, 12.0, 18.0, 26.0]
    whole = Recorder(trace([0.0, 1.0, 2.0, 3.0], prompt=[10, 20, 30, 40]), 1, keep_seconds=30.0)
    parts = Recorder(trace([0.0, 1.0, 2.0, 3.0], prompt=[10, 20, 30, 40]), 1, keep_seconds=30.0)
    for recorder in (whole, parts):
        for request, time in enumerate(times):
            recorder.routed(request, 0)
            recorder.first_token(request, time)
            recorder.completed(request, time + 1.0)
    whole.report(30.0)
    for end in (7.5, 15.0, 22.5, 30.0):
        parts.report(end)
    for start, end in ((0.0, 30.0), (10.0, 20.0), (6.0, 27.0)):
        a, b = whole.window(start, end).tiers[0], parts.window(start, end).tiers[0]
        assert (a.prompt_tokens, a.completed, a.completed_prompts) == (
            b.prompt_tokens,
            b.completed,
            b.completed_prompts,
        )
        assert parts.prompts_and_completions(start, end) == [(b.prompt_tokens, b.completed)]
    assert parts.prompts_and_completions(10.0, 20.0) == [(50, 2)]


def test_without_keep_seconds_nothing_is_kept_for_windows() -> None:
    recorder = Recorder(trace([0.0], prompt=[10]), 1)
    recorder.routed(0, 0)
    recorder.first_token(0, 5.0)
    assert recorder.interval(0.0, 30.0).tiers[0].prompt_tokens == 10
    assert recorder.window(0.0, 30.0).tiers[0].prompt_tokens == 0
