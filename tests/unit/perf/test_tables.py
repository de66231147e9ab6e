"""The datasheet and architecture tables: physical sanity, and the io.net runs fit memory."""

from __future__ import annotations

import pytest

from gpufleet.perf.hardware import GPUS, gpu
from gpufleet.perf.ionet import load_runs
from gpufleet.perf.models import MODELS, model
from gpufleet.perf.roofline import Efficiency, Replica
from tests.pools import SHARED_DATA

pytestmark = pytest.mark.timeout(5)
RUNS_DIR = SHARED_DATA / "iog-llm-inference-benchmarks"


def test_the_required_gpus_are_listed_with_physical_numbers() -> None:
    for name in ("H100-PCIe", "H100-SXM", "H200", "A100-80GB", "L40S", "RTX-4090", "RTX-5090"):
        g = GPUS[name]
        assert 100 < g.bf16_tflops < 2000
        assert g.fp8_tflops is None or g.fp8_tflops >= g.bf16_tflops
        assert 500 < g.bandwidth_gbps < 10_000
        assert 16 < g.memory_gib < 200
        assert g.pcie_gen in (4, 5) and g.pcie_lanes == 16
        assert 0 < g.link_gbps <= (g.nvlink_gbps or g.pcie_gbps)
        assert 200 <= g.board_power_w <= 1000
        assert g.source


def test_geforce_cards_have_no_nvlink_and_no_peer_to_peer() -> None:
    for name in ("RTX-4090", "RTX-5090"):
        assert GPUS[name].nvlink_gbps is None
        assert GPUS[name].peer_to_peer is False
        assert GPUS[name].link_gbps == pytest.approx(GPUS[name].pcie_gbps / 2)
    assert gpu("NVIDIA-GeForce-RTX-4090").link_gbps == pytest.approx(31.5 / 2)
    assert gpu("NVIDIA-H100-PCIe").link_gbps == pytest.approx(63.0)  # PCIe 5.0, no bridge


def test_parameter_counts_match_the_published_sizes() -> None:
    expected = {
        "meta-llama/Meta-Llama-3-8B-Instruct": 8.03e9,
        "meta-llama/Meta-Llama-3-70B-Instruct": 70.6e9,
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": 1.78e9,
        "Qwen/Qwen2.5-7B-Instruct": 7.62e9,
        "Qwen/Qwen2.5-14B-Instruct": 14.77e9,
        "Qwen/Qwen2.5-32B-Instruct": 32.76e9,
        "Qwen/Qwen2.5-72B-Instruct": 72.7e9,
        "google/gemma-2-9b-it": 9.24e9,
        "microsoft/phi-4": 14.66e9,
        "mistralai/Mistral-7B-Instruct-v0.3": 7.25e9,
        "meta-llama/Llama-3.2-1B-Instruct": 1.24e9,
    }
    for name, params in expected.items():
        assert MODELS[name].params == pytest.approx(params, rel=0.01), name


def test_fp8_checkpoints_take_about_half_the_memory() -> None:
    fp8 = model("neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic")
    bf16 = model("meta-llama/Llama-3.1-70B-Instruct")
    assert fp8.weight_bytes == 1
    assert 0.5 < fp8.weight_memory_bytes / bf16.weight_memory_bytes < 0.55


def test_every_io_net_model_is_in_the_table_and_fits_its_gpus() -> None:
    runs = load_runs(RUNS_DIR)
    assert len(runs) == 130
    for run in runs:
        replica = Replica(gpu(run.gpu), model(run.model), run.gpus, Efficiency())
        assert replica.weight_bytes_per_gpu() < replica.gpu.memory_gib * 2**30
        # Room for at least the 200 requests' longest prompt plus output.
        assert replica.kv_capacity_tokens() >= 2048, run.key


def test_a_model_larger_than_the_gpus_does_not_fit() -> None:
    replica = Replica(gpu("RTX-4090"), model("meta-llama/Meta-Llama-3-70B-Instruct"), 2)
    assert replica.kv_capacity_tokens() == 0
    assert not replica.fits()


def test_unknown_names_are_refused_with_the_choices() -> None:
    with pytest.raises(KeyError, match="H100-PCIe"):
        gpu("B300")
    with pytest.raises(KeyError, match="Qwen"):
        model("nobody/none-7B")
