"""Per-class demand: one tokens/s figure split by the class's mean lengths."""

from __future__ import annotations

import pytest

from gpufleet.api.types import TrafficClass
from gpufleet.planning.demand import prompt_share, split_demand

pytestmark = pytest.mark.timeout(2)


def test_one_tokens_per_second_figure_splits_by_the_class_s_mean_lengths() -> None:
    chat = TrafficClass(
        name="chat", ttft_p99_milliseconds=100, mean_prompt_tokens=300, mean_output_tokens=100
    )
    assert prompt_share(chat) == 0.75
    split = split_demand(chat, 2000.0)
    assert (split.prompt_tokens_per_second, split.generation_tokens_per_second) == (1500, 500)
