"""What-if numbers from the engine: P99 TTFT against load and prompt length, and capacity.

A steady Poisson stream (the benchmark's arrival process and ShareGPT-like lengths with the
given means) through one replica: at least `REQUESTS` requests and at least `STEADY_SECONDS`
of arrivals, so a rate the replica cannot sustain shows a queue that keeps growing rather
than the short backlog of a 400-request run (which let one RTX 4090 with Llama 3 8B "hold"
15.5 req/s within 2 s where it sustains 12.8). Capacity is the highest rate whose P99 TTFT stays
under an objective (bisection; the same seeded draws scale with 1/rate, so P99 grows with
the rate up to the draws' noise), never above the sustained throughput: requests completed
per second while a backlog keeps the engine at its largest batch (the middle half of
`SATURATED_REQUESTS` offered at twice the decode bound, so neither the first prefills nor
the drain of the last long outputs count).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray

from gpufleet.perf.engine import simulate
from gpufleet.perf.roofline import Replica
from gpufleet.perf.workload import (
    MAX_PROMPT,
    MAX_TOTAL,
    poisson_arrivals,
    sharegpt_lengths,
)

REQUESTS = 400
STEADY_SECONDS = 90.0
MAX_REQUESTS = 3000
SATURATED_REQUESTS = 600
SATURATED_OFFERED = 2.0  # x the decode bound


def lengths(
    n: int, mean_prompt: float, mean_output: float
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """ShareGPT-like lengths with these means. The benchmark's filter (prompts up to 1024
    tokens, pairs up to 2048) holds at its own shape; for longer requests each limit is
    raised to four times its mean, so a what-if for 4,096-token prompts gets them rather
    than the longest 1,024-token ones a clip would leave."""
    max_prompt = max(MAX_PROMPT, math.ceil(4 * mean_prompt))
    max_total = max(MAX_TOTAL, max_prompt + math.ceil(4 * mean_output))
    return sharegpt_lengths(n, mean_prompt, mean_output, max_prompt=max_prompt, max_total=max_total)


@functools.lru_cache(maxsize=512)  # bisections for several objectives share their first rates
def p99_ttft_seconds(
    replica: Replica, rate: float, mean_prompt: float, mean_output: float, n: int = REQUESTS
) -> float:
    """P99 TTFT of Poisson requests at `rate` req/s, at least `n` of them and at least
    `STEADY_SECONDS` of arrivals (inf when some are never served)."""
    n = max(n, min(MAX_REQUESTS, math.ceil(rate * STEADY_SECONDS)))
    arrivals, _ = poisson_arrivals(rate, n)
    prompts, outputs = lengths(n, mean_prompt, mean_output)
    result = simulate(replica, arrivals, prompts, outputs)
    ttft = np.where(np.isnan(result.ttft), np.inf, result.ttft)
    return float(np.percentile(ttft, 99))


def decode_bound_rps(replica: Replica, mean_prompt: float, mean_output: float) -> float:
    """An upper bound on the sustainable rate: the whole KV cache decoding at full batch."""
    kv = replica.kv_capacity_tokens()
    if kv <= 0:
        return 0.0
    batch = max(1, min(replica.engine.max_num_seqs, int(kv / (mean_prompt + mean_output))))
    ctx = batch * (mean_prompt + mean_output / 2)
    step = replica.step_seconds(batch, batch, ctx, ctx)
    prefill = replica.step_seconds(int(mean_prompt), 1, mean_prompt**2 / 2, 0)
    per_request = mean_output * step / batch + prefill
    return 1.0 / per_request * 1.5


def sustained_rps(replica: Replica, mean_prompt: float, mean_output: float) -> float:
    """Requests completed per second under a backlog (see the module docstring); 0 when
    most requests are never served."""
    bound = decode_bound_rps(replica, mean_prompt, mean_output) / 1.5
    if bound <= 0:
        return 0.0
    arrivals, _ = poisson_arrivals(bound * SATURATED_OFFERED, SATURATED_REQUESTS)
    prompts, outputs = lengths(SATURATED_REQUESTS, mean_prompt, mean_output)
    busy = simulate(replica, arrivals, prompts, outputs)
    done = np.sort(busy.finish[~np.isnan(busy.finish)])
    if len(done) < SATURATED_REQUESTS // 2:
        return 0.0
    lo, hi = len(done) // 4, 3 * len(done) // 4
    return (hi - lo) / max(float(done[hi] - done[lo]), 1e-9)


def capacity_rps(
    replica: Replica,
    objective_s: float,
    mean_prompt: float,
    mean_output: float,
    n: int = REQUESTS,
    iterations: int = 14,
) -> float:
    """The highest rate (req/s) at which P99 TTFT stays within `objective_s`, at most the
    sustained throughput (0 if none)."""
    hi = min(
        decode_bound_rps(replica, mean_prompt, mean_output),
        sustained_rps(replica, mean_prompt, mean_output),
    )
    lo = 0.0
    if hi <= 0 or p99_ttft_seconds(replica, hi / 64, mean_prompt, mean_output, n) > objective_s:
        return 0.0
    if p99_ttft_seconds(replica, hi, mean_prompt, mean_output, n) <= objective_s:
        return hi
    lo = hi / 64
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        if p99_ttft_seconds(replica, mid, mean_prompt, mean_output, n) <= objective_s:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.02:
            break
    return lo
