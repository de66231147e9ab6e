"""A class's short-horizon demand forecast, from its own history (pure).

Replicas bought now serve only after a tier's lead time (`leadtime`), so a pass plans for
the demand expected over the next lead time plus one interval, not for the last window.
Each class carries a condensed history in its status (`DemandForecast`): Holt's linear
smoothing of its demand (a level and a damped trend) and the typical size of the one-step
forecast error (the deviation). Each pass:

    predicted = level + trend * dt                 (dt: seconds since the last update)
    error     = observed - predicted
    level     = predicted + ALPHA * error
    trend     = DAMPING * (trend + ALPHA * BETA * error / dt)
    deviation = sqrt((1 - GAMMA) * deviation^2 + GAMMA * error^2)

The *expected* demand over a horizon h is the larger of what is observed now and the
level carried h seconds ahead on the trend (a falling trend never plans below today:
scale-down has its own delay). The *planned* demand is the expected one at the spec's
quantile (`scaling.forecastPercentile`):

    planned = expected + z(percentile) * deviation

The deviation is not widened with the horizon (as a random walk's error would be, by the
square root of the intervals in it): the change a reserve is for is a step, one error the
size of the step, however many intervals the horizon spans.

Where the demand is steady the deviation is the noise of one window, and the headroom
(`scaling.headroomPercent`) already covers it; where it jumps (bursts, flash crowds),
the deviation grows and the planned demand holds a *burst reserve* that the headroom
alone would not: replicas that absorb a step for the time a new one takes to load. The
deviation forgets slowly (GAMMA), so a workload that bursts every few minutes keeps its
reserve between bursts, and one that calmed down gives it back.

*Burst memory.* A burst shorter than the horizon is over before a replica bought for it
can serve, so reacting to it buys only cost, and the deviation forgets it within a few
intervals. So each class also keeps a baseline (its demand outside bursts, smoothed) and
remembers its short bursts (demand at least BURST_RATIO x the baseline, over within the
horizon): when the last one ended, the mean gap between them (smoothed, GAP_ALPHA), and the
higher of the last two peaks. While such bursts recur and the percentile asks for a reserve
(over 50), the planned demand is at least that peak: a standing reserve for the next burst,
what a fixed split sized for the peak holds. It is held for as long as the next burst comes
within that time at the planned percentile, taking bursts to arrive at random (Poisson) at
their mean gap: mean gap x -ln(1 - percentile), 2.3 gaps at the 90th. Two bursts at least
make a pattern (one alone is never held), and bursts more than
MAX_GAP_SECONDS apart on average are not held between. A burst that lasts longer than the
horizon is a new level, which the forecast follows, not a burst. While such bursts recur, a
burst in progress is planned at no more than the higher of their peak and the demand seen
now: it is most likely over before a replica bought for it serves, so the trend and the
deviation it throws up are not bought (the reserve meets it; more replicas would only arrive
after it). If it outlasts the horizon, it is a new level, as above.

*Daily pattern.* Each class also keeps its demand by time of day (planning.daily); once it
has seen a whole day, the expected demand is at least the demand seen now plus the rise the
day usually brings within the horizon, less the deviation (slots differ by noise too, which
the planned quantile covers already), so a step that recurs daily is planned a lead time
ahead of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from statistics import NormalDist

from gpufleet.api.bursts import BurstMemory, DailyPattern
from gpufleet.api.status import DemandForecast
from gpufleet.planning import daily as days

ALPHA = 0.5  # weight of a new observation in the level: half the error, each interval
BETA = 0.3  # weight of a new observation's error in the trend
DAMPING = 0.7  # per update: a trend seen once fades within a few intervals
GAMMA = 0.1  # weight of a new error in the deviation: a memory of about ten intervals
MINUTE = 60.0
BURST_RATIO = 2.0  # demand at least double the baseline is a burst (noise is less)
BASELINE_ALPHA = 0.2  # weight of a new observation outside bursts in the baseline
GAP_ALPHA = 0.3  # weight of a new gap in the mean gap between bursts
MAX_GAP_SECONDS = 1800.0  # bursts further apart than this are not held between


@dataclass(frozen=True)
class Bursts:
    """A class's burst memory (see the module docstring), tokens/s."""

    baseline: float | None = None
    since: datetime | None = None  # the burst in progress began
    peak: float = 0.0  # of the burst in progress
    last_end: datetime | None = None  # when the last short burst ended
    gap_seconds: float = 0.0  # mean gap between short bursts' ends (0: one or none yet)
    last_peak: float = 0.0  # of the last short burst
    recent_peak: float = 0.0  # the higher of the last two short bursts' peaks

    def recurring(self, now: datetime, percentile: int) -> bool:
        """Short bursts keep coming: the next one is due within the time that covers
        `percentile` of Poisson gaps of their mean. A burst in progress that began within
        that time is the next one, however long it has lasted since (up to the horizon,
        when it becomes a new level): counted from `now`, a burst that came late in the
        window ended the pattern halfway up its own step, and the pass bought for its trend
        and deviation what the pattern's reserve was holding for it."""
        if self.last_end is None or not 0 < self.gap_seconds <= MAX_GAP_SECONDS:
            return False
        hold = -math.log(1.0 - min(percentile, 99.9) / 100.0) * self.gap_seconds
        began = now if self.since is None else min(self.since, now)
        return (began - self.last_end).total_seconds() <= hold


