"""The planner's foresight: forecast and burst reserve, lead time, scale-down window, backlog."""

from __future__ import annotations

import dataclasses

import pytest

from gpufleet.api.status import DemandForecast, InferencePoolStatus, TierWeight
from gpufleet.api.types import InferencePoolSpec
from gpufleet.planning import explain, forecast, needs
from gpufleet.planning.capacity import ReplicaModel
from gpufleet.planning.inputs import Inputs
from gpufleet.planning.leadtime import MIN_SAMPLE_SECONDS, lead_times
from gpufleet.planning.planner import plan
from gpufleet.planning.profiles import replica_model
from gpufleet.planning.records import PodStart
from gpufleet.planning.stabilization import hold_for_delay
from tests.unit.planning.factories import (
    at,
    observe,
    previous,
    replicas,
    spec,
    status_from,
)

pytestmark = pytest.mark.timeout(10)

LIVE = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}


def _run(series: list[float], percentile: int = 90) -> list[forecast.ClassForecast]:
    """Forecasts over a series of 30 s observations, the status carried as ints."""
    carried: DemandForecast | None = None
    out = []
    for k, value in enumerate(series):
        now = at(30 * k)
        f = forecast.update(
            carried,
            value,
            now=now,
            interval_seconds=30,
            horizon_seconds=106,
            percentile=percentile,
        )
        carried = forecast.to_status(f)
        out.append(f)
    return out


def test_steady_demand_plans_for_itself_with_no_reserve() -> None:
    last = _run([5000.0] * 20)[-1]
    assert last.expected == pytest.approx(5000, rel=1e-3)
    assert last.reserve == pytest.approx(0, abs=5)


def test_a_volatile_demand_holds_a_reserve_and_a_calm_one_gives_it_back() -> None:
    bursty = _run([2000.0, 8000.0] * 10 + [2000.0])
    assert bursty[-1].reserve > 2000  # between bursts, a step of their size is held
    calmed = _run([2000.0, 8000.0] * 10 + [2000.0] * 60)
    assert calmed[-1].reserve < 0.1 * bursty[-1].reserve


def test_a_rising_demand_is_expected_higher_over_the_lead_time() -> None:
    rising = _run([1000.0 * (k + 1) for k in range(8)], percentile=50)
    assert rising[-1].expected > rising[-1].observed
    assert rising[-1].planned == rising[-1].expected  # the median: no reserve


def test_a_step_the_history_has_not_taken_in_is_stepping_up_and_noise_is_not() -> None:
    noisy = _run([5000.0, 5400.0, 4700.0, 5200.0, 4800.0] * 4)
    assert not any(f.stepping_up(0.2) for f in noisy)
    assert not any(f.stepping_up(0.0) for f in noisy[10:])  # the deviation learned the noise
    step = _run([5000.0] * 10 + [12000.0, 15000.0, 15000.0, 15000.0, 15000.0])
    assert [f.stepping_up(0.2) for f in step[9:]] == [False, True, False, False, False, False]
    within = forecast.update(  # woken 5 s after the step's first pass: the history as it was
        forecast.to_status(step[9]),
        9000.0,
        now=at(30 * 9 + 5),
        interval_seconds=30,
        horizon_seconds=106,
        percentile=90,
    )
    assert within.stepping_up(0.2) and within.level == step[9].level
    falling = _run([15000.0] * 10 + [5000.0])
    assert not falling[-1].stepping_up(0.2)


def test_a_falling_trend_never_plans_below_today() -> None:
    falling = _run([8000.0 - 1000.0 * k for k in range(8)], percentile=50)
    assert falling[-1].expected == pytest.approx(falling[-1].observed)


def test_the_reserve_grows_with_the_planned_quantile() -> None:
    series = [2000.0, 3500.0] * 10  # volatile, but no burst (under twice the baseline)
    assert _run(series, percentile=99)[-1].reserve > _run(series, percentile=75)[-1].reserve
    assert _run(series, percentile=50)[-1].reserve == 0


# -- burst memory ----------------------------------------------------------------------------

BASE, PEAK = 2000.0, 8000.0


def _bursts(count: int, every: int, calm_after: int = 0) -> list[float]:
    """A one-interval burst to PEAK every `every` intervals, then `calm_after` calm ones."""
    series = [BASE if k % every else PEAK for k in range(1, count * every + 1)]
    return series + [BASE] * calm_after


