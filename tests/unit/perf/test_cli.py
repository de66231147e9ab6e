"""`gpufleet model validate` and `gpufleet model show`: the JSON shapes and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli import main
from gpufleet.perf.ionet import load_runs
from gpufleet.perf.validate import validate
from tests.pools import SHARED_DATA

pytestmark = pytest.mark.timeout(60)  # `model show` simulates streams of 90 s of requests
RUNS_DIR = SHARED_DATA / "iog-llm-inference-benchmarks"
KEYS = {"p99TtftMs", "medianTtftMs", "medianTpotMs", "outputTokensPerSecond"}


def test_validate_prints_every_run_measured_and_predicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (
        "vllm_200prompts8qps_Meta-Llama-3-8B-Instruct_sharegpt_1xNVIDIA-H100-PCIe.json",
        "vllm_200prompts1qps_DeepSeek-R1-Distill-Qwen-1.5B_sharegpt_1xNVIDIA-GeForce-RTX-4090.json",
    ):
        (tmp_path / name).symlink_to(RUNS_DIR / name)  # a link, not a copy of the data
    assert main(["model", "validate", "--runs", str(tmp_path), "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs"]) == 3  # the 4090 file holds two runs
    for run in data["runs"]:
        assert set(run) == {"file", "line", "gpu", "gpus", "model", "rate", "measured", "predicted"}
        assert set(run["measured"]) == KEYS and set(run["predicted"]) == KEYS
        assert all(v > 0 for v in run["predicted"].values())
    assert [r["line"] for r in data["runs"] if "4090" in r["gpu"]] == [1, 2]


def test_validate_refuses_a_missing_directory(tmp_path: Path) -> None:
    assert main(["model", "validate", "--runs", str(tmp_path / "none")]) == 2


def test_show_says_an_uncalibrated_gpu_is_datasheet_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["model", "show", "--accelerator", "L40S", "--model", "Qwen/Qwen2.5-7B-Instruct"]
    assert main([*args, "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["calibration"]["measured"] is False
    assert "compute" in data["calibration"]["datasheetOnly"]
    caps = data["capacityRps"]
    assert caps["2000"] >= caps["200"] > 0
    loads = [row["p99TtftMs"] for row in data["p99TtftVsLoad"]]
    assert loads[0] <= loads[-1]


def test_show_gives_the_capacity_at_each_prompt_length_and_no_p99_above_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Longer prompts leave fewer requests/s within the objective; where the table's rate is
    above a length's capacity the queue only grows, so there is no P99 to print."""
    args = ["model", "show", "--accelerator", "L40S", "--model",
            "Qwen/Qwen2.5-14B-Instruct", "--gpus", "2"]  # fmt: skip
    assert main([*args, "--output", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["p99TtftVsPrompt"]
    assert [r["promptTokens"] for r in rows] == [128, 512, 1024, 2048, 4096]
    capacities = [r["capacityRps"] for r in rows]
    assert capacities == sorted(capacities, reverse=True) and capacities[-1] < capacities[0]
    over = [r["rate"] > r["capacityRps"] for r in rows]
    assert over[0] is False and over[-1] is True  # 128 tokens within it, 4096 above it
    for row, above in zip(rows, over, strict=True):
        assert (row["p99TtftMs"] is None) == above
        assert above or 0 < row["p99TtftMs"] <= 2000.0
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "and the 2 s capacity at each length:" in table
    assert table.count("overloaded: above its capacity") == sum(over)


def test_show_refuses_a_model_that_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model", "show", "--accelerator", "RTX-4090", "--model", "Qwen/Qwen2.5-72B-Instruct"]
    assert main(args) == 2
    assert "no KV cache" in capsys.readouterr().err


def test_show_refuses_fewer_than_one_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model", "show", "--accelerator", "L40S", "--model",
            "Qwen/Qwen2.5-14B-Instruct", "--gpus", "0"]  # fmt: skip
    assert main(args) == 2
    assert "--gpus: must be at least 1" in capsys.readouterr().err


def test_show_refuses_a_gpu_count_vllm_would_refuse(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model", "show", "--accelerator", "A100-80GB", "--model",
            "mistralai/Mistral-7B-Instruct-v0.3", "--gpus", "3"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--gpus 3" in err
    assert "its 32 attention heads do not divide by 3" in err


def test_validate_refuses_a_directory_without_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["model", "validate", "--runs", str(tmp_path)]) == 2
    assert "no vLLM benchmark runs" in capsys.readouterr().err


def test_validate_names_the_line_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.json").write_text('{"gpu_name": "NVIDIA H100 PCIe"}\n')
    assert main(["model", "validate", "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "broken.json:1: not a vLLM benchmark_serving result" in err
    assert "gpu_count" in err  # the missing field


def test_validate_reports_each_run_replayed_and_keeps_stdout_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The progress bar advances once per run (`on_run`); on stdout only the JSON."""
    name = "DeepSeek-R1-Distill-Qwen-1.5B_sharegpt_1xNVIDIA-GeForce-RTX-4090.json"
    (tmp_path / name).symlink_to(RUNS_DIR / f"vllm_200prompts1qps_{name}")
    ticks: list[int] = []
    rows = validate(load_runs(tmp_path), on_run=lambda: ticks.append(1))
    assert len(ticks) == len(rows) == 2  # the file holds two runs
    assert main(["model", "validate", "--runs", str(tmp_path), "--output", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 2
