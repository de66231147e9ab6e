"""How a leaving vLLM replica drains: the times its pod spec carries, derived from the pool.

When a pod is deleted (a scale-down, a rollout, a node going away) three things happen in
order, all inside `terminationGracePeriodSeconds`:

1. the preStop hook sleeps while the pod's endpoint is removed from the Service and the
   gateway stops picking it (endpoint removal and SIGTERM start at the same time, so
   without the pause new requests would still arrive at a server that is stopping);
2. vLLM gets SIGTERM and, with `--shutdown-timeout N` (N > 0), stops taking new requests
   and lets the ones in flight finish for up to N seconds, then aborts the rest
   (vLLM 0.33 `vllm/v1/engine/core.py` `_handle_shutdown`: 0 aborts at once, its default);
3. the engine tears down; the kubelet kills whatever is left at the end of the grace period.

So the grace period is the pause, plus the drain, plus room for the teardown.
"""

from __future__ import annotations

import math

from gpufleet.api.types import MAX_DRAIN_SECONDS, InferencePool

# Endpoint removal reaches kube-proxy and the gateway's endpoint watch within a few seconds
# on a healthy cluster; the pause covers that with margin.
PRESTOP_PAUSE_SECONDS = 10
# Freeing GPU memory, joining workers and closing the HTTP server after the drain.
TEARDOWN_SECONDS = 15
# A slow bound on the time per output token of a replica under full batch (10 tokens/s):
# generous so a request longer than its class's mean still finishes.
SLOW_SECONDS_PER_OUTPUT_TOKEN = 0.1
# Never drain for less: a request that has just started needs its first token at least.
MIN_DERIVED_DRAIN_SECONDS = 10


def derived_drain_seconds(pool: InferencePool) -> int:
    """The longest a request in flight of any class should take to finish, whole seconds:
    its TTFT objective plus its mean output length at the slow per-token bound."""
    longest = max(
        c.objective_seconds + c.mean_output_tokens * SLOW_SECONDS_PER_OUTPUT_TOKEN
        for c in pool.spec.traffic_classes
    )
    seconds = math.ceil(longest)
    return min(MAX_DRAIN_SECONDS, max(MIN_DERIVED_DRAIN_SECONDS, seconds))


def drain_seconds(pool: InferencePool) -> int:
    """vLLM's `--shutdown-timeout`: the pool's `spec.scaling.drainSeconds`, else derived."""
    chosen = pool.spec.scaling.drain_seconds
    return derived_drain_seconds(pool) if chosen is None else chosen


def termination_grace_seconds(pool: InferencePool) -> int:
    """The pod's grace period: the preStop pause, the drain, then the teardown."""
    return PRESTOP_PAUSE_SECONDS + drain_seconds(pool) + TEARDOWN_SECONDS
