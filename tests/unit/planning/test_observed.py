"""Per-class demand and P99 from per-tier readings: the one function the operator and the
simulator share (the operator's path from Prometheus: tests/unit/adapters; the
simulator's: tests/unit/sim/test_policies.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.planning.observed import Routed, observe_classes, window_weights
from gpufleet.planning.records import TierMetrics
from tests.pools import pool, tier, traffic_class

pytestmark = pytest.mark.timeout(2)


def _pool(realtime: dict[str, Any], weights: dict[str, dict[str, int]]) -> InferencePool:
    body = pool(
        tiers=[tier("h100", "H100-PCIe-80GB"), tier("rtx4090")],
        classes=[
            traffic_class("realtime", 100, header="realtime", **realtime),
            traffic_class("batch", 2000, meanPromptTokens=300, meanOutputTokens=100),
        ],
        scaling={"intervalSeconds": 30},
    )
    body["status"] = {
        "classes": [
            {"name": c, "weights": [{"tier": t, "weight": w} for t, w in ws.items()]}
            for c, ws in weights.items()
        ]
    }
    return parse_pool(body)


MEASURED = {"meanPromptTokens": 200, "meanOutputTokens": 200, "demandQuery": "sum(q)"}
SHARED = {"realtime": {"h100": 100}, "batch": {"h100": 100}}
H100 = TierMetrics(prompt_tokens_per_second=800.0, generation_tokens_per_second=700.0)


def _observe(p: InferencePool, tiers: dict[str, TierMetrics], answers: dict[str, Any]) -> Any:
    return observe_classes(p.spec, p.status, tiers, answers)


def test_a_measured_class_is_split_by_its_lengths_and_taken_out_of_its_tiers() -> None:
    seen = _observe(_pool(MEASURED, SHARED), {"h100": H100}, {"realtime": 1000.0})
    realtime, batch = seen.demand["realtime"], seen.demand["batch"]
    assert (realtime.prompt_tokens_per_second, realtime.generation_tokens_per_second) == (
        500.0,
        500.0,
    )
    # What the H100 served less realtime's 500 + 500: batch's, on the same tier.
    assert batch.prompt_tokens_per_second == pytest.approx(300.0)
    assert batch.generation_tokens_per_second == pytest.approx(200.0)


@pytest.mark.parametrize(
    ("realtime", "answers", "expected"),
    [
        pytest.param(
            MEASURED, {"realtime": -5.0}, 0.0, id="negative-answer-reads-as-none-demanded"
        ),
        pytest.param(MEASURED, {"realtime": None}, "inferred", id="no-answer-infers"),
        pytest.param(MEASURED, {}, "inferred", id="not-asked-infers"),
        pytest.param({}, {"realtime": 1000.0}, "inferred", id="no-demand-query-ignores-it"),
    ],
)
def test_only_a_usable_answer_to_a_class_s_own_query_measures_it(
    realtime: dict[str, Any], answers: dict[str, Any], expected: Any
) -> None:
    seen = _observe(_pool(realtime, SHARED), {"h100": H100}, answers)
    demand = seen.demand["realtime"]
    assert demand is not None
    if expected == "inferred":  # from the H100's 1500 tokens/s, shared with batch
        assert 0 < demand.tokens_per_second < 1500
        assert demand.tokens_per_second + seen.demand["batch"].tokens_per_second == (
            pytest.approx(1500.0)
        )
    else:
        assert demand.tokens_per_second == expected


def test_a_class_s_p99_is_the_worst_of_the_tiers_its_live_weights_use() -> None:
    weights = {"realtime": {"h100": 100, "rtx4090": 0}, "batch": {"h100": 20, "rtx4090": 80}}
    tiers = {
        "h100": TierMetrics(ttft_p99_seconds=0.05),
        "rtx4090": TierMetrics(ttft_p99_seconds=1.5),
    }
    seen = _observe(_pool({}, weights), tiers, {})
    assert seen.ttft_p99_seconds == {"realtime": 0.05, "batch": 1.5}
    no_p99 = {"h100": TierMetrics(), "rtx4090": TierMetrics()}
    assert _observe(_pool({}, weights), no_p99, {}).ttft_p99_seconds == {
        "realtime": None,
        "batch": None,
    }


def test_a_class_without_live_weights_is_unknown() -> None:
    p = _pool({}, {})
    seen = _observe(p, {"h100": H100}, {})
    assert seen.demand == {"realtime": None, "batch": None}
    assert seen.ttft_p99_seconds == {"realtime": None, "batch": None}


# -- the weights a window's tokens followed ------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
OLD = {"interactive": {"h100": 100}, "standard": {"h100": 10, "rtx4090": 90}}
NEW = {"interactive": {"h100": 100}, "standard": {"h100": 60, "rtx4090": 40}}


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_change_inside_the_window_is_averaged_by_time() -> None:
    history = [Routed(_at(0), OLD), Routed(_at(30), NEW)]
    # A 60 s window ending at 60 s: half under each.
    got = window_weights(NEW, history, _at(60), 60.0)
    assert got["standard"] == pytest.approx({"h100": 35.0, "rtx4090": 65.0})
    assert got["interactive"] == pytest.approx({"h100": 100.0})
    # Ending at 75 s, the window starts at 15 s: a quarter under the old ones.
    assert window_weights(NEW, history, _at(75), 60.0)["standard"] == pytest.approx(
        {"h100": 47.5, "rtx4090": 52.5}
    )
    # Ending at 90 s it starts when the new ones were applied: they alone.
    assert window_weights(NEW, history, _at(90), 60.0)["standard"] == pytest.approx(
        {"h100": 60.0, "rtx4090": 40.0}
    )


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([], id="none-kept-restarted-operator"),
        pytest.param([Routed(_at(0), NEW), Routed(_at(30), OLD)], id="not-this-status-s"),
    ],
)
def test_without_a_history_of_these_weights_the_live_ones_stand(history: list[Routed]) -> None:
    assert window_weights(NEW, history, _at(60), 60.0) == {
        c: {t: float(w) for t, w in ws.items()} for c, ws in NEW.items()
    }


def test_before_the_first_entry_its_weights_held_and_a_new_class_had_its_live_ones() -> None:
    live = {**NEW, "bulk": {"rtx4090": 100}}
    history = [Routed(_at(50), OLD), Routed(_at(80), live)]
    got = window_weights(live, history, _at(100), 60.0)
    # 40..80 s under OLD (the first entry also stands for 40..50), 80..100 s under live.
    assert got["standard"] == pytest.approx(
        {"h100": 10 * 2 / 3 + 60 / 3, "rtx4090": 90 * 2 / 3 + 40 / 3}
    )
    assert got["bulk"] == pytest.approx({"rtx4090": 100.0})


def test_inferred_with_the_window_s_weights_a_moved_share_is_not_read_as_demand() -> None:
    """standard moved from 10% to 60% of its tokens on the H100 half way through a 60 s
    window: the tiers' tokens hold half of each split. With the live weights alone, the
    RTX 4090's tokens (half of them still under the old 90%) read as 1.4x standard's true
    rate and leave interactive nothing."""
    body = pool(
        tiers=[tier("h100", "H100-PCIe-80GB"), tier("rtx4090")],
        classes=[
            traffic_class("interactive", 250, header="interactive"),
            traffic_class("standard", 3000),
        ],
    )
    body["status"] = {
        "classes": [
            {"name": c, "weights": [{"tier": t, "weight": w} for t, w in ws.items()]}
            for c, ws in NEW.items()
        ]
    }
    p = parse_pool(body)
    interactive, standard = 1000.0, 2600.0
    on_4090 = standard * (0.9 + 0.4) / 2
    served = {"h100": interactive + standard - on_4090, "rtx4090": on_4090}
    tiers = {
        n: TierMetrics(prompt_tokens_per_second=v, generation_tokens_per_second=v)
        for n, v in served.items()
    }
    routed = [Routed(_at(0), OLD), Routed(_at(30), NEW)]
    right = observe_classes(
        p.spec, p.status, tiers, {}, routed=routed, now=_at(60), window_seconds=60.0
    ).demand
    assert right["interactive"].prompt_tokens_per_second == pytest.approx(interactive, rel=0.01)
    assert right["standard"].prompt_tokens_per_second == pytest.approx(standard, rel=0.01)
    wrong = observe_classes(p.spec, p.status, tiers, {}).demand
    assert wrong["standard"].prompt_tokens_per_second > 1.3 * standard
    assert wrong["interactive"].prompt_tokens_per_second < 0.01 * interactive
