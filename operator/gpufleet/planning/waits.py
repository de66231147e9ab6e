"""Capacity over a class's prompt lengths, not its mean: the queue of prefills (pure).

vLLM schedules waiting prompts first come, first served, in chunks of a per-step token
budget, beside the running decodes. A request therefore waits for the prefill work queued
ahead of it, and that work is set by the *second moment* of prompt lengths: one prompt of
7,000 tokens holds the queue as long as thirty-five of 200. The fitted P99 curve
(`capacity.ReplicaModel`) scales its queueing term by the mean request only, so on a class
of long, heavy-tailed prompts it reads far too low: for the batch class of the synthetic
traces (the longest 70% of lognormal prompts of mean 1,000 tokens, mean 1,319) on one RTX
4090 at 70% utilization, the simulator's engine served 12% of the requests later than 2 s
(P99 4.8 s) where the fit predicts a P99 of 0.66 s. Feedback then learned the gap back as a
capacity factor, 10% a pass, over some fifteen minutes of misses.

Per class and tier, with the class's learned prompt lengths (`prompts`), a request of p
prompt tokens misses its objective T when its wait W is longer than its slack
T - base(p) (base: the fitted zero-load P99 at that length, prefill included). W follows a
queue of prefills served by the least-loaded of n replicas (the router's choice):

    P(W > t) = C x exp(-t / scale)
    C        = ErlangC(n, n x rho), rho itself for one replica: the chance all are busy
    scale    = E[prefill^2] / (2 x E[service] x (1 - rho)): M/G/1's mean residual wait

floored where the fit's own P99 queueing term at that load is longer (the fit's wait at
the mean prompt is then the 99th percentile of W), so a class of fixed prompts is never
judged faster than the fit. The class's missed share at rho is the sum over its prompt
lengths of share(p) x P(W > T - base(p)) (1 for prompts no idle replica of the tier
reaches); the highest rho at which that share is at most those unreached prompts plus
TAIL is the class's `max_utilization` on the tier.

Checked against the simulator's engine (`tests/unit/planning/test_waits.py`, the same
batch prompts on 2 and 4 replicas behind a least-loaded router): the predicted share of
requests later than 2 s stays within about a point of the engine's where it matters (at
most 3% late). Where the limits land (the highest utilization with at most the unreached
prompts plus 1% late; 13,500-15,000 requests a point through the engine behind a
least-loaded router), engine / model on 1, 2, 4 and 8 replicas:

    synthetic batch prompts, RTX 4090, 2 s    <0.30/0.26  0.33/0.35  0.45/0.45  0.55/0.54
    Azure conversation batch, RTX 4090, 2 s    0.36/0.40  0.50/0.46  0.70/0.52  0.77/0.59
    synthetic batch prompts, H100, 0.5 s       0.52/0.61  0.62/0.64  0.76/0.67  0.85/0.70

(Azure: the trace's longest 70% of prompts, mean 1,528 tokens, 99th percentile 4,248.)
Where lengths vary less than lognormal ones, more replicas help more than the model
credits, and it buys more of them than the engine needs; on one replica it can be up to
0.09 optimistic. Its two terms are each off, in ways that partly cancel. In the engine the
chance to wait at all is far above Erlang C, as the router balances requests in flight,
decodes included, not prefills (eight replicas at 30% busy: 14% of requests waited, Erlang
C says 0.4%), while the wait once waiting shrinks with the replicas toward the residual of
the prefill in progress, E[X^2]/2E[X]. Modelled that way (waiting: 0.4 x Erlang C + 0.6 x
the share of its time a replica spends prefilling; scale: that residual x (1 + rho / (n (1
- rho)))), it came within a third of a point of the engine on eight replicas of both RTX
4090 sets and was never optimistic on the three, but read short prompts with long outputs
far too slow (205-token prompts at 300 ms: 59% against the engine's 88%), and it cost the
simulator suite 4 of its targets (30 of 50, more RTX 4090-hours on the synthetic traces).
Dividing only the queue behind the prefill in progress by the replicas fit the Azure
prompts but overstated the synthetic ones' limits by 0.07 to 0.16. The model stays as
above, erring toward replicas.

The queue is served one prompt after another. vLLM's chunked prefill fits several short
prompts into one step, so for prompts of a few hundred tokens the queue reads slower than
it is: the benchmark's own prompts (205 tokens, fixed) on an RTX 4090 with a 300 ms
objective get 79% utilization here against the fit's 95%. That errs toward more replicas,
on classes whose short prompts leave a small slack; long prompts, which set the second
moment wherever lengths vary, are served a chunk at a time as modelled.

Beside another class on a tier (`classes._behind`), a class waits in a queue that may be
mostly the other's prompts: where both classes' lengths are learned, the residual above is
the larger of its own prompts' and the other's (at worst the queue is all theirs; any mix
lies between). Charged only the wait behind the other's *mean* prompt, realtime's short
prompts (300 ms) were allowed 95% busy beside batch's lognormal ones (30 s) on one H100,
and in the engine 11.7% of them were late with batch 95% of the requests
(`tests/unit/planning/test_waits.py`); over the queue of batch's prompts the limit is 42%,
where the engine has 2.0% of them late (the model reads the same queue about a point
optimistic there).

Only classes whose objective a typical prompt clears with room (the tier's reach at least
`contention.TYPICAL_AHEAD` times the class's mean prompt) are sized here (`contention` may
size them too, where the tier serves longer prompts than theirs). A tight class
(100 ms for prompts of about a thousand tokens) misses mostly for the one prefill in
progress when it arrives, which `contention` sizes; its slack is too short for the
exponential tail above, which over-counts those misses.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from gpufleet.planning.capacity import MAX_UTILIZATION, MIN_ELIGIBLE_UTILIZATION, ReplicaModel
from gpufleet.planning.contention import TYPICAL_AHEAD, erlang_c, grid
from gpufleet.planning.prompts import Distribution, longest_within

TAIL = 0.01  # a P99 objective lets 1% of requests be slower
STEPS = 16  # bisection steps over utilization (1e-5 of it: far below any effect)


class ClassWaits:
    """One class's prompts on one tier's replica model, ready to evaluate at any load."""

    def __init__(
        self,
        model: ReplicaModel,
        prompts: Distribution,
        output_tokens: float,
        objective_seconds: float,
        blocking_seconds: float = 0.0,
        queue: tuple[Distribution, float] | None = None,
    ) -> None:
        lengths, shares = _grid(prompts)
        # Both are linear in the prompt's length (`capacity.ReplicaModel`).
        prefill = lengths * model.prefill_seconds_for(1.0)
        base = model.ttft_base_seconds(0.0) + prefill
        slack = objective_seconds - base - blocking_seconds
        reached = slack > 0
        self.model = model
        self.prompt_tokens = prompts.mean_tokens
        self.output_tokens = output_tokens
        # Prompts no idle replica of this tier reaches in time: missed at any load.
        self.unreached = float(shares[base >= objective_seconds].sum())
        self.unreached_blocked = float(shares[~reached].sum())
        self._shares = shares[reached]
        self._slack = slack[reached]
        self._service = model.service_seconds(prompts.mean_tokens, output_tokens)
        # E[prefill^2] / E[service] of the queue it waits in: its own prompts, or another
        # class's sharing the tier where theirs wait longer (at worst the queue is all theirs).
        self._residual = _residual(prefill, shares, self._service)
        if queue is not None:
            theirs, their_output = queue
            their_lengths, their_shares = _grid(theirs)
            their_prefill = their_lengths * model.prefill_seconds_for(1.0)
            their_service = model.service_seconds(theirs.mean_tokens, their_output)
            self._residual = max(
                self._residual, _residual(their_prefill, their_shares, their_service)
            )

    def _scale(self, rho: float, waiting: float) -> float:
        residual = self._residual / (2.0 * (1.0 - rho))
        fitted = self.model.ttft_p99_at_utilization(
            rho, self.prompt_tokens, self.output_tokens
        ) - self.model.ttft_base_seconds(self.prompt_tokens)
        if waiting > TAIL and fitted > 0:
            return max(residual, fitted / math.log(waiting / TAIL))
        return residual

    def missed(self, rho: float, servers: int = 1) -> float:
        """Share of the class's requests later than its objective at utilization rho."""
        if rho >= 1.0:
            return 1.0
        if rho <= 0.0 or self._service <= 0:
            return self.unreached_blocked
        servers = max(servers, 1)
        waiting = erlang_c(servers, servers * rho) if servers > 1 else rho
        scale = self._scale(rho, waiting)
        if scale <= 0:  # no prefill time and no queueing in the fit: nothing waits
            return self.unreached_blocked
        late = np.minimum(waiting * np.exp(-self._slack / scale), 1.0)
        return self.unreached_blocked + float(np.dot(self._shares, late))

    def max_utilization(self, servers: int = 1) -> float:
        """Highest utilization at which the missed share is at most the unreached prompts
        plus TAIL; MIN_ELIGIBLE_UTILIZATION at the lowest (eligibility is the fit's call)."""
        allowed = self.unreached + TAIL
        if self.missed(MAX_UTILIZATION, servers) <= allowed:
            return MAX_UTILIZATION
        low, high = MIN_ELIGIBLE_UTILIZATION, MAX_UTILIZATION
        if self.missed(low, servers) > allowed:
            return low
        for _ in range(STEPS):
            middle = (low + high) / 2.0
            if self.missed(middle, servers) <= allowed:
                low = middle
            else:
                high = middle
        return low


