"""The io.net vLLM 0.8.5 benchmark runs (one JSON object per line, one or two per file)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

METRICS = ("p99TtftMs", "medianTtftMs", "medianTpotMs", "outputTokensPerSecond")


@dataclass(frozen=True)
class Run:
    file: str
    line: int  # 1-based line of the file
    gpu: str  # the file's gpu_name, e.g. NVIDIA-H100-PCIe
    gpus: int
    model: str
    rate: float
    num_prompts: int
    total_input: int
    total_output: int
    duration: float
    measured: dict[str, float]

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def mean_prompt(self) -> float:
        return self.total_input / self.num_prompts

    @property
    def mean_output(self) -> float:
        return self.total_output / self.num_prompts


def load_runs(directory: Path) -> list[Run]:
    """Every run in `directory`'s *.json files, sorted by file and line."""
    runs = []
    for path in sorted(Path(directory).glob("*.json")):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            if not text.strip():
                continue
            d = json.loads(text)
            runs.append(
                Run(
                    file=path.name,
                    line=number,
                    gpu=str(d["gpu_name"]),
                    gpus=int(d["gpu_count"]),
                    model=str(d["model_id"]),
                    rate=float(d["request_rate"]),
                    num_prompts=int(d["num_prompts"]),
                    total_input=int(d["total_input_tokens"]),
                    total_output=int(d["total_output_tokens"]),
                    duration=float(d["duration"]),
                    measured={
                        "p99TtftMs": float(d["p99_ttft_ms"]),
                        "medianTtftMs": float(d["median_ttft_ms"]),
                        "medianTpotMs": float(d["median_tpot_ms"]),
                        "outputTokensPerSecond": float(d["output_throughput"]),
                    },
                )
            )
    return runs
