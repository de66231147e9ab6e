"""Every example a user copies parses, and says what the README promises."""

from pathlib import Path

import pytest
import yaml

from gpufleet.api.parse import parse_pool
from gpufleet.api.types import Accelerator
from tests.pools import EXAMPLES

pytestmark = pytest.mark.timeout(2)


def test_there_are_at_least_three_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_parses(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    pool = parse_pool(body)
    assert pool.metadata.name == body["metadata"]["name"]
    assert sum(1 for c in pool.spec.traffic_classes if c.match is None) == 1


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_commented(path: Path) -> None:
    head = path.read_text().splitlines()[0]
    assert head.startswith("#"), "examples open with a comment saying what they show"


def test_mixed_example_has_h100_and_4090() -> None:
    pool = parse_pool(yaml.safe_load(Path(EXAMPLES[0].parent / "llama3-8b-mixed.yaml").read_text()))
    assert {t.accelerator for t in pool.spec.tiers} == {Accelerator.H100_PCIE, Accelerator.RTX4090}
    assert {c.name for c in pool.spec.traffic_classes} == {"realtime", "batch"}


def test_tensor_parallel_example_uses_four_4090s() -> None:
    pool = parse_pool(yaml.safe_load((EXAMPLES[0].parent / "qwen14b-4x4090.yaml").read_text()))
    consumer = next(t for t in pool.spec.tiers if t.accelerator is Accelerator.RTX4090)
    assert consumer.gpus_per_replica == 4


def test_budget_example_is_batch_only_with_a_budget() -> None:
    pool = parse_pool(yaml.safe_load((EXAMPLES[0].parent / "batch-budget.yaml").read_text()))
    assert [c.name for c in pool.spec.traffic_classes] == ["batch"]
    assert pool.spec.objectives.max_hourly_cost == "3.00"


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8.0),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.5),
        ("meta-llama/Meta-Llama-3-70B-Instruct", 70.0),
        ("Qwen/Qwen2.5-7B-Instruct", 7.0),
        ("google/gemma-2-9b-it", 9.0),
    ],
)
def test_model_size_is_read_from_the_name(name: str, size: float) -> None:
    from gpufleet.api.types import ModelSpec

    assert ModelSpec(name=name).size_billions() == size


def test_explicit_size_wins_over_the_name() -> None:
    from gpufleet.api.types import ModelSpec

    assert ModelSpec(name="org/model-7B", parameters_billions=8).size_billions() == 8.0
