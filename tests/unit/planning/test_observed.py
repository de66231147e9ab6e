"""Per-class demand and P99 from per-tier readings: the one function the operator and the
simulator share (the operator's path from Prometheus: tests/unit/adapters; the
simulator's: tests/unit/sim/test_policies.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import InferencePool
from gpufleet.planning.observed import observe_classes
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
