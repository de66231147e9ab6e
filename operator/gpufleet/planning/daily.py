"""A class's daily pattern: the demand it usually has at each time of day (pure).

Production traffic repeats by the day: a batch job that starts at 09:00, a working day's
ramp, a quiet night. The short-horizon forecast (planning.forecast) sees such a step only
once it has started, a lead time too late. So each class also keeps its demand per 15-minute
slot of the day (UTC): the passes within a slot are averaged, and when the slot is over its
mean is folded into the slot's value, smoothed over the days (DAY_WEIGHT: yesterday counts
as much as all the days before it). A slot seen for the first time takes that day's mean.

Once the pattern has seen a whole day (its first pass at least a day ago), the forecast
adds its *rise*: how far the slots the horizon reaches stand above the slot of now,

    rise = max(slot value over [now, now + horizon]) - value of now's slot   (at least 0)

so a step that recurs at the same time each day is planned for a lead time before it comes,
by the size it usually has (the forecast counts only the part of it beyond the demand's
usual deviation: neighbouring slots differ by noise too). The rise is added to the demand
seen now, and only upward: a falling pattern never plans below today (scale-down has its
own delay). A slot not seen yet (the operator was down, or the class is new) adds nothing.
The rise is additive, the usual step in tokens/s: a day busier than usual gets the usual
step on top of its own level.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

SLOT_SECONDS = 900
SLOTS = 86400 // SLOT_SECONDS
DAY = timedelta(days=1)
DAY_WEIGHT = 0.5  # how far one day's mean moves its slot's value
UNSEEN = -1.0


@dataclass(frozen=True)
class Daily:
    """Tokens/s per slot of the day (UNSEEN: none yet; always SLOTS of them, a status with
    another count is read as no pattern), the first pass that learned, and the slot in
    progress: when its first pass was, its passes' mean demand and their count."""

    slots: tuple[float, ...] = (UNSEEN,) * SLOTS
    since: datetime | None = None
    open_at: datetime | None = None
    open_mean: float = 0.0
    open_passes: int = 0

    def complete(self, now: datetime) -> bool:
        """It has seen a whole day: its slots say what this time of day usually brings."""
        return self.since is not None and now - self.since >= DAY


def slot_of(moment: datetime) -> int:
    """The slot of the UTC day `moment` falls in."""
    utc = moment.astimezone(UTC) if moment.tzinfo is not None else moment
    seconds = utc.hour * 3600 + utc.minute * 60 + utc.second
    return seconds // SLOT_SECONDS


def learn(before: Daily, observed: float, now: datetime) -> Daily:
    """The pattern after one more pass that saw `observed` tokens/s."""
    observed = max(observed, 0.0)
    slots = before.slots
    since = before.since or now
    opened = before.open_at
    if opened is not None and slot_of(opened) == slot_of(now) and now - opened < DAY / SLOTS:
        passes = max(before.open_passes, 0) + 1
        mean = before.open_mean + (observed - before.open_mean) / passes
        return Daily(slots, since, opened, mean, passes)
    if opened is not None and before.open_passes > 0:
        slots = fold(slots, slot_of(opened), before.open_mean)
    return Daily(slots, since, now, observed, 1)


def fold(slots: tuple[float, ...], index: int, mean: float) -> tuple[float, ...]:
    """The slots with one day's mean of slot `index` folded in."""
    old = slots[index]
    value = mean if old < 0 else old + DAY_WEIGHT * (mean - old)
    return (*slots[:index], value, *slots[index + 1 :])


def rise(daily: Daily, now: datetime, horizon_seconds: float) -> float:
    """Tokens/s the daily pattern adds within the horizon (see the module docstring)."""
    if not daily.complete(now):
        return 0.0
    here = slot_of(now)
    base = daily.slots[here]
    if base < 0:
        return 0.0
    last = slot_of(now + timedelta(seconds=max(horizon_seconds, 0.0)))
    best = 0.0
    index = here
    for _ in range(SLOTS - 1):
        if index == last:
            break
        index = (index + 1) % SLOTS
        value = daily.slots[index]
        if value >= 0:
            best = max(best, value - base)
    return best
