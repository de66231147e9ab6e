"""`gpufleet run`: the operator process.

Clients are built once here and handed to the handlers through Kopf's memo. With leader
election on (the default), the process serves /healthz and /readyz at once but starts Kopf
only after it holds the Lease, and exits when it loses it (its Deployment restarts it as a
standby), so two replicas never act at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import socket
import sys
from datetime import UTC, datetime
from typing import Any

from gpufleet.commands import logs

ENV_PREFIX = "GPUFLEET_"
MAX_SHARDS = 64


def register(subparsers: Any) -> None:
    from gpufleet.desired.leaving import INTERRUPTION_TAINTS

    parser = subparsers.add_parser(
        "run",
        help="run the operator against the current kubeconfig or in-cluster",
        description="Run the gpufleet operator. Flags also read GPUFLEET_* environment variables.",
    )
    env = os.environ.get
    parser.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        default=[n for n in env(f"{ENV_PREFIX}WATCH_NAMESPACES", "").split(",") if n],
        help="namespace to watch (repeatable; default: all namespaces) "
        "[GPUFLEET_WATCH_NAMESPACES, comma-separated]",
    )
    parser.add_argument(
        "--prometheus-url",
        default=env(f"{ENV_PREFIX}PROMETHEUS_URL", ""),
        help="Prometheus to read vLLM metrics from; empty: no metrics, replicas stay at "
        "their minimum [GPUFLEET_PROMETHEUS_URL]",
    )
    parser.add_argument(
        "--prometheus-scrape-interval",
        type=int,
        default=int(env(f"{ENV_PREFIX}PROMETHEUS_SCRAPE_INTERVAL", "15")),
        metavar="SECONDS",
        help="how often that Prometheus scrapes the vLLM pods; rate and P99 windows span "
        "at least four scrapes (default 15) [GPUFLEET_PROMETHEUS_SCRAPE_INTERVAL]",
    )
    parser.add_argument(
        "--queue-check-seconds",
        type=float,
        default=float(env(f"{ENV_PREFIX}QUEUE_CHECK_SECONDS") or "nan"),
        metavar="SECONDS",
        help="how often to read every pool's vLLM queues and prompt tokens/s (four queries "
        "for all pools) and run a pass early for a pool where either doubled on a tier since "
        "its last pass; 0: off (default: the scrape interval) [GPUFLEET_QUEUE_CHECK_SECONDS]",
    )
    parser.add_argument(
        "--interruption-taints",
        type=lambda text: tuple(k for k in text.split(",") if k),
        default=env(f"{ENV_PREFIX}INTERRUPTION_TAINTS", ",".join(INTERRUPTION_TAINTS)),
        metavar="KEYS",
        help="comma-separated node taint keys that announce a node's removal; Ready replicas "
        "on such a node (or a cordoned one) are replaced at once (default: "
        f"{','.join(INTERRUPTION_TAINTS)}) [GPUFLEET_INTERRUPTION_TAINTS]",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(env(f"{ENV_PREFIX}METRICS_PORT", "8080")),
        help="port of the operator's own /metrics (0: off) [GPUFLEET_METRICS_PORT]",
    )
    parser.add_argument(
        "--health-port",
        type=int,
        default=int(env(f"{ENV_PREFIX}HEALTH_PORT", "8081")),
        help="port of /healthz and /readyz (0: off) [GPUFLEET_HEALTH_PORT]",
    )
    parser.add_argument(
        "--bind-address",
        default=env(f"{ENV_PREFIX}BIND_ADDRESS", "0.0.0.0"),
        help="address the metrics and health servers listen on [GPUFLEET_BIND_ADDRESS]",
    )
    parser.add_argument(
        "--leader-election",
        action=argparse.BooleanOptionalAction,
        default=env(f"{ENV_PREFIX}LEADER_ELECTION", "true").lower() != "false",
        help="act only while holding a Lease (default: on) [GPUFLEET_LEADER_ELECTION]",
    )
    parser.add_argument(
        "--lease-name",
        default=env(f"{ENV_PREFIX}LEASE_NAME", "gpufleet-operator"),
        help="name of the leader Lease [GPUFLEET_LEASE_NAME]",
    )
    parser.add_argument(
        "--lease-namespace",
        default=env(f"{ENV_PREFIX}LEASE_NAMESPACE", env("POD_NAMESPACE", "default")),
        help="namespace of the leader Lease (default: $POD_NAMESPACE or default)",
    )
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=float(env(f"{ENV_PREFIX}KUBE_API_QPS", "100")),
        metavar="QPS",
        help="requests per second to the Kubernetes API, on average, across every pool's "
        "passes (0: no limit; default 100) [GPUFLEET_KUBE_API_QPS]",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=int(env(f"{ENV_PREFIX}KUBE_API_BURST", "200")),
        metavar="N",
        help="requests that may go at once above --kube-api-qps (default 200) "
        "[GPUFLEET_KUBE_API_BURST]",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=int(env(f"{ENV_PREFIX}SHARDS", "1")),
        metavar="N",
        help="split the pools into N shards, each held by one replica through a Lease "
        "named <lease-name>-shard-<i>; replicas share them fairly (default 1: one leader "
        "reconciles every pool) [GPUFLEET_SHARDS]",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=env(f"{ENV_PREFIX}LOG_FORMAT", "text"),
        help="log line format [GPUFLEET_LOG_FORMAT]",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    logs.configure(args.log_format, args.verbose)
    if not 1 <= args.shards <= MAX_SHARDS:
        print(f"--shards must be between 1 and {MAX_SHARDS}, got {args.shards}", file=sys.stderr)
        return 2
    if args.kube_api_qps < 0 or args.kube_api_burst < 1:
        print(
            f"--kube-api-qps must be 0 (no limit) or more and --kube-api-burst at least 1, got "
            f"{args.kube_api_qps} and {args.kube_api_burst}",
            file=sys.stderr,
        )
        return 2
    if args.queue_check_seconds < 0:
        print(
            f"--queue-check-seconds must be 0 (off) or more, got {args.queue_check_seconds}",
            file=sys.stderr,
        )
        return 2
    if args.shards > 1 and not args.leader_election:
        print(
            "--shards above 1 needs leader election: the shards are Leases "
            "(drop --no-leader-election)",
            file=sys.stderr,
        )
        return 2
    logs.native_output_to_log()
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 0


async def _serve_health(bind: str, port: int, ready: asyncio.Event) -> Any:
    from aiohttp import web

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready.is_set() else web.Response(status=503)

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, bind, port).start()
    return runner


async def _run(args: argparse.Namespace) -> int:
    import kopf
    from kubernetes import client, config
    from prometheus_client import start_http_server

    from gpufleet.adapters.instrument import count_requests
    from gpufleet.adapters.kube import KubeAdapter
    from gpufleet.adapters.lease import LeaseElector
    from gpufleet.planning.planner import plan
    from gpufleet.reconcile import Reconciler
    from gpufleet.runtime import Loops, measure_lag
    from gpufleet.telemetry import Telemetry

    log = logging.getLogger("gpufleet")
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    api_client = client.ApiClient()
    # Leases get their own client, outside the rate limit: a renewal queued behind a
    # thousand pools' reads could miss its deadline and hand the pools over for nothing.
    lease_client = client.ApiClient()
    identity = f"{socket.gethostname()}-{os.getpid()}"
    telemetry = Telemetry()
    for each in (api_client, lease_client):
        count_requests(each, lambda verb, code: telemetry.api_requests.labels(verb, code).inc())
    if args.kube_api_qps > 0:
        from gpufleet.adapters.ratelimit import TokenBucket, limit

        bucket = TokenBucket(args.kube_api_qps, args.kube_api_burst)
        limit(api_client, bucket, telemetry.api_throttled.inc)
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.bind_address, registry=telemetry.registry)
    ready = asyncio.Event()
    health = (
        await _serve_health(args.bind_address, args.health_port, ready)
        if args.health_port
        else None
    )

    kube = KubeAdapter(
        api_client, telemetry, instance=identity, interruption_taints=args.interruption_taints
    )
    metrics = _metrics_source(args.prometheus_url, args.prometheus_scrape_interval)
    reconciler = Reconciler(
        kube,
        metrics,
        plan,
        telemetry,
        lambda: datetime.now(UTC),
        identity=identity,
    )
    import gpufleet.handlers  # noqa: F401  (registers the handlers with Kopf)

    loops = Loops(reconciler)
    elector = None
    keeper = None
    if args.shards > 1:
        keeper = _shard_keeper(args, lease_client, telemetry, identity, loops)
        loops.owns = keeper.owns
        loops.held = keeper.fresh
        from gpufleet.sharding import shard_of

        loops.shard_of = lambda namespace, name: shard_of(namespace, name, args.shards)
        ready.set()  # a replica without shards yet is healthy: it is doing its job
    elif args.leader_election:
        elector = LeaseElector(
            lease_client,
            telemetry,
            namespace=args.lease_namespace,
            name=args.lease_name,
            identity=identity,
        )
        ready.set()  # a standby is healthy and ready: it is doing its job
        await elector.acquire()
    else:
        telemetry.leader.set(1)
    ready.set()
    scope = ", ".join(args.namespaces) if args.namespaces else "all namespaces"
    log.info("Started gpufleet operator %s watching %s", identity, scope)

    stop = asyncio.get_running_loop().create_future()
    operator = asyncio.create_task(
        kopf.operator(
            clusterwide=not args.namespaces,
            namespaces=args.namespaces,
            standalone=True,
            memo=kopf.Memo(loops=loops),
            stop_flag=stop,
        )
    )
    lag = asyncio.create_task(measure_lag(telemetry.loop_lag.observe))
    background = [lag]
    check = args.queue_check_seconds
    if math.isnan(check):
        check = float(args.prometheus_scrape_interval)
    if args.prometheus_url and check > 0:
        from gpufleet.queuewatch import WINDOW_CHECKS, QueueWatch, reading_of

        window = max(1, round(WINDOW_CHECKS * check))
        watch = QueueWatch(lambda: reading_of(metrics.queues(window)), loops.wake_early, check)
        loops.passed = watch.passed
        background.append(asyncio.create_task(watch.run()))
    tasks: set[asyncio.Task[Any]] = {operator}
    if elector is not None:
        tasks.add(asyncio.create_task(elector.hold()))
    if keeper is not None:
        tasks.add(asyncio.create_task(keeper.run()))
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if operator not in done:  # leadership lost: stop acting at once and exit non-zero
        log.error("Stopping: this process is no longer the leader")
        stop.set_result(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(operator, timeout=10)
        code = 1
    for task in (*tasks, *background):
        task.cancel()
    if keeper is not None:  # hand the shards over now rather than when they expire
        with contextlib.suppress(Exception):
            await asyncio.wait_for(keeper.release_all(), timeout=10)
    if health is not None:
        await health.cleanup()
    return code


def _shard_keeper(
    args: argparse.Namespace, api_client: Any, telemetry: Any, identity: str, loops: Any
) -> Any:
    from gpufleet.adapters.shards import ShardKeeper, ShardLeases, list_pools
    from gpufleet.sharding import shard_of

    async def gained(shards: set[int]) -> None:
        pools = await asyncio.to_thread(list_pools, api_client, args.namespaces)
        for namespace, name in pools:
            if shard_of(namespace, name, args.shards) in shards:
                loops.ensure(namespace, name)

    async def lost(shards: set[int]) -> None:
        await loops.retire(lambda namespace, name: shard_of(namespace, name, args.shards) in shards)

    leases = ShardLeases(
        api_client,
        telemetry,
        namespace=args.lease_namespace,
        group=args.lease_name,
        identity=identity,
        shards=args.shards,
    )
    return ShardKeeper(leases, on_gain=gained, on_lose=lost)


def _metrics_source(url: str, scrape_interval_seconds: int) -> Any:
    from gpufleet.reconcile import NoMetrics

    if not url:
        return NoMetrics()
    from gpufleet.adapters.prometheus import PrometheusMetrics

    return PrometheusMetrics(url, scrape_interval_seconds=scrape_interval_seconds)