def test_recurring_short_bursts_hold_their_peak_between_them() -> None:
    runs = _run(_bursts(4, every=6))
    last = runs[-2]  # calm, four intervals after the third burst
    assert last.observed == BASE
    assert last.holds_burst_peak and last.planned == pytest.approx(PEAK)
    assert last.bursts.gap_seconds == 180
    # The first burst alone held no peak (one burst is not a pattern), only the reserve.
    first_calm = runs[7]
    assert not first_calm.holds_burst_peak and first_calm.planned < 0.7 * PEAK


def test_the_peak_is_given_back_when_the_bursts_stop() -> None:
    # Gaps of 180 s: at the 90th percentile the next burst is due within 180 x ln 10 =
    # 414 s of the last one's end, the first calm pass (elapsed 0, 30, ... 390 s: held).
    runs = _run(_bursts(3, every=6, calm_after=20))
    held = [f.holds_burst_peak for f in runs[-20:]]
    assert held[:14] == [True] * 14 and not any(held[14:]), held
    longer = [f.holds_burst_peak for f in _run(_bursts(3, every=6, calm_after=20), 99)[-20:]]
    assert sum(longer) > sum(held)  # a higher percentile waits longer for the next one
    assert runs[-1].planned < PEAK / 2


def test_a_burst_where_bursts_recur_is_met_by_their_peak_not_chased() -> None:
    """A burst over within the horizon ends before replicas bought for it serve: once
    bursts recur, the trend and the deviation it throws up are not planned on top."""
    runs = _run(_bursts(4, every=6))
    first, third, fourth = runs[5], runs[17], runs[23]
    assert first.observed == third.observed == fourth.observed == PEAK
    # The first burst is no pattern yet: planned past what is seen (trend and deviation).
    assert not first.rides_burst and first.planned > 1.2 * PEAK
    for burst in (third, fourth):
        assert burst.rides_burst and burst.bursts.since is not None
        assert burst.expected == pytest.approx(PEAK) and burst.planned == pytest.approx(PEAK)
    # A burst above the remembered peak is planned at what is seen, never below it.
    bigger = forecast.update(
        forecast.to_status(runs[22]),
        1.5 * PEAK,
        now=at(30 * 23),
        interval_seconds=30,
        horizon_seconds=106,
        percentile=90,
    )
    assert bigger.rides_burst and bigger.planned == pytest.approx(1.5 * PEAK)
    # The median asks for no reserve: nothing is held, nothing capped.
    assert not any(f.rides_burst for f in _run(_bursts(4, every=6), percentile=50))


def test_a_burst_that_begins_late_in_the_pattern_is_ridden_to_its_end() -> None:
    """The pattern (gaps of 180 s) expects the next burst within 414 s of the last one's
    end (t = 540 s): one beginning at 930 s is that burst, still at 960 s, past the 954 s."""
    series = _bursts(3, every=6) + [BASE] * 13 + [PEAK, PEAK, BASE]
    runs = _run(series)
    began, still = runs[31], runs[32]
    assert began.bursts.since == still.bursts.since == at(930)
    for burst in (began, still):
        assert burst.rides_burst and burst.planned == pytest.approx(PEAK)
    # It ended at 990 s, 450 s after the last one: the mean gap moves toward it.
    assert runs[33].bursts.gap_seconds == pytest.approx(180 + forecast.GAP_ALPHA * (450 - 180))


def test_a_burst_that_outlasts_the_horizon_is_followed_again() -> None:
    """Recurring short bursts, then a step that stays: capped while it could be a burst,
    followed with the trend and the deviation once it has lasted longer than the horizon."""
    runs = _run(_bursts(3, every=6) + [PEAK] * 8)
    stay = runs[-8:]
    assert stay[0].rides_burst and stay[0].planned == pytest.approx(PEAK)
    assert stay[-1].bursts.since is None and not stay[-1].rides_burst


def test_a_burst_longer_than_the_horizon_is_a_new_level_not_a_burst() -> None:
    """Flash crowds: the forecast follows them; they are never held afterwards."""
    series = ([BASE] * 5 + [PEAK] * 8) * 3 + [BASE] * 6
    runs = _run(series)
    assert not any(f.holds_burst_peak for f in runs)
    assert runs[-1].bursts.last_end is None


