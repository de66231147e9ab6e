"""Bounded least-recently-used caches for the planner's costly pure steps (the solvers).

A pass is a pure function of its inputs, and so is each solve in it: the same program
handed to HiGHS gives the same answer. An operator re-plans every pool each interval, and
an idle pool hands the solvers the same programs pass after pass; remembering the answer
is then the same as computing it again, only cheaper. A cache here is keyed by everything
the step reads, exactly (no rounding, no tolerance), so a hit can only return what a solve
would have returned; it is bounded, so a process planning many pools holds at most
`maxsize` answers per cache, and it is locked, since reconciles run on several threads.

`bypassed()` turns every cache off for a block: the tests plan with and without them and
compare, and the benchmark measures both side by side.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

V = TypeVar("V")

_bypass = threading.local()


@dataclass(frozen=True)
class Stats:
    hits: int
    misses: int
    size: int
    maxsize: int


class Lru(Generic[V]):
    """At most `maxsize` values by key; the least recently used goes first."""

    def __init__(self, name: str, maxsize: int) -> None:
        self.name = name
        self.maxsize = maxsize
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        _ALL.append(self)

    def get(self, key: Hashable) -> V | None:
        if getattr(_bypass, "on", False):
            return None
        with self._lock:
            value = self._values.get(key)
            if value is None:
                self._misses += 1
                return None
            self._values.move_to_end(key)
            self._hits += 1
            return value

    def put(self, key: Hashable, value: V) -> None:
        if getattr(_bypass, "on", False):
            return
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.maxsize:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._hits = self._misses = 0

    def stats(self) -> Stats:
        with self._lock:
            return Stats(self._hits, self._misses, len(self._values), self.maxsize)


_ALL: list[Lru[Any]] = []


def caches() -> tuple[Lru[Any], ...]:
    """Every cache the planner keeps (for /metrics, tests and the benchmark)."""
    return tuple(_ALL)


def clear_all() -> None:
    for cache in _ALL:
        cache.clear()


@contextmanager
def bypassed() -> Iterator[None]:
    """Every cache off in this thread for the block: each step computes its answer."""
    before = getattr(_bypass, "on", False)
    _bypass.on = True
    try:
        yield
    finally:
        _bypass.on = before


def array_key(*arrays: np.ndarray) -> tuple[object, ...]:
    """A key equal for two argument lists exactly when the solver is handed the same
    program: a vector by dtype, shape and every byte (0.0 and -0.0 differ, NaN equals
    itself: both on the safe side); a matrix by its nonzeros, where and their bytes, as
    scipy hands it to HiGHS (a sparse matrix, -0.0 dropped like any zero), so that a key
    stays small when the matrix grows with a pool."""
    key: list[object] = []
    for a in arrays:
        if a.ndim == 2:
            where = np.flatnonzero(a)
            key.append((a.dtype.str, a.shape, where.tobytes(), a.ravel()[where].tobytes()))
        else:
            key.append((a.dtype.str, a.shape, a.tobytes()))
    return tuple(key)