def _residual(prefill: np.ndarray, shares: np.ndarray, service: float) -> float:
    """E[prefill^2] / E[service] of a queue of prompts with these prefill times (0 when a
    request takes no replica time)."""
    if service <= 0:
        return 0.0
    return float(np.dot(shares, prefill * prefill)) / service


@functools.lru_cache(maxsize=256)
def _grid(prompts: Distribution) -> tuple[np.ndarray, np.ndarray]:
    """The lengths on the grid `contention` sums over (a pass asks for each class's several
    times: per tier, alone and shared, for two replica counts)."""
    return grid(prompts)


def sized_here(model: ReplicaModel, prompts: Distribution, objective_seconds: float) -> bool:
    """Whether this module sizes the class on the tier (see the module docstring)."""
    reach = longest_within(model, objective_seconds)
    return reach >= TYPICAL_AHEAD * prompts.mean_tokens


def limited(
    rho: Mapping[str, float],
    models: Mapping[str, ReplicaModel],
    prompts: Distribution,
    output_tokens: float,
    objective_seconds: float,
    servers: Mapping[str, int],
    blocking_seconds: Mapping[str, float] | None = None,
    queues: Mapping[str, tuple[Distribution, float]] | None = None,
) -> dict[str, float]:
    """`rho` (eligible tiers' utilization limits from the fit) lowered, tier by tier, to
    what the class's prompt lengths allow on `servers` replicas; `queues`: per tier, the
    prompt lengths and mean output of another class whose prompts it may wait behind."""
    result = dict(rho)
    for tier, alone in rho.items():
        model = models[tier]
        if alone <= 0 or not sized_here(model, prompts, objective_seconds):
            continue
        blocking = (blocking_seconds or {}).get(tier, 0.0)
        waits = ClassWaits(
            model, prompts, output_tokens, objective_seconds, blocking, (queues or {}).get(tier)
        )
        result[tier] = min(alone, waits.max_utilization(servers.get(tier, 1)))
    return result
