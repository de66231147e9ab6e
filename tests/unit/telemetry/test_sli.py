"""Per-class attainment from the tiers' TTFT histograms and the live weights."""

import math

import pytest

from gpufleet.api.status import ClassStatus, InferencePoolStatus, TierWeight
from gpufleet.api.types import InferencePool
from gpufleet.desired.sli import VLLM_TTFT_BUCKETS, class_slis, share_slower, sli_buckets
from gpufleet.planning.records import TierObservation
from tests.pools import load_example

pytestmark = pytest.mark.timeout(2)

# Share of first tokens slower than each bound.
SHARES = {0.08: 0.2, 0.1: 0.05, 0.25: 0.01, 1.0: 0.004, 2.5: 0.0}


@pytest.mark.parametrize(
    ("objective", "expected"),
    [
        pytest.param(0.1, 0.05, id="at-a-bound-exact"),
        pytest.param(0.05, 0.2, id="below-every-bound-reads-the-first"),
        pytest.param(5.0, 0.0, id="above-every-bound-reads-the-last"),
        pytest.param(0.175, 0.05 * math.pow(0.01 / 0.05, 0.5), id="log-linear-inside"),
        pytest.param(1.75, 0.004 * 0.5, id="linear-where-the-tail-ends"),
    ],
)
def test_share_slower(objective: float, expected: float) -> None:
    assert share_slower(SHARES, objective) == pytest.approx(expected)


def test_no_histogram_is_no_share() -> None:
    assert share_slower({}, 0.1) is None


def _status(weights: dict[str, dict[str, int]]) -> InferencePoolStatus:
    return InferencePoolStatus(
        classes=[
            ClassStatus(name=c, weights=[TierWeight(tier=t, weight=w) for t, w in by_tier.items()])
            for c, by_tier in weights.items()
        ]
    )


def test_a_class_s_attainment_weighs_each_tier_by_its_share_of_the_class() -> None:
    # realtime 100 ms, batch 2000 ms; tiers h100 and rtx4090
    pool = InferencePool.model_validate(load_example())
    tiers = {
        "h100": TierObservation("h100", ttft_fraction_above={0.1: 0.0, 2.0: 0.0}),
        "rtx4090": TierObservation("rtx4090", ttft_fraction_above={0.1: 0.9, 2.0: 0.04}),
    }
    status = _status({"realtime": {"h100": 100}, "batch": {"h100": 25, "rtx4090": 75}})
    slis = {s.name: s for s in class_slis(pool.spec, status, tiers)}
    assert slis["realtime"].attainment_ratio == pytest.approx(1.0)
    assert slis["batch"].attainment_ratio == pytest.approx(1 - 0.75 * 0.04)
    assert slis["batch"].exact and slis["realtime"].exact
    assert slis["batch"].objective_seconds == 2.0


def test_a_tier_without_data_is_left_out_and_no_data_is_no_attainment() -> None:
    pool = InferencePool.model_validate(load_example())
    tiers = {
        "h100": TierObservation("h100", ttft_fraction_above={0.1: 0.02, 0.25: 0.0}),
        "rtx4090": TierObservation("rtx4090"),
    }
    status = _status({"realtime": {"h100": 50, "rtx4090": 50}, "batch": {"rtx4090": 100}})
    slis = {s.name: s for s in class_slis(pool.spec, status, tiers)}
    assert slis["realtime"].attainment_ratio == pytest.approx(0.98)
    assert slis["batch"].attainment_ratio is None and not slis["batch"].exact


def test_sli_buckets_add_each_objective_to_vllm_s_defaults_once() -> None:
    buckets = sli_buckets([0.1, 2.0, 0.3, 2.0])
    assert set(buckets) == set(VLLM_TTFT_BUCKETS) | {2.0, 0.3}
    assert buckets == sorted(buckets) and len(buckets) == len(set(buckets))
