"""What passes between the engine and a policy: the one module `sim.engine` imports of them.

At each decision time the engine shows a policy what the simulated Prometheus shows
(`Seen`) and applies its `Decision`: replicas per tier and integer weights per class over
tiers. The policies (`sim.baselines`, `sim.oracle`, `sim.gpufleet_policy`, built by
`sim.policies.make_policies`) import this module and may import the engine; the engine
imports none of them, so no import goes both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gpufleet.planning.records import ClassDemand, Observation
from gpufleet.sim.traces import Trace


@dataclass(frozen=True)
class Decision:
    replicas: Mapping[str, int]
    weights: Mapping[str, Mapping[str, int]]  # class -> tier -> weight
    instant: bool = False  # new replicas Ready at once (the oracle)
    # Prompt tokens/s the weights send each tier, as the operator tells its queue watch
    # (`gpufleet.planning.routing.prompt_tokens_sent`); None: not known.
    sent: Mapping[str, float] | None = None


@dataclass(frozen=True)
class ClassLoad:
    """A class's demand over an interval: requests/s and mean shape."""

    rate_rps: float
    prompt_tokens: float
    output_tokens: float


@dataclass(frozen=True)
class Seen:
    """What a policy sees at a decision: the operator's observation and tier utilization."""

    time: float  # seconds since the trace start
    observation: Observation
    busy_replicas: Mapping[str, float]  # compute done over the interval / interval length


class Policy(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def foresight(self) -> bool:
        """Whether it sees the coming interval's requests (the oracle) rather than the last."""
        ...

    @property
    def early_passes(self) -> bool:
        """Whether the queue watch wakes it between intervals, as it does the operator
        (`sim.early`)."""
        ...

    def warm(self, seen: Seen) -> Decision:
        """The fleet it runs before the trace starts, from the first horizon's demand (`engine`)."""
        ...

    def decide(self, seen: Seen) -> Decision: ...


def class_loads(trace: Trace, start: float, end: float) -> dict[str, ClassLoad]:
    """Each class's demand among the trace's requests arriving in [start, end)."""
    lo, hi = np.searchsorted(trace.arrival_seconds, [start, end], side="left")
    seconds = max(end - start, 1e-9)
    loads = {}
    for ci, name in enumerate(trace.classes):
        mask = trace.class_index[lo:hi] == ci
        count = int(mask.sum())
        prompt = float(trace.prompt_tokens[lo:hi][mask].mean()) if count else 0.0
        output = float(trace.output_tokens[lo:hi][mask].mean()) if count else 0.0
        loads[name] = ClassLoad(count / seconds, prompt, output)
    return loads


def demand_of(loads: Mapping[str, ClassLoad]) -> dict[str, ClassDemand | None]:
    return {
        name: ClassDemand(load.rate_rps * load.prompt_tokens, load.rate_rps * load.output_tokens)
        for name, load in loads.items()
    }
