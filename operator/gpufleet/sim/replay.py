"""Replay a `benchmark_serving` run through one simulated replica.

This is how the simulator's engine is checked on its own against the io.net measurements:
vLLM's benchmark sends N requests with exponential gaps at the offered rate (burstiness 1)
and reports P99 TTFT over them and tokens/s as all prompt plus generated tokens divided
by the run's duration (first send to last completion). Replaying the same run here and
comparing the two numbers with the raw files tests the engine's queueing, batching and
drain, none of which comes from the planner's fitted P99 curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.sim.replica import EngineParams, Replica


@dataclass(frozen=True)
class BenchmarkResult:
    ttft_p99_seconds: float
    tokens_per_second: float
    completed_rps: float
    mean_tpot_seconds: float


class _Times:
    def __init__(self, n: int) -> None:
        self.first = np.full(n, np.nan)
        self.done = np.full(n, np.nan)

    def first_token(self, request: int, time: float) -> None:
        self.first[request] = time

    def completed(self, request: int, time: float) -> None:
        self.done[request] = time


def replay_benchmark(
    params: EngineParams,
    *,
    rate_rps: float,
    prompt_tokens: list[int],
    output_tokens: list[int],
    seed: int = 0,
) -> BenchmarkResult:
    """One benchmark run of len(prompt_tokens) requests at `rate_rps`, as benchmark_serving."""
    n = len(prompt_tokens)
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_rps, size=n)
    arrival = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
    times = _Times(n)
    replica = Replica(params, prompt_tokens, output_tokens, times)
    for i in range(n):
        replica.enqueue(i, float(arrival[i]) + params.overhead)
    replica.drain()
    ttft = times.first - arrival
    duration = float(np.max(times.done))
    decode = np.array(output_tokens) - 1
    has_decode = decode > 0
    tpot = (times.done - times.first)[has_decode] / decode[has_decode]
    return BenchmarkResult(
        ttft_p99_seconds=float(np.percentile(ttft, 99)),
        tokens_per_second=float(sum(prompt_tokens) + sum(output_tokens)) / duration,
        completed_rps=n / duration,
        mean_tpot_seconds=float(np.mean(tpot)) if len(tpot) else 0.0,
    )
