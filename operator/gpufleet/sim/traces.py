"""Request traces for the simulator: the Azure LLM trace format, class assignment, synthetic load.

A `Trace` is columns of equal length, sorted by arrival: seconds since the trace start,
prompt tokens, generated tokens and the traffic class of each request (an index into
`classes`). Everything random takes a seed; the same seed gives the same trace.

Class assignment (the Azure trace has no classes):
- by fraction: each request independently joins class c with probability f_c (seeded);
  classes without a fraction share nothing, the pool's default class takes the rest;
- by size: the same shares, but the shortest prompts go to the highest-priority class
  (interactive traffic tends to be short), the next shortest to the next, and so on.

The context (`within_context`): what a vLLM server started with `--max-model-len` accepts of a
trace. A lognormal prompt length has no upper bound, and a trace may hold prompts longer than
the pool's context; vLLM refuses those before they reach the engine, so the simulator must not
let a 30,000-token prefill hold an 8,192-token server's queue for seconds.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from gpufleet.api.types import InferencePoolSpec

# Independent random streams per purpose, so adding one never shifts another.
STREAM_CLASSES = 1
STREAM_ROUTING = 2
STREAM_SYNTHETIC = 3
STREAM_PREEMPTION = 4


def rng(seed: int, stream: int, *extra: int) -> np.random.Generator:
    """The generator of one purpose (and e.g. one tier) for a run's seed."""
    return np.random.default_rng([seed, stream, *extra])


@dataclass(frozen=True)
class Trace:
    """Requests sorted by arrival time."""

    arrival_seconds: NDArray[np.float64]
    prompt_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    class_index: NDArray[np.int64]
    classes: tuple[str, ...]
    start: datetime = datetime(2023, 11, 16, tzinfo=UTC)
    source: str = ""
    # Per class, the requests taken out by `within_context` (refused: prompt over the
    # context). They never reach a replica, and count against the class's attainment.
    refused: Mapping[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.arrival_seconds)

    @property
    def duration_seconds(self) -> float:
        return float(self.arrival_seconds[-1]) if len(self) else 0.0

    def class_mask(self, name: str) -> NDArray[np.bool_]:
        mask: NDArray[np.bool_] = self.class_index == self.classes.index(name)
        return mask


