"""What-if numbers from the engine: P99 TTFT against load and prompt length, and capacity.

A steady Poisson stream of `n` requests (the benchmark's arrival process and ShareGPT-like
lengths with the given means) through one replica; capacity is the highest rate whose P99
TTFT stays under an objective (bisection; the same seeded draws scale with 1/rate, so P99
grows with the rate up to the draws' noise).
"""

from __future__ import annotations

import math

import numpy as np

from gpufleet.perf.engine import simulate
from gpufleet.perf.roofline import Replica
from gpufleet.perf.workload import poisson_arrivals, sharegpt_lengths

REQUESTS = 400


def p99_ttft_seconds(
    replica: Replica, rate: float, mean_prompt: float, mean_output: float, n: int = REQUESTS
) -> float:
    """P99 TTFT of `n` Poisson requests at `rate` req/s (inf when some are never served)."""
    arrivals, _ = poisson_arrivals(rate, n)
    prompts, outputs = sharegpt_lengths(n, mean_prompt, mean_output)
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


def capacity_rps(
    replica: Replica,
    objective_s: float,
    mean_prompt: float,
    mean_output: float,
    n: int = REQUESTS,
    iterations: int = 14,
) -> float:
    """The highest rate (req/s) at which P99 TTFT stays within `objective_s` (0 if none)."""
    hi = decode_bound_rps(replica, mean_prompt, mean_output)
    lo = 0.0
    if hi <= 0 or p99_ttft_seconds(replica, hi / 64, mean_prompt, mean_output, n) > objective_s:
        return 0.0
    lo = hi / 64
    for _ in range(iterations):
        mid = math.sqrt(lo * hi)
        if p99_ttft_seconds(replica, mid, mean_prompt, mean_output, n) <= objective_s:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.01:
            break
    return lo
