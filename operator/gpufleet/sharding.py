"""Which operator replica reconciles which pool: shards of pools, held through Leases.

With `--shards N` (N > 1) the pools are split into N shards by a stable hash of
namespace/name, the same in every replica and every release; each shard is a
coordination.k8s.io Lease, and a replica reconciles only the pools of the shards it holds
(`gpufleet.adapters.shards` keeps them). Each replica also keeps a member Lease, so every
replica knows which are alive and takes its fair share (`fair_share`): a replica that
joins finds shards released by those above their share; a replica that dies stops
renewing, and its shards are taken by the others once their Leases expire.

A shard changes hands only through its Lease: a replica stops every loop of a shard (and
waits for a pass in flight to end) before it releases the Lease, and takes a shard only
when its Lease is free or expired, so no two replicas reconcile one pool at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard of a pool: the first 8 bytes of SHA-256("namespace/name") modulo N.
    Python's hash() is salted per process; this is the same everywhere."""
    if shards <= 1:
        return 0
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def fair_share(shards: int, members: Collection[str], me: str) -> int:
    """How many shards `me` takes among the live `members` (itself included): N // M each,
    and one more for the first N % M members by name, so the shares add up to N exactly
    and every replica computes the same split from the same member list."""
    ranked = sorted(set(members) | {me})
    base, extra = divmod(shards, len(ranked))
    return base + (1 if ranked.index(me) < extra else 0)
