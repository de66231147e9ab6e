"""A few io.net runs replayed with the stored calibration: the model is near the measurement."""

from __future__ import annotations

import pytest

from gpufleet.perf.calibration import DEFAULT, FITTED
from gpufleet.perf.ionet import load_runs
from gpufleet.perf.validate import validate
from gpufleet.perf.vidur import compare
from tests.pools import SHARED_DATA

pytestmark = pytest.mark.timeout(10)
RUNS = load_runs(SHARED_DATA / "iog-llm-inference-benchmarks")


def _pick(model: str, gpu: str, gpus: int, rate: float) -> list[object]:
    return [
        r for r in RUNS if model in r.model and gpu in r.gpu and r.gpus == gpus and r.rate == rate
    ]


@pytest.mark.parametrize(
    ("model", "gpu", "gpus", "rate"),
    [
        ("Meta-Llama-3-8B", "H100", 1, 1.0),
        ("Meta-Llama-3-8B", "4090", 1, 8.0),
        ("Qwen-14B", "H100", 1, 4.0),
    ],
)
def test_single_gpu_runs_are_replayed_within_loose_bounds(
    model: str, gpu: str, gpus: int, rate: float
) -> None:
    rows = validate(_pick(model, gpu, gpus, rate))  # type: ignore[arg-type]
    assert rows
    for row in rows:
        assert abs(row.error("medianTpotMs")) < 0.25
        assert abs(row.error("outputTokensPerSecond")) < 0.25
        assert abs(row.error("medianTtftMs")) < 0.5


def test_the_vidur_comparison_covers_both_gpus_and_stays_within_a_factor_of_two() -> None:
    points = compare(
        SHARED_DATA / "vidur-profiling",
        {"H100-SXM": FITTED.get("H100-PCIe", DEFAULT), "A100-80GB": DEFAULT},
        tokens=(1, 512, 4096),
    )
    assert {p.gpu for p in points} == {"H100-SXM", "A100-80GB"}
    assert all(0.5 < p.predicted_ms / p.measured_ms < 2.0 for p in points if p.tokens >= 512)
