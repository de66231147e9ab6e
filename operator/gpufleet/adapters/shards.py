"""Shard Leases (gpufleet.sharding): one member Lease per replica, one Lease per shard.

Every `renew_seconds` a replica lists the group's Leases (one call), renews its member
Lease, renews the shard Leases it holds, releases the shards above its fair share and takes
free or expired ones up to it. Every write is a compare-and-swap on the Lease's
resourceVersion, so of two replicas racing for a shard one gets a 409 and leaves it.

Before a shard's Lease is released its pools' loops are stopped and their passes in flight
awaited (`on_lose`); a shard that could not be renewed for `renew_deadline` seconds (less
than the Lease's duration, as client-go's renewDeadline) is given up the same way, so its
pools are idle before anyone else may take it. Replicas that disagree on the number of
shards (a rolling change of `--shards`) hold none until only one number is left.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.adapters.lease import parse_time
from gpufleet.api.constants import GROUP, PLURAL, VERSION
from gpufleet.sharding import fair_share, shard_of
from gpufleet.telemetry import Telemetry

log = logging.getLogger(__name__)

LABEL_GROUP = f"{GROUP}/shard-group"
ANNOTATION_SHARDS = f"{GROUP}/shards"
ANNOTATION_IDENTITY = f"{GROUP}/identity"
# A coordination.k8s.io/v1 Lease as the client returns it (a V1Lease; its optional fields
# are read as the apiserver fills them for a Lease this module wrote).
Lease = Any
# A member Lease expired this many durations ago is deleted by whoever sees it.
PRUNE_AFTER_DURATIONS = 20


def _slug(identity: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:200] or "replica"


class ShardLeases:
    """The Lease reads and writes of one replica (blocking; called from a worker thread)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        telemetry: Telemetry,
        *,
        namespace: str,
        group: str,
        identity: str,
        shards: int,
        lease_seconds: int = 15,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.telemetry = telemetry
        self.namespace = namespace
        self.group = group
        self.identity = identity
        self.shards = shards
        self.lease_seconds = lease_seconds

    def shard_name(self, shard: int) -> str:
        return f"{self.group}-shard-{shard}"

    @property
    def member_name(self) -> str:
        return f"{self.group}-member-{_slug(self.identity)}"

    def list(self) -> dict[str, Lease]:
        leases: list[Lease] = self.api.list_namespaced_lease(
            self.namespace, label_selector=f"{LABEL_GROUP}={self.group}"
        ).items
        return {str(lease.metadata.name): lease for lease in leases}

    def expired(self, lease: Lease, now: datetime) -> bool:
        spec = lease.spec or client.V1LeaseSpec()
        if not spec.holder_identity:
            return True
        renewed = parse_time(spec.renew_time) or parse_time(spec.acquire_time)
        duration = timedelta(seconds=spec.lease_duration_seconds or self.lease_seconds)
        return renewed is None or renewed + duration < now

    def members(self, leases: dict[str, Lease], now: datetime) -> dict[str, int]:
        """Live replicas (their member Lease not expired) and the shard count each runs."""
        live: dict[str, int] = {}
        for name, lease in leases.items():
            if not name.startswith(f"{self.group}-member-") or self.expired(lease, now):
                continue
            annotations = lease.metadata.annotations or {}
            try:
                live[lease.spec.holder_identity] = int(annotations.get(ANNOTATION_SHARDS, "0"))
            except ValueError:
                live[lease.spec.holder_identity] = 0
        return live

    def heartbeat(self, leases: dict[str, Lease], now: datetime) -> bool:
        """Create or renew this replica's member Lease."""
        lease = leases.get(self.member_name)
        if lease is None:
            return self._create(self.member_name, now, {ANNOTATION_SHARDS: str(self.shards)})
        lease.metadata.annotations = {
            **(lease.metadata.annotations or {}),
            ANNOTATION_SHARDS: str(self.shards),
        }
        return self._write(lease, now, acquire=lease.spec.holder_identity != self.identity)

    def renew(self, lease: Lease, now: datetime) -> bool:
        if (lease.spec.holder_identity or "") != self.identity:
            return False
        return self._write(lease, now, acquire=False)

    def take(self, shard: int, lease: Lease | None, now: datetime) -> bool:
        """Take a shard whose Lease is missing, free or expired."""
        if lease is None:
            return self._create(self.shard_name(shard), now, {})
        if not self.expired(lease, now):
            return False
        return self._write(lease, now, acquire=True)

    def release(self, lease: Lease) -> bool:
        """Give a held shard back at once (holder cleared), so another takes it now."""
        if (lease.spec.holder_identity or "") != self.identity:
            return False
        lease.spec.holder_identity = None
        lease.spec.renew_time = None
        lease.spec.acquire_time = None
        return self._replace(lease)

    def prune(self, leases: dict[str, Lease], now: datetime) -> None:
        """Delete member Leases of replicas long gone (a pod name and pid never return)."""
        stale = timedelta(seconds=self.lease_seconds * PRUNE_AFTER_DURATIONS)
        for name, lease in leases.items():
            if not name.startswith(f"{self.group}-member-") or name == self.member_name:
                continue
            renewed = parse_time(lease.spec.renew_time) or parse_time(lease.spec.acquire_time)
            if renewed is not None and renewed + stale > now:
                continue
            try:
                self.api.delete_namespaced_lease(
                    name,
                    self.namespace,
                    body=client.V1DeleteOptions(
                        preconditions=client.V1Preconditions(
                            resource_version=lease.metadata.resource_version
                        )
                    ),
                )
                self.telemetry.api_writes.labels("delete", "leases").inc()
            except ApiException as error:
                if error.status not in (404, 409):
                    raise

    def _create(self, name: str, now: datetime, annotations: dict[str, str]) -> bool:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=self.namespace,
                labels={LABEL_GROUP: self.group},
                annotations=annotations or None,
            ),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity,
                acquire_time=now,
                renew_time=now,
                lease_duration_seconds=self.lease_seconds,
                lease_transitions=0,
            ),
        )
        try:
            self.api.create_namespaced_lease(self.namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        self.telemetry.api_writes.labels("create", "leases").inc()
        return True

    def _write(self, lease: Lease, now: datetime, *, acquire: bool) -> bool:
        spec = lease.spec
        if acquire:
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.acquire_time = now
        spec.holder_identity = self.identity
        spec.renew_time = now
        spec.lease_duration_seconds = self.lease_seconds
        return self._replace(lease)

    def _replace(self, lease: Lease) -> bool:
        try:
            # The resourceVersion read with the Lease makes this a compare-and-swap.
            written: Lease = self.api.replace_namespaced_lease(
                lease.metadata.name, self.namespace, lease
            )
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        self.telemetry.api_writes.labels("update", "leases").inc()
        # The next write of this round (a renewed shard released) swaps on the new version.
        lease.metadata.resource_version = written.metadata.resource_version
        return True


Shards = Callable[[set[int]], Awaitable[None]]


def list_pools(
    api_client: client.ApiClient, namespaces: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """(namespace, name) of every pool, in the watched namespaces or all of them: the pools
    of a shard just taken, which no watch event may announce for a while."""
    custom: Any = client.CustomObjectsApi(api_client)  # answers are plain dicts
    found: list[dict[str, Any]] = []
    for namespace in namespaces:
        found += custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
    if not namespaces:
        found = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in found]


class ShardKeeper:
    """Holds this replica's fair share of the shards; says which pools are its own."""

    def __init__(
        self,
        leases: ShardLeases,
        *,
        on_gain: Shards,
        on_lose: Shards,
        renew_seconds: float = 5.0,
        renew_deadline: float = 10.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.leases = leases
        self.on_gain = on_gain
        self.on_lose = on_lose
        self.renew_seconds = renew_seconds
        self.renew_deadline = renew_deadline
        self.clock = clock
        self.held: set[int] = set()
        self._renewed: dict[int, datetime] = {}

    @property
    def shards(self) -> int:
        return self.leases.shards

    def owns(self, namespace: str, name: str) -> bool:
        return shard_of(namespace, name, self.shards) in self.held

    def fresh(self, namespace: str, name: str) -> bool:
        """Whether the pool's shard is held and was renewed within the renew deadline (the
        Lease lasts longer): checked by each pass as it starts, from its worker thread, so
        a keeper whose renewals are stuck stops the writes before its Leases expire."""
        shard = shard_of(namespace, name, self.shards)
        renewed = self._renewed.get(shard)
        return (
            shard in self.held
            and renewed is not None
            and (self.clock() - renewed).total_seconds() <= self.renew_deadline
        )

    async def run(self) -> None:
        """Keep the fair share until cancelled."""
        while True:
            try:
                await self.step()
            except ApiException as error:
                log.warning("Failed to keep shard leases: %s", error.reason)
                await self._give_up_stale()
            await asyncio.sleep(self.renew_seconds)

    async def step(self) -> None:
        """One round: heartbeat, renew, release above the fair share, take up to it."""
        leases = await asyncio.to_thread(self.leases.list)
        now = self.clock()
        await asyncio.to_thread(self.leases.heartbeat, leases, now)
        members = self.leases.members(leases, now)
        members[self.leases.identity] = self.shards
        agree = all(n == self.shards for n in members.values())
        share = fair_share(self.shards, members, self.leases.identity) if agree else 0
        if not agree:
            log.warning("Replicas run different shard counts %s: holding none", members)

        lost: set[int] = set()
        for shard in sorted(self.held):
            lease = leases.get(self.leases.shard_name(shard))
            if lease is not None and await asyncio.to_thread(self.leases.renew, lease, now):
                self._renewed[shard] = now
            else:
                lost.add(shard)
        if lost:
            log.error("Lost shards %s", sorted(lost))
            await self._drop(lost)
        await self._give_up_stale()

        extra = set(sorted(self.held)[share:]) if len(self.held) > share else set()
        if extra:
            await self._drop(extra)  # loops stopped first, then the Leases go
            for shard in sorted(extra):
                lease = leases.get(self.leases.shard_name(shard))
                if lease is not None:
                    await asyncio.to_thread(self.leases.release, lease)
            log.info("Released shards %s (fair share %d of %d)", sorted(extra), share, self.shards)

        gained: set[int] = set()
        for shard in range(self.shards):
            if len(self.held) + len(gained) >= share:
                break
            if shard in self.held:
                continue
            lease = leases.get(self.leases.shard_name(shard))
            if await asyncio.to_thread(self.leases.take, shard, lease, now):
                gained.add(shard)
                self._renewed[shard] = now
        if gained:
            self.held |= gained
            log.info("Took shards %s; holding %s", sorted(gained), sorted(self.held))
            await self.on_gain(gained)
        self._export()
        if len(members) > 1:
            await asyncio.to_thread(self.leases.prune, leases, now)

    async def release_all(self) -> None:
        """The process stops: loops first, then every held Lease, so others take them now."""
        held = set(self.held)
        if not held:
            return
        await self._drop(held)
        leases = await asyncio.to_thread(self.leases.list)
        for shard in sorted(held):
            lease = leases.get(self.leases.shard_name(shard))
            if lease is not None:
                await asyncio.to_thread(self.leases.release, lease)

    async def _give_up_stale(self) -> None:
        now = self.clock()
        stale = {
            s
            for s in self.held
            if (now - self._renewed.get(s, now)).total_seconds() > self.renew_deadline
        }
        if stale:
            log.error(
                "Could not renew shards %s for %.0f s: giving them up", stale, self.renew_deadline
            )
            await self._drop(stale)

    async def _drop(self, shards: Iterable[int]) -> None:
        dropped = set(shards) & self.held
        if not dropped:
            return
        self.held -= dropped
        for shard in dropped:
            self._renewed.pop(shard, None)
        self._export()
        await self.on_lose(dropped)

    def _export(self) -> None:
        self.leases.telemetry.shards_held.set(len(self.held))
        self.leases.telemetry.leader.set(1 if self.held else 0)
