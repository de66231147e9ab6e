"""What a class's demand forecast remembers of its bursts and its days, in status
(planning.forecast, planning.daily)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from gpufleet.api.statusbase import StatusModel


class BurstMemory(StatusModel):
    """Bursts over within a lead time (new replicas could not have served them): what the
    forecast keeps to hold their peak while they recur."""

    baseline_tokens_per_second: int = Field(
        description="The class's demand outside bursts, smoothed: a burst is at least twice it."
    )
    since: datetime | None = Field(
        default=None, description="When the burst in progress began (absent: none in progress)."
    )
    peak_tokens_per_second: int = Field(
        default=0, description="The highest demand of the burst in progress."
    )
    last_ended_at: datetime | None = Field(
        default=None, description="When the last burst over within a lead time ended."
    )
    mean_gap_seconds: int = Field(
        default=0,
        description="The mean time between such bursts, smoothed (0: fewer than two yet).",
    )
    last_peak_tokens_per_second: int = Field(
        default=0, description="The highest demand of the last such burst."
    )
    held_peak_tokens_per_second: int = Field(
        default=0,
        description=(
            "The higher peak of the last two such bursts: planned for while the next one is "
            "due at forecastPercentile."
        ),
    )


class DailyPattern(StatusModel):
    """A class's demand by time of day, smoothed over days: what the forecast plans ahead of
    a step that recurs at the same time each day."""

    tokens_per_second: list[float] = Field(
        description=(
            "Usual demand in each 15-minute slot of the UTC day, from 00:00: each day's mean, "
            "smoothed over days (96 slots; -1: not seen yet)."
        )
    )
    since: datetime = Field(description="The first pass it learned from: used after a day.")
    open_at: datetime | None = Field(
        default=None, description="The first pass of the slot in progress (folded in when over)."
    )
    open_tokens_per_second: float = Field(
        default=0.0, description="The mean demand of the slot in progress so far."
    )
    open_passes: int = Field(default=0, description="The passes that mean is over.")
