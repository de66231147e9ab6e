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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist

from gpufleet.api.status import DemandForecast

ALPHA = 0.5  # weight of a new observation in the level: half the error, each interval
BETA = 0.3  # weight of a new observation's error in the trend
DAMPING = 0.7  # per update: a trend seen once fades within a few intervals
GAMMA = 0.1  # weight of a new error in the deviation: a memory of about ten intervals
MINUTE = 60.0


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
    elif elapsed < interval_seconds / 2:
        updated_at = previous.updated_at
        # A pass woken by an event within the same interval: the history moves once per
        # interval, or a few seconds' change would read as a steep trend.
        level = float(previous.level_tokens_per_second)
        trend = previous.trend_tokens_per_second_per_minute / MINUTE
        deviation = float(previous.deviation_tokens_per_second)
    else:
        dt = max(elapsed, interval_seconds)
        trend = previous.trend_tokens_per_second_per_minute / MINUTE
        predicted = max(previous.level_tokens_per_second + trend * elapsed, 0.0)
        error = observed - predicted
        level = max(predicted + ALPHA * error, 0.0)
        trend = DAMPING * (trend + ALPHA * BETA * error / dt)
        deviation = math.sqrt(
            (1 - GAMMA) * previous.deviation_tokens_per_second**2 + GAMMA * error**2
        )
    ahead = level + trend * horizon_seconds
    expected = max(observed, ahead)
    planned = expected + z_score(percentile) * deviation
    return ClassForecast(
        observed=observed,
        level=level,
        trend_per_second=trend,
        deviation=deviation,
        horizon_seconds=horizon_seconds,
        expected=expected,
        planned=max(planned, expected),
        updated_at=updated_at,
    )


def to_status(forecast: ClassForecast) -> DemandForecast:
    return DemandForecast(
        level_tokens_per_second=round(forecast.level),
        trend_tokens_per_second_per_minute=round(forecast.trend_per_second * MINUTE),
        deviation_tokens_per_second=round(forecast.deviation),
        expected_tokens_per_second=round(forecast.expected),
        planned_tokens_per_second=round(forecast.planned),
        updated_at=forecast.updated_at.replace(microsecond=0),
    )
