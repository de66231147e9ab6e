"""Prompt lengths learned from the tiers' histograms: the share no tier can serve in time.

The H100 PCIe profile prefills within 100 ms, idle, prompts up to about 1,565 tokens; the
RTX 4090's up to about 290. A realtime class (100 ms) whose prompts run longer than that
cannot be served in time whatever the fleet: status says how many, ObjectivesMet says why,
and the replicas and weights are what they would be without the histogram.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from gpufleet.api.status import ClassStatus, InferencePoolStatus, PromptLengths, Reason, TierWeight
from gpufleet.api.types import InferencePool
from gpufleet.desired.status import RoutingState, build_status
from gpufleet.planning import conditions
from gpufleet.planning.planner import plan
from gpufleet.planning.profiles import replica_model
from gpufleet.planning.prompts import (
    MEMORY_REQUESTS,
    MIN_REQUESTS,
    RATIOS,
    Distribution,
    learn,
    longest_idle_within,
    longest_within,
    on_grid,
    tier_distribution,
    usable,
)
from gpufleet.planning.records import TierObservation
from tests.pools import pool
from tests.unit.planning.factories import (
    T0,
    batch,
    h100,
    observe,
    previous,
    realtime,
    replicas,
    rtx4090,
    spec,
    status_from,
    tier_spec,
    weights,
)

pytestmark = pytest.mark.timeout(10)

LIVE = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
RUNNING = {"h100": 1, "rtx4090": 2}
# A long-tailed histogram (bound -> share at most it), its mean 1,200 tokens.
LONG = {200.0: 0.1, 500.0: 0.3, 1000.0: 0.6, 2000.0: 0.8, 5000.0: 0.95, 10000.0: 1.0}
MEAN = 1200.0
CLASSES = [realtime(meanPromptTokens=round(MEAN)), batch()]


def histogram(shares: dict[float, float], rps: float, mean: float = MEAN) -> dict[str, Any]:
    """A tier's readings: its prompt histogram and their mean, request rate, tokens/s."""
    return {
        "prompt_share_at_most": {**shares, float("inf"): 1.0},
        "requests_per_second": rps,
        "prompt_tokens_per_second": rps * mean,
        "prompt_mean_tokens": mean,
        "generation_tokens_per_second": rps * 200.0,
    }


def test_shares_between_bounds_are_log_linear() -> None:
    d = Distribution(((100.0, 0.2), (1000.0, 0.8)), 500.0)
    assert d.share_at_most(100.0) == pytest.approx(0.2)
    assert d.share_at_most(1000.0) == pytest.approx(0.8)
    assert d.share_at_most(316.2278) == pytest.approx(0.5, abs=1e-4)  # halfway in log
    assert d.share_at_most(50.0) == pytest.approx(0.1)  # linear from zero below the first
    assert d.share_at_most(5000.0) == 1.0
    assert d.share_at_most(0.0) == 0.0


def test_prompts_above_the_last_bound_are_spread_up_to_twice_it() -> None:
    seen = TierObservation(
        name="h100", **histogram({1000.0: 0.5, 2000.0: 0.7, 5000.0: 0.9}, rps=10.0)
    )
    d = tier_distribution(seen)
    assert d is not None
    assert 0.9 < d.share_at_most(7000.0) < 1.0
    assert d.share_at_most(10000.0) == 1.0


def test_a_tier_s_mean_prompt_comes_from_its_histogram_not_its_token_rate() -> None:
    # Under a backlog, prompt tokens/s (counted at prefill) over requests/s (counted when
    # they finish) read 14,000 tokens for these prompts of 1,200: the mean is the
    # histogram's own, and the lengths learned are those of a steady interval.
    steady = TierObservation(name="h100", **histogram(LONG, rps=10.0))
    readings = {**histogram(LONG, rps=10.0), "prompt_tokens_per_second": 140000.0}
    backlog = TierObservation(name="h100", **readings)
    assert tier_distribution(backlog) == tier_distribution(steady)
    learned = [learn(None, {"h100": s}, {"h100": 100}, MEAN, 30.0, T0) for s in (steady, backlog)]
    assert learned[0] is not None and learned[1] is not None
    assert learned[1].share_at_most == learned[0].share_at_most


