"""One simulated replica: a continuous-batching engine (vLLM-like), request by request.

The engine runs *steps*. Each step decodes one token for every running sequence and
prefills waiting prompts first come, first served, up to a token budget (chunked
prefill). A step's time follows a roofline: a floor set by reading the weights (the
time of a decode step at small batch) or the compute of its tokens, whichever is larger:

    step_seconds = max(floor, running * decode_per_token + prefill_tokens * prefill_per_token)

A request's time to first token is a fixed overhead (HTTP, tokenizer, detokenizer) plus its
wait for the step in progress and for the prompts ahead of it, plus the step(s) that
prefill its own prompt; so TTFT grows with prompt length and, as the replica nears
saturation, with load (steps grow with the batch, prompts queue). Its decode then takes one
step per generated token.

Every parameter comes from the planner's `ReplicaModel` (`engine_params`), none from its
P99 curve: prefill per token and decode per token (whose sum over a request is the model's
`service_seconds`, so both saturate at the same rate), the step floor (the profile's TPOT
at zero load), the overhead (the profile's zero-load P99 TTFT less the first step), and
vLLM 0.33's token budget and cap on running sequences for the tier's card and flags
(8,192 and 1,024 on an H100, 2,048 and 256 on an RTX 4090: `gpufleet.perf.vllm`). How
P99 grows with load is this simulation's own, checked against the io.net runs in
`tests/unit/sim/test_replica_vs_ionet.py`.

Not modelled: KV-cache capacity (the batch is capped at `max_running` sequences only),
preemption of sequences by the engine, speculative decoding, prefix caching. What the
server's context refuses never gets here (`traces.within_context`, the twin's gateway).

Event-skipping keeps it fast: between arrivals and completions every decode step is the
same, so runs of them are advanced in one stroke; per request there are O(1) steps to
compute (the ones carrying its prefill) and one completion.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from gpufleet.planning.capacity import ReplicaModel, idle_ttft_seconds

# vLLM's OpenAI-server defaults on a card under 70 GiB: chunked prefill budget per step and
# max running sequences (a tier's own come with its model: `ReplicaModel.max_batched_tokens`).
MAX_BATCHED_TOKENS = 2048
MAX_RUNNING = 256


@dataclass(frozen=True)
class EngineParams:
    """Timing of one replica, all in seconds."""

    step_floor: float  # a step never takes less (memory bound: the weights are read once)
    decode_per_token: float  # compute per running sequence per step
    prefill_per_token: float  # compute per prompt token
    overhead: float  # fixed latency outside the engine, added to every TTFT
    max_batched_tokens: int = MAX_BATCHED_TOKENS
    max_running: int = MAX_RUNNING

    def work_seconds(self, prompt_tokens: float, output_tokens: float) -> float:
        """Compute one request costs the replica (the model's service_seconds)."""
        return prompt_tokens * self.prefill_per_token + output_tokens * self.decode_per_token

    def idle_ttft_seconds(self, prompt_tokens: float) -> float:
        """TTFT of a prompt reaching an idle replica: the least this engine ever gives it
        (`capacity.idle_ttft_seconds`)."""
        return idle_ttft_seconds(
            prompt_tokens,
            overhead=self.overhead,
            step_floor=self.step_floor,
            prefill_per_token=self.prefill_per_token,
            max_batched_tokens=self.max_batched_tokens,
        )


def engine_params(model: ReplicaModel) -> EngineParams:
    """The engine a replica of this model runs (see module docstring)."""
    # The profile's zero-load P99 comes from runs at 1 req/s with 2 s decodes: the engine
    # was busy, so it holds a wait for the step in progress (up to a floor) and the step
    # prefilling the prompt. What is left is outside the engine (`idle_overhead_seconds`).
    return EngineParams(
        step_floor=model.step_floor_seconds,
        decode_per_token=model.service_seconds(0.0, 1.0),
        prefill_per_token=model.prefill_seconds_for(1.0),
        overhead=model.idle_overhead_seconds,
        max_batched_tokens=model.max_batched_tokens,
        max_running=model.max_running,
    )


def least_ttft_seconds(
    models: Mapping[str, ReplicaModel], prompt_tokens: Iterable[float]
) -> dict[float, float]:
    """Per prompt length: its TTFT on an idle replica of the fastest tier, the least any
    fleet of these tiers gives it in this engine (`EngineParams.idle_ttft_seconds`)."""
    engines = [engine_params(m) for m in models.values()]
    return {
        float(p): min(e.idle_ttft_seconds(float(p)) for e in engines) for p in set(prompt_tokens)
    }


class Recorder(Protocol):
    """Where a replica reports its requests' first tokens, tokens and completions."""

    def first_token(self, request: int, time: float) -> None: ...

    def generated(self, request: int, tokens: int, time: float) -> None:
        """`tokens` output tokens generated by steps ending by `time`, on the replica
        serving `request`: what vLLM adds to vllm:generation_tokens each step (the first
        token included), not at a request's end."""

    def completed(self, request: int, time: float) -> None: ...


class Replica:
    """The engine of one replica. Feed requests in time order with `enqueue`."""

    __slots__ = (
        "_count",
        "_head_left",
        "_output",
        "_prompt",
        "_recorder",
        "_running",
        "_waiting",
        "busy_seconds",
        "last_step_end",
        "next_start",
        "params",
    )

    def __init__(
        self,
        params: EngineParams,
        prompt_tokens: list[int],
        output_tokens: list[int],
        recorder: Recorder,
        start: float = 0.0,
    ) -> None:
        self.params = params
        self._prompt = prompt_tokens
        self._output = output_tokens
        self._recorder = recorder
        self._waiting: deque[int] = deque()
        self._head_left = 0
        self._running: list[tuple[int, int]] = []  # (step count at which it ends, request)
        self._count = 0  # decode steps run so far
        self.next_start = start  # when the next step may start
        self.last_step_end = start
        self.busy_seconds = 0.0  # compute done (work, not wall time): utilization's numerator

    # -- what the router sees --------------------------------------------------------------

    @property
    def outstanding(self) -> int:
        """Requests in the replica: waiting for prefill or decoding."""
        return len(self._waiting) + len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def idle(self) -> bool:
        return not self._waiting and not self._running

    # -- driving it ------------------------------------------------------------------------

    def enqueue(self, request: int, time: float) -> None:
        """A request reaches the engine at `time` (>= every earlier call's time)."""
        self.advance(time)
        if not self._waiting:
            self._head_left = self._prompt[request]
        self._waiting.append(request)

    def advance(self, until: float) -> None:
        """Run every step that starts before `until`."""
        p = self.params
        while True:
            if not self._waiting and not self._running:
                self.next_start = max(self.next_start, until)
                return
            if self.next_start >= until:
                return
            if self._waiting and len(self._running) < p.max_running:
                self._prefill_step()
            else:
                self._decode_steps(until)

    def evict(self, time: float) -> tuple[list[int], list[int]]:
        """The node went away at `time`: (requests not yet prefilled, requests cut mid-decode)."""
        self.advance(time)
        waiting = list(self._waiting)
        cut = [request for _, request in self._running]
        self._waiting.clear()
        self._running.clear()
        return waiting, cut

    def drain(self) -> float:
        """Run until empty; the time the last step ended."""
        self.advance(math.inf)
        return self.last_step_end

    # -- steps -----------------------------------------------------------------------------

    def _prefill_step(self) -> None:
        p = self.params
        running = len(self._running)
        budget = p.max_batched_tokens - running
        room = p.max_running - running
        tokens = 0
        prefilled: list[int] = []
        while self._waiting and budget > 0 and len(prefilled) < room:
            take = min(self._head_left, budget)
            tokens += take
            budget -= take
            self._head_left -= take
            if self._head_left == 0:
                prefilled.append(self._waiting.popleft())
                if self._waiting:
                    self._head_left = self._prompt[self._waiting[0]]
        work = running * p.decode_per_token + tokens * p.prefill_per_token
        end = self.next_start + max(p.step_floor, work)
        self.busy_seconds += work
        self._count += 1
        # The step decodes every running sequence and gives each prefilled prompt its
        # first token.
        if running or prefilled:
            anyone = self._running[0][1] if running else prefilled[0]
            self._recorder.generated(anyone, running + len(prefilled), end)
        self._finish(end)
        for request in prefilled:
            self._recorder.first_token(request, end)
            remaining = self._output[request] - 1  # the prefill step made the first token
            if remaining <= 0:
                self._recorder.completed(request, end)
            else:
                heapq.heappush(self._running, (self._count + remaining, request))
        self.next_start = self.last_step_end = end

    def _decode_steps(self, until: float) -> None:
        p = self.params
        running = len(self._running)
        step = max(p.step_floor, running * p.decode_per_token)
        to_finish = self._running[0][0] - self._count
        steps = to_finish
        if until < math.inf:  # a request arriving before `until` joins the step after
            steps = min(to_finish, max(1, math.ceil((until - self.next_start) / step)))
        self._count += steps
        self.next_start += steps * step
        self.last_step_end = self.next_start
        self.busy_seconds += steps * running * p.decode_per_token
        self._recorder.generated(self._running[0][1], steps * running, self.next_start)
        if steps == to_finish:
            self._finish(self.next_start)

    def _finish(self, time: float) -> None:
        running = self._running
        while running and running[0][0] <= self._count:
            _, request = heapq.heappop(running)
            self._recorder.completed(request, time)
