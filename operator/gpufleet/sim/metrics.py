"""What happened to every request, and what Prometheus would have shown per interval.

The `Recorder` keeps each request's fate (first token, completion, drop, cut and why) and
the stream of first-token and completion events. At each decision time the engine asks for
the interval that just ended: only events before that time count, so the planner sees
the past and nothing else. A rate window longer than an interval (the operator's, at a
slow scrape) reads the events of its exact span (`window`): the recorder keeps reported
events that long. Latency quantiles are computed the way the operator reads them:
`histogram_quantile(0.99, ...)` over vLLM's TTFT histogram buckets, with Prometheus's
linear interpolation inside a bucket, not the exact sample quantile. The buckets are the
ones the operator asks the pool's vLLM for (`gpufleet.desired.manifests.ttft_buckets`:
vLLM's defaults plus a bound at each class objective, on images that take the flag), or
vLLM's defaults where it asks for none (`TTFT_BUCKETS`). The share of requests
slower than each bucket bound (`fraction_above`) is what the operator's adapter reads from
the same buckets: exact at the bounds, in either metrics mode. The share of requests
whose prompt was at most each bound of vLLM's `vllm:request_prompt_tokens` buckets
(`share_at_most`) is read the same way; vLLM observes a request's prompt when it finishes.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from gpufleet.api.flags import max_model_len_in
from gpufleet.planning.observed import metrics_window_seconds
from gpufleet.sim.traces import Trace

_E = TypeVar("_E", tuple[float, int], tuple[float, int, int])  # a recorded event
# One report's events: (its end, first tokens, completions, tokens).
_Report = tuple[
    float, list[tuple[float, int]], list[tuple[float, int]], list[tuple[float, int, int]]
]

# vllm:time_to_first_token_seconds default buckets (the same in vLLM 0.8 and 0.33).
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip


# vllm:request_prompt_tokens buckets (vLLM 0.33.0, vllm/v1/metrics/buckets.py):
# build_1_2_5_buckets(max_model_len), 1, 2, 5, 10, 20, 50, ... up to the model's context.
# The context is the pool's `--max-model-len` (`manifests.max_model_len_in`); MAX_MODEL_LEN
# (Llama-3-8B's 8192, the first example's) where its flags set none. The fleet twin exports
# the same buckets, from each pod's command line.
MAX_MODEL_LEN = 8192


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series of token-count bucket bounds capped at `max_model_len`."""
    bounds: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(bounds)
            bounds.append(float(value))
        exponent += 1


def prompt_buckets_of(args: Sequence[str]) -> tuple[float, ...]:
    """The prompt-length bounds a pod started with these vLLM flags exports."""
    return request_tokens_buckets(max_model_len_in(args) or MAX_MODEL_LEN)


PROMPT_TOKEN_BUCKETS: tuple[float, ...] = request_tokens_buckets(MAX_MODEL_LEN)


def histogram_quantile(
    q: float, samples: Sequence[float], bounds: Sequence[float] = TTFT_BUCKETS
) -> float | None:
    """Prometheus's histogram_quantile over buckets `bounds` of `samples`; None without
    samples."""
    if not samples:
        return None
    counts = [0] * (len(bounds) + 1)
    for value in samples:
        counts[bisect.bisect_left(bounds, value)] += 1
    rank = q * len(samples)
    cumulative = 0
    for i, count in enumerate(counts):
        if cumulative + count >= rank and count > 0:
            if i == len(bounds):  # the +Inf bucket: Prometheus answers its lower bound
                return float(bounds[-1])
            lower = 0.0 if i == 0 else bounds[i - 1]
            upper = bounds[i]
            return lower + (upper - lower) * (rank - cumulative) / count
        cumulative += count
    return float(bounds[-1])


def fraction_above(
    samples: Sequence[float], bounds: Sequence[float] = TTFT_BUCKETS
) -> dict[float, float]:
    """Bucket bound -> share of `samples` above it (1 - bucket / +Inf bucket); {} if none."""
    if not samples:
        return {}
    values = np.sort(np.asarray(samples, dtype=np.float64))
    within = np.searchsorted(values, bounds, side="right")  # samples <= le
    n = len(values)
    return {float(le): float(1.0 - k / n) for le, k in zip(bounds, within.tolist(), strict=True)}