def test_without_the_histogram_s_mean_the_buckets_give_it() -> None:
    # All prompts in one bucket (1,000, 2,000]: spread log-uniformly, their mean is
    # 1,000 / ln 2; below the first bound, uniformly from zero.
    one = {**histogram({1000.0: 0.0, 2000.0: 1.0}, rps=5.0), "prompt_mean_tokens": None}
    d = tier_distribution(TierObservation(name="h100", **one))
    assert d is not None
    assert d.mean_tokens == pytest.approx(1000.0 / math.log(2.0))
    low = {**histogram({100.0: 1.0}, rps=5.0), "prompt_mean_tokens": None}
    d = tier_distribution(TierObservation(name="h100", **low))
    assert d is not None and d.mean_tokens == pytest.approx(50.0)


def test_learned_from_the_tier_a_class_alone_is_sent_to() -> None:
    seen = {"h100": TierObservation(name="h100", **histogram(LONG, rps=10.0))}
    learned = learn(None, seen, {"h100": 100}, MEAN, 30.0, T0)
    assert learned is not None and usable(learned)
    assert learned.requests == pytest.approx(300.0)
    assert learned.mean_tokens == MEAN
    at = dict(zip(RATIOS, learned.share_at_most, strict=True))
    assert at[1.0] == pytest.approx(
        Distribution(tuple(sorted(LONG.items())), MEAN).share_at_most(MEAN), abs=1e-5
    )
    assert at[50.0] == pytest.approx(1.0)


def test_a_class_with_a_longer_mean_than_its_tiers_is_scaled_to_it() -> None:
    seen = {"h100": TierObservation(name="h100", **histogram(LONG, rps=10.0))}
    twice = learn(None, seen, {"h100": 100}, 2 * MEAN, 30.0, T0)
    once = learn(None, seen, {"h100": 100}, MEAN, 30.0, T0)
    assert twice is not None and once is not None
    assert twice.share_at_most == pytest.approx(once.share_at_most, abs=1e-4)  # same shape
    assert twice.mean_tokens == 2 * MEAN


def test_each_interval_weighs_its_requests_against_a_bounded_memory() -> None:
    short = {500.0: 0.9, 1000.0: 1.0}
    seen_long = {"h100": TierObservation(name="h100", **histogram(LONG, rps=10.0))}
    seen_short = {"h100": TierObservation(name="h100", **histogram(short, rps=10.0, mean=MEAN))}
    first = learn(None, seen_long, {"h100": 100}, MEAN, 30.0, T0)
    alone = learn(None, seen_short, {"h100": 100}, MEAN, 30.0, T0)
    both = learn(first, seen_short, {"h100": 100}, MEAN, 30.0, T0)
    assert first is not None and alone is not None and both is not None
    assert both.requests == pytest.approx(600.0)
    for a, b, mix in zip(first.share_at_most, alone.share_at_most, both.share_at_most, strict=True):
        assert mix == pytest.approx((a + b) / 2, abs=1e-4)
    # A long memory counts as MEMORY_REQUESTS, so new intervals still move it.
    old = first.model_copy(update={"requests": 1e6})
    moved = learn(old, seen_short, {"h100": 100}, MEAN, 30.0, T0)
    assert moved is not None
    assert moved.requests == pytest.approx(MEMORY_REQUESTS + 300.0)


