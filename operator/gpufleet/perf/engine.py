"""An iteration-level simulation of one vLLM replica (continuous batching, chunked prefill).

Each step follows vLLM 0.8.5's V1 scheduler (see gpufleet.perf.vllm): running requests
first (a decode takes 1 token, an unfinished prefill a chunk under the token budget), then
waiting requests in arrival order while budget, max_num_seqs and free KV blocks allow; a
request that cannot get a KV block preempts the last running one (recompute). A step's time
comes from the roofline (gpufleet.perf.roofline). A prefill's last chunk samples the first
token at the end of its step; each decode step one more.

Speed: while every running request decodes and nothing can join, the batch is the same
step after step except for its growing contexts, so up to the next finish or arrival the
engine advances k steps at once, timed at the middle context (the step time is linear in
the context in the memory-bound regime, so this is exact there).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpufleet.perf.roofline import Replica, ceil_div, coefficients

MAX_SECONDS = 1e6


@dataclass(frozen=True)
class EngineResult:
    """Per request: the first token's and the last token's times (NaN: never served)."""

    arrival: NDArray[np.float64]
    first_token: NDArray[np.float64]
    finish: NDArray[np.float64]
    outputs: NDArray[np.int64]
    steps: int
    preemptions: int
    max_running: int
    max_batched_tokens: int
    max_kv_blocks_used: int
    kv_blocks: int

    @property
    def ttft(self) -> NDArray[np.float64]:
        return self.first_token - self.arrival

    @property
    def tpot(self) -> NDArray[np.float64]:
        """Per request with more than one output token (vLLM's definition), seconds."""
        many = self.outputs > 1
        return (self.finish[many] - self.first_token[many]) / (self.outputs[many] - 1)


def simulate(
    replica: Replica,
    arrivals: NDArray[np.float64],
    prompts: NDArray[np.int64],
    outputs: NDArray[np.int64],
    cached: NDArray[np.int64] | None = None,
) -> EngineResult:
    """Serve the requests (arrival times at the client, seconds, ascending) on `replica`.

    `cached`: per request, prompt tokens already in the prefix cache (vLLM's automatic
    prefix caching, on by default in V1): they are neither computed nor attended to again,
    though their blocks still count against the cache while the request runs."""
    n = len(arrivals)
    cfg = replica.engine
    c = coefficients(replica)
    block = cfg.block_size
    total_blocks = replica.kv_capacity_tokens() // block
    free = total_blocks
    budget_max = cfg.max_num_batched_tokens
    max_seqs = cfg.max_num_seqs
    eng_arr = [float(a) + replica.eff.api_overhead_s for a in arrivals]
    prompt = [int(p) for p in prompts]
    out = [max(1, int(o)) for o in outputs]
    hit = [0] * n if cached is None else [int(c) for c in cached]
    comp = [0] * n
    gen = [0] * n
    blocks = [0] * n
    first = [float("nan")] * n
    finish = [float("nan")] * n
    running: list[int] = []
    waiting: deque[int] = deque()
    ai = 0
    done = 0
    t = 0.0
    steps = preemptions = 0
    max_running = max_tokens = max_used = 0

    while done < n and t < MAX_SECONDS:
        while ai < n and eng_arr[ai] <= t:
            waiting.append(ai)
            ai += 1
        if not running and not waiting:
            t = eng_arr[ai]
            continue
        budget = budget_max
        sched: list[tuple[int, int]] = []
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            k = min(prompt[r] + gen[r] - comp[r], budget)
            need = ceil_div(comp[r] + k, block) - blocks[r]
            ok = True
            while need > free:
                victim = running.pop()
                free += blocks[victim]
                blocks[victim] = 0
                comp[victim] = 0
                waiting.appendleft(victim)
                preempted = True
                preemptions += 1
                if victim == r:
                    ok = False
                    break
            if not ok:
                break
            free -= need
            blocks[r] += need
            sched.append((r, k))
            budget -= k
            i += 1
        if not preempted:
            while waiting and budget > 0 and len(running) < max_seqs:
                r = waiting[0]
                if comp[r] == 0:
                    comp[r] = min(hit[r], prompt[r] - 1)
                k = min(prompt[r] + gen[r] - comp[r], budget)
                need = ceil_div(comp[r] + k, block) - blocks[r]
                if need > free:
                    comp[r] = 0 if blocks[r] == 0 else comp[r]
                    break
                waiting.popleft()
                running.append(r)
                free -= need
                blocks[r] += need
                sched.append((r, k))
                budget -= k
        if not sched:
            # Nothing fits even with the cache empty: this request can never be served.
            if not running and waiting:
                waiting.popleft()
                done += 1
                continue
            t = eng_arr[ai] if ai < n else t + 1.0
            continue

        tokens = 0
        pairs = 0.0
        kv_read = 0
        decode_only = True
        for r, k in sched:
            tokens += k
            pairs += k * (comp[r] + (k + 1) / 2)
            kv_read += comp[r]
            if k != 1 or gen[r] == 0 or comp[r] + 1 != prompt[r] + gen[r]:
                decode_only = False
        nreq = len(sched)
        dt = c.step(tokens, nreq, pairs, kv_read)
        steps_now = 1
        if decode_only and not preempted:
            kmax = min(out[r] - gen[r] for r, _ in sched)
            if not waiting and ai < n:
                kmax = min(kmax, max(1, ceil_div_f(eng_arr[ai] - t, dt)))
            while kmax > 1:
                extra = sum(ceil_div(comp[r] + kmax, block) - blocks[r] for r, _ in sched)
                if extra <= free:
                    break
                kmax //= 2
            if kmax > 1:
                mid = nreq * (kmax - 1) / 2
                dt = kmax * c.step(tokens, nreq, pairs + mid, kv_read + mid)
                steps_now = kmax
        t += dt
        steps += steps_now
        max_running = max(max_running, len(running))
        max_tokens = max(max_tokens, tokens)
        max_used = max(max_used, total_blocks - free)
        finished = False
        for r, k in sched:
            if steps_now > 1:
                comp[r] += steps_now
                gen[r] += steps_now
                grown = ceil_div(comp[r], block) - blocks[r]
                if grown > 0:
                    free -= grown
                    blocks[r] += grown
            else:
                comp[r] += k
                if comp[r] == prompt[r] + gen[r]:
                    gen[r] += 1
                    if gen[r] == 1:
                        first[r] = t
            if gen[r] >= out[r]:
                finish[r] = t
                free += blocks[r]
                blocks[r] = 0
                done += 1
                finished = True
        if finished:
            running = [r for r in running if gen[r] < out[r]]

    return EngineResult(
        arrival=np.asarray(arrivals, dtype=np.float64),
        first_token=np.array(first),
        finish=np.array(finish),
        outputs=np.array(out, dtype=np.int64),
        steps=steps,
        preemptions=preemptions,
        max_running=max_running,
        max_batched_tokens=max_tokens,
        max_kv_blocks_used=max_used,
        kv_blocks=total_blocks,
    )


def ceil_div_f(a: float, b: float) -> int:
    return int(-(-a // b))
