"""Small builders for simulator tests: pools, traces, engines and a recording sink."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.sim.replica import EngineParams, Replica
from gpufleet.sim.traces import Trace
from tests.pools import pool, tier, traffic_class

# Round numbers so expected times can be worked out by hand.
PARAMS = EngineParams(
    step_floor=0.010, decode_per_token=0.001, prefill_per_token=0.0001, overhead=0.005
)


def mixed_pool(**spec: Any) -> InferencePool:
    """The llama3-8b-mixed example (h100 + preemptible rtx4090, realtime + batch)."""
    return parse_pool(pool(**spec))


def renamed_pool() -> InferencePool:
    """The same fleet with tier names that say nothing about the accelerator."""
    return parse_pool(
        pool(
            tiers=[
                tier("fast", "H100-PCIe-80GB", minReplicas=1),
                tier("cheap", "RTX4090", maxReplicas=16, preemptible=True),
            ],
            classes=[
                traffic_class("realtime", 100, header="realtime", priority=100),
                traffic_class("batch", 2000, priority=10),
            ],
        )
    )


def trace(
    arrival: Sequence[float] | NDArray[Any],
    prompt: Sequence[int] | int = 200,
    output: Sequence[int] | int = 200,
    classes: Sequence[int] | None = None,
    names: tuple[str, ...] = ("realtime", "batch"),
) -> Trace:
    n = len(arrival)
    prompts = [prompt] * n if isinstance(prompt, int) else list(prompt)
    outputs = [output] * n if isinstance(output, int) else list(output)
    return Trace(
        arrival_seconds=np.asarray(arrival, dtype=np.float64),
        prompt_tokens=np.asarray(prompts, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        class_index=np.asarray(classes if classes is not None else [1] * n, dtype=np.int64),
        classes=names,
    )


class Sink:
    """Records what an engine reports."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.tokens: list[tuple[float, int]] = []  # (step end, tokens generated)

    def first_token(self, request: int, time: float) -> None:
        self.first[request] = time

    def generated(self, request: int, tokens: int, time: float) -> None:
        self.tokens.append((time, tokens))

    def completed(self, request: int, time: float) -> None:
        self.done[request] = time


def engine(
    prompt: Sequence[int], output: Sequence[int], params: EngineParams = PARAMS
) -> tuple[Replica, Sink]:
    sink = Sink()
    return Replica(params, list(prompt), list(output), sink), sink


class Recording:
    """A fixed policy that keeps what it was shown."""

    name = "recording"
    description = "fixed replicas and weights"
    foresight = False
    early_passes = False

    def __init__(self, replicas: dict[str, int], weights: dict[str, dict[str, int]]) -> None:
        from gpufleet.sim.policy import Decision, Seen

        self.decision = Decision(replicas=replicas, weights=weights)
        self.seen: list[Seen] = []

    def warm(self, seen: Any) -> Any:
        return self.decision

    def decide(self, seen: Any) -> Any:
        self.seen.append(seen)
        return self.decision


class Scripted(Recording):
    """A policy that runs a list of fleets: the first from the start, then one per decision
    (the last one kept)."""

    def __init__(
        self, replicas: Sequence[dict[str, int]], weights: dict[str, dict[str, int]]
    ) -> None:
        from gpufleet.sim.policy import Decision

        super().__init__(dict(replicas[0]), weights)
        self.script = [Decision(replicas=r, weights=weights) for r in replicas]

    def warm(self, seen: Any) -> Any:
        return self.script[0]

    def decide(self, seen: Any) -> Any:
        self.seen.append(seen)
        return self.script[min(len(self.seen), len(self.script) - 1)]