@dataclass(frozen=True)
class ClassForecast:
    """One pass's forecast of a class's demand, tokens/s."""

    observed: float
    level: float
    trend_per_second: float
    deviation: float
    horizon_seconds: float
    expected: float  # over the horizon, at the mean
    planned: float  # over the horizon, at the planned quantile
    updated_at: datetime  # when level, trend and deviation last moved
    bursts: Bursts = Bursts()
    holds_burst_peak: bool = False  # planned is the remembered peak of recurring bursts
    rides_burst: bool = False  # a burst in progress, not extrapolated past its recurring peak
    daily: days.Daily = field(default_factory=days.Daily)
    daily_rise: float = 0.0  # what the daily pattern added to the expected demand
    predicted: float = 0.0  # what the history before this pass predicted for now
    prior_deviation: float = 0.0  # and the deviation it held

    def stepping_up(self, headroom: float) -> bool:
        """Whether the demand seen now is above what the history before it predicted for
        now by more than the headroom and twice the usual one-step error (a change noise
        rarely makes): a step, which the demand's rate window may still show only in part."""
        return self.observed > self.predicted * (1 + headroom) + 2 * self.prior_deviation

    @property
    def reserve(self) -> float:
        """Tokens/s planned above the expected demand for bursts."""
        return max(self.planned - self.expected, 0.0)


def z_score(percentile: int) -> float:
    """The standard normal quantile of a percentile (50 -> 0)."""
    return NormalDist().inv_cdf(min(max(percentile, 50), 99.9) / 100.0)


def update(
    previous: DemandForecast | None,
    observed: float,
    *,
    now: datetime,
    interval_seconds: float,
    horizon_seconds: float,
    percentile: int,
) -> ClassForecast:
    """This pass's forecast from the last one and the demand observed now."""
    observed = max(observed, 0.0)
    elapsed = (now - previous.updated_at).total_seconds() if previous is not None else 0.0
    updated_at = now
    if previous is None or elapsed < 0:
        level, trend, deviation = observed, 0.0, 0.0
        predicted, prior_deviation = observed, 0.0
    elif elapsed < interval_seconds / 2:
        updated_at = previous.updated_at
        # A pass woken by an event within the same interval: the history moves once per
        # interval, or a few seconds' change would read as a steep trend.
        level = float(previous.level_tokens_per_second)
        trend = previous.trend_tokens_per_second_per_minute / MINUTE
        deviation = prior_deviation = float(previous.deviation_tokens_per_second)
        predicted = max(level + trend * elapsed, 0.0)
    else:
        dt = max(elapsed, interval_seconds)
        trend = previous.trend_tokens_per_second_per_minute / MINUTE
        predicted = max(previous.level_tokens_per_second + trend * elapsed, 0.0)
        error = observed - predicted
        prior_deviation = float(previous.deviation_tokens_per_second)
        level = max(predicted + ALPHA * error, 0.0)
        trend = DAMPING * (trend + ALPHA * BETA * error / dt)
        deviation = math.sqrt(
            (1 - GAMMA) * previous.deviation_tokens_per_second**2 + GAMMA * error**2
        )
    bursts = _remembered(previous)
    pattern = _pattern(previous)
    if updated_at == now:  # the history moved this pass: so do the burst and daily memories
        bursts = remember(bursts, observed, now, horizon_seconds)
        pattern = days.learn(pattern, observed, now)
    ahead = level + trend * horizon_seconds
    # Slots differ by noise too: only the part of a rise beyond the usual deviation is a step.
    rise = max(days.rise(pattern, now, horizon_seconds) - deviation, 0.0)
    expected = max(observed, ahead, observed + rise)
    planned = expected + z_score(percentile) * deviation
    recurring = percentile > 50 and bursts.recurring(now, percentile)
    # A burst in progress where short bursts recur is most likely over before a replica
    # bought now serves: it is met by the reserve held for their peak, and what the burst
    # itself throws into the trend and the deviation is not bought on top of what is seen.
    cap = max(bursts.recent_peak, observed)
    rides = recurring and bursts.since is not None and bursts.recent_peak > 0 and planned > cap
    if rides:
        expected, planned = min(expected, cap), cap
    holds = recurring and bursts.recent_peak > max(planned, expected)
    if holds:
        planned = bursts.recent_peak
    return ClassForecast(
        observed=observed,
        level=level,
        trend_per_second=trend,
        deviation=deviation,
        horizon_seconds=horizon_seconds,
        expected=expected,
        planned=max(planned, expected),
        updated_at=updated_at,
        bursts=bursts,
        holds_burst_peak=holds,
        rides_burst=rides,
        daily=pattern,
        daily_rise=rise if ahead < observed + rise <= expected else 0.0,
        predicted=predicted,
        prior_deviation=prior_deviation,
    )