def test_a_quiet_interval_changes_nothing() -> None:
    first = learn(
        None,
        {"h100": TierObservation(name="h100", **histogram(LONG, rps=10.0))},
        {"h100": 100},
        MEAN,
        30.0,
        T0,
    )
    quiet = {"h100": TierObservation(name="h100")}
    assert learn(first, quiet, {"h100": 100}, MEAN, 30.0, T0 + timedelta(seconds=30)) is first
    # Nor does a tier the class is not sent to.
    busy_elsewhere = {"rtx4090": TierObservation(name="rtx4090", **histogram(LONG, rps=10.0))}
    assert learn(first, busy_elsewhere, {"h100": 100}, MEAN, 30.0, T0) is first


@pytest.mark.parametrize(
    "shares",
    [[0.5] * 3, [0.9, 0.1] + [1.0] * (len(RATIOS) - 2), [2.0] * len(RATIOS)],
    ids=["too-few", "falling", "above-one"],
)
def test_shares_written_by_hand_are_dropped_not_trusted(shares: list[float]) -> None:
    strange = PromptLengths(mean_tokens=MEAN, requests=500, share_at_most=shares, updated_at=T0)
    assert not usable(strange)
    seen = {"h100": TierObservation(name="h100", **histogram(LONG, rps=10.0))}
    learned = learn(strange, seen, {"h100": 100}, MEAN, 30.0, T0)
    assert learned is not None and usable(learned)
    assert learned.requests == pytest.approx(300.0)  # started again
    assert learn(strange, {}, {"h100": 100}, MEAN, 30.0, T0) is None


def test_reach_is_the_longest_prompt_prefilled_in_time_at_low_load() -> None:
    h100 = replica_model(tier_spec("h", "H100-PCIe-80GB"), spec().model)
    reach = longest_within(h100, 0.1)
    assert h100.ttft_base_seconds(reach) == pytest.approx(0.1)
    assert 1000 < reach < 2500
    assert longest_within(h100, h100.ttft_base_seconds(0.0) / 2) == 0.0


@pytest.mark.parametrize("accelerator", ["H100-PCIe-80GB", "RTX4090"])
@pytest.mark.parametrize("objective", [0.1, 0.3, 2.0])
def test_idle_reach_is_the_longest_prompt_an_idle_replica_prefills_in_time(
    accelerator: str, objective: float
) -> None:
    model = replica_model(tier_spec("t", accelerator), spec().model)
    reach = longest_idle_within(model, objective)
    # Within a nanosecond: the inverse rounds the way floating point does.
    assert model.idle_ttft_seconds(reach) <= objective + 1e-9 < model.idle_ttft_seconds(reach + 1)
    # Nothing running is faster than the zero-load P99, which waits for a step in progress.
    assert reach > longest_within(model, objective)
    assert reach - longest_within(model, objective) <= (
        model.step_floor_seconds / model.prefill_seconds_for(1.0) + 1
    )
    assert longest_idle_within(model, model.idle_ttft_seconds(0.0) / 2) == 0.0


def verdict(s: Any, seen: Any, p: Any) -> Any:
    """ObjectivesMet as status would set it from this plan."""
    return conditions.objectives(s, seen, p)


def _pass(shares: dict[float, float], rps: float, before: InferencePoolStatus | None = None) -> Any:
    s = spec(classes=CLASSES)
    seen = observe(
        s,
        {"realtime": 2000, "batch": 30000},
        ready=RUNNING,
        tiers={"h100": histogram(shares, rps)},
    )
    return s, seen, plan(s, seen, before or previous(RUNNING, LIVE))