def test_noise_is_not_a_burst_and_the_median_holds_no_peak() -> None:
    noisy = _run([BASE * (1.0 + 0.4 * (-1) ** k) for k in range(40)])
    assert all(f.bursts.last_end is None for f in noisy)
    median = _run(_bursts(4, every=6), percentile=50)
    assert not any(f.holds_burst_peak for f in median)
    assert median[-2].planned == median[-2].expected


def test_the_burst_memory_survives_the_status() -> None:
    runs = _run(_bursts(3, every=6))
    carried = forecast.to_status(runs[-2])
    kept = carried.bursts
    assert kept is not None and kept.mean_gap_seconds == 180
    assert kept.held_peak_tokens_per_second == PEAK
    assert kept.last_ended_at is not None and kept.baseline_tokens_per_second
    again = forecast.update(
        carried, BASE, now=at(30 * 18), interval_seconds=30, horizon_seconds=106, percentile=90
    )
    assert again.holds_burst_peak


def test_the_planner_holds_the_peak_of_recurring_bursts_and_says_so() -> None:
    """Bursts of one interval every four, a 60 s scale-down delay: without the memory the
    tier follows each burst down and pays a lead time of misses at the next."""

    def run(percentile: int) -> list[tuple[int, str]]:
        s = spec(scaling={"scaleDownDelaySeconds": 60, "forecastPercentile": percentile})
        running = {"h100": 1, "rtx4090": 2}
        status = previous(running, LIVE)
        out = []
        for k, batch in enumerate([4000.0 if k % 4 else 16000.0 for k in range(1, 21)]):
            seen = observe(s, {"realtime": 1000, "batch": batch}, now=30 * k, ready=running)
            p = plan(s, seen, status)
            status, running = status_from(p, seen), replicas(p)
            out.append((running["rtx4090"], p.message))
        return out

    held, median = run(90), run(50)
    # The calm pass before the fifth burst: the memory holds the bursts' size.
    assert held[-2][0] > median[-2][0], (held[-2], median[-2])
    assert "the peak of recurring bursts shorter than that (batch every 120 s)" in held[-2][1]
    assert "recurring bursts" not in median[-2][1]
    # The fifth burst is met by what is held, not chased like the first one was.
    assert held[-1][0] <= held[-2][0] < held[3][0], (held[3], held[-2:])
    assert "burst not chased: batch planned at 16000 tok/s" in held[-1][1], held[-1][1]
    assert "not chased" not in held[3][1] and "not chased" not in median[-1][1]


# -- lead time -------------------------------------------------------------------------------


def _model() -> ReplicaModel:
    s = spec()
    return replica_model(s.tiers[1], s.model)


def _inputs(starts: list[tuple[float, float]], **before: object) -> Inputs:
    s = spec()
    pods = tuple(PodStart(at(c), at(r)) for c, r in starts)
    seen = observe(s, {}, now=600, tiers={"rtx4090": {"pod_starts": pods}})
    status = previous({"h100": 1, "rtx4090": 2}, LIVE, tiers={"rtx4090": dict(before)})
    return Inputs(s, seen, status)


def test_lead_time_starts_at_the_model_load_time_and_learns_from_pods() -> None:
    prior = lead_times(_inputs([]), {"rtx4090": _model()})["rtx4090"]
    assert prior.seconds == pytest.approx(_model().model_load_seconds)
    assert not prior.learned
    first = lead_times(_inputs([(0, 200), (10, 230)]), {"rtx4090": _model()})["rtx4090"]
    assert first.seconds == pytest.approx(210) and first.observed_at == at(230)
    # Next pass: the estimate moves halfway to a new sample; pods already used are not.
    later = _inputs(
        [(0, 200), (10, 230), (300, 400)], lead_time_seconds=210, lead_time_observed_at=at(230)
    )
    moved = lead_times(later, {"rtx4090": _model()})["rtx4090"]
    assert moved.seconds == pytest.approx(210 + 0.5 * (100 - 210))
    assert moved.observed_at == at(400)


def test_pods_that_were_ready_at_once_say_nothing_of_lead_time() -> None:
    warm = _inputs([(0, MIN_SAMPLE_SECONDS / 2)])
    assert not lead_times(warm, {"rtx4090": _model()})["rtx4090"].learned


