"""The roofline's linear-layer time against Vidur's measured per-layer kernel times.

Vidur (microsoft/vidur, data/profiling, MIT; Agrawal et al., MLSys 2024) profiles one
transformer layer's non-attention operators per batch size (num_tokens) and tensor-parallel
degree. Its projections (attn_pre_proj = QKV, attn_post_proj = O, mlp_up_proj = gate+up,
mlp_down_proj = down) are the linear maps the roofline's `linear_layer_seconds` times. Vidur
ran on DGX machines (H100 SXM, A100 80GB SXM), so the rows use those datasheets.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from gpufleet.perf.hardware import gpu
from gpufleet.perf.models import model
from gpufleet.perf.roofline import Efficiency, Replica

PROJECTIONS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
GPU_DIRS = {"h100": "H100-SXM", "a100": "A100-80GB"}
TOKENS = (1, 8, 32, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class VidurPoint:
    gpu: str
    model: str
    tp: int
    tokens: int
    measured_ms: float
    predicted_ms: float

    @property
    def error(self) -> float:
        return self.predicted_ms / self.measured_ms - 1


def compare(
    root: Path, eff_for: dict[str, Efficiency], tokens: tuple[int, ...] = TOKENS
) -> list[VidurPoint]:
    """Every (gpu, model, tp) in `root`/compute at the listed token counts."""
    points = []
    for path in sorted(Path(root).glob("compute/*/*/*/mlp.csv")):
        gpu_name = GPU_DIRS.get(path.parts[-4])
        if gpu_name is None:
            continue
        model_name = f"{path.parts[-3]}/{path.parts[-2]}"
        with path.open() as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            n, tp = int(row["num_tokens"]), int(row["num_tensor_parallel_workers"])
            if n not in tokens:
                continue
            measured = sum(float(row[f"time_stats.{op}.median"]) for op in PROJECTIONS)
            replica = Replica(gpu(gpu_name), model(model_name), tp, eff_for[gpu_name])
            predicted = replica.linear_layer_seconds(n) * 1e3
            points.append(VidurPoint(gpu_name, model_name, tp, n, measured, predicted))
    return points
