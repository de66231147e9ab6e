"""Integer weights: the one rounding of shares, for the planner and the simulator's oracle."""

from __future__ import annotations

import pytest

from gpufleet.planning.stabilization import integer_weights

pytestmark = pytest.mark.timeout(2)


def test_integer_weights_sum_to_100_by_largest_remainder() -> None:
    assert integer_weights({"a": 1, "b": 1, "c": 1}, ["a", "b", "c"]) == {"a": 34, "b": 33, "c": 33}
    assert integer_weights({"a": 0.0, "b": 0.0}, ["a", "b"]) == {}  # no share, no weight


def test_a_tie_goes_to_the_earlier_tier_whatever_the_float_rounding() -> None:
    # 87.5 and 12.5, an exact tie; computed as share / total * 100 instead, the remainders
    # would differ in the last bit and the later tier would win it.
    assert integer_weights({"a": 0.7, "b": 0.1}, ["a", "b"]) == {"a": 88, "b": 12}
    assert integer_weights({"a": 0.1, "b": 0.7}, ["b", "a"]) == {"b": 88, "a": 12}