# -- the scale-down window -------------------------------------------------------------------


def test_scale_down_follows_the_highest_recommendation_of_the_last_delay() -> None:
    window: tuple = ()
    current = 10
    seen = []
    for t, recommended in [(0, 10), (60, 8), (120, 6), (180, 4), (300, 4), (360, 4), (420, 4)]:
        d = hold_for_delay(
            current=current, recommended=recommended, window=window, now=at(t), delay_seconds=300
        )
        window, current = d.window, d.replicas
        seen.append(d.replicas)
    # 10 holds until 300 s after it was recommended, then 8's turn, then 6's: one step each.
    assert seen == [10, 10, 10, 10, 8, 6, 4]


def test_a_scale_up_is_immediate_and_clears_the_window() -> None:
    held = hold_for_delay(
        current=4, recommended=9, window=((at(0), 6),), now=at(30), delay_seconds=300
    )
    assert held.replicas == 9 and held.window == ((at(30), 9),)


def test_without_a_window_the_current_size_is_held_for_the_delay() -> None:
    fresh = hold_for_delay(current=10, recommended=2, window=(), now=at(0), delay_seconds=300)
    assert fresh.replicas == 10 and fresh.scale_down_to == 2


# -- the backlog ------------------------------------------------------------------------------


def test_a_growing_queue_buys_more_and_what_drains_it_is_not_held() -> None:
    s = spec()
    running = {"h100": 1, "rtx4090": 4}
    base = observe(s, {"realtime": 1000, "batch": 10000}, now=0, ready=running)
    first = plan(s, base, previous(running, LIVE))
    status = status_from(first, base)
    quiet = plan(s, observe(s, {"realtime": 1000, "batch": 10000}, now=30, ready=running), status)
    queued = dataclasses.replace(
        observe(s, {"realtime": 1000, "batch": 10000}, now=30, ready=running),
        class_backlog_tokens={"batch": 120_000.0},
    )
    busy = plan(s, queued, status)
    assert replicas(busy)["rtx4090"] > replicas(quiet)["rtx4090"]
    assert busy.tiers["rtx4090"].drain_replicas > 0
    assert "backlog drain" in busy.message
    # The queue drained: what it bought goes at once, without the scale-down delay.
    after = observe(s, {"realtime": 1000, "batch": 10000}, now=60, ready=replicas(busy))
    drained = plan(s, after, status_from(busy, queued))
    assert replicas(drained)["rtx4090"] == replicas(quiet)["rtx4090"]
    # But not by a pass an event woke a second after the decision that bought it: the
    # queue read then is noise, and the replicas have not even started.
    soon = observe(s, {"realtime": 1000, "batch": 10000}, now=31, ready=running)
    early = plan(s, soon, status_from(busy, queued))
    assert replicas(early)["rtx4090"] == replicas(busy)["rtx4090"]


def test_a_draining_queue_is_not_demand() -> None:
    """Inferred demand is what the tiers served plus what their queues grew by, or less
    what they drained: replicas clearing a queue serve its tokens on top of the arrivals.
    Only where the queues were read: a missing reading is no drain."""
    s = spec()
    running = {"h100": 1, "rtx4090": 4}
    waiting = {"h100": {"requests_waiting": 0.0}, "rtx4090": {"requests_waiting": 40.0}}
    queued = dataclasses.replace(
        observe(s, {"realtime": 1000, "batch": 10000}, now=0, ready=running, tiers=waiting),
        class_backlog_tokens={"batch": 120_000.0},
    )
    status = status_from(plan(s, queued, previous(running, LIVE)), queued)
    emptied = {"h100": {"requests_waiting": 0.0}, "rtx4090": {"requests_waiting": 0.0}}
    for tiers, served, expected in (
        (emptied, 14_000.0, 10_000.0),  # 120k tokens drained over 30 s: 4,000 tok/s of it
        (emptied, 3_000.0, 0.0),  # never below zero
        (None, 14_000.0, 14_000.0),  # the queues not read: no drain
    ):
        seen = observe(s, {"realtime": 1000, "batch": served}, now=30, ready=running, tiers=tiers)
        inputs = Inputs(s, seen, status)
        assert needs.demand_tokens(inputs, "batch") == pytest.approx(expected)
    # A queue that grew is demand the tiers could not serve yet.
    grown = dataclasses.replace(
        observe(s, {"realtime": 1000, "batch": 10000}, now=30, ready=running, tiers=emptied),
        class_backlog_tokens={"batch": 180_000.0},
    )
    assert needs.demand_tokens(Inputs(s, grown, status), "batch") == pytest.approx(12_000.0)


