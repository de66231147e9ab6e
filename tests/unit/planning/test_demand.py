"""Per-class demand from tier token rates and live weights, queues, and mean lengths."""

from __future__ import annotations

import pytest

from gpufleet.api.types import TrafficClass
from gpufleet.planning.demand import backlog_tokens, infer_demand, prompt_share, split_demand

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


def test_waiting_requests_are_priced_at_the_sizes_of_the_classes_on_the_tier() -> None:
    """60 waiting on a tier that takes all of chat (400 tokens) and a quarter of batch
    (2000 tokens), where chat's demand is 3x batch's share: split 3:1, each at its size."""
    weights = {"chat": {"a": 100}, "batch": {"a": 25, "b": 75}}
    demand = {"chat": 3000.0, "batch": 4000.0}
    sizes = {"chat": 400.0, "batch": 2000.0}
    got = backlog_tokens({"a": 60.0, "b": 0.0}, weights, demand, sizes)
    assert got["chat"] == pytest.approx(60 * 0.75 * 400)
    assert got["batch"] == pytest.approx(60 * 0.25 * 2000)


def test_a_queue_without_demand_readings_splits_by_weight_and_none_is_nothing() -> None:
    weights = {"chat": {"a": 50}, "batch": {"a": 50}}
    sizes = {"chat": 400.0, "batch": 2000.0}
    got = backlog_tokens({"a": 10.0}, weights, {"chat": None, "batch": None}, sizes)
    assert got == {"chat": pytest.approx(5 * 400), "batch": pytest.approx(5 * 2000)}
    assert backlog_tokens({"a": None}, weights, {}, sizes) == {"chat": 0.0, "batch": 0.0}


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
