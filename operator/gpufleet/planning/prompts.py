"""Prompt lengths as distributions, not means: which slow first tokens capacity cannot fix (pure).

A class's P99 time to first token is set by its longest prompts as much as by queueing: a
prompt's prefill alone may take most of the objective (a 6,000-token prompt takes ~1.5 s on
an idle RTX 4090), and some prompts do not fit in it at all, on any tier. Judged at the mean
prompt, those misses read as "the tier is slow": feedback shrinks its capacity factor and
the planner buys replicas that cannot make them faster.

vLLM counts prompt lengths per pod (`vllm:request_prompt_tokens`), so each tier shows the
prompts it served over the last interval (`TierObservation.prompt_share_at_most`); their
mean is the same histogram's sum over its count (`prompt_mean_tokens`), not the tier's
prompt tokens/s over its requests/s: those count a prefill when it runs and a request
when it finishes, so under a backlog their ratio read 14,000 tokens one interval and 660
the next for prompts of 1,500 on average, and the lengths learned from it were stretched
by that much. vLLM has no per-class series, so a class's
prompts are taken as the mix of the tiers its live weights send it to (weighted by those
weights), scaled by the class's mean prompt over the mix's mean. On a tier that serves one
class this is the class's own distribution; on a tier shared with a class of other lengths
it is wider than the class's own.

From the learned distribution, per class (`for_pass`): the share of its prompts that no
tier prefills within the objective even with nothing running (`longest_idle_within`, from
`ReplicaModel.idle_ttft_seconds`: the bound the simulator reports as each class's ceiling,
with the same numbers). No fleet serves them in time, whatever it buys, so status shows
that share (`unservablePercent`) and ObjectivesMet names it (reason PromptsTooLong) instead
of blaming capacity. The profile's zero-load P99 holds a wait for a step in progress, so
its reach (`longest_within`) is shorter: an H100 with Llama 3 8B prefills about 1,565
tokens within 100 ms by it and 1,765 with nothing running. The prompts between the two
meet the objective only on a replica found idle; the planner sizes for the shorter reach
(`waits`, `contention`), and they are not counted as unservable. Feedback reads per tier
(`beyond_reach`, from the prompts the tier itself served) the prompts past the shorter
reach: the first tokens those prompts make slow are not read as "the tier is slow"
(`feedback.signal`). The learned
shares are a running mix over about MEMORY_REQUESTS requests, kept in status
(`promptLengths`), so that a quiet interval or a restart does not lose them; under
MIN_REQUESTS learned, nothing is concluded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from gpufleet.api.status import PromptLengths
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.records import TierObservation

MIN_REQUESTS = 100.0  # fewer requests learned: a 99th percentile says nothing yet
MEMORY_REQUESTS = 1000.0  # the learned shares weigh about this many recent requests
# Multiples of the class's mean prompt at which the learned shares are kept (PromptLengths).
RATIOS = (
    0.05,
    0.1,
    0.2,
    0.3,
    0.5,
    0.7,
    1.0,
    1.4,
    2.0,
    2.8,
    4.0,
    5.6,
    8.0,
    11.0,
    16.0,
    23.0,
    32.0,
    50.0,
)


@dataclass(frozen=True)
class Distribution:
    """Prompt lengths: sorted (bound, share at most bound) points and the mean."""

    points: tuple[tuple[float, float], ...]
    mean_tokens: float

    def share_at_most(self, tokens: float) -> float:
        """Share of prompts at most `tokens` long (log-linear inside a bucket)."""
        if tokens <= 0:
            return 0.0
        lower, at_lower = 0.0, 0.0
        for bound, share in self.points:
            if tokens <= bound:
                if share <= at_lower or bound <= lower:
                    return share
                if lower <= 0:
                    return at_lower + (share - at_lower) * tokens / bound
                position = math.log(tokens / lower) / math.log(bound / lower)
                return at_lower + (share - at_lower) * position
            lower, at_lower = bound, share
        return 1.0

    def scaled(self, factor: float) -> Distribution:
        return Distribution(
            tuple((b * factor, s) for b, s in self.points), self.mean_tokens * factor
        )


def tier_distribution(seen: TierObservation) -> Distribution | None:
    """The prompts a tier served over the last interval; None without any."""
    if not seen.prompt_share_at_most or not seen.requests_per_second:
        return None
    finite = sorted((b, s) for b, s in seen.prompt_share_at_most.items() if math.isfinite(b))
    if not finite:
        return None
    if finite[-1][1] < 1.0:
        # The +Inf bucket: vLLM's last 1-2-5 bound is at most max_model_len and at least 40%
        # of it, so these prompts lie within 2.5x of it; spread them up to twice it.
        finite.append((2 * finite[-1][0], 1.0))
    mean = seen.prompt_mean_tokens
    if mean is None or not math.isfinite(mean) or mean <= 0:
        mean = _interpolated_mean(finite)
    return Distribution(tuple(finite), mean)


def _interpolated_mean(points: Sequence[tuple[float, float]]) -> float:
    """The mean of the shares as `Distribution.share_at_most` spreads them: uniform below
    the first bound, log-uniform inside each bucket (mean (b - a) / ln(b / a))."""
    total, lower, at_lower = 0.0, 0.0, 0.0
    for bound, share in points:
        weight = share - at_lower
        if weight > 0:
            if lower <= 0:
                middle = bound / 2.0
            elif bound > lower:
                middle = (bound - lower) / math.log(bound / lower)
            else:
                middle = bound
            total += weight * middle
        lower, at_lower = bound, max(share, at_lower)
    return total


def mixed(parts: Sequence[tuple[float, Distribution]]) -> Distribution | None:
    """The mix of distributions, each with a weight (bounds merged)."""
    total = sum(w for w, _ in parts if w > 0)
    if total <= 0:
        return None
    bounds = sorted({b for _, d in parts for b, _ in d.points})
    points = tuple(
        (b, sum(w * d.share_at_most(b) for w, d in parts if w > 0) / total) for b in bounds
    )
    mean = sum(w * d.mean_tokens for w, d in parts if w > 0) / total
    return Distribution(points, mean)


def on_grid(lengths: PromptLengths) -> Distribution:
    """The learned shares as a distribution at the class's mean."""
    pairs = zip(RATIOS, lengths.share_at_most, strict=True)
    points = tuple((r * lengths.mean_tokens, s) for r, s in pairs)
    return Distribution(points, lengths.mean_tokens)