def _passed(
    s: InferencePoolSpec,
    demand: dict[str, float],
    running: dict[str, int],
    weights: dict[str, dict[str, int]],
    backlog: dict[str, int],
) -> InferencePoolStatus:
    """The status a pass at t=0 on `demand` left, each class's live weights and queued
    tokens then set as given."""
    first = observe(s, demand, now=0, ready=running)
    status = status_from(plan(s, first, previous(running, weights)), first)
    classes = [
        c.model_copy(
            update={
                "backlog_tokens": backlog[c.name],
                "weights": [TierWeight(tier=t, weight=w) for t, w in weights[c.name].items()],
            }
        )
        for c in status.classes
    ]
    return status.model_copy(update={"classes": classes})


def test_a_class_sharing_a_tier_drains_no_more_than_its_share_of_the_queue() -> None:
    """Two classes on the same H100s: their queue is one, split between them by a guess
    that follows the split of what the tier served. When the guess moves most of it from
    realtime to batch while the queue shrinks by a third, realtime's own backlog "drained"
    800k tokens in 30 s: counted alone, that read its demand as zero (the plan then cut
    its H100s). It drains its share of what the queue drained; growth stays its own."""
    s = spec()
    running = {"h100": 3, "rtx4090": 0}
    shared = {"realtime": {"h100": 100}, "batch": {"h100": 100}}
    backlog = {"realtime": 1_200_000, "batch": 50_000}
    status = _passed(s, {"realtime": 20_000, "batch": 1_000}, running, shared, backlog)
    queue = {"h100": {"requests_waiting": 700.0}, "rtx4090": {"requests_waiting": 0.0}}
    seen = dataclasses.replace(
        observe(s, {"realtime": 17_000, "batch": 19_000}, now=30, ready=running, tiers=queue),
        class_backlog_tokens={"realtime": 400_000.0, "batch": 440_000.0},
    )
    inputs = Inputs(s, seen, status)
    assert {t for c in ("realtime", "batch") for t in inputs.previous_weights(c)} == {"h100"}
    realtime, batch = (needs.demand_tokens(inputs, c) for c in ("realtime", "batch"))
    drained = (1_250_000 - 840_000) / 30  # the queue's, tokens/s
    share = (1_200_000 + 400_000) / (1_250_000 + 840_000)  # realtime's of the two readings
    assert realtime == pytest.approx(17_000 - share * drained)
    assert realtime > 5_000, "not read as zero"
    assert batch == pytest.approx(19_000 + (440_000 - 50_000) / 30)


def test_a_class_with_a_tier_of_its_own_drains_its_own_queue() -> None:
    """Batch on the 4090s and the H100s, realtime on the H100s alone: a 4090 queue that
    nodes took with them when they left is batch's drain, all of it; pooled with realtime's
    growing H100 queue it was hidden, and the plan bought H100s for requests that were gone."""
    s = spec()
    running = {"h100": 2, "rtx4090": 4}
    split = {"realtime": {"h100": 100}, "batch": {"h100": 50, "rtx4090": 50}}
    backlog = {"realtime": 100_000, "batch": 600_000}
    status = _passed(s, {"realtime": 3_000, "batch": 18_000}, running, split, backlog)
    queue = {"h100": {"requests_waiting": 200.0}, "rtx4090": {"requests_waiting": 10.0}}
    seen = dataclasses.replace(
        observe(s, {"realtime": 3_000, "batch": 18_000}, now=30, ready=running, tiers=queue),
        class_backlog_tokens={"realtime": 300_000.0, "batch": 100_000.0},
    )
    inputs = Inputs(s, seen, status)
    assert inputs.previous_weights("batch") == split["batch"]
    assert needs.demand_tokens(inputs, "batch") == pytest.approx(18_000 - 500_000 / 30)
    assert needs.demand_tokens(inputs, "realtime") == pytest.approx(3_000 + 200_000 / 30)


