"""The weights each pool's passes applied, kept for the windows that span them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpufleet.api.status import InferencePoolStatus
from gpufleet.planning.weighthistory import WeightHistory

pytestmark = pytest.mark.timeout(2)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _status(h100: int) -> InferencePoolStatus:
    weights = [{"tier": "h100", "weight": h100}, {"tier": "rtx4090", "weight": 100 - h100}]
    return InferencePoolStatus.model_validate({"classes": [{"name": "batch", "weights": weights}]})


def test_a_pass_that_changes_nothing_adds_nothing() -> None:
    history = WeightHistory()
    history.applied("ns/pool", T0, _status(10), 60.0)
    history.applied("ns/pool", T0 + timedelta(seconds=30), _status(10), 60.0)
    (only,) = history.of("ns/pool")
    assert only.since == T0
    assert only.weights == {"batch": {"h100": 10, "rtx4090": 90}}


def test_what_no_window_reaches_is_dropped_but_the_weights_in_force_at_its_start() -> None:
    history = WeightHistory()
    for i, share in enumerate((10, 60, 20, 100)):
        history.applied("ns/pool", T0 + timedelta(seconds=30 * i), _status(share), 60.0)
    # At 90 s a 60 s window starts at 30 s: 60% held from then; 10% (0 s) is gone. A
    # tier at weight 0 is not kept.
    kept = history.of("ns/pool")
    assert [e.since for e in kept] == [T0 + timedelta(seconds=s) for s in (30, 60, 90)]
    assert kept[-1].weights == {"batch": {"h100": 100}}
    assert history.of("other/pool") == ()


def test_it_holds_at_most_its_bound_of_pools_least_recently_applied_first() -> None:
    history = WeightHistory(max_pools=2)
    for name in ("a", "b", "c"):
        history.applied(name, T0, _status(50), 60.0)
    assert (history.of("a"), len(history.of("b")), len(history.of("c"))) == ((), 1, 1)
