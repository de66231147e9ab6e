"""Load for the fleet twin: tokens/s per traffic class over time, or a replayed trace.

A *schedule* is a list of phases, each lasting some seconds and giving every class a
demand in tokens per second (prompt plus generated) and, optionally, its request shape;
a class without a shape uses the pool's `meanPromptTokens` / `meanOutputTokens`, the
lengths the planner plans with. Requests arrive as a Poisson process at
`tokens_per_second / (prompt + output)` requests per second (seeded). A *trace*
(`gpufleet.sim.traces.Trace`) is replayed request by request instead.

Schedule file (`gpufleet dev twin --load FILE`):

    pools:
    - namespace: llm
      pool: llama3-8b
      seed: 1                     # optional
      phases:
      - name: quiet
        seconds: 60
        classes:
        - {name: realtime, tokensPerSecond: 1500}
        - {name: batch, tokensPerSecond: 6000, promptTokens: 800, outputTokens: 200}
      - name: surge
        seconds: 120
        classes:
        - {name: batch, tokensPerSecond: 18000}

A class missing from a phase sends nothing during it. After the last phase, the last
phase's load continues (`hold_last=True`, the default) or stops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import yaml

from gpufleet.sim.traces import Trace

# Never more than this many arrivals per call: a schedule typo (tokens/s in the millions)
# must not stall the twin.
MAX_ARRIVALS_PER_CALL = 20_000


@dataclass(frozen=True)
class ClassLoad:
    """Demand of one class: tokens/s, and the request shape (None: the pool's class means)."""

    tokens_per_second: float
    prompt_tokens: int | None = None
    output_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.tokens_per_second < 0 or not math.isfinite(self.tokens_per_second):
            raise ValueError(f"tokensPerSecond must be >= 0, got {self.tokens_per_second}")
        for value in (self.prompt_tokens, self.output_tokens):
            if value is not None and value < 1:
                raise ValueError("promptTokens and outputTokens must be at least 1")


@dataclass(frozen=True)
class Phase:
    """A stretch of constant demand."""

    name: str
    seconds: float
    classes: Mapping[str, ClassLoad] = field(default_factory=dict)


@dataclass(frozen=True)
class Schedule:
    """Phases played one after another from the twin's time 0 (or from `start`)."""

    phases: tuple[Phase, ...]
    hold_last: bool = True

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    def phase_at(self, t: float) -> Phase | None:
        """The phase playing at `t` seconds (None before 0, or after the end unless held)."""
        if t < 0 or not self.phases:
            return None
        elapsed = 0.0
        for phase in self.phases:
            elapsed += phase.seconds
            if t < elapsed:
                return phase
        return self.phases[-1] if self.hold_last else None


class Arrival(NamedTuple):
    """One request reaching the gateway."""

    time: float
    traffic_class: str
    prompt_tokens: int
    output_tokens: int


class LoadSource(Protocol):
    """What the twin asks each tick: the requests arriving in [start, end), in time order.

    `shapes` are the pool's class means (prompt, output), for loads that give none.
    """

    def arrivals(
        self, start: float, end: float, shapes: Mapping[str, tuple[int, int]]
    ) -> list[Arrival]: ...


class PoissonLoad:
    """Poisson arrivals at the current per-class demand, which can change at any time."""

    def __init__(
        self,
        classes: Mapping[str, ClassLoad] | None = None,
        *,
        seed: int = 0,
        schedule: Schedule | None = None,
        offset_seconds: float = 0.0,
    ) -> None:
        self._fixed = dict(classes or {})
        self._schedule = schedule
        self._offset = offset_seconds
        self._rng = np.random.default_rng(seed)

    def set(self, classes: Mapping[str, ClassLoad]) -> None:
        """Replace the demand (a schedule, if any, is dropped)."""
        self._fixed = dict(classes)
        self._schedule = None

    def current(self, t: float) -> Mapping[str, ClassLoad]:
        if self._schedule is None:
            return self._fixed
        phase = self._schedule.phase_at(t - self._offset)
        return phase.classes if phase is not None else {}

    def arrivals(
        self, start: float, end: float, shapes: Mapping[str, tuple[int, int]]
    ) -> list[Arrival]:
        if end <= start:
            return []
        out: list[Arrival] = []
        # The demand is taken at the start of the window: ticks are a fraction of a second.
        for name, load in sorted(self.current(start).items()):
            default = shapes.get(name)
            if default is None:
                continue  # a class the pool does not have
            prompt = load.prompt_tokens or default[0]
            output = load.output_tokens or default[1]
            rate = load.tokens_per_second / (prompt + output)
            count = min(int(self._rng.poisson(rate * (end - start))), MAX_ARRIVALS_PER_CALL)
            for time in self._rng.uniform(start, end, size=count).tolist():
                out.append(Arrival(float(time), name, prompt, output))
        out.sort()
        return out[:MAX_ARRIVALS_PER_CALL]


class TraceLoad:
    """A trace replayed from the twin's time `offset_seconds`, its class names kept."""

    def __init__(self, trace: Trace, *, offset_seconds: float = 0.0) -> None:
        self._trace = trace
        self._offset = offset_seconds

    def arrivals(
        self, start: float, end: float, shapes: Mapping[str, tuple[int, int]]
    ) -> list[Arrival]:
        t = self._trace
        lo, hi = np.searchsorted(
            t.arrival_seconds, [start - self._offset, end - self._offset], side="left"
        ).tolist()
        hi = min(hi, lo + MAX_ARRIVALS_PER_CALL)
        return [
            Arrival(
                float(t.arrival_seconds[i]) + self._offset,
                t.classes[int(t.class_index[i])],
                int(t.prompt_tokens[i]),
                int(t.output_tokens[i]),
            )
            for i in range(lo, hi)
        ]


# -- files ------------------------------------------------------------------------------------


def parse_phases(raw: Sequence[Mapping[str, Any]]) -> tuple[Phase, ...]:
    """Phases from their YAML form (see module docstring)."""
    phases = []
    for i, item in enumerate(raw):
        seconds = float(item["seconds"])
        if seconds <= 0:
            raise ValueError(f"phases[{i}].seconds must be positive")
        classes = {
            str(c["name"]): ClassLoad(
                tokens_per_second=float(c.get("tokensPerSecond", 0)),
                prompt_tokens=int(c["promptTokens"]) if "promptTokens" in c else None,
                output_tokens=int(c["outputTokens"]) if "outputTokens" in c else None,
            )
            for c in item.get("classes") or []
        }
        phases.append(Phase(str(item.get("name", f"phase-{i}")), seconds, classes))
    return tuple(phases)


@dataclass(frozen=True)
class PoolSchedule:
    namespace: str
    pool: str
    schedule: Schedule
    seed: int = 0


def load_schedules(path: Path) -> list[PoolSchedule]:
    """Every pool's schedule in a schedule file."""
    data = yaml.safe_load(path.read_text()) or {}
    out = []
    for item in data.get("pools") or []:
        out.append(
            PoolSchedule(
                namespace=str(item.get("namespace", "default")),
                pool=str(item["pool"]),
                schedule=Schedule(
                    parse_phases(item.get("phases") or []),
                    hold_last=bool(item.get("holdLast", True)),
                ),
                seed=int(item.get("seed", 0)),
            )
        )
    if not out:
        raise ValueError(f"{path}: no pools with a load schedule")
    return out
