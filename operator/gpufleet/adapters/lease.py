"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does.

Only the holder acts; the others wait and take over when the holder stops renewing for
longer than the lease duration. Standbys only read the Lease, so "only one writes" holds
for every object, the Lease included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpufleet.telemetry import Telemetry

log = logging.getLogger(__name__)


def parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


class LeaseElector:
    """Acquire and keep a Lease for `identity`."""

    def __init__(
        self,
        api_client: client.ApiClient,
        telemetry: Telemetry,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = 15,
        renew_seconds: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.telemetry = telemetry
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.clock = clock
        self.holder: str | None = None

    def try_acquire(self) -> bool:
        """One attempt to take or renew the Lease; True while we hold it."""
        now = self.clock()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            return self._create(now)
        spec = lease.spec or client.V1LeaseSpec()
        self.holder = spec.holder_identity
        renewed = parse_time(spec.renew_time) or parse_time(spec.acquire_time)
        duration = timedelta(seconds=spec.lease_duration_seconds or self.lease_seconds)
        expired = renewed is None or renewed + duration < now
        if spec.holder_identity != self.identity and not expired:
            return False
        transitions = spec.lease_transitions or 0
        if spec.holder_identity != self.identity:
            transitions += 1
            spec.acquire_time = now
        spec.holder_identity = self.identity
        spec.renew_time = now
        spec.lease_duration_seconds = self.lease_seconds
        spec.lease_transitions = transitions
        lease.spec = spec
        try:
            # The resourceVersion in `lease` makes this a compare-and-swap: of two standbys
            # racing for an expired Lease, one gets a 409 and stays standby.
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        self.telemetry.api_writes.labels("update", "leases").inc()
        self.holder = self.identity
        return True

    def _create(self, now: datetime) -> bool:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
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
        self.holder = self.identity
        return True

    async def acquire(self) -> None:
        """Wait until this process holds the Lease."""
        announced = False
        while True:
            try:
                if await asyncio.to_thread(self.try_acquire):
                    log.info(
                        "Acquired leader lease %s/%s as %s",
                        self.namespace,
                        self.name,
                        self.identity,
                    )
                    self.telemetry.leader.set(1)
                    return
            except ApiException as error:
                log.warning(
                    "Failed to read lease %s/%s: %s", self.namespace, self.name, error.reason
                )
            if not announced:
                log.info(
                    "Waiting for leader lease %s/%s, held by %s",
                    self.namespace,
                    self.name,
                    self.holder,
                )
                announced = True
            await asyncio.sleep(self.renew_seconds)

    async def hold(self) -> None:
        """Renew until renewal fails for a whole lease duration; then return (leadership lost)."""
        last_renewed = self.clock()
        while True:
            await asyncio.sleep(self.renew_seconds)
            try:
                if await asyncio.to_thread(self.try_acquire):
                    last_renewed = self.clock()
                    continue
                log.error("Lost leader lease %s/%s to %s", self.namespace, self.name, self.holder)
                break
            except ApiException as error:
                log.warning(
                    "Failed to renew lease %s/%s: %s", self.namespace, self.name, error.reason
                )
            if (self.clock() - last_renewed).total_seconds() > self.lease_seconds:
                log.error(
                    "Could not renew leader lease %s/%s for %ss",
                    self.namespace,
                    self.name,
                    self.lease_seconds,
                )
                break
        self.telemetry.leader.set(0)