def share_at_most(
    samples: Sequence[float], bounds: Sequence[float] = PROMPT_TOKEN_BUCKETS
) -> dict[float, float]:
    """Bucket bound -> share of `samples` at most it (bucket / +Inf bucket); {} if none."""
    if not samples:
        return {}
    values = np.sort(np.asarray(samples, dtype=np.float64))
    within = np.searchsorted(values, bounds, side="right")  # samples <= le
    n = len(values)
    return {float(le): float(k / n) for le, k in zip(bounds, within.tolist(), strict=True)}


def exact_quantile(q: float, samples: Sequence[float]) -> float | None:
    """The sample quantile: what a perfect metric would report (for what-ifs)."""
    if not samples:
        return None
    return float(np.percentile(np.asarray(samples), q * 100.0))


class Fate(IntEnum):
    PENDING = 0  # still in a replica (or never routed)
    COMPLETED = 1
    DROPPED = 2  # no Ready replica on any tier the class may use
    CUT = 3  # aborted in its replica before it completed (`CutCause` says why)


class CutCause(IntEnum):
    """Why a request was cut: what a user would ask first about a lost stream."""

    NONE = 0  # not cut
    NODE_LOST = 1  # its replica's node went away (preemption) mid-decode
    # its replica was removed (scaled down, or evicted on a notice of its node's loss) and
    # the pool's drain time ran out before it finished
    DRAIN_TIMEOUT = 2

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ")

    @property
    def key(self) -> str:
        """camelCase, for JSON."""
        first, *rest = self.name.lower().split("_")
        return first + "".join(word.capitalize() for word in rest)


CUT_CAUSES: tuple[CutCause, ...] = (CutCause.NODE_LOST, CutCause.DRAIN_TIMEOUT)


@dataclass
class TierInterval:
    """One tier's metrics over an interval."""

    ttft_samples: list[float] = field(default_factory=list)
    prompt_tokens: int = 0  # prompts prefilled
    generation_tokens: int = 0  # output tokens generated (vLLM counts them each step)
    completed: int = 0
    completed_prompts: list[int] = field(default_factory=list)  # prompt lengths of those


@dataclass
class Interval:
    """Every tier's and class's metrics over [start, end)."""

    start: float
    end: float
    tiers: list[TierInterval]
    class_ttft_samples: list[list[float]]


