"""The simulator's engine against the raw io.net runs, on its own (not the planner's P99 curve).

Each single-GPU run of a built-in profile's model is replayed through one simulated
replica the way `benchmark_serving` ran it (200 requests, exponential gaps at the offered
rate, the run's mean prompt and output lengths) and its P99 TTFT and tokens/s (prompt
plus generated over the run's duration) compared with the raw JSON file. Only runs offered
at most the model's saturation rate count: past it the engine's queue grows without
bound, as the profile says, while the real runs (which never saturated the GPU; their
completed rate is set by the last requests' drain) kept a low TTFT.

Stated tolerance (median of 5 seeds): P99 TTFT within +60% / -25% of the measurement, the
engine erring high (a request waits out the step in progress and the prefills ahead of
it); tokens/s within 30%.
"""

from __future__ import annotations

import pytest

from gpufleet.sim.replay import MeasuredRun, compare, measured_runs
from tests.pools import SHARED_DATA

pytestmark = pytest.mark.timeout(10)

TTFT_ABOVE = 0.60
TTFT_BELOW = 0.25
TOKENS = 0.30
RUNS = measured_runs(SHARED_DATA / "iog-llm-inference-benchmarks")
# The stated range: runs offered at most the model's saturation rate (listed in
# BENCHMARKS.md with the others, which are not asserted).
IN_RANGE = [r for r in RUNS if compare(r, seeds=1).below_saturation]


def test_the_raw_runs_are_there() -> None:
    assert len(RUNS) >= 25
    assert {r.accelerator for r in RUNS} == {"H100-PCIe-80GB", "RTX4090"}
    llama = [
        r for r in RUNS if r.size_class == "8B" and r.rate_rps == 16 and "H100" in r.accelerator
    ]
    assert llama[0].ttft_p99_seconds == pytest.approx(0.0311, abs=0.0005)  # the raw file's


@pytest.mark.parametrize(
    "run", IN_RANGE, ids=[r.path.stem.removeprefix("vllm_200prompts") for r in IN_RANGE]
)
def test_engine_reproduces_a_raw_run(run: MeasuredRun) -> None:
    result = compare(run)
    assert result.below_saturation
    shown = f"P99 TTFT {result.ttft_p99_seconds:.4f} s vs {run.ttft_p99_seconds:.4f} s"
    assert -TTFT_BELOW <= result.ttft_error <= TTFT_ABOVE, shown
    assert abs(result.tokens_error) <= TOKENS


def test_most_runs_are_in_the_stated_range() -> None:
    assert len(IN_RANGE) >= 0.5 * len(RUNS)
