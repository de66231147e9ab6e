"""The fleet twin's books: every request its gateway took, and what became of it.

A request is an index into flat lists (its arrival time, prompt and output tokens, class,
replica), because the simulator's engines (`gpufleet.sim.replica`) index prompt and output
lengths by request id; the ledger is the engines' `Recorder`. It keeps what a production
gateway would count per route and class (`GatewayClass`: tokens offered at arrival, requests
by backend tier and code, TTFT), each replica's vLLM counters, and, beyond what any real
system can see, every request's exact TTFT, so tests can hold the Prometheus quantiles the
operator acts on against the ground truth (`ClassWindow`).

Engines run steps that end a little after `now`; their reports wait in a heap until the
twin's clock reaches them (`release`), and a report from after a request was cut (its node
vanished) is dropped. The ledger has no lock of its own: the twin holds its lock around
every call.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Protocol

from gpufleet.dev.loadstory import Arrival
from gpufleet.dev.twinmetrics import GatewayClass, PodMetrics

__all__ = ["ClassWindow", "Ledger", "Serving"]

_FIRST_TOKEN, _TOKENS, _COMPLETED = 0, 1, 2


class Serving(Protocol):
    """The replica a request went to, as far as the books are concerned."""

    @property
    def metrics(self) -> PodMetrics: ...

    @property
    def key(self) -> tuple[str, str]: ...  # (namespace, pool)


@dataclass(frozen=True)
class ClassWindow:
    """Ground truth for one class over a time window: every request's exact TTFT."""

    requests: int
    within: int  # first token within the objective
    failed: int  # no backend, or cut by a vanished node
    p99_seconds: float | None  # exact sample P99 (inf when more than 1% failed)

    @property
    def attainment(self) -> float | None:
        return self.within / self.requests if self.requests else None

    @classmethod
    def of(cls, values: list[float], objective: float) -> ClassWindow:
        """The window of these TTFTs (inf: failed) against the class's objective."""
        if not values:
            return cls(0, 0, 0, None)
        values.sort()
        rank = max(math.ceil(0.99 * len(values)) - 1, 0)
        return cls(
            requests=len(values),
            within=sum(1 for v in values if v <= objective),
            failed=sum(1 for v in values if math.isinf(v)),
            p99_seconds=values[rank],
        )


