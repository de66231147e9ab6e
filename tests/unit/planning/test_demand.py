"""Per-class demand from tier token rates and live weights, queues, and mean lengths."""

from __future__ import annotations

import pytest

from gpufleet.api.types import TrafficClass
from gpufleet.planning.demand import infer_demand, prompt_share, split_demand, with_backlog

pytestmark = pytest.mark.timeout(2)


@pytest.mark.parametrize(
    ("tiers", "weights", "prior", "known", "expected"),
    [
        pytest.param(
            {"h100": 2000.0, "rtx": 4000.0},
            {"rt": {"h100": 100}, "batch": {"h100": 20, "rtx": 80}},
            {},
            {},
            {"rt": 1000.0, "batch": 5000.0},
            id="identifiable-exact",
        ),
        pytest.param(
            {"h100": 3000.0},
            {"rt": {"h100": 100}, "batch": {"h100": 100}},
            {"rt": 1000.0, "batch": 2000.0},
            {},
            {"rt": 1000.0, "batch": 2000.0},
            id="same-tier-keeps-last-split",
        ),
        pytest.param(
            {"h100": 6000.0},
            {"rt": {"h100": 100}, "batch": {"h100": 100}},
            {"rt": 1000.0, "batch": 2000.0},
            {},
            {"rt": 2000.0, "batch": 4000.0},
            id="same-tier-scales-last-split",
        ),
        pytest.param(
            {"h100": 3000.0},
            {"rt": {"h100": 100}, "batch": {"h100": 100}},
            {},
            {"rt": 1000.0},
            {"batch": 2000.0},
            id="known-class-subtracted",
        ),
        pytest.param(
            {"h100": 3000.0},
            {"rt": {"h100": 100}, "new": {}},
            {},
            {},
            {"rt": 3000.0, "new": None},
            id="unrouted-class-unknown",
        ),
        pytest.param(
            {"h100": None, "rtx": 400.0},
            {"rt": {"h100": 100}, "batch": {"rtx": 100}},
            {},
            {},
            {"rt": 0.0, "batch": 400.0},
            id="tier-without-data-counts-zero",
        ),
    ],
)
def test_infer_demand(
    tiers: dict[str, float | None],
    weights: dict[str, dict[str, int]],
    prior: dict[str, float],
    known: dict[str, float],
    expected: dict[str, float | None],
) -> None:
    got = infer_demand(tiers, weights, prior, known)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == (None if value is None else pytest.approx(value, rel=1e-3)), name


@pytest.mark.parametrize(
    ("tokens", "rps", "waiting", "expected"),
    [
        pytest.param(3000.0, 2.0, 0.0, 3000.0, id="no-queue"),
        pytest.param(3000.0, 2.0, 60.0, 3000.0 + 60 * 1500 / 30, id="queue-cleared-in-an-interval"),
        pytest.param(3000.0, 0.0, 60.0, 3000.0, id="nothing-served-no-size-known"),
        pytest.param(None, 2.0, 60.0, None, id="no-rate"),
    ],
)
def test_a_saturated_tier_counts_its_queue_as_demand(
    tokens: float | None, rps: float, waiting: float, expected: float | None
) -> None:
    got = with_backlog(tokens, rps, waiting, 30.0)
    assert got == (None if expected is None else pytest.approx(expected))


def test_one_tokens_per_second_figure_splits_by_the_class_s_mean_lengths() -> None:
    chat = TrafficClass(
        name="chat",
        ttft_p99_objective_milliseconds=100,
        mean_prompt_tokens=300,
        mean_output_tokens=100,
    )
    assert prompt_share(chat) == 0.75
    split = split_demand(chat, 2000.0)
    assert (split.prompt_tokens_per_second, split.generation_tokens_per_second) == (1500, 500)
