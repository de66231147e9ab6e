"""The fitted efficiencies: within 20%-90% of peak, never above the datasheet, deterministic."""

from __future__ import annotations

import pytest

from gpufleet.perf.calibrate import EFF_HIGH, EFF_LOW, fit, residuals
from gpufleet.perf.calibration import DEFAULT, FITTED, calibration
from gpufleet.perf.hardware import GPUS
from gpufleet.perf.ionet import load_runs
from tests.pools import SHARED_DATA

pytestmark = pytest.mark.timeout(5)
RUNS_DIR = SHARED_DATA / "iog-llm-inference-benchmarks"


def test_every_io_net_gpu_is_calibrated() -> None:
    assert set(FITTED) == {"H100-PCIe", "RTX-4090"}
    for name, eff in FITTED.items():
        assert {"compute", "memory", "step_overhead_s"} <= set(eff.measured), name


@pytest.mark.parametrize("name", sorted(FITTED))
def test_fitted_efficiencies_are_20_to_90_percent_of_peak(name: str) -> None:
    eff = FITTED[name]
    g = GPUS[name]
    for share in (eff.compute, eff.memory, eff.link):
        assert EFF_LOW <= share <= EFF_HIGH
    # So the achieved rates never exceed the datasheet.
    assert eff.compute * g.bf16_tflops < g.bf16_tflops
    assert eff.memory * g.bandwidth_gbps < g.bandwidth_gbps
    assert 0 <= eff.step_overhead_s < 0.02
    assert 0 <= eff.api_overhead_s < 0.05


def test_an_uncalibrated_gpu_says_which_numbers_are_datasheet_only() -> None:
    cal = calibration("L40S")
    assert cal.measured is False
    assert cal.efficiency == DEFAULT
    assert "compute" in cal.datasheet_only and "memory" in cal.datasheet_only
    h100 = calibration("NVIDIA-H100-PCIe")
    assert h100.measured is True
    assert "compute" not in h100.datasheet_only


@pytest.mark.timeout(60)
def test_a_short_fit_is_deterministic_and_bounded() -> None:
    runs = [r for r in load_runs(RUNS_DIR) if "Qwen-1.5B" in r.model and "H100" in r.gpu]
    a = fit(runs, max_evaluations=3)
    b = fit(runs, max_evaluations=3)
    assert a.efficiency == b.efficiency
    assert EFF_LOW <= a.efficiency.compute <= EFF_HIGH
    assert EFF_LOW <= a.efficiency.memory <= EFF_HIGH
    assert "link" not in a.efficiency.measured  # one GPU per run: nothing measures the link
    assert residuals(a.efficiency, runs).shape == (4 * len(runs),)


@pytest.mark.timeout(120)
def test_the_tensor_parallel_stage_fits_the_link_and_its_floor_on_step_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpufleet.perf import calibrate

    runs = [r for r in load_runs(RUNS_DIR) if "Qwen-7B" in r.model and "4090" in r.gpu]
    assert {r.gpus for r in runs} >= {1, 2}
    seen: list[tuple[int, tuple[str, ...]]] = []
    real = calibrate.residuals

    def spy(eff, runs, metrics=calibrate.METRICS):  # type: ignore[no-untyped-def]
        seen.append((max(r.gpus for r in runs), tuple(metrics)))
        return real(eff, runs, metrics)

    monkeypatch.setattr(calibrate, "residuals", spy)
    result = fit(runs, max_evaluations=4)
    assert {"link", "allreduce_latency_s", "tp_layer_launch_s"} <= set(result.efficiency.measured)
    assert result.efficiency.tp_layer_launch_s is not None
    # The GPU's own parameters on its single-GPU runs, every metric; the tensor-parallel
    # ones on the multi-GPU runs, median TPOT and output tokens/s only.
    assert {m for gpus, m in seen if gpus == 1} == {calibrate.METRICS}
    assert {m for gpus, m in seen if gpus > 1} == {calibrate.STEP_METRICS}