def usable(lengths: PromptLengths) -> bool:
    """Whether learned shares read from status can be used: one per RATIOS multiple, each
    a share, never falling, over a positive mean and request count."""
    shares = lengths.share_at_most
    return (
        len(shares) == len(RATIOS)
        and all(0.0 <= x <= 1.0 for x in shares)
        and all(a <= b + 1e-9 for a, b in pairwise(shares))
        and lengths.mean_tokens > 0
        and lengths.requests >= 0
    )


def learn(
    previous: PromptLengths | None,
    observed: Mapping[str, TierObservation],
    weights: Mapping[str, int],
    mean_prompt: float,
    interval_seconds: float,
    now: datetime,
) -> PromptLengths | None:
    """A class's prompt lengths with this interval's requests learned in (module doc).

    The interval's prompts are the mix of the tiers the class's live weights send it to,
    scaled to its mean prompt; they weigh their request count against the learned
    shares' (at most MEMORY_REQUESTS), so a quiet interval moves them little."""
    if previous is not None and not usable(previous):
        previous = None  # written by another version, or by hand: start again
    if mean_prompt <= 0:
        return previous
    parts = []
    requests = 0.0
    for tier, weight in weights.items():
        seen = observed.get(tier)
        distribution = tier_distribution(seen) if seen else None
        if weight <= 0 or distribution is None or seen is None:
            continue
        parts.append((float(weight), distribution))
        requests += (seen.requests_per_second or 0.0) * interval_seconds * weight / 100.0
    mix = mixed(parts)
    if mix is None or mix.mean_tokens <= 0 or requests <= 0:
        return previous
    fresh = mix.scaled(mean_prompt / mix.mean_tokens)
    shares = [fresh.share_at_most(r * mean_prompt) for r in RATIOS]
    kept = min(previous.requests, MEMORY_REQUESTS) if previous else 0.0
    if previous is not None and kept > 0:
        total = kept + requests
        shares = [
            (kept * p + requests * f) / total
            for p, f in zip(previous.share_at_most, shares, strict=True)
        ]
    return PromptLengths(
        mean_tokens=round(mean_prompt, 1),
        requests=round(kept + requests, 1),
        share_at_most=[round(s, 5) for s in shares],
        updated_at=now,
    )


