"""Test factories for InferencePools, and the invalid-input table shared by unit and
integration tests."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
BASE_EXAMPLE = ROOT / "examples" / "llama3-8b-mixed.yaml"
INVALID_TABLE = Path(__file__).resolve().parent / "data" / "invalid_pools.yaml"
SHARED_DATA = ROOT.parent / "shared" / "data"

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def load_example(path: Path = BASE_EXAMPLE) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    return body


def _walk(body: Any, path: str) -> tuple[Any, str | int]:
    """The container holding the last element of `path`, and that element's key."""
    keys: list[str | int] = [name if name else int(index) for name, index in _TOKEN.findall(path)]
    node = body
    for key in keys[:-1]:
        node = node[key]
    return node, keys[-1]


@dataclass(frozen=True)
class InvalidCase:
    id: str
    field: str
    set: dict[str, Any]
    delete: list[str]

    def apply(self, base: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(base)
        for path, value in self.set.items():
            node, key = _walk(body, path)
            if value is None and isinstance(node, dict):
                node.pop(key, None)
            else:
                node[key] = value
        for path in self.delete:
            node, key = _walk(body, path)
            del node[key]
        return body


def invalid_cases() -> list[InvalidCase]:
    table = yaml.safe_load(INVALID_TABLE.read_text())
    return [
        InvalidCase(
            id=case["id"],
            field=case["field"],
            set=case.get("set", {}),
            delete=case.get("delete", []),
        )
        for case in table["cases"]
    ]


# Near misses of the issue-19 rules: refusing these would refuse pools people run.
ACCEPTED: dict[str, dict[str, Any]] = {
    "extra-arg-model-impl": {
        "spec.model.extraArgs": ["--model-impl=vllm", "--max-model-len", "8192"]
    },
    "extra-arg-port-lookalike": {"spec.model.extraArgs": ["--disable-log-requests", "--hosted=x"]},
    "half-billion-model": {"spec.model.name": "Qwen/Qwen2.5-0.5B-Instruct"},
    "engine-performance-model": {"spec.scaling.performanceModel": "Engine"},
    "custom-accelerator-by-datasheet": {
        "spec.tiers[1].accelerator": "Custom",
        "spec.tiers[1].gpu": {
            "bf16TFLOPS": 1307,
            "fp8TFLOPS": 2615,
            "memoryBandwidthGBps": 5300,
            "memoryGiB": 192,
            "pcieGeneration": 5,
            "boardPowerWatts": 750,
        },
    },
    # gemma-2-9b's shape: hiddenSize 3584 is not 16 heads of 256, so headDim is given.
    "architecture-with-head-dim": {
        "spec.model.architecture": {
            "numHiddenLayers": 42,
            "hiddenSize": 3584,
            "numAttentionHeads": 16,
            "numKeyValueHeads": 8,
            "headDim": 256,
            "intermediateSize": 14336,
            "vocabSize": 256000,
            "tieWordEmbeddings": True,
            "weightDtype": "fp8",
        }
    },
    "wildcard-hostname": {"spec.routing.hostnames": ["*.example.com", "llm.example.com"]},
    # The example's classes (200 + 200 tokens) exactly fill a 400-token context.
    "class-lengths-filling-the-context": {"spec.model.extraArgs": ["--max-model-len=400"]},
    "env-name-with-dot-dash": {"spec.model.env[0].name": "my.var-1_X"},
    "request-equal-limit": {
        "spec.tiers[0].resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "4000m"}}
    },
    "memory-units-compared": {
        "spec.tiers[0].resources": {"requests": {"memory": "1G"}, "limits": {"memory": "1Gi"}}
    },
    "toleration-no-execute-seconds": {
        "spec.tiers[0].tolerations": [
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        ]
    },
    "toleration-of-everything": {"spec.tiers[0].tolerations": [{"operator": "Exists"}]},
}


def pool(
    name: str = "llama3-8b",
    *,
    namespace: str = "default",
    tiers: list[dict[str, Any]] | None = None,
    classes: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A valid InferencePool body based on the first example, with overrides."""
    body = load_example()
    body["metadata"] = {"name": name, "namespace": namespace}
    if tiers is not None:
        body["spec"]["tiers"] = tiers
    if classes is not None:
        body["spec"]["trafficClasses"] = classes
    body["spec"].update(spec)
    return body


def tier(name: str, accelerator: str = "RTX4090", **fields: Any) -> dict[str, Any]:
    """A tier body with sensible defaults."""
    selector = "h100" if accelerator.startswith("H100") else "rtx4090"
    return {
        "name": name,
        "accelerator": accelerator,
        "nodeSelector": {"gpufleet.dev/accelerator": selector},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "minReplicas": 0,
        "maxReplicas": 8,
        "pricePerGPUHour": "2.00" if accelerator.startswith("H100") else "0.25",
        **fields,
    }


def traffic_class(
    name: str, ttft_ms: int, *, header: str | None = None, **fields: Any
) -> dict[str, Any]:
    """A traffic class body; a header makes it a matched (non-default) class."""
    body: dict[str, Any] = {"name": name, "ttftP99Milliseconds": ttft_ms, **fields}
    if header is not None:
        body["match"] = {"headers": [{"name": "x-request-class", "value": header}]}
    return body