class Recorder:
    """Per-request outcomes of one run, and the events the metrics are made of."""

    def __init__(self, trace: Trace, n_tiers: int, keep_seconds: float = 0.0) -> None:
        n = len(trace)
        # Reported events stay this long for `window` (0: none stay).
        self.keep_seconds = keep_seconds
        # What each report moved here, oldest first: (its end, first tokens, completions,
        # tokens). Whole reports are dropped once older than `keep_seconds`, so a report
        # costs what it carries, however often the engine reports.
        self._kept: collections.deque[_Report] = collections.deque()
        self.arrival: list[float] = trace.arrival_seconds.tolist()
        self.prompt: list[int] = trace.prompt_tokens.tolist()
        self.output: list[int] = trace.output_tokens.tolist()
        self.class_of: list[int] = trace.class_index.tolist()
        self.n_classes = len(trace.classes)
        self.n_tiers = n_tiers
        self.ttft: NDArray[np.float64] = np.full(n, np.inf)
        self.done: NDArray[np.float64] = np.full(n, np.nan)
        self.tier_of: NDArray[np.int64] = np.full(n, -1, dtype=np.int64)
        self.fate: NDArray[np.int64] = np.zeros(n, dtype=np.int64)
        self.cut_cause: NDArray[np.int64] = np.zeros(n, dtype=np.int64)
        self._first_events: list[tuple[float, int]] = []
        self._done_events: list[tuple[float, int]] = []
        self._token_events: list[tuple[float, int, int]] = []  # (time, request, tokens)

    # -- the engine reports here -----------------------------------------------------------

    def first_token(self, request: int, time: float) -> None:
        self.ttft[request] = time - self.arrival[request]
        self._first_events.append((time, request))

    def generated(self, request: int, tokens: int, time: float) -> None:
        self._token_events.append((time, request, tokens))

    def completed(self, request: int, time: float) -> None:
        self.done[request] = time
        self.fate[request] = Fate.COMPLETED
        self._done_events.append((time, request))

    def routed(self, request: int, tier: int) -> None:
        self.tier_of[request] = tier

    def dropped(self, request: int) -> None:
        self.fate[request] = Fate.DROPPED
        self.ttft[request] = np.inf

    def cut(self, request: int, cause: CutCause) -> None:
        self.fate[request] = Fate.CUT
        self.cut_cause[request] = cause

    # -- the metrics -----------------------------------------------------------------------

    def interval(self, start: float, end: float) -> Interval:
        """Metrics of events before `end` not yet reported (those after wait for later)."""
        return self._metrics(start, end, *self.report(end))

    def report(
        self, end: float
    ) -> tuple[list[tuple[float, int]], list[tuple[float, int]], list[tuple[float, int, int]]]:
        """The events before `end` not yet reported (first tokens, completions, tokens),
        now kept for `window` (those after wait for later)."""
        first, first_later = _split(self._first_events, end)
        done, done_later = _split(self._done_events, end)
        tokens, tokens_later = _split(self._token_events, end)
        self._first_events, self._done_events, self._token_events = (
            first_later,
            done_later,
            tokens_later,
        )
        if self.keep_seconds > 0:
            self._kept.append((end, first, done, tokens))
            while self._kept and self._kept[0][0] <= end - self.keep_seconds:
                self._kept.popleft()  # every event in it is older than anything kept is for
        return first, done, tokens

    def window(self, start: float, end: float) -> Interval:
        """Metrics of the reported events in [start, end): what a rate or P99 window reads
        (at most `keep_seconds` back)."""
        reports = [r for r in self._kept if r[0] > start]  # the older hold nothing after it
        first = [e for r in reports for e in r[1] if start <= e[0] < end]
        done = [e for r in reports for e in r[2] if start <= e[0] < end]
        tokens = [e for r in reports for e in r[3] if start <= e[0] < end]
        return self._metrics(start, end, first, done, tokens)

    def prompts_and_completions(self, start: float, end: float) -> list[tuple[int, int]]:
        """Per tier, the prompt tokens prefilled and the requests completed in [start, end)
        among the reported events (the queue watch's short window): lighter than `window`."""
        counts = [[0, 0] for _ in range(self.n_tiers)]
        for report_end, first, done, _ in self._kept:
            if report_end <= start:
                continue
            for when, request in first:
                if start <= when < end:
                    counts[int(self.tier_of[request])][0] += self.prompt[request]
            for when, request in done:
                if start <= when < end:
                    counts[int(self.tier_of[request])][1] += 1
        return [(p, c) for p, c in counts]

    def _metrics(
        self,
        start: float,
        end: float,
        first: list[tuple[float, int]],
        done: list[tuple[float, int]],
        tokens: list[tuple[float, int, int]],
    ) -> Interval:
        tiers = [TierInterval() for _ in range(self.n_tiers)]
        classes: list[list[float]] = [[] for _ in range(self.n_classes)]
        for _, request in first:
            tier = tiers[int(self.tier_of[request])]
            value = float(self.ttft[request])
            tier.ttft_samples.append(value)
            tier.prompt_tokens += self.prompt[request]
            classes[self.class_of[request]].append(value)
        for _, request in done:
            tier = tiers[int(self.tier_of[request])]
            tier.completed += 1
            tier.completed_prompts.append(self.prompt[request])
        for _, request, count in tokens:
            tiers[int(self.tier_of[request])].generation_tokens += count
        return Interval(start, end, tiers, classes)


def _split(events: list[_E], end: float) -> tuple[list[_E], list[_E]]:
    """Events before `end`, and the rest."""
    before = [e for e in events if e[0] < end]
    return before, [e for e in events if e[0] >= end] if len(before) < len(events) else []


def window_seconds(interval: float, scrape_interval_seconds: float | None) -> float:
    """The span of a pass's rates and P99s (SimConfig.scrape_interval_seconds); a policy
    with foresight sees its own interval's arrivals instead."""
    if scrape_interval_seconds is None:
        return interval
    return metrics_window_seconds(interval, scrape_interval_seconds)


def busy_share(marks: list[tuple[float, float]], start: float, end: float, total: float) -> float:
    """Busy replicas on average over [start, end): `marks` are (time, busy replica-seconds
    so far) at earlier passes, `total` the count at `end`; between marks it grew evenly."""
    times = [t for t, _ in marks]
    start = max(start, times[0])
    k = bisect.bisect_right(times, start) - 1
    at = marks[k][1]
    if k + 1 < len(marks) and times[k + 1] > times[k]:
        at += (marks[k + 1][1] - at) * (start - times[k]) / (times[k + 1] - times[k])
    elif k + 1 == len(marks) and end > times[k]:
        at += (total - at) * (start - times[k]) / (end - times[k])
    return (total - at) / (end - start) if end > start else 0.0