def test_a_queue_grows_over_the_time_since_the_last_pass_not_the_last_decision() -> None:
    """A steady pool keeps its last decision for many passes; the queue in its status was
    read by the last pass (its forecast dates it), so what the queue grew by since is
    spread over that interval, not over the decision's age."""
    s = spec()
    running = {"h100": 1, "rtx4090": 4}
    waiting = {"h100": {"requests_waiting": 0.0}, "rtx4090": {"requests_waiting": 40.0}}
    first = observe(s, {"realtime": 1000, "batch": 10000}, now=0, ready=running, tiers=waiting)
    status = status_from(plan(s, first, previous(running, LIVE)), first)
    later = dataclasses.replace(
        observe(s, {"realtime": 1000, "batch": 10000}, now=300, ready=running, tiers=waiting),
        class_backlog_tokens={"batch": 60_000.0},
    )
    status = status_from(plan(s, later, status), later)
    # The decision and the optimizer's answer as a steady pool keeps them: from the start.
    assert status.last_decision is not None and status.sizing is not None
    status = status.model_copy(
        update={
            "last_decision": status.last_decision.model_copy(update={"time": at(0)}),
            "sizing": status.sizing.model_copy(update={"time": at(0)}),
        }
    )
    batch = next(c for c in status.classes if c.name == "batch")
    assert batch.forecast is not None and batch.forecast.updated_at == at(300)
    grown = dataclasses.replace(
        observe(s, {"realtime": 1000, "batch": 10000}, now=330, ready=running, tiers=waiting),
        class_backlog_tokens={"batch": 120_000.0},
    )
    inputs = Inputs(s, grown, status)
    assert needs.last_pass(inputs) == at(300)
    # 60,000 more tokens in 30 s: 2,000 tokens/s on top of what the tiers served (over the
    # decision's 330 s it would read as 182).
    assert needs.demand_tokens(inputs, "batch") == pytest.approx(12_000.0)


def test_reserve_is_priced_in_the_plan() -> None:
    s = spec()
    running = {"h100": 1, "rtx4090": 4}
    status = previous(running, LIVE)
    p = None
    for k, batch in enumerate([4000, 16000] * 6 + [4000]):
        seen = observe(s, {"realtime": 1000, "batch": batch}, now=30 * k, ready=running)
        p = plan(s, seen, status)
        status = status_from(p, seen)
        running = replicas(p)
    assert p is not None
    reserve = sum(t.reserve_replicas for t in p.tiers.values())
    assert reserve > 0
    assert p.reserve_cost_per_hour == pytest.approx(
        sum(
            t.reserve_replicas * price
            for t, price in zip(p.tiers.values(), (2.0, 0.25), strict=True)
        )
    )
    assert "burst reserve: $" in p.message


def test_passes_within_an_interval_do_not_move_the_history() -> None:
    """Events wake passes seconds apart: a step seen twice in one second is no trend."""
    first = forecast.update(
        None, 1500.0, now=at(0), interval_seconds=10, horizon_seconds=20, percentile=90
    )
    carried = forecast.to_status(first)
    step = forecast.update(
        carried, 9000.0, now=at(10), interval_seconds=10, horizon_seconds=20, percentile=90
    )
    again = forecast.update(
        forecast.to_status(step),
        9000.0,
        now=at(11),
        interval_seconds=10,
        horizon_seconds=20,
        percentile=90,
    )
    assert again.updated_at == step.updated_at == at(10)
    assert (again.level, again.trend_per_second, again.deviation) == pytest.approx(
        (step.level, step.trend_per_second, step.deviation), abs=1
    )
    assert again.expected < 2 * 9000  # no trend extrapolated from one second


def test_a_reserve_for_a_class_read_near_zero_is_stated_in_tokens() -> None:
    # A class whose demand this pass reads about 0 (its tiers' tokens explained by another
    # class's backlog) while its forecast still plans for it: no "to 5.6e20x".
    assert explain._step("batch", 8000.0, 4000.0) == "batch to 2.0x"
    assert explain._step("realtime", 390.0, 7e-19) == "realtime to 390 tok/s"
    assert explain._step("realtime", 390.0, 0.0) == "realtime to 390 tok/s"
    assert explain._step("realtime", 39_000.0, 2.0) == "realtime to 39000 tok/s"