class Ledger:
    """Requests by id; the engines' Recorder. Keys: (namespace, pool[, class])."""

    def __init__(self) -> None:
        # Requests (index = request id; the engines index prompt/output by it).
        self.arrival: list[float] = []
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.class_of: list[tuple[str, str, str]] = []
        self.pod_of: list[Serving | None] = []
        self._first_seen: list[bool] = []
        self._cut_at: dict[int, float] = {}
        # time, seq, kind, request, tokens (generated, for _TOKENS)
        self._events: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.gateway: dict[tuple[str, str, str], GatewayClass] = {}
        self._outcomes: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        self._served: dict[tuple[str, str], int] = {}  # tokens prefilled and generated
        self.arrived: dict[tuple[str, str], int] = {}  # requests per pool

    # -- what the gateway writes ----------------------------------------------------------

    def arrive(self, key: tuple[str, str], arrival: Arrival) -> int:
        """A new request for pool `key`; its id. Counts its tokens as offered."""
        request = len(self.arrival)
        self.arrival.append(arrival.time)
        self.prompt.append(arrival.prompt_tokens)
        self.output.append(arrival.output_tokens)
        cls_key = (key[0], key[1], arrival.traffic_class)
        self.class_of.append(cls_key)
        self.pod_of.append(None)
        self._first_seen.append(False)
        self.arrived[key] = self.arrived.get(key, 0) + 1
        gateway = self.gateway.setdefault(cls_key, GatewayClass())
        gateway.tokens += arrival.prompt_tokens + arrival.output_tokens
        return request

    def send(
        self, request: int, replica: Serving, tier: str, at: float, context: int | None = None
    ) -> bool:
        """The gateway passed the request to a replica of `tier`, whose vLLM has a context of
        `context` tokens (None: unknown); whether it took it. As vLLM, it refuses a prompt of
        its context or more (HTTP 400) and stops an output where the context ends."""
        prompt = self.prompt[request]
        if context is not None and prompt >= context:
            self.count(request, tier, "400")
            self.outcome(request, at, math.inf)
            return False
        if context is not None:
            self.output[request] = min(self.output[request], context - prompt)
        self.pod_of[request] = replica
        self.count(request, tier, "200")
        return True

    def fail(self, request: int, at: float, code: str) -> None:
        """The gateway answered with an error: no first token, ever."""
        self.count(request, "", code)
        self.outcome(request, at, math.inf)

    def cut(self, request: int, at: float) -> None:
        """Its node vanished mid-decode: the stream breaks, later reports are dropped."""
        self._cut_at[request] = at
        self.count(request, "", "502")
        if not self._first_seen[request]:  # a stream cut after its first token met TTFT
            self.outcome(request, at, math.inf)

    def count(self, request: int, tier: str, code: str) -> None:
        gateway = self.gateway.setdefault(self.class_of[request], GatewayClass())
        gateway.requests[(tier, code)] = gateway.requests.get((tier, code), 0) + 1

    def outcome(self, request: int, at: float, ttft: float) -> None:
        self._outcomes.setdefault(self.class_of[request], []).append((at, ttft))

    # -- the engines report here (gpufleet.sim.replica.Recorder) ---------------------------

    def first_token(self, request: int, time: float) -> None:
        self._push(time, _FIRST_TOKEN, request)

    def generated(self, request: int, tokens: int, time: float) -> None:
        self._push(time, _TOKENS, request, tokens)

    def completed(self, request: int, time: float) -> None:
        self._push(time, _COMPLETED, request)

    def _push(self, at: float, kind: int, request: int, tokens: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, kind, request, tokens))

    def release(self, now: float) -> None:
        """Count what happened up to `now` (engines run steps that end a little later)."""
        events = self._events
        while events and events[0][0] <= now:
            at, _, kind, request, tokens = heapq.heappop(events)
            if at > self._cut_at.get(request, math.inf):
                continue  # its node went away before this happened
            pod = self.pod_of[request]
            if pod is None:
                continue
            if kind == _FIRST_TOKEN:
                ttft = at - self.arrival[request]
                self._first_seen[request] = True
                pod.metrics.ttft.observe(ttft)
                pod.metrics.prompt_tokens += self.prompt[request]
                self._served[pod.key] = self._served.get(pod.key, 0) + self.prompt[request]
                self.gateway[self.class_of[request]].ttft.observe(ttft)
                self.outcome(request, at, ttft)
            elif kind == _TOKENS:  # vLLM counts generated tokens each step
                pod.metrics.generation_tokens += tokens
                self._served[pod.key] = self._served.get(pod.key, 0) + tokens
            else:
                pod.metrics.success += 1
                pod.metrics.request_prompt_tokens.observe(self.prompt[request])

    # -- what tests read ------------------------------------------------------------------

    def ttfts(self, cls_key: tuple[str, str, str], start: float, stop: float) -> list[float]:
        """TTFTs (inf: failed) of the class's requests whose outcome fell in [start, stop)."""
        return [v for t, v in self._outcomes.get(cls_key, []) if start <= t < stop]

    def routed(self, namespace: str, pool: str) -> dict[str, dict[str, int]]:
        """Requests per class and backend tier so far (failed ones under tier '')."""
        out: dict[str, dict[str, int]] = {}
        for (ns, name, cls), gateway in self.gateway.items():
            if (ns, name) != (namespace, pool):
                continue
            per = out.setdefault(cls, {})
            for (tier, _), n in gateway.requests.items():
                per[tier] = per.get(tier, 0) + n
        return out

    def answered(self, namespace: str, pool: str) -> dict[str, int]:
        """Answers per response code so far (a cut request counts as 200, then 502)."""
        out: dict[str, int] = {}
        for (ns, name, _), gateway in self.gateway.items():
            if (ns, name) == (namespace, pool):
                for (_, code), n in gateway.requests.items():
                    out[code] = out.get(code, 0) + n
        return out

    def served_tokens(self, namespace: str, pool: str) -> int:
        return self._served.get((namespace, pool), 0)
