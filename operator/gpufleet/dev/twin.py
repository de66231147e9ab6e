"""The fleet twin: plays the vLLM pods of every InferencePool in the local control plane.

kwok marks pods Running and Ready, but nothing runs in them, and nothing may ever connect to
a pod IP. The twin stands in for the fleet and its gateway, on 127.0.0.1 only:

- It watches (polls) the API: InferencePools, their pods, the nodes and the HTTPRoutes the
  operator wrote. A pod that has been Ready on a node that still exists is a replica; it
  serves while it is Ready and not terminating. A pod bound to a node that is gone stops at
  once (its queued requests go back to the gateway, those mid-decode fail), as a vanished
  consumer GPU box would, although its Pod object stays Running for another minute. If a
  node of that name comes back while the pod object still exists, its kubelet runs the pod
  again: it serves again, as a fresh replica.
- It plays the gateway: each pool's load (`gpufleet.dev.loadstory`: tokens/s per class over
  time, or a trace) is split per class by the weights of the pool's HTTPRoute, and within a
  tier to the serving replica with the fewest requests in flight. A tier picked with no
  serving replica passes the request to the class's other weighted tiers (a retry); with
  none left it fails (503), as does a request for a pool with no HTTPRoute (404).
- Each replica is the simulator's continuous-batching engine (`gpufleet.sim.replica`) with
  the parameters of its tier's `ReplicaModel` (`gpufleet.planning.profiles`): the one model
  the planner plans with and `gpufleet simulate` replays. Time is real time.
- It serves each replica's metrics under vLLM's names and buckets, as the pod's command line
  sets them (`--custom-histogram-buckets` for TTFT, `--max-model-len` for prompt lengths) at
  `/pods/<namespace>/<pod>/metrics` and writes a Prometheus file_sd target file with the
  labels the operator's PromQL needs (`gpufleet.dev.twinhttp`).
- Like a production gateway it counts per route and class at `/gateway/metrics`:
  `gpufleet_dev_gateway_tokens_total` (tokens offered: prompt plus requested output, at
  arrival, so a class's `demandQuery` sees demand the fleet cannot serve yet),
  `gpufleet_dev_gateway_requests_total` (by backend tier and code) and the
  `gpufleet_dev_gateway_ttft_seconds` histogram per class. Those books, and every request's
  exact TTFT that tests compare against, are kept by `gpufleet.dev.twinledger`.

Stated simplifications: generated tokens are counted when a request completes (vLLM counts
them as they stream); `vllm:kv_cache_usage_perc` is an estimate from the running sequences
and the KV room left beside the fp16 weights (`KV_BYTES_PER_TOKEN_PER_BILLION` in
`gpufleet.dev.twinworld`); a Ready pod serves at once (kwok's pods are Ready at once; a real
one turns Ready after loading the model); a deleted pod finishes its in-flight requests for
up to its pool's drain time, then the rest are cut (`gpufleet.dev.twindrain`).

`gpufleet dev twin` (`gpufleet.commands.dev_twin`) runs it against a plane under a load
schedule.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpufleet.dev.loadstory import Arrival, LoadSource, PoissonLoad
from gpufleet.dev.twindrain import DrainBook, DrainOutcome
from gpufleet.dev.twinhttp import handler, target_groups, write_atomically
from gpufleet.dev.twinledger import ClassWindow, Ledger
from gpufleet.dev.twinmetrics import render_gateway, render_pod
from gpufleet.dev.twinworld import (
    DEFAULT_KV_TOKENS,
    PoolView,
    RouteChange,
    TwinReplica,
    World,
    pod_metrics,
    read_world,
)
from gpufleet.sim.replica import Replica

log = logging.getLogger(__name__)


# -- the twin -------------------------------------------------------------------------------


class FleetTwin:
    """The fleet twin. `start()` / `stop()`, or use it as a context manager.

    api_client: a kubernetes ApiClient (only the poll thread uses it); None: no polling,
    the world comes from `observe()` and `tick()` may be driven by hand (tests).
    targets_file: where to write the file_sd targets (a `*.json` Prometheus's file_sd
    reads). Times are `time.monotonic()` seconds, the same clock tests read.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        targets_file: Path,
        port: int = 0,
        seed: int = 0,
        poll_seconds: float = 0.5,
        tick_seconds: float = 0.1,
    ) -> None:
        self._api = api_client
        self.targets_file = targets_file
        self._port = port
        self._poll_seconds = poll_seconds
        self._tick_seconds = tick_seconds
        self._route_rng = random.Random(seed)
        self._seed = seed
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: ThreadingHTTPServer | None = None
        self._pending_world: World | None = None
        self._world_seen = threading.Event()
        # Applied state.
        self._nodes: frozenset[str] = frozenset()
        self._views: dict[tuple[str, str], PoolView] = {}
        self._versions: dict[tuple[str, str], str] = {}
        self._routes: dict[tuple[str, str], Mapping[str, Mapping[str, int]]] = {}
        self._replicas: dict[str, TwinReplica] = {}  # by pod uid
        self._drains = DrainBook()
        self._loads: dict[tuple[str, str], LoadSource] = {}
        self._ledger = Ledger()
        self._route_log: list[RouteChange] = []
        self._targets_written: str | None = None
        self._last = time.monotonic()
        self.poll_errors = 0

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the twin is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_seconds: float = 30.0) -> FleetTwin:
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), handler(self))
        self._server.daemon_threads = True
        self._last = time.monotonic()
        self._write_targets()
        loops = [("twin-http", self._server.serve_forever), ("twin-tick", self._tick_loop)]
        if self._api is not None:
            loops.append(("twin-poll", self._poll_loop))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        if not self._world_seen.wait(timeout_seconds):
            self.stop()
            raise RuntimeError(f"The twin could not read the API within {timeout_seconds:.0f} s")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads.clear()
        with contextlib.suppress(OSError):
            self.targets_file.unlink()

    def __enter__(self) -> FleetTwin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests and the demo drive and read --------------------------------------------

    def set_load(self, namespace: str, pool: str, source: LoadSource | None) -> None:
        """The load of one pool from now on (None: no requests)."""
        with self._lock:
            if source is None:
                self._loads.pop((namespace, pool), None)
            else:
                self._loads[(namespace, pool)] = source

    def poisson(self, namespace: str, pool: str) -> PoissonLoad:
        """The pool's Poisson load, created (silent) if it has none yet."""
        with self._lock:
            source = self._loads.get((namespace, pool))
            if not isinstance(source, PoissonLoad):
                source = PoissonLoad(seed=self._seed)
                self._loads[(namespace, pool)] = source
            return source

    def window(
        self, namespace: str, pool: str, traffic_class: str, start: float, end: float | None = None
    ) -> ClassWindow:
        """Exact outcomes of a class's requests whose first token or failure fell in the window."""
        with self._lock:
            view = self._views.get((namespace, pool))
            objective = view.objectives.get(traffic_class, math.inf) if view else math.inf
            stop = math.inf if end is None else end
            values = self._ledger.ttfts((namespace, pool, traffic_class), start, stop)
        return ClassWindow.of(values, objective)

    def serving(self, namespace: str, pool: str) -> dict[str, int]:
        """Serving replicas per tier, as the twin plays them now."""
        with self._lock:
            return self._serving_counts((namespace, pool))

    def serving_pods(self, namespace: str, pool: str) -> set[str]:
        """The names of the pods whose replicas serve, as the twin plays them now."""
        with self._lock:
            return {r.info.name for r in self._serving((namespace, pool))}

    def routed(self, namespace: str, pool: str) -> dict[str, dict[str, int]]:
        """Requests per class and backend tier so far (failed ones under tier '')."""
        with self._lock:
            return self._ledger.routed(namespace, pool)

    def drained(self, namespace: str, pool: str) -> DrainOutcome:
        """Requests the pool's deleted replicas held: finished in the drain time, or cut;
        and those lost with a vanished node."""
        with self._lock:
            return self._drains.outcome(namespace, pool)

    def arrived(self, namespace: str, pool: str) -> int:
        """Requests the pool's gateway has taken so far."""
        with self._lock:
            return self._ledger.arrived.get((namespace, pool), 0)

    def answered(self, namespace: str, pool: str) -> dict[str, int]:
        """The gateway's answers so far by response code, over classes and tiers: 200 a
        replica took the request, 502 its stream was cut, 503 no replica, 404 no route."""
        with self._lock:
            return self._ledger.answered(namespace, pool)

    def served_tokens(self, namespace: str, pool: str) -> int:
        """Prompt plus generated tokens the pool's replicas have served so far."""
        with self._lock:
            return self._ledger.served_tokens(namespace, pool)

    def route_changes(self, namespace: str, pool: str) -> list[RouteChange]:
        with self._lock:
            return [c for c in self._route_log if (c.namespace, c.pool) == (namespace, pool)]

    # -- polling the API ------------------------------------------------------------------

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                world = read_world(self._api)
            except Exception as error:  # the apiserver restarting, a timeout: try again
                self.poll_errors += 1
                log.debug("Failed to read the API: %s", error)
            else:
                self.observe(world)
            self._stop.wait(self._poll_seconds)

    def observe(self, world: World) -> None:
        """A new view of the API; applied at the start of the next tick."""
        with self._lock:
            self._pending_world = world
        self._world_seen.set()

    # -- the clock ------------------------------------------------------------------------

    def _tick_loop(self) -> None:
        while not self._stop.wait(self._tick_seconds):
            try:
                self.tick(time.monotonic())
            except Exception:  # keep playing; a bug shows in the log, not as a dead fleet
                log.exception("The twin failed a tick")

    def tick(self, now: float) -> None:
        """Advance the fleet to `now`: apply the last poll, route arrivals, run engines."""
        with self._lock:
            start = self._last
            if now <= start:
                return
            world, self._pending_world = self._pending_world, None
            if world is not None:
                self._apply_world(world, start)
            arrivals: list[tuple[Arrival, tuple[str, str]]] = []
            for key, source in self._loads.items():
                view = self._views.get(key)
                if view is None:
                    continue  # no such pool (yet): nothing to send it
                arrivals += [(a, key) for a in source.arrivals(start, now, view.shapes)]
            arrivals.sort(key=lambda pair: pair[0].time)
            for arrival, key in arrivals:
                self._arrive(key, arrival)
            self._drains.settle(now, self._ledger)
            for engine in self._all_engines():
                engine.advance(now)
            self._ledger.release(now)
            self._last = now

    def _all_engines(self) -> Iterator[Replica]:
        yield from (r.engine for r in self._replicas.values())
        yield from self._drains.engines()

    # -- applying a poll ------------------------------------------------------------------

    def _apply_world(self, world: World, at: float) -> None:
        self._nodes = world.nodes
        for key, pool in world.pools.items():
            version = f"{pool.metadata.uid}/{pool.metadata.generation}"
            if self._versions.get(key) != version:
                self._views[key] = PoolView.of(pool)
                self._versions[key] = version
        for key in list(self._views):
            if key not in world.pools:
                del self._views[key]
                self._versions.pop(key, None)
        seen: set[str] = set()
        for info in world.pods:
            seen.add(info.uid)
            replica = self._replicas.get(info.uid)
            node_gone = info.node is not None and info.node not in world.nodes
            if replica is not None:
                if node_gone:
                    self._lose(replica, at)
                    continue
                if info.terminating:  # deleted, its object still there: it drains from now
                    self._retire(replica, at)
                    continue
                replica.info = info
                replica.serving = info.ready
                continue
            if node_gone or info.node is None or not info.ready:
                continue
            if info.terminating:
                continue
            view = self._views.get((info.namespace, info.pool))
            if view is None or info.tier not in view.engines:
                continue
            params = view.engines[info.tier]
            prompt, output = max(view.shapes.values(), key=lambda s: s[0] + s[1])
            self._replicas[info.uid] = TwinReplica(
                info=info,
                engine=Replica(
                    params, self._ledger.prompt, self._ledger.output, self._ledger, start=at
                ),
                params=params,
                kv_tokens=view.kv_tokens.get(info.tier, DEFAULT_KV_TOKENS),
                context_tokens=prompt + output / 2.0,
                model_name=view.model_name,
                metrics=pod_metrics(info),
            )
        for uid in [u for u in self._replicas if u not in seen]:
            self._retire(self._replicas[uid], at)  # deleted and gone already
        for key, weights in world.routes.items():
            if self._routes.get(key) != weights:
                self._routes[key] = weights
                self._route_log.append(
                    RouteChange(at, key[0], key[1], weights, self._serving_counts(key))
                )
        for key in [k for k in self._routes if k not in world.routes]:
            del self._routes[key]
        self._write_targets()

    def _serving(self, key: tuple[str, str]) -> list[TwinReplica]:
        return [r for r in self._replicas.values() if r.key == key and r.serving]

    def _serving_counts(self, key: tuple[str, str]) -> dict[str, int]:
        return dict(Counter(r.info.tier for r in self._serving(key)))

    def _retire(self, replica: TwinReplica, at: float) -> None:
        """Its pod was deleted: it takes no new request and drains what it has (vLLM's
        shutdown), counted from the first poll that saw the deletion."""
        del self._replicas[replica.info.uid]
        self._drains.add(replica.key, replica.engine, at, self._views.get(replica.key))

    def _lose(self, replica: TwinReplica, at: float) -> None:
        """Its node vanished: queued requests go back to the gateway, running ones fail."""
        del self._replicas[replica.info.uid]
        waiting, cut = replica.engine.evict(at)
        for request in cut:
            self._ledger.cut(request, at)
        self._drains.lose(replica.key, len(cut))
        for request in waiting:
            self._route(request, at)

    # -- the gateway ----------------------------------------------------------------------

    def _arrive(self, key: tuple[str, str], arrival: Arrival) -> None:
        self._route(self._ledger.arrive(key, arrival), arrival.time)

    def _route(self, request: int, at: float) -> None:
        namespace, pool, cls = self._ledger.class_of[request]
        weights = self._routes.get((namespace, pool))
        if weights is None:
            self._ledger.fail(request, at, "404")
            return
        tiers = [(t, w) for t, w in weights.get(cls, {}).items() if w > 0]
        if not tiers:
            self._ledger.fail(request, at, "503")
            return
        x = self._route_rng.random() * sum(w for _, w in tiers)
        pick = tiers[-1][0]
        for tier, w in tiers:
            if x < w:
                pick = tier
                break
            x -= w
        order = [pick] + [t for t, _ in sorted(tiers, key=lambda tw: -tw[1]) if t != pick]
        for tier in order:
            ready = [
                r
                for r in self._replicas.values()
                if r.serving and r.info.tier == tier and r.key == (namespace, pool)
            ]
            if not ready:
                continue
            for r in ready:
                r.engine.advance(at)
            chosen = min(ready, key=lambda r: (r.engine.outstanding, r.info.name))
            if self._ledger.send(request, chosen, tier, at, chosen.info.max_model_len):
                chosen.engine.enqueue(request, at + chosen.params.overhead)
            return
        self._ledger.fail(request, at, "503")

    # -- serving metrics ------------------------------------------------------------------

    def pod_metrics(self, namespace: str, name: str) -> str | None:
        with self._lock:
            replica = next(
                (
                    r
                    for r in self._replicas.values()
                    if r.info.namespace == namespace and r.info.name == name
                ),
                None,
            )
            if replica is None:
                return None
            engine = replica.engine
            running = engine.outstanding - engine.waiting
            kv = min(running * replica.context_tokens / replica.kv_tokens, 1.0)
            return render_pod(replica.metrics, replica.model_name, running, engine.waiting, kv)

    def gateway_metrics(self) -> str:
        with self._lock:
            return render_gateway(self._ledger.gateway)

    def _write_targets(self) -> None:
        address = f"127.0.0.1:{self.port}" if self._server is not None else ""
        replicas = sorted(self._replicas.values(), key=lambda r: (r.key, r.info.name))
        text = json.dumps(target_groups(address, (r.info for r in replicas)), indent=1)
        if text == self._targets_written:
            return
        write_atomically(self.targets_file, text)
        self._targets_written = text
