"""GPU datasheet numbers, one row per accelerator, each citing its source.

Peak numbers are the dense (no 2:4 sparsity) tensor-core rates: the datasheets' headline
figures for Hopper, Ada and Blackwell are "with sparsity", twice the dense rate. GeForce cards
run FP16/BF16 matrix maths with FP32 accumulation (what PyTorch's GEMMs use) at half the rate
of FP16 accumulation; that halved figure is the one that applies to vLLM. Memory is what the
driver reports as total memory (nvidia-smi `memory.total`), in GiB, which is what vLLM's
`gpu_memory_utilization` multiplies.

Interconnect: `link_gbps` is the per-direction bandwidth one GPU has to its tensor-parallel
peers, in GB/s. With NVLink that is the NVLink bandwidth; without it, the PCIe link. GeForce
cards have peer-to-peer over PCIe disabled by the driver, so NCCL stages every all-reduce
through host memory: `peer_to_peer=False` (the all-reduce then crosses PCIe twice).
"""

from __future__ import annotations

from dataclasses import dataclass

# PCIe x16 per-direction payload bandwidth, GB/s (PCI-SIG: 8 GT/s Gen3, 16 GT/s Gen4,
# 32 GT/s Gen5 with 128b/130b encoding: 15.75, 31.5 and 63 GB/s; 64 GT/s Gen6, PAM4 with
# FLIT encoding: 121 GB/s).
PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}


@dataclass(frozen=True)
class Gpu:
    name: str
    bf16_tflops: float  # dense FP16/BF16 tensor TFLOPS (FP32 accumulate)
    fp8_tflops: float | None  # dense FP8 tensor TFLOPS, None where the GPU has none
    bandwidth_gbps: float  # memory bandwidth, GB/s
    memory_gib: float  # total memory as the driver reports it
    pcie_gen: int
    pcie_lanes: int
    nvlink_gbps: float | None  # per-direction NVLink bandwidth per GPU; None: no NVLink
    peer_to_peer: bool  # GPU-to-GPU DMA over PCIe/NVLink (GeForce: off)
    board_power_w: float
    source: str

    @property
    def pcie_gbps(self) -> float:
        return PCIE_X16_GBPS[self.pcie_gen] * self.pcie_lanes / 16

    @property
    def link_gbps(self) -> float:
        """Per-direction bandwidth to a tensor-parallel peer (host-staged without P2P)."""
        if self.nvlink_gbps is not None:
            return self.nvlink_gbps
        # Without peer-to-peer every byte goes device -> host -> device: PCIe twice.
        return self.pcie_gbps if self.peer_to_peer else self.pcie_gbps / 2

    def peak_tflops(self, weight_bytes: float) -> float:
        """The tensor rate a model with `weight_bytes`-byte weights runs at (FP8 on FP8 GPUs)."""
        if weight_bytes <= 1 and self.fp8_tflops is not None:
            return self.fp8_tflops
        return self.bf16_tflops


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        # https://www.nvidia.com/en-us/data-center/h100/ (datasheet, H100 PCIe column:
        # BF16 1,513 / FP8 3,026 TFLOPS with sparsity, 2.0 TB/s HBM2e, 80 GB, PCIe Gen5 x16,
        # optional 2-way NVLink bridge 600 GB/s, 300-350 W). No bridge assumed (io.net nodes).
        Gpu(
            "H100-PCIe",
            756.0,
            1513.0,
            2000.0,
            79.6,
            5,
            16,
            None,
            True,
            350.0,
            "NVIDIA H100 datasheet, PCIe column",
        ),
        # Same datasheet, SXM column: BF16 1,979 / FP8 3,958 with sparsity, 3.35 TB/s,
        # 80 GB HBM3, NVLink 900 GB/s (bidirectional: 450 GB/s per direction), 700 W.
        Gpu(
            "H100-SXM",
            989.0,
            1979.0,
            3350.0,
            79.6,
            5,
            16,
            450.0,
            True,
            700.0,
            "NVIDIA H100 datasheet, SXM column",
        ),
        # https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM: same Hopper rates as H100
        # SXM, 4.8 TB/s HBM3e, 141 GB, NVLink 900 GB/s, up to 700 W).
        Gpu(
            "H200",
            989.0,
            1979.0,
            4800.0,
            139.8,
            5,
            16,
            450.0,
            True,
            700.0,
            "NVIDIA H200 datasheet, SXM column",
        ),
        # https://www.nvidia.com/en-us/data-center/a100/ (A100 80GB SXM: BF16 312 dense,
        # no FP8, 2,039 GB/s HBM2e, NVLink 600 GB/s bidirectional, 400 W).
        Gpu(
            "A100-80GB",
            312.0,
            None,
            2039.0,
            79.2,
            4,
            16,
            300.0,
            True,
            400.0,
            "NVIDIA A100 datasheet, 80GB SXM column",
        ),
        # https://www.nvidia.com/en-us/data-center/l40s/ (BF16 733 / FP8 1,466 with
        # sparsity, 864 GB/s GDDR6, 48 GB, PCIe Gen4 x16, no NVLink, 350 W).
        Gpu("L40S", 362.0, 733.0, 864.0, 44.5, 4, 16, None, True, 350.0, "NVIDIA L40S datasheet"),
        # NVIDIA Ada GPU architecture whitepaper v1.03, appendix table "GeForce RTX 4090":
        # FP16/BF16 tensor with FP32 accumulate 165.2 dense, FP8 (FP32 acc.) 330.3 dense,
        # 1,008 GB/s GDDR6X, 24 GB, PCIe Gen4 x16, no NVLink, 450 W. P2P disabled on GeForce.
        Gpu(
            "RTX-4090",
            165.2,
            330.3,
            1008.0,
            23.99,
            4,
            16,
            None,
            False,
            450.0,
            "NVIDIA Ada Lovelace architecture whitepaper, RTX 4090",
        ),
        # NVIDIA RTX Blackwell GPU architecture whitepaper, "GeForce RTX 5090": FP16/BF16
        # tensor with FP32 accumulate 209.5 dense, FP8 (FP32 acc.) 419 dense, 1,792 GB/s
        # GDDR7, 32 GB, PCIe Gen5 x16, no NVLink, 575 W. P2P disabled on GeForce.
        Gpu(
            "RTX-5090",
            209.5,
            419.0,
            1792.0,
            31.36,
            5,
            16,
            None,
            False,
            575.0,
            "NVIDIA RTX Blackwell architecture whitepaper, RTX 5090",
        ),
    )
}

# Names the io.net files and the pool specs use for the same cards.
ALIASES: dict[str, str] = {
    "NVIDIA-H100-PCIe": "H100-PCIe",
    "H100-PCIe-80GB": "H100-PCIe",
    "H100-SXM-80GB": "H100-SXM",
    "H200-SXM-141GB": "H200",
    "A100-SXM-80GB": "A100-80GB",
    "H100": "H100-SXM",
    "NVIDIA-GeForce-RTX-4090": "RTX-4090",
    "RTX4090": "RTX-4090",
    "RTX5090": "RTX-5090",
    "A100": "A100-80GB",
    "H200-SXM": "H200",
}


def gpu(name: str) -> Gpu:
    """The datasheet row for `name` (a table name or an alias); KeyError names the choices."""
    key = ALIASES.get(name, name)
    if key not in GPUS:
        raise KeyError(f"unknown accelerator {name!r}; known: {', '.join(sorted(GPUS))}")
    return GPUS[key]
