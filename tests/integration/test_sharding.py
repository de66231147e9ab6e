"""Sharded operator replicas on the real plane: disjoint shares, takeover, rebalance.

Each replica is a real `gpufleet run --shards 4` process; the shards are real Leases. A
pool's `status.observedBy` names the replica that wrote its status last. A watch on the
pools records every status write with its writer and time: it shows which replica
reconciled each pool, that no pool went back and forth (a replica started first holds every
shard until the next one's member Lease shows up, then hands half over: one move per pool,
never back), and that after a kill no survivor writes a pool within an interval of the dead
replica's last write (the Lease must expire first).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tools.operator_probes import StatusWrites

from gpufleet.sharding import shard_of
from tests.harness import OperatorProcess, create_pool, wait_for
from tests.pools import pool

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

SHARDS = 4
POOLS = [f"p{i}" for i in range(8)]
LEASE_SECONDS = 15  # the keeper's Lease duration
RENEW_SECONDS = 5


def replica(plane: Any, namespace: str, log: Path) -> OperatorProcess:
    args = ["--namespace", namespace, "--lease-namespace", namespace]
    return OperatorProcess(
        plane.kubeconfig, log, *args, "--lease-name", "shards", "--shards", str(SHARDS)
    ).start()


def holders(api: Any, namespace: str) -> dict[int, str]:
    leases = client.CoordinationV1Api(api).list_namespaced_lease(namespace).items
    found = {}
    for lease in leases:
        name = lease.metadata.name
        if name.startswith("shards-shard-") and lease.spec.holder_identity:
            found[int(name.rsplit("-", 1)[1])] = lease.spec.holder_identity
    return found


def identity(process: OperatorProcess) -> str:
    assert process.proc is not None
    return f"-{process.proc.pid}"


def held(process: OperatorProcess) -> int:
    return int(process.metric("gpufleet_shards_held"))


@pytest.fixture
def pools(kube_api: Any, crd: None, namespace: str) -> Iterator[list[str]]:
    for name in POOLS:
        body = pool(name, namespace=namespace)
        body["spec"]["scaling"]["intervalSeconds"] = 5
        create_pool(kube_api, namespace, body)
    yield POOLS


def owned_as_leased(api: Any, namespace: str, writes: StatusWrites) -> bool:
    """Every pool observed by the holder of its shard's Lease."""
    lease = holders(api, namespace)
    seen = writes.latest()
    return len(seen) == len(POOLS) and all(
        lease.get(shard_of(namespace, name, SHARDS)) == by for name, by in seen.items()
    )


def test_two_replicas_split_the_shards_and_one_takes_over_when_the_other_dies(
    plane: Any, kube_api: Any, namespace: str, pools: list[str], tmp_path: Path
) -> None:
    a = replica(plane, namespace, tmp_path / "a.log")
    b = replica(plane, namespace, tmp_path / "b.log")
    try:
        with StatusWrites(kube_api, namespace) as writes:
            wait_for("2 shards each", lambda: held(a) == 2 and held(b) == 2, 60)
            wait_for(
                "every pool reconciled by its shard's holder",
                lambda: owned_as_leased(kube_api, namespace, writes),
                60,
            )
            before = writes.latest()
            writers = {by.rsplit("-", 1)[1] for by in before.values()}
            assert writers == {identity(a)[1:], identity(b)[1:]}, "both reconcile some pools"
            settled = {name: len(seen) for name, seen in writes.writers().items()}
            time.sleep(3 * 5)  # three intervals: no pool changes writer
            assert {n: len(seen) for n, seen in writes.writers().items()} == settled, (
                writes.writers()
            )

            a.kill()
            killed = time.monotonic()
            wait_for("b to hold every shard", lambda: held(b) == SHARDS, 2 * LEASE_SECONDS + 10)
            took = time.monotonic() - killed
            wait_for(
                "a's pools reconciled by b",
                lambda: all(by.endswith(identity(b)) for by in writes.latest().values()),
                30,
            )
            # Each pool changed hands at most once since, from a to b, never back.
            for name, seen in writes.writers().items():
                assert len(seen) - settled[name] <= 1, (name, seen)
                assert seen[-1].endswith(identity(b)), (name, seen)
            moved = sum(len(seen) > settled[n] for n, seen in writes.writers().items())
            assert moved > 0
            print(f"\nb held every shard {took:.1f} s after a was killed; {moved} pools moved")
            assert took <= LEASE_SECONDS + 2 * RENEW_SECONDS + 5
            time.sleep(5)  # an interval more: the watch has seen the last writes
            assert writes.returns() == 0, writes.writers()
            assert writes.close_handovers(5, since=killed) == 0
            assert any(by.endswith(identity(a)) for seq in writes.writers().values() for by in seq)
    finally:
        a.stop()
        b.stop()


def test_a_replica_that_joins_gets_its_share_and_no_pool_has_two_writers(
    plane: Any, kube_api: Any, namespace: str, pools: list[str], tmp_path: Path
) -> None:
    a = replica(plane, namespace, tmp_path / "a.log")
    b = c = None
    try:
        with StatusWrites(kube_api, namespace) as writes:
            wait_for("a to hold every shard", lambda: held(a) == SHARDS, 60)
            wait_for(
                "every pool reconciled by a",
                lambda: owned_as_leased(kube_api, namespace, writes),
                60,
            )
            b = replica(plane, namespace, tmp_path / "b.log")
            c = replica(plane, namespace, tmp_path / "c.log")
            started = time.monotonic()
            wait_for(
                "shares of 2, 1 and 1",
                lambda: sorted([held(a), held(b), held(c)]) == [1, 1, 2],
                60,
            )
            took = time.monotonic() - started
            wait_for(
                "every pool reconciled by its shard's holder",
                lambda: owned_as_leased(kube_api, namespace, writes),
                60,
            )
            leases = holders(kube_api, namespace)
            assert len(leases) == SHARDS and len(set(leases.values())) == 3
            # A pool moves from a to its new holder once and never back.
            for name, seen in writes.writers().items():
                assert len(seen) == len(set(seen)) <= 2, (name, seen)
            time.sleep(5)
            assert writes.returns() == 0, writes.writers()  # every write, not samples
            assert len(writes.writers()) == len(POOLS)
            print(f"\nRebalanced to 2/1/1 shards {took:.1f} s after two replicas joined")
    finally:
        for process in (a, b, c):
            if process is not None:
                process.stop()