def remember(before: Bursts, observed: float, now: datetime, horizon_seconds: float) -> Bursts:
    """The burst memory after one more interval's demand (see the module docstring)."""
    base = observed if before.baseline is None else before.baseline
    above = observed > BURST_RATIO * base and observed > 0
    if before.since is None:
        if above:
            return replace(before, baseline=base, since=now, peak=observed)
        return replace(before, baseline=base + BASELINE_ALPHA * (observed - base))
    if above:
        if (now - before.since).total_seconds() > horizon_seconds:
            # Served by a reaction: a new level, not a burst.
            return replace(before, baseline=observed, since=None, peak=0.0)
        return replace(before, peak=max(before.peak, observed))
    # Over within the horizon: a burst no reaction could have served.
    ended = base + BASELINE_ALPHA * (observed - base)
    gap = 0.0 if before.last_end is None else (now - before.last_end).total_seconds()
    if gap > 0 and before.gap_seconds > 0:
        gap = before.gap_seconds + GAP_ALPHA * (gap - before.gap_seconds)
    return Bursts(
        baseline=ended,
        last_end=now,
        gap_seconds=gap,
        last_peak=before.peak,
        recent_peak=max(before.peak, before.last_peak if gap > 0 else 0.0),
    )


def _remembered(previous: DemandForecast | None) -> Bursts:
    kept = None if previous is None else previous.bursts
    if kept is None:
        return Bursts()
    return Bursts(
        baseline=float(kept.baseline_tokens_per_second),
        since=kept.since,
        peak=float(kept.peak_tokens_per_second),
        last_end=kept.last_ended_at,
        gap_seconds=float(kept.mean_gap_seconds),
        last_peak=float(kept.last_peak_tokens_per_second),
        recent_peak=float(kept.held_peak_tokens_per_second),
    )


def _pattern(previous: DemandForecast | None) -> days.Daily:
    kept = None if previous is None else previous.daily
    if kept is None or len(kept.tokens_per_second) != days.SLOTS:
        return days.Daily()
    return days.Daily(
        slots=tuple(float(v) if v >= 0 else days.UNSEEN for v in kept.tokens_per_second),
        since=kept.since,
        open_at=kept.open_at,
        open_mean=float(kept.open_tokens_per_second),
        open_passes=kept.open_passes,
    )


def to_status(forecast: ClassForecast) -> DemandForecast:
    b = forecast.bursts
    d = forecast.daily
    return DemandForecast(
        level_tokens_per_second=round(forecast.level),
        trend_tokens_per_second_per_minute=round(forecast.trend_per_second * MINUTE),
        deviation_tokens_per_second=round(forecast.deviation),
        expected_tokens_per_second=round(forecast.expected),
        planned_tokens_per_second=round(forecast.planned),
        updated_at=forecast.updated_at.replace(microsecond=0),
        bursts=None
        if b.baseline is None
        else BurstMemory(
            baseline_tokens_per_second=round(b.baseline),
            since=None if b.since is None else b.since.replace(microsecond=0),
            peak_tokens_per_second=round(b.peak),
            last_ended_at=None if b.last_end is None else b.last_end.replace(microsecond=0),
            mean_gap_seconds=round(b.gap_seconds),
            last_peak_tokens_per_second=round(b.last_peak),
            held_peak_tokens_per_second=round(b.recent_peak),
        ),
        daily=None
        if d.since is None
        else DailyPattern(
            tokens_per_second=[round(v, 1) if v >= 0 else -1.0 for v in d.slots],
            since=d.since.replace(microsecond=0),
            open_at=None if d.open_at is None else d.open_at.replace(microsecond=0),
            open_tokens_per_second=round(d.open_mean, 1),
            open_passes=d.open_passes,
        ),
    )