def longest_within(model: ReplicaModel, objective_seconds: float) -> float:
    """The longest prompt whose zero-load P99 TTFT is within the objective (tokens): what
    the replica serves in time at low load, a step in progress included (the reach the
    planner sizes against; `longest_idle_within` is the one with nothing running)."""
    fixed = model.ttft_base_seconds(0.0)
    per_token = model.prefill_seconds_for(1.0)
    if objective_seconds <= fixed:
        return 0.0
    if per_token <= 0:
        return math.inf
    return (objective_seconds - fixed) / per_token


def longest_idle_within(model: ReplicaModel, objective_seconds: float) -> float:
    """The longest prompt a replica with nothing running prefills within the objective
    (tokens; 0 if not even one): `ReplicaModel.idle_ttft_seconds` inverted. It prefills in
    chunks of the token budget, each step at least the floor: as many full chunks as fit,
    then a last chunk if the time left holds a step."""
    if model.idle_ttft_seconds(1.0) > objective_seconds:
        return 0.0
    per_token = model.prefill_seconds_for(1.0)
    if per_token <= 0:
        return math.inf
    floor, budget = model.step_floor_seconds, model.max_batched_tokens
    chunk = max(floor, budget * per_token)
    left = objective_seconds - model.idle_overhead_seconds
    full = math.floor(left / chunk)
    rest = left - full * chunk
    return full * budget + (min(rest / per_token, budget) if rest >= floor else 0.0)


@dataclass(frozen=True)
class ClassPrompts:
    """A pass's view of every class's prompt lengths (see the module docstring)."""

    lengths: Mapping[str, PromptLengths]  # classes with any learned, for status
    # Classes with enough learned: the share of their prompts no tier prefills within
    # their objective even with nothing running (`longest_idle_within`).
    unservable: Mapping[str, float]

    def for_sizing(self) -> dict[str, Distribution]:
        """The classes whose lengths are learned well enough to size over them (`waits`).

        From MIN_REQUESTS, like everything else here. The far tail (the second moment the
        queue reads) of a hundred requests is rough, but a class not sized over its lengths
        is sized at its mean prompt, as if every prompt were the mean: the least spread
        there is. Sized over them only from 500 requests, the batch class of the constant
        synthetic trace (`make bench-sim`, size) was sized for its first passes at its mean
        prompt's limit (RTX 4090s 95% busy) where over its lengths the limit is about 50%;
        feedback read the misses as a slow tier and held its capacity factor at 81-86% for
        the rest of the hour (90% from 100 requests: 5.26 RTX 4090-hours instead of 5.63,
        batch 98.52% of requests in time instead of 98.59%)."""
        return {c: on_grid(x) for c, x in self.lengths.items() if x.requests >= MIN_REQUESTS}


def for_pass(inputs: Inputs, models: Mapping[str, ReplicaModel]) -> ClassPrompts:
    """Learn each class's prompt lengths from this pass's histograms, and the share out of
    every tier's reach (`models`: the tiers' replica models at their profile's speed)."""
    interval = float(inputs.spec.scaling.interval_seconds)
    lengths: dict[str, PromptLengths] = {}
    unservable: dict[str, float] = {}
    for cls in inputs.classes:
        before = next((c for c in inputs.previous.classes if c.name == cls.name), None)
        learned = learn(
            before.prompt_lengths if before else None,
            inputs.observation.tiers,
            inputs.previous_weights(cls.name),
            cls.shape[0],
            interval,
            inputs.now,
        )
        if learned is None:
            continue
        lengths[cls.name] = learned
        if learned.requests < MIN_REQUESTS or not models:
            continue
        distribution = on_grid(learned)
        reach = max(longest_idle_within(m, cls.objective_seconds) for m in models.values())
        unservable[cls.name] = 1.0 - distribution.share_at_most(reach)
    return ClassPrompts(lengths, unservable)


def beyond_reach(seen: TierObservation, model: ReplicaModel, seconds: float) -> float:
    """Share of the prompts a tier served over the last interval that take longer than
    `seconds` to first token even on an idle replica (0 without a histogram)."""
    distribution = tier_distribution(seen)
    if distribution is None:
        return 0.0
    return 1.0 - distribution.share_at_most(longest_within(model, seconds))
