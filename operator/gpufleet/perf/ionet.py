"""The io.net vLLM 0.8.5 benchmark runs (one JSON object per line, one or two per file).

Server sessions: each file's `date` is when the benchmark finished (vLLM's benchmark_serving
stamps it after the run). For one (GPU, GPU count, model), consecutive runs end 20-25 s apart
beyond their durations (same server, next rate: 32, 16, 8, 4, 1 req/s in that order), while
a new server (model load, compile, graph capture) leaves minutes. A run that starts within
SESSION_GAP_S of the previous one's end is on the same, warm server (`follows` = True): its
200 prompts, the same ones in the same order, were served a minute earlier.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

SESSION_GAP_S = 120.0

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
    date: str = ""  # when the benchmark finished, YYYYmmdd-HHMMSS
    follows: bool = False  # ran right after another run on the same server (see above)

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
    """Every run in `directory`'s *.json files, sorted by file and line; ValueError names
    the file and line of one that is not a benchmark result."""
    runs = []
    for path in sorted(Path(directory).glob("*.json")):
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            if not text.strip():
                continue
            try:
                runs.append(_run(path.name, number, json.loads(text)))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(
                    f"{path.name}:{number}: not a vLLM benchmark_serving result "
                    f"({type(error).__name__}: {error})"
                ) from None
    return _sessions(runs)


def _run(file: str, line: int, d: dict[str, Any]) -> Run:
    return Run(
        file=file,
        line=line,
        gpu=str(d["gpu_name"]),
        gpus=int(d["gpu_count"]),
        model=str(d["model_id"]),
        rate=float(d["request_rate"]),
        num_prompts=int(d["num_prompts"]),
        total_input=int(d["total_input_tokens"]),
        total_output=int(d["total_output_tokens"]),
        duration=float(d["duration"]),
        date=str(d.get("date", "")),
        measured={
            "p99TtftMs": float(d["p99_ttft_ms"]),
            "medianTtftMs": float(d["median_ttft_ms"]),
            "medianTpotMs": float(d["median_tpot_ms"]),
            "outputTokensPerSecond": float(d["output_throughput"]),
        },
    )


def _end(run: Run) -> float:
    return datetime.strptime(run.date, "%Y%m%d-%H%M%S").timestamp() if run.date else 0.0


def _sessions(runs: list[Run]) -> list[Run]:
    """Mark each run that started within SESSION_GAP_S of the previous run's end on the same
    GPUs and model (the files' order is kept)."""
    by_group: dict[tuple[str, int, str], list[Run]] = {}
    for r in runs:
        if r.date:
            by_group.setdefault((r.gpu, r.gpus, r.model), []).append(r)
    follows: set[str] = set()
    for group in by_group.values():
        group.sort(key=_end)
        for prev, cur in itertools.pairwise(group):
            if _end(cur) - cur.duration - _end(prev) <= SESSION_GAP_S:
                follows.add(cur.key)
    return [replace(r, follows=r.key in follows) for r in runs]
