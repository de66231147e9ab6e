"""The fitted efficiencies per GPU type, and datasheet-only defaults for the others.

Fitted by `python tools/bench_model.py --refit` (gpufleet.perf.calibrate.fit on every io.net
run of the GPU type, ../shared/data/iog-llm-inference-benchmarks) and pasted here so that
`gpufleet model show` and the tests need no fit. GPUs without io.net runs get DEFAULT, whose
numbers are typical shares of peak (not measurements): `measured` is empty for them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from gpufleet.perf.hardware import gpu
from gpufleet.perf.roofline import Efficiency

# Typical shares of peak for a GPU never measured here (stated, not fitted).
DEFAULT = Efficiency(
    compute=0.55,
    memory=0.75,
    link=0.6,
    step_overhead_s=0.003,
    per_seq_overhead_s=2e-5,
    api_overhead_s=0.005,
    allreduce_latency_s=3e-5,
    layer_launch_s=5e-5,
)

FITTED: dict[str, Efficiency] = {
    "H100-PCIe": Efficiency(
        compute=0.4674,
        memory=0.8846,
        link=0.3985,
        step_overhead_s=0,
        per_seq_overhead_s=5.128e-05,
        api_overhead_s=0.005542,
        allreduce_latency_s=6.084e-05,
        layer_launch_s=0.0001355,
        measured=(
            "compute",
            "memory",
            "step_overhead_s",
            "per_seq_overhead_s",
            "api_overhead_s",
            "layer_launch_s",
            "link",
            "allreduce_latency_s",
        ),
    ),
    "RTX-4090": Efficiency(
        compute=0.709,
        memory=0.8729,
        link=0.2834,
        step_overhead_s=0,
        per_seq_overhead_s=3.675e-05,
        api_overhead_s=0.007452,
        allreduce_latency_s=7.617e-05,
        layer_launch_s=0.0003921,
        measured=(
            "compute",
            "memory",
            "step_overhead_s",
            "per_seq_overhead_s",
            "api_overhead_s",
            "layer_launch_s",
            "link",
            "allreduce_latency_s",
        ),
    ),
}

FIELDS = tuple(f.name for f in fields(Efficiency) if f.name != "measured")


@dataclass(frozen=True)
class Calibration:
    gpu: str
    efficiency: Efficiency
    measured: bool
    datasheet_only: tuple[str, ...]  # parameters not fitted on any measurement


def calibration(accelerator: str, table: dict[str, Efficiency] | None = None) -> Calibration:
    """The efficiencies of `accelerator` (fitted where measured, else DEFAULT)."""
    name = gpu(accelerator).name
    fitted = (FITTED if table is None else table).get(name)
    if fitted is None:
        return Calibration(name, DEFAULT, False, FIELDS)
    missing = tuple(f for f in FIELDS if f not in fitted.measured)
    return Calibration(name, fitted, True, missing)
