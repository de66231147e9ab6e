"""The Events a pass posts for its changes of replicas."""

from gpufleet.api.status import InferencePoolStatus, Reason, TierStatus
from gpufleet.api.types import InferencePool
from gpufleet.desired.status import events
from gpufleet.planning.records import Plan
from tests.pools import load_example


def _scaled(reason: Reason) -> list[tuple[str, str]]:
    """The scaling Events of a pass that grows h100 2 -> 3 and shrinks rtx4090 8 -> 7."""

    def status(h100: int, rtx4090: int) -> InferencePoolStatus:
        return InferencePoolStatus(
            tiers=[
                TierStatus(name="h100", desired_replicas=h100),
                TierStatus(name="rtx4090", desired_replicas=rtx4090),
            ]
        )

    plan = Plan(
        tiers={},
        classes={},
        reason=reason,
        message="Scaled h100 2->3, rtx4090 8->7 for realtime demand 9600 tok/s",
        cost_per_hour=0.0,
        cost_per_million_tokens=None,
        energy_kwh_per_million_tokens=None,
        carbon_grams_per_million_tokens=None,
    )
    records = events(InferencePool.model_validate(load_example()), status(2, 8), status(3, 7), plan)
    return [(r.reason, r.message.split(":")[0]) for r in records]


def test_each_tier_scaled_for_demand_is_named_by_its_own_direction() -> None:
    """A pass that moves realtime onto the H100s grows them and shrinks the RTX 4090s: the
    shrinking tier's Event does not say DemandIncreased."""
    assert _scaled(Reason.DEMAND_INCREASED) == [
        (Reason.DEMAND_INCREASED, "Scaled tier h100 of default/llama3-8b from 2 to 3"),
        (Reason.DEMAND_DECREASED, "Scaled tier rtx4090 of default/llama3-8b from 8 to 7"),
    ]


def test_a_scaling_for_another_cause_keeps_the_decisions_reason() -> None:
    assert [reason for reason, _ in _scaled(Reason.OVERFLOW)] == [Reason.OVERFLOW] * 2
    assert [reason for reason, _ in _scaled(Reason.INITIAL)] == [Reason.INITIAL] * 2
