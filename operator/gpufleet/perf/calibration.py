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
        compute=0.4427,
        memory=0.884,
        link=0.4863,
        step_overhead_s=0.0005417,
        per_seq_overhead_s=2.957e-05,
        api_overhead_s=0.006505,
        allreduce_latency_s=4.334e-05,
        layer_launch_s=9.34e-05,
        tp_layer_launch_s=7.28e-05,
        measured=(
            "compute",
            "memory",
            "step_overhead_s",
            "per_seq_overhead_s",
            "api_overhead_s",
            "layer_launch_s",
            "link",
            "allreduce_latency_s",
            "tp_layer_launch_s",
        ),
    ),
    "RTX-4090": Efficiency(
        compute=0.717,
        memory=0.8529,
        link=0.2949,
        step_overhead_s=0.0007388,
        per_seq_overhead_s=3.771e-05,
        api_overhead_s=0.007527,
        allreduce_latency_s=1e-06,
        layer_launch_s=0.0003822,
        tp_layer_launch_s=0.0004215,
        measured=(
            "compute",
            "memory",
            "step_overhead_s",
            "per_seq_overhead_s",
            "api_overhead_s",
            "layer_launch_s",
            "link",
            "allreduce_latency_s",
            "tp_layer_launch_s",
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