def test_prompts_no_tier_reaches_are_named_in_objectives_met() -> None:
    s, seen, p = _pass(LONG, rps=10.0)
    unservable = p.classes["realtime"].unservable_share
    # LONG has 60% at most 1,000 and 80% at most 2,000 tokens; an H100 with nothing
    # running prefills ~1,765 within 100 ms (~1,565 at its zero-load P99, a step waited).
    assert unservable == pytest.approx(0.24, abs=0.02)
    h100 = replica_model(tier_spec("h", "H100-PCIe-80GB"), s.model)
    learned = on_grid(p.classes["realtime"].prompt_lengths)
    idle, busy = longest_idle_within(h100, 0.1), longest_within(h100, 0.1)
    assert unservable == pytest.approx(1.0 - learned.share_at_most(idle), abs=1e-9)
    assert unservable < 1.0 - learned.share_at_most(busy) - 0.01
    assert (
        verdict(s, seen, p).status is False
        and verdict(s, seen, p).reason is Reason.PROMPTS_TOO_LONG
    )
    assert (
        f"realtime: {unservable:.0%} of its prompts take longer than 100 ms to prefill"
        in verdict(s, seen, p).message
    )
    assert p.classes["batch"].unservable_share is None  # no histogram where batch goes


def test_prompts_within_reach_are_not_blamed() -> None:
    short = {200.0: 0.5, 500.0: 0.95, 1000.0: 1.0}
    s, seen, p = _pass(short, rps=10.0)
    assert p.classes["realtime"].unservable_share == pytest.approx(0.0, abs=1e-9)
    assert verdict(s, seen, p).reason is not Reason.PROMPTS_TOO_LONG


def test_too_few_requests_conclude_nothing_until_enough_are_learned() -> None:
    rps = (MIN_REQUESTS / 2) / 30.0
    s, seen, first = _pass(LONG, rps=rps)
    assert first.classes["realtime"].unservable_share is None
    assert verdict(s, seen, first).reason is not Reason.PROMPTS_TOO_LONG
    assert first.classes["realtime"].prompt_lengths is not None  # learning
    _, _, second = _pass(LONG, rps=rps, before=status_from(first, seen))
    assert second.classes["realtime"].unservable_share == pytest.approx(0.25, abs=0.03)


def test_the_unservable_share_changes_no_decision() -> None:
    # Prompts no tier reaches buy nothing; the only replicas the histogram adds are the
    # prompt tail's, for the prompts within reach that wait behind others' prefills
    # (gpufleet.planning.contention, tests/unit/planning/test_contention.py).
    _, _, with_histogram = _pass(LONG, rps=10.0)
    s = spec(classes=CLASSES)
    seen = observe(s, {"realtime": 2000, "batch": 30000}, ready=RUNNING)
    without = plan(s, seen, previous(RUNNING, LIVE))
    tail = {n: t.tail_replicas for n, t in with_histogram.tiers.items()}
    assert {n: r - tail[n] for n, r in replicas(with_histogram).items()} == replicas(without)
    assert weights(with_histogram) == weights(without)


def test_status_shows_the_unservable_share_and_keeps_the_learned_lengths() -> None:
    s, seen, p = _pass(LONG, rps=10.0)
    the_pool = InferencePool.model_validate(pool(tiers=[h100(), rtx4090()], classes=CLASSES))
    routing = RoutingState(True, Reason.ROUTE_APPLIED, "applied")
    status = build_status(the_pool, seen, p, routing, previous(RUNNING, LIVE))
    rt = next(c for c in status.classes if c.name == "realtime")
    assert rt.unservable_percent is not None and abs(rt.unservable_percent - 25) <= 3
    assert rt.prompt_lengths is not None and len(rt.prompt_lengths.share_at_most) == len(RATIOS)
    # A pass that learned nothing new keeps both.
    kept = InferencePoolStatus(
        classes=[
            ClassStatus(
                name="realtime",
                weights=[TierWeight(tier="h100", weight=100)],
                unservable_percent=rt.unservable_percent,
                prompt_lengths=rt.prompt_lengths,
            )
        ]
    )
    quiet = observe(s, {"realtime": 2000, "batch": 30000}, ready=RUNNING)
    again = build_status(the_pool, quiet, plan(s, quiet, kept), routing, kept)
    rt_again = next(c for c in again.classes if c.name == "realtime")
    assert rt_again.prompt_lengths == rt.prompt_lengths
    assert rt_again.unservable_percent == rt.unservable_percent
