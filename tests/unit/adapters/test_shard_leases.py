"""Shard Lease writes are compare-and-swaps on resourceVersion, several in one round."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.adapters.shards import ShardLeases
from gpufleet.telemetry import Telemetry

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Leases:
    """coordination/v1 Leases as the apiserver keeps them: a replace with a stale
    resourceVersion is a 409 Conflict."""

    def __init__(self) -> None:
        self.stored: dict[str, client.V1Lease] = {}
        self.version = 0

    def _stamp(self, lease: client.V1Lease) -> client.V1Lease:
        self.version += 1
        lease.metadata.resource_version = str(self.version)
        self.stored[lease.metadata.name] = copy.deepcopy(lease)
        return copy.deepcopy(lease)

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease) -> client.V1Lease:
        if body.metadata.name in self.stored:
            raise ApiException(status=409)
        return self._stamp(copy.deepcopy(body))

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: client.V1Lease
    ) -> client.V1Lease:
        if self.stored[name].metadata.resource_version != body.metadata.resource_version:
            raise ApiException(status=409)
        return self._stamp(copy.deepcopy(body))

    def list_namespaced_lease(self, namespace: str, label_selector: str) -> Any:
        return client.V1LeaseList(items=[copy.deepcopy(v) for v in self.stored.values()])


@pytest.fixture
def api() -> Leases:
    return Leases()


def keeper_of(api: Leases, identity: str) -> ShardLeases:
    leases = ShardLeases(
        client.ApiClient(), Telemetry(), namespace="ns", group="g", identity=identity, shards=4
    )
    leases.api = api  # type: ignore[assignment]
    return leases


def test_a_shard_renewed_and_then_released_in_one_round_is_free_at_once(api: Leases) -> None:
    a, b = keeper_of(api, "a"), keeper_of(api, "b")
    assert a.take(0, None, NOW)
    later = NOW + timedelta(seconds=5)
    lease = a.list()["g-shard-0"]
    assert a.renew(lease, later)
    assert a.release(lease), "the release must swap on the version the renewal wrote"
    assert api.stored["g-shard-0"].spec.holder_identity is None
    # b takes it in its next round, without waiting for the Lease to expire.
    assert b.take(0, b.list()["g-shard-0"], later + timedelta(seconds=1))
    assert api.stored["g-shard-0"].spec.holder_identity == "b"


def test_a_held_shard_is_not_taken_and_an_expired_one_is(api: Leases) -> None:
    a, b = keeper_of(api, "a"), keeper_of(api, "b")
    assert a.take(1, None, NOW)
    assert not b.take(1, b.list()["g-shard-1"], NOW + timedelta(seconds=10))
    assert b.take(1, b.list()["g-shard-1"], NOW + timedelta(seconds=16))  # 15 s Lease
    assert not a.renew(a.list()["g-shard-1"], NOW + timedelta(seconds=17))  # b holds it


def test_two_replicas_racing_for_a_free_shard_one_wins(api: Leases) -> None:
    a, b = keeper_of(api, "a"), keeper_of(api, "b")
    assert a.take(2, None, NOW)
    seen = a.list()["g-shard-2"]
    assert a.release(seen)
    free_a, free_b = a.list()["g-shard-2"], b.list()["g-shard-2"]
    assert a.take(2, free_a, NOW)
    assert not b.take(2, free_b, NOW), "b's copy is stale: a 409, b stays without it"


def test_a_pool_s_hold_is_fresh_only_while_its_shard_was_renewed_within_the_deadline(
    api: Leases,
) -> None:
    import asyncio

    from gpufleet.adapters.shards import ShardKeeper
    from gpufleet.sharding import shard_of

    clock = [NOW]

    async def nothing(_: set[int]) -> None:
        return None

    keeper = ShardKeeper(
        keeper_of(api, "a"),
        on_gain=nothing,
        on_lose=nothing,
        renew_deadline=10,
        clock=lambda: clock[0],
    )
    asyncio.run(keeper.step())  # alone: takes all four
    assert keeper.held == {0, 1, 2, 3}
    assert keeper.fresh("ns", "p")
    clock[0] = NOW + timedelta(seconds=10)
    assert keeper.fresh("ns", "p")
    clock[0] = NOW + timedelta(seconds=10.5)  # renewals stuck: stop writing before expiry
    assert keeper.owns("ns", "p") and not keeper.fresh("ns", "p")
    asyncio.run(keeper.step())  # renewed again
    assert keeper.fresh("ns", "p")
    keeper.held.discard(shard_of("ns", "p", 4))
    assert not keeper.fresh("ns", "p")
