"""Which replica reconciles which pool: a stable shard per pool, fair shares that add up."""

from __future__ import annotations

from collections import Counter

import pytest

from gpufleet.sharding import fair_share, shard_of


def test_a_pools_shard_is_the_same_in_every_process_and_release() -> None:
    # SHA-256("llm/llama3-8b") begins 4ecba36f7ac0c1d9: modulo 4 and 7, 1. A change of
    # the hash would move pools between replicas of different releases mid-upgrade.
    assert shard_of("llm", "llama3-8b", 4) == 1
    assert shard_of("llm", "llama3-8b", 7) == 1
    assert shard_of("llm", "llama3-8b", 1) == 0


def test_shards_spread_pools_evenly() -> None:
    counts = Counter(shard_of("ns", f"pool-{i}", 8) for i in range(4000))
    assert set(counts) == set(range(8))
    assert max(counts.values()) < 1.15 * 4000 / 8


@pytest.mark.parametrize(("shards", "members"), [(4, 1), (4, 2), (4, 3), (5, 3), (2, 5), (64, 7)])
def test_fair_shares_add_up_to_every_shard_and_differ_by_at_most_one(
    shards: int, members: int
) -> None:
    names = [f"replica-{i}" for i in range(members)]
    shares = [fair_share(shards, names, me) for me in names]
    assert sum(shares) == shards
    assert max(shares) - min(shares) <= 1
    # The split is the same whichever replica computes it, and whatever order it lists.
    assert shares == [fair_share(shards, list(reversed(names)), me) for me in names]