def read_azure(path: Path) -> Trace:
    """An Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens), one class."""
    stamps: list[datetime] = []
    prompts: list[int] = []
    outputs: list[int] = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(
                f"{path}: not an Azure LLM trace, missing {', '.join(sorted(missing))}"
            )
        for row in reader:
            stamps.append(_timestamp(row["TIMESTAMP"]))
            prompts.append(int(row["ContextTokens"]))
            outputs.append(int(row["GeneratedTokens"]))
    if not stamps:
        raise ValueError(f"{path}: no requests")
    start = min(stamps)
    arrival = np.array([(s - start).total_seconds() for s in stamps], dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    return Trace(
        arrival_seconds=arrival[order],
        # A request always costs at least one token each way.
        prompt_tokens=np.maximum(np.array(prompts, dtype=np.int64)[order], 1),
        output_tokens=np.maximum(np.array(outputs, dtype=np.int64)[order], 1),
        class_index=np.zeros(len(stamps), dtype=np.int64),
        classes=("all",),
        start=start,
        source=str(path),
    )


def _timestamp(text: str) -> datetime:
    # The Azure files carry 7 fractional digits; datetime takes at most 6.
    head, _, fraction = text.strip().partition(".")
    value = datetime.fromisoformat(f"{head}.{fraction[:6]}" if fraction else head)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def cut(trace: Trace, *, speedup: float = 1.0, duration_seconds: float | None = None) -> Trace:
    """The trace replayed `speedup` times faster, then only its first `duration_seconds`."""
    if speedup <= 0:
        raise ValueError("speedup must be positive")
    arrival = trace.arrival_seconds / speedup
    keep = slice(None)
    if duration_seconds is not None:
        keep = slice(0, int(np.searchsorted(arrival, duration_seconds, side="left")))
    return Trace(
        arrival_seconds=arrival[keep],
        prompt_tokens=trace.prompt_tokens[keep],
        output_tokens=trace.output_tokens[keep],
        class_index=trace.class_index[keep],
        classes=trace.classes,
        start=trace.start,
        source=trace.source,
    )


def within_context(trace: Trace, max_model_len: int | None) -> Trace:
    """What a vLLM 0.33 server with a context of `max_model_len` tokens serves of `trace`
    (None: the context is not known, everything as it is).

    vLLM refuses a prompt of the context's length or more before it reaches the engine
    (HTTP 400): a longer one in `renderers/params.py`, and one of exactly `max_model_len`
    tokens because `get_max_tokens` (`entrypoints/serve/utils/api_utils.py`) leaves it an
    output budget of 0, which `sampling_params.py` refuses. It caps a request's output at
    the context its prompt leaves. The refused requests are
    taken out of the trace and counted per class (`Trace.refused`): no replica sees them,
    and a class's attainment counts them as missed (`report.summarize`)."""
    if max_model_len is None or len(trace) == 0:
        return trace
    refused = trace.prompt_tokens >= max_model_len
    keep = ~refused
    counts = dict(trace.refused)
    for ci, name in enumerate(trace.classes):
        n = int(np.sum(refused & (trace.class_index == ci)))
        if n:
            counts[name] = counts.get(name, 0) + n
    prompts = trace.prompt_tokens[keep]
    return Trace(
        arrival_seconds=trace.arrival_seconds[keep],
        prompt_tokens=prompts,
        output_tokens=np.minimum(trace.output_tokens[keep], max_model_len - prompts),
        class_index=trace.class_index[keep],
        classes=trace.classes,
        start=trace.start,
        source=trace.source,
        refused=counts,
    )


def refused_notes(trace: Trace, max_model_len: int | None) -> list[str]:
    """What `within_context` took out of the trace, per class (none: nothing)."""
    shares = []
    for ci, name in enumerate(trace.classes):
        refused = trace.refused.get(name, 0)
        if refused:
            offered = refused + int(np.sum(trace.class_index == ci))
            shares.append(f"{name} {refused} ({refused / offered:.2%})")
    if not shares:
        return []
    return [
        f"vLLM refuses the prompts of the pool's --max-model-len ({max_model_len} tokens) "
        f"or more: {', '.join(shares)} of the trace's requests, missed whatever the fleet "
        "(they count against attainment and its ceiling, for every policy)"
    ]


class AssignBy(StrEnum):
    FRACTION = "fraction"
    SIZE = "size"


def class_shares(spec: InferencePoolSpec, fractions: Mapping[str, float]) -> dict[str, float]:
    """Every class's share: the given fractions, the default class (no match) the rest."""
    names = [c.name for c in spec.traffic_classes]
    unknown = sorted(set(fractions) - set(names))
    if unknown:
        raise ValueError(f"unknown traffic class {', '.join(unknown)}; the pool has {names}")
    if any(not 0.0 <= f <= 1.0 for f in fractions.values()):
        raise ValueError("class fractions must be between 0 and 1")
    default = next(c.name for c in spec.traffic_classes if c.match is None)
    shares = {name: float(fractions.get(name, 0.0)) for name in names}
    if default not in fractions:
        shares[default] = 1.0 - sum(shares.values())
    total = sum(shares.values())
    if shares[default] < -1e-9 or not math.isclose(total, 1.0, abs_tol=1e-6):
        raise ValueError(
            f"class fractions must sum to 1 (the default class takes the rest): {total}"
        )
    return {name: max(share, 0.0) for name, share in shares.items()}


def assign_classes(
    trace: Trace,
    spec: InferencePoolSpec,
    fractions: Mapping[str, float],
    *,
    by: AssignBy = AssignBy.FRACTION,
    seed: int = 0,
) -> Trace:
    """The trace with each request given one of the pool's traffic classes."""
    shares = class_shares(spec, fractions)
    names = tuple(c.name for c in spec.traffic_classes)
    n = len(trace)
    generator = rng(seed, STREAM_CLASSES)
    if by is AssignBy.FRACTION:
        bounds = np.cumsum([shares[name] for name in names])
        draws = generator.random(n)
        index = np.minimum(np.searchsorted(bounds, draws, side="right"), len(names) - 1)
    else:
        # Shortest prompts first (random tie-break), handed out in priority order.
        order = np.lexsort((generator.random(n), trace.prompt_tokens))
        by_priority = sorted(
            range(len(names)), key=lambda i: (-spec.traffic_classes[i].priority, i)
        )
        index = np.empty(n, dtype=np.int64)
        start = 0
        for rank, ci in enumerate(by_priority):
            stop = n if rank == len(by_priority) - 1 else start + round(shares[names[ci]] * n)
            index[order[start:stop]] = ci
            start = stop
    return Trace(
        arrival_seconds=trace.arrival_seconds,
        prompt_tokens=trace.prompt_tokens,
        output_tokens=trace.output_tokens,
        class_index=index.astype(np.int64),
        classes=names,
        start=trace.start,
        source=trace.source,
    )


# -- synthetic load --------------------------------------------------------------------------


class Shape(StrEnum):
    CONSTANT = "constant"  # Poisson at the mean rate
    DIURNAL = "diurnal"  # one sinusoidal day over the duration, trough at the start
    BURSTS = "bursts"  # short 4x bursts at random times, about 6 an hour
    FLASH_CROWD = "flash-crowd"  # a sudden 5x surge at 40% of the duration, decaying
    WORKDAY = "workday"  # 4x from 09:00 to 17:00 UTC each day (the trace starts at 00:00)


DIURNAL_AMPLITUDE = 0.6
BURST_FACTOR = 4.0
BURST_SECONDS = 60.0
BURSTS_PER_HOUR = 6.0
FLASH_FACTOR = 5.0
FLASH_AT = 0.4
FLASH_RAMP_SECONDS = 30.0
FLASH_DECAY_SECONDS = 300.0
WORKDAY_FACTOR = 4.0
WORKDAY_HOURS = (9, 17)
PROMPT_SIGMA = 1.0  # lognormal spread of lengths, about the Azure conversation trace's
OUTPUT_SIGMA = 0.8
MAX_TOKENS = 16384


def rate_curve(
    shape: Shape, mean_rps: float, duration_seconds: float, burst_starts: Sequence[float] = ()
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Request rate over time, one point per second: (seconds, requests/s)."""
    t = np.arange(0.0, max(duration_seconds, 1.0), 1.0)
    if shape is Shape.CONSTANT:
        rate = np.full_like(t, mean_rps)
    elif shape is Shape.DIURNAL:
        rate = mean_rps * (1.0 - DIURNAL_AMPLITUDE * np.cos(2.0 * math.pi * t / duration_seconds))
    elif shape is Shape.BURSTS:
        rate = np.full_like(t, mean_rps)
        for b in burst_starts:
            rate[(t >= b) & (t < b + BURST_SECONDS)] = mean_rps * BURST_FACTOR
    elif shape is Shape.WORKDAY:
        hour = (t % 86400.0) / 3600.0
        busy = (hour >= WORKDAY_HOURS[0]) & (hour < WORKDAY_HOURS[1])
        rate = mean_rps * np.where(busy, WORKDAY_FACTOR, 1.0)
    else:
        onset = FLASH_AT * duration_seconds
        ramp = np.clip((t - onset) / FLASH_RAMP_SECONDS, 0.0, 1.0)
        decay = np.exp(-np.maximum(t - onset - FLASH_RAMP_SECONDS, 0.0) / FLASH_DECAY_SECONDS)
        rate = mean_rps * (1.0 + (FLASH_FACTOR - 1.0) * ramp * decay)
    # `mean_rps` is the mean whatever the shape: bursts and surges come out of the quiet parts.
    return t, rate * (mean_rps / rate.mean())


def synthetic(
    shape: Shape,
    *,
    mean_rps: float,
    duration_seconds: float,
    mean_prompt_tokens: float = 1000.0,
    mean_output_tokens: float = 200.0,
    seed: int = 0,
) -> Trace:
    """A synthetic trace: a Poisson process following `shape` (by thinning), lognormal lengths."""
    generator = rng(seed, STREAM_SYNTHETIC)
    bursts: list[float] = []
    if shape is Shape.BURSTS:
        count = generator.poisson(BURSTS_PER_HOUR * duration_seconds / 3600.0)
        bursts = sorted(generator.uniform(0.0, duration_seconds, size=count).tolist())
    grid, rate = rate_curve(shape, mean_rps, duration_seconds, bursts)
    peak = float(rate.max()) if len(rate) else 0.0
    if peak <= 0:
        raise ValueError("the mean rate must be positive")
    count = generator.poisson(peak * duration_seconds)
    candidates = np.sort(generator.uniform(0.0, duration_seconds, size=count))
    here = np.interp(candidates, grid, rate)
    arrival = candidates[generator.random(count) * peak < here]
    n = len(arrival)
    return Trace(
        arrival_seconds=arrival.astype(np.float64),
        prompt_tokens=_lognormal(generator, mean_prompt_tokens, PROMPT_SIGMA, n),
        output_tokens=_lognormal(generator, mean_output_tokens, OUTPUT_SIGMA, n),
        class_index=np.zeros(n, dtype=np.int64),
        classes=("all",),
        source=f"synthetic:{shape.value} mean {mean_rps:g} req/s seed {seed}",
    )


def _lognormal(
    generator: np.random.Generator, mean: float, sigma: float, n: int
) -> NDArray[np.int64]:
    mu = math.log(mean) - sigma * sigma / 2.0  # so the mean is `mean`
    values = np.rint(generator.lognormal(mu, sigma, size=n))
    return np.clip(values, 1, MAX_TOKENS).astype(np.int64)
