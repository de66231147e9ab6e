"""The daily pattern: a step that recurs at the same time each day is planned a lead time ahead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.api.bursts import DailyPattern
from gpufleet.api.status import DemandForecast, InferencePoolStatus
from gpufleet.planning import daily, forecast
from gpufleet.planning.planner import plan
from tests.unit.planning.factories import at, observe, previous, replicas, spec

pytestmark = pytest.mark.timeout(30)

MIDNIGHT = datetime(2026, 3, 2, tzinfo=UTC)
BASE, BUSY = 1000.0, 4000.0
STEP = 60  # seconds between passes
HORIZON = 180.0


def _demand(moment: datetime) -> float:
    """A working day: BUSY from 09:00 to 17:00 UTC, BASE otherwise."""
    return BUSY if 9 <= moment.hour < 17 else BASE


def _days(count: float, start: datetime = MIDNIGHT) -> dict[datetime, forecast.ClassForecast]:
    """Forecasts every STEP seconds over `count` days, the status carried as the operator
    writes it."""
    carried: DemandForecast | None = None
    out = {}
    for k in range(int(count * 86400 / STEP)):
        now = start + timedelta(seconds=STEP * k)
        f = forecast.update(
            carried,
            _demand(now),
            now=now,
            interval_seconds=STEP,
            horizon_seconds=HORIZON,
            percentile=50,
        )
        carried = forecast.to_status(f)
        out[now] = f
    return out


@pytest.fixture(scope="module")
def two_days() -> dict[datetime, forecast.ClassForecast]:
    return _days(2)


def test_the_second_day_plans_the_morning_step_a_lead_time_ahead(
    two_days: dict[datetime, forecast.ClassForecast],
) -> None:
    first, second = MIDNIGHT.replace(hour=8, minute=58), MIDNIGHT + timedelta(hours=32, minutes=58)
    # Day one has not seen a day yet: the step is a surprise, as without the pattern.
    assert two_days[first].expected == pytest.approx(BASE)
    assert two_days[first].daily_rise == 0.0
    # Day two, two minutes before 09:00 with a three-minute horizon: the usual step.
    early = two_days[second]
    assert early.observed == BASE
    assert early.daily_rise == pytest.approx(BUSY - BASE, rel=0.02)
    assert early.expected == pytest.approx(BUSY, rel=0.02)
    # Before the horizon reaches 09:00, and once the step has come, nothing is added.
    assert two_days[second - timedelta(minutes=10)].daily_rise == 0.0
    assert two_days[second + timedelta(minutes=5)].daily_rise == 0.0


def test_a_falling_pattern_never_plans_below_today(
    two_days: dict[datetime, forecast.ClassForecast],
) -> None:
    evening = MIDNIGHT + timedelta(hours=40, minutes=58)  # day two, 16:58
    f = two_days[evening]
    assert f.observed == BUSY and f.daily_rise == 0.0 and f.expected >= BUSY


def test_the_pattern_survives_the_status(
    two_days: dict[datetime, forecast.ClassForecast],
) -> None:
    last = two_days[max(two_days)]
    kept = forecast.to_status(last).daily
    assert kept is not None and len(kept.tokens_per_second) == daily.SLOTS
    assert kept.since == MIDNIGHT
    assert kept.tokens_per_second[9 * 4] == pytest.approx(BUSY, rel=0.02)  # 09:00-09:15
    assert kept.tokens_per_second[8 * 4 + 3] == pytest.approx(BASE, rel=0.02)  # 08:45-09:00


def test_a_slot_not_seen_adds_nothing() -> None:
    slots = [BASE] * daily.SLOTS
    slots[9 * 4] = daily.UNSEEN
    pattern = daily.Daily(slots=tuple(slots), since=MIDNIGHT - timedelta(days=3))
    assert daily.rise(pattern, MIDNIGHT.replace(hour=8, minute=58), HORIZON) == 0.0
    slots[9 * 4] = BUSY
    pattern = daily.Daily(slots=tuple(slots), since=MIDNIGHT - timedelta(days=3))
    assert daily.rise(pattern, MIDNIGHT.replace(hour=8, minute=58), HORIZON) == BUSY - BASE
    # Midnight wraps: 23:58 looks at 00:00's slot.
    slots[0] = BUSY
    pattern = daily.Daily(slots=tuple(slots), since=MIDNIGHT - timedelta(days=3))
    assert daily.rise(pattern, MIDNIGHT.replace(hour=23, minute=58), HORIZON) == BUSY - BASE


def test_a_slot_is_each_day_s_mean_and_one_day_moves_it_halfway() -> None:
    """Yesterday counts as much as all the days before it; a slot in progress is not used."""
    pattern = daily.Daily()
    start = MIDNIGHT.replace(hour=9)
    for k in range(15):  # the first day in the 09:00 slot: BASE, then 3 x BASE
        pattern = daily.learn(pattern, BASE if k < 10 else 3 * BASE, start + timedelta(minutes=k))
    assert pattern.slots[9 * 4] == daily.UNSEEN and pattern.open_passes == 15
    pattern = daily.learn(pattern, BASE, start + timedelta(minutes=15))  # 09:15: folded
    first = (10 * BASE + 5 * 3 * BASE) / 15
    assert pattern.slots[9 * 4] == pytest.approx(first)
    for k in range(16):  # the next day: BUSY, then the next slot
        pattern = daily.learn(pattern, BUSY, start + timedelta(days=1, minutes=k))
    assert pattern.slots[9 * 4] == pytest.approx((first + BUSY) / 2)


def _with_pattern(
    status: InferencePoolStatus, now: datetime, busy_from: int
) -> InferencePoolStatus:
    """The status of a pool whose batch class has learned, over days, that its demand
    quadruples from slot `busy_from` on (4,000 tokens/s before)."""
    slots = [16000.0 if i >= busy_from else 4000.0 for i in range(daily.SLOTS)]
    kept = DemandForecast(
        level_tokens_per_second=4000,
        updated_at=now - timedelta(seconds=30),
        daily=DailyPattern(tokens_per_second=slots, since=now - timedelta(days=5)),
    )
    classes = [
        c.model_copy(update={"forecast": kept}) if c.name == "batch" else c for c in status.classes
    ]
    return status.model_copy(update={"classes": classes})


def test_the_planner_buys_ahead_of_the_daily_step_and_says_so() -> None:
    s = spec()
    running = {"h100": 1, "rtx4090": 2}
    live = {"realtime": {"h100": 100}, "batch": {"rtx4090": 100}}
    now = 13 * 60 + 30  # 12:13:30 with the factories' clock; the step comes at 12:15
    seen = observe(s, {"realtime": 1000, "batch": 4000}, now=now, ready=running)
    step = daily.slot_of(at(now)) + 1
    ahead = plan(s, seen, _with_pattern(previous(running, live), at(now), busy_from=step))
    flat = plan(s, seen, _with_pattern(previous(running, live), at(now), busy_from=daily.SLOTS))
    assert replicas(ahead)["rtx4090"] > replicas(flat)["rtx4090"], (ahead.message, flat.message)
    assert "its daily pattern rises" in ahead.message
    assert "daily pattern" not in flat.message


def test_a_strange_status_is_read_as_no_pattern_and_never_fails() -> None:
    now = MIDNIGHT.replace(hour=9)
    odd = DemandForecast(
        level_tokens_per_second=1000,
        updated_at=now - timedelta(minutes=1),
        daily=DailyPattern(
            tokens_per_second=[float("nan"), -5.0, 3.0],  # not 96 slots
            since=now + timedelta(days=1),
            open_at=now,
            open_tokens_per_second=-1.0,
            open_passes=-3,
        ),
    )
    f = forecast.update(
        odd, BASE, now=now, interval_seconds=STEP, horizon_seconds=HORIZON, percentile=90
    )
    assert f.daily_rise == 0.0 and f.expected >= BASE
    kept = forecast.to_status(f).daily
    assert kept is not None and len(kept.tokens_per_second) == daily.SLOTS
    # The right length, but a count below zero and a first pass a day ahead: no crash, no rise.
    assert odd.daily is not None
    odd.daily.tokens_per_second = [BASE] * daily.SLOTS
    f = forecast.update(
        odd, BASE, now=now, interval_seconds=STEP, horizon_seconds=HORIZON, percentile=90
    )
    assert f.daily_rise == 0.0 and f.daily.open_passes == 1


def test_slots_that_differ_by_noise_are_not_a_step() -> None:
    """A rise within the demand's usual deviation is noise the planned quantile covers."""
    now = MIDNIGHT.replace(hour=8, minute=58)

    def rise_with(next_slot: float) -> float:
        slots = [BASE] * daily.SLOTS
        slots[9 * 4] = next_slot
        kept = DemandForecast(
            level_tokens_per_second=round(BASE),
            deviation_tokens_per_second=400,
            updated_at=now - timedelta(seconds=STEP),
            daily=DailyPattern(tokens_per_second=slots, since=now - timedelta(days=2)),
        )
        f = forecast.update(
            kept, BASE, now=now, interval_seconds=STEP, horizon_seconds=HORIZON, percentile=90
        )
        return f.daily_rise

    assert rise_with(BASE + 300) == 0.0
    step = rise_with(BUSY)
    assert BUSY - BASE - 400 <= step < BUSY - BASE
