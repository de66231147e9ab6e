"""What the operator benchmark reads from outside: an operator's histograms, process CPU and
memory, and every status write of the pools as the apiserver's watch reports it."""

from __future__ import annotations

import math
import os
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.api.constants import GROUP, PLURAL, VERSION
from gpufleet.dev.operator import OperatorProcess

TICKS = os.sysconf("SC_CLK_TCK")


def scrape(operator: OperatorProcess) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of the operator's /metrics by sample name."""
    url = f"http://127.0.0.1:{operator.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def buckets(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> list[float]:
    """The cumulative bucket counts of a histogram, in bucket order (+Inf last)."""
    rows = [(float(labels["le"]), value) for labels, value in samples.get(name + "_bucket", [])]
    return [value for _, value in sorted(rows)]


def bounds(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> list[float]:
    return sorted(float(labels["le"]) for labels, _ in samples.get(name + "_bucket", []))


def quantile(
    q: float,
    after: dict[str, list[tuple[dict[str, str], float]]],
    name: str,
    before: dict[str, list[tuple[dict[str, str], float]]] | None = None,
) -> float:
    """Prometheus's histogram_quantile over the observations between two scrapes:
    linear within the bucket the quantile falls in (NaN without observations)."""
    upper = bounds(after, name)
    counts = buckets(after, name)
    if before is not None and buckets(before, name):
        counts = [a - b for a, b in zip(counts, buckets(before, name), strict=True)]
    if not counts or counts[-1] <= 0:
        return math.nan
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(upper, counts, strict=True):
        if cumulative >= rank:
            if math.isinf(bound):
                return lower  # above the last finite bound: that bound, as Prometheus does
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mib(pid: int) -> float:
    """VmHWM (peak resident set) of a process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


class CpuMeter:
    """CPU used by named processes between two readings, in cores (1.0 = one core busy)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._at = time.monotonic()
        self._used = self._read()

    def _read(self) -> dict[str, float]:
        used = {}
        for name, pid in self.pids.items():
            try:
                used[name] = cpu_seconds(pid)
            except OSError:  # gone (a killed replica)
                used[name] = math.nan
        return used

    def lap(self) -> dict[str, float]:
        """Cores used by each process since the last lap."""
        now, used = time.monotonic(), self._read()
        span = max(now - self._at, 1e-9)
        cores = {name: (used[name] - self._used[name]) / span for name in self.pids}
        self._at, self._used = now, used
        return cores


@dataclass
class Write:
    pool: str
    at: float
    by: str
    generation: int
    observed_generation: int


@dataclass
class StatusWrites:
    """Every change of the pools in a namespace as the apiserver's watch reports it, from a
    thread: who wrote each pool's status (status.observedBy) and when."""

    api: Any
    namespace: str
    writes: list[Write] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> StatusWrites:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(70)

    def _run(self) -> None:
        custom = client.CustomObjectsApi(self.api)
        version = ""
        seen: dict[str, str] = {}  # pool -> resourceVersion of its last status we recorded
        while not self._stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=version,
                    timeout_seconds=60,
                ):
                    item = event["object"]
                    meta = item["metadata"]
                    version = meta["resourceVersion"]
                    status = item.get("status") or {}
                    by = status.get("observedBy")
                    if by and seen.get(meta["name"]) != version:
                        seen[meta["name"]] = version
                        self.writes.append(
                            Write(
                                meta["name"],
                                time.monotonic(),
                                by,
                                int(meta.get("generation") or 0),
                                int(status.get("observedGeneration") or 0),
                            )
                        )
                    if self._stop.is_set():
                        stream.stop()
            except client.ApiException as error:
                if error.status == 410:  # too old: start again from now
                    version = ""
                time.sleep(0.5)
            except Exception:  # the plane going away at the end
                time.sleep(0.5)

    def writers(self, since: float = 0.0) -> dict[str, list[str]]:
        """Per pool, the sequence of replicas that wrote its status, repeats collapsed."""
        runs: dict[str, list[str]] = {}
        for write in list(self.writes):
            if write.at < since:
                continue
            seq = runs.setdefault(write.pool, [])
            if not seq or seq[-1] != write.by:
                seq.append(write.by)
        return runs

    def latest(self) -> dict[str, str]:
        """Per pool, the replica that wrote its status last."""
        return {pool: seq[-1] for pool, seq in self.writers().items()}

    def returns(self) -> int:
        """Pools whose status went back to a replica that had handed it over: two replicas
        writing one pool in turn (never expected: a shard moves once and not back)."""
        return sum(len(seq) != len(set(seq)) for seq in self.writers().values())

    def close_handovers(self, seconds: float, since: float = 0.0) -> int:
        """Writes made from `since` on of a pool by one replica less than `seconds` after
        another replica wrote it (that earlier write may come before `since`)."""
        last: dict[str, Write] = {}
        close = 0
        for write in list(self.writes):
            before = last.get(write.pool)
            if (
                write.at >= since
                and before is not None
                and before.by != write.by
                and write.at - before.at < seconds
            ):
                close += 1
            last[write.pool] = write
        return close

    def observed(self, pool: str, generation: int, after: float) -> float | None:
        """When a status for `generation` (or later) of the pool was first written."""
        for write in list(self.writes):
            if write.pool == pool and write.at >= after and write.observed_generation >= generation:
                return write.at
        return None
