"""What a class's demand forecast remembers of its bursts, in status (planning.forecast)."""

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
