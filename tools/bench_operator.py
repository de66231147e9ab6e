"""Operator scale benchmark on the local control plane: 1,000 pools on one operator process,
then 2,000 pools on four sharded replicas and one of them killed with SIGKILL.

For each operator process it reports the time until every pool converged (status written
for its generation, every desired replica Ready), reconcile passes per second and API writes
per interval while idle, peak memory, the event loop's lag P99, the time from a spec change
to the status that reflects it, and the planner's median and P99 per pass; for the kill,
the time until the killed replica's pools are reconciled by the others and whether any pool
was ever written by two replicas in turn. The plane's own CPU is shown beside it. Run with
`make bench-operator`; it starts and stops its own plane.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client
from rich.console import Console
from rich.progress import Progress

from gpufleet.api.constants import GROUP, PLURAL, VERSION
from gpufleet.dev import nodes
from gpufleet.dev.cluster import ControlPlane
from gpufleet.sharding import shard_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness import OperatorProcess, install_crd  # noqa: E402
from tests.pools import pool, tier, traffic_class  # noqa: E402

from tools.benchmarks_md import write_section  # noqa: E402
from tools.operator_probes import CpuMeter, StatusWrites, peak_rss_mib, quantile, scrape  # noqa: E402

NAMESPACE = "bench"
INTERVAL_SECONDS = 30  # the default interval: 1,000 pools are 33 passes a second
SPEC_CHANGES = 50  # pools whose spec is changed, one every 0.2 s, while all are planned
PLANE = ("kube-apiserver", "etcd", "kwok", "kube-scheduler", "kube-controller-manager")
console = Console()


def bench_pool(index: int) -> dict[str, Any]:
    body = pool(
        f"pool-{index:04d}",
        namespace=NAMESPACE,
        tiers=[
            tier("h100", "H100-PCIe-80GB", minReplicas=1, maxReplicas=2),
            tier("rtx4090", "RTX4090", minReplicas=1, maxReplicas=4),
        ],
        classes=[
            traffic_class("realtime", 100, header="realtime", priority=100),
            traffic_class("batch", 2000),
        ],
    )
    body["spec"]["scaling"]["intervalSeconds"] = INTERVAL_SECONDS
    return body


def settled(item: dict[str, Any], writers: set[str]) -> bool:
    """Converged, and by one of `writers` (the replicas that run now)."""
    status = item.get("status", {})
    tiers = status.get("tiers", [])
    return (
        status.get("observedGeneration") == item["metadata"]["generation"]
        and status.get("observedBy") in writers
        and bool(tiers)
        and all(t.get("readyReplicas") == t.get("desiredReplicas") for t in tiers)
    )


def identity(operator: OperatorProcess) -> str:
    assert operator.proc is not None
    return f"{socket.gethostname()}-{operator.proc.pid}"


def wait_converged(custom: Any, total: int, writers: set[str], timeout: float) -> int:
    started, done = time.monotonic(), 0
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("Pools converged", total=total)
        while done < total and time.monotonic() - started < timeout:
            items = custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
            done = sum(1 for item in items if settled(item, writers))
            progress.update(task, completed=done)
            time.sleep(2)
    return done


def create_pools(custom: Any, indices: range) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(8) as creator:
        list(
            creator.map(
                lambda i: custom.create_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, PLURAL, bench_pool(i)
                ),
                indices,
            )
        )
    return time.monotonic() - started


def idle(operators: list[OperatorProcess]) -> tuple[list[float], list[float]]:
    """Per operator: API writes per interval and passes per second over two idle intervals,
    after one interval for the last passes of the convergence to finish."""
    time.sleep(INTERVAL_SECONDS)
    writes = [op.pool_writes() for op in operators]
    passes = [op.metric("gpufleet_reconcile_duration_seconds_count") for op in operators]
    time.sleep(2 * INTERVAL_SECONDS)
    per_interval = [(op.pool_writes() - w) / 2 for op, w in zip(operators, writes, strict=True)]
    rate = [
        (op.metric("gpufleet_reconcile_duration_seconds_count") - p) / (2 * INTERVAL_SECONDS)
        for op, p in zip(operators, passes, strict=True)
    ]
    return per_interval, rate


def change_specs(custom: Any, watcher: StatusWrites, total: int, base: int) -> list[float]:
    """Change one pool's spec every 0.2 s; the seconds until each one's status showed it."""
    count = min(SPEC_CHANGES, total)
    step = total // count
    sent: list[tuple[str, int, float]] = []
    for n, index in enumerate(range(0, step * count, step)):
        name = f"pool-{index:04d}"
        patch = {"spec": {"scaling": {"scaleDownDelaySeconds": base + n}}}
        at = time.monotonic()
        body = custom.patch_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name, patch)
        sent.append((name, int(body["metadata"]["generation"]), at))
        time.sleep(0.2)
    deadline = time.monotonic() + 4 * INTERVAL_SECONDS
    took: list[float] = []
    for name, generation, at in sent:
        seen = None
        while seen is None and time.monotonic() < deadline:
            seen = watcher.observed(name, generation, at)
            if seen is None:
                time.sleep(0.2)
        took.append(seen - at if seen is not None else math.inf)
    return took


def figures(op: OperatorProcess, start: dict[str, Any]) -> dict[str, float]:
    """The operator's own histograms since `start` (a scrape at its start)."""
    now = scrape(op)
    assert op.proc is not None
    return {
        "lag_p99": quantile(0.99, now, "gpufleet_event_loop_lag_seconds", start),
        "spec_p99": quantile(0.99, now, "gpufleet_spec_change_to_reconcile_seconds", start),
        "plan_p50": quantile(0.5, now, "gpufleet_plan_duration_seconds", start),
        "plan_p99": quantile(0.99, now, "gpufleet_plan_duration_seconds", start),
        "memory": peak_rss_mib(op.proc.pid),
        "requests": sum(v for _, v in now.get("gpufleet_api_requests_total", [])),
        "conflicts": sum(
            v for labels, v in now.get("gpufleet_api_errors_total", []) if labels["code"] == "409"
        ),
        "passes": sum(v for _, v in now.get("gpufleet_reconcile_duration_seconds_count", [])),
    }


def ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def cores(lap: dict[str, float], names: tuple[str, ...]) -> str:
    return f"{sum(lap[n] for n in names if not math.isnan(lap[n])):.2f}"


def run_single(plane: Any, custom: Any, args: Any, work: Path) -> dict[str, Any]:
    op = OperatorProcess(
        plane.kubeconfig, work / "single.log", "--no-leader-election", "--namespace", NAMESPACE
    ).start()
    try:
        start = scrape(op)
        assert op.proc is not None
        meter = CpuMeter({**{n: plane.pids[n] for n in PLANE}, "operator": op.proc.pid})
        with StatusWrites(plane.api_client(), NAMESPACE) as watcher:
            t0 = time.monotonic()
            created = create_pools(custom, range(args.pools))
            done = wait_converged(custom, args.pools, {identity(op)}, args.timeout)
            converge = time.monotonic() - t0
            cpu_converge = meter.lap()
            writes, rate = idle([op])
            cpu_idle = meter.lap()
            took = change_specs(custom, watcher, args.pools, base=301)
        result = figures(op, start)
    finally:
        op.stop()
    return {
        **result, "created": created, "done": done, "converge": converge, "writes": writes[0],
        "rate": rate[0], "spec_changes": took, "cpu": (cpu_converge, cpu_idle),
    }  # fmt: skip


def run_sharded(plane: Any, custom: Any, args: Any, work: Path) -> dict[str, Any]:
    shard_args = ["--namespace", NAMESPACE, "--lease-namespace", NAMESPACE]
    shard_args += ["--lease-name", "bench", "--shards", str(args.shards)]
    with StatusWrites(plane.api_client(), NAMESPACE) as watcher:
        t0 = time.monotonic()
        created = create_pools(custom, range(args.pools, args.sharded_pools))
        ops = [
            OperatorProcess(plane.kubeconfig, work / f"replica-{i}.log", *shard_args).start()
            for i in range(args.replicas)
        ]
        try:
            starts = [scrape(op) for op in ops]
            pids = {f"replica-{i}": op.proc.pid for i, op in enumerate(ops) if op.proc}
            meter = CpuMeter({**{n: plane.pids[n] for n in PLANE}, **pids})
            names = {identity(op) for op in ops}
            done = wait_converged(custom, args.sharded_pools, names, args.timeout)
            converge = time.monotonic() - t0
            cpu_converge = meter.lap()
            writes, rate = idle(ops)
            cpu_idle = meter.lap()
            took = change_specs(custom, watcher, args.sharded_pools, base=401)
            each = [figures(op, start) for op, start in zip(ops, starts, strict=True)]
            held = [op.metric("gpufleet_shards_held") for op in ops]
            victim = ops[0]
            leases = client.CoordinationV1Api(plane.api_client()).list_namespaced_lease(NAMESPACE)
            shards = {
                int(lease.metadata.name.rsplit("-", 1)[1])
                for lease in leases.items
                if lease.metadata.name.startswith("bench-shard-")
                and lease.spec.holder_identity == identity(victim)
            }
            moved = [
                f"pool-{i:04d}"
                for i in range(args.sharded_pools)
                if shard_of(NAMESPACE, f"pool-{i:04d}", args.shards) in shards
            ]
            victim.kill()
            killed = time.monotonic()
            survivors = {identity(op) for op in ops[1:]}
            takeover = math.inf
            while time.monotonic() - killed < 6 * INTERVAL_SECONDS:
                runs = watcher.writers(since=killed)
                if all(runs.get(name, [""])[-1] in survivors for name in moved):
                    takeover = time.monotonic() - killed
                    break
                time.sleep(0.5)
            time.sleep(INTERVAL_SECONDS)  # one more interval: nothing goes back
            after = [figures(op, start) for op, start in zip(ops[1:], starts[1:], strict=True)]
            returns = watcher.returns()
            close = watcher.close_handovers(INTERVAL_SECONDS, since=killed)
        finally:
            for op in ops:
                op.stop()
    conflicts = each[0]["conflicts"] + sum(f["conflicts"] for f in after)
    return {
        "created": created, "done": done, "converge": converge, "writes": writes, "rate": rate,
        "spec_changes": took, "each": each, "held": held, "moved": len(moved),
        "shards_moved": len(shards), "takeover": takeover, "returns": returns, "close": close,
        "conflicts": conflicts, "cpu": (cpu_converge, cpu_idle),
    }  # fmt: skip


def report(args: Any, one: dict[str, Any], many: dict[str, Any]) -> tuple[str, str, str]:
    """The BENCHMARKS.md section: figures side by side, then the plane's CPU."""
    n, r = args.pools, args.replicas
    each, cols = many["each"], [f"replica {i + 1}" for i in range(r)]

    def row(label: str, single: str, per: list[str]) -> str:
        return f"| {label} | {single} | " + " | ".join(per) + " |"

    spec1, spec4 = one["spec_changes"], many["spec_changes"]
    blank = [""] * (r - 1)

    def per(key: str, fmt: str) -> list[str]:
        return [fmt.format(f[key]) for f in each]

    def rate(f: dict[str, Any]) -> str:
        return f"{f['requests'] / max(f['passes'], 1):.1f}"

    def plans(f: dict[str, Any]) -> str:
        return f"{ms(f['plan_p50'])} / {ms(f['plan_p99'])}"

    def spread(xs: list[float], note: str = "") -> str:
        return f"{statistics.median(xs):.1f} / {p99(xs):.1f} s{note}"

    idle_label = f"reconcile passes per second, idle (interval {INTERVAL_SECONDS} s)"
    watched = f"spec change to status written, median / P99 ({SPEC_CHANGES} pools, watched)"
    new_pools = f" (the {args.sharded_pools - n:,} new)"
    lines = [
        f"| measure | {n:,} pools, one operator | " + " | ".join(cols) + " |",
        "|---|---|" + "---|" * r,
        row("pools converged", f"{one['done']}/{n}",
            [f"{many['done']}/{args.sharded_pools} (all)", *blank]),
        row("time to create the pools", f"{one['created']:.0f} s",
            [f"{many['created']:.0f} s{new_pools}", *blank]),
        row("time until every pool converged", f"{one['converge']:.0f} s",
            [f"{many['converge']:.0f} s (all)", *blank]),
        row(f"shards held (of {args.shards})", "-", [f"{h:.0f}" for h in many["held"]]),
        row(idle_label, f"{one['rate']:.1f}", [f"{x:.1f}" for x in many["rate"]]),
        row("API writes per idle interval", f"{one['writes']:.1f}",
            [f"{x:.1f}" for x in many["writes"]]),
        row("API requests per pass (all verbs)", rate(one), [rate(f) for f in each]),
        row("peak memory (VmHWM)", f"{one['memory']:.0f} MiB", per("memory", "{:.0f} MiB")),
        row("event-loop lag P99", ms(one["lag_p99"]), [ms(f["lag_p99"]) for f in each]),
        row("spec change to first pass P99 (operator's histogram)", ms(one["spec_p99"]),
            [ms(f["spec_p99"]) for f in each]),
        row(watched, spread(spec1), [spread(spec4, " (all)"), *blank]),
        row("plan() median / P99", plans(one), [plans(f) for f in each]),
    ]  # fmt: skip
    c1, i1 = one["cpu"]
    c4, i4 = many["cpu"]
    ops = tuple(f"replica-{i}" for i in range(r))
    plane_rows = [
        "| phase | kube-apiserver | etcd | kwok | scheduler + controller-manager | operator(s) |",
        "|---|---|---|---|---|---|",
    ]
    for label, lap, who in (
        (f"{n:,} pools, converging", c1, ("operator",)),
        (f"{n:,} pools, idle", i1, ("operator",)),
        (f"{args.sharded_pools:,} pools on {r}, converging", c4, ops),
        (f"{args.sharded_pools:,} pools on {r}, idle", i4, ops),
    ):
        plane_rows.append(
            f"| {label} | {cores(lap, ('kube-apiserver',))} | {cores(lap, ('etcd',))} | "
            f"{cores(lap, ('kwok',))} | "
            f"{cores(lap, ('kube-scheduler', 'kube-controller-manager'))} | {cores(lap, who)} |"
        )
    kill = [
        "| after SIGKILL of replica 1 | value |",
        "|---|---|",
        f"| its shards / pools | {many['shards_moved']} / {many['moved']} |",
        "| until every one of its pools was written by another replica | "
        f"{many['takeover']:.1f} s |",
        f"| pools whose writer went back to an earlier one (whole run) | {many['returns']} |",
        f"| pools written by two replicas within one interval (since the kill) | {many['close']} |",
        f"| 409 Conflict answers to the replicas' writes (whole run) | {many['conflicts']:.0f} |",
    ]
    return "\n".join(lines), "\n".join(plane_rows), "\n".join(kill)


def main() -> int:
    global INTERVAL_SECONDS
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pools", type=int, default=1000, help="pools on one operator")
    parser.add_argument("--sharded-pools", type=int, default=2000, help="pools when sharded")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--interval", type=int, default=INTERVAL_SECONDS, help="pools' seconds")
    parser.add_argument("--timeout", type=float, default=1500, help="per convergence, seconds")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    INTERVAL_SECONDS = args.interval
    if args.sharded_pools < args.pools:
        parser.error("--sharded-pools must be at least --pools (it adds pools to those)")
    work = Path(tempfile.mkdtemp(prefix="gpufleet-bench-"))
    with ControlPlane() as plane:
        api = plane.api_client()
        install_crd(api)
        labels = {"h100": "h100", "rtx4090": "rtx4090"}
        count = (args.sharded_pools + 7) // 8 + 1
        specs = []
        for kind, capacity in (("h100", "192"), ("rtx4090", "64")):
            node_pool = nodes.Pool(
                kind,
                {"gpufleet.dev/accelerator": labels[kind]},
                {"cpu": capacity, "memory": "1536Gi", "pods": "250"},
            )
            specs += [node_pool.node(f"bench-{kind}-{i}", 8) for i in range(count)]
        nodes.add_nodes(api, specs, wait_ready_s=300)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        custom = client.CustomObjectsApi(api)
        console.print(f"[bold]{args.pools:,} pools on one operator[/bold]")
        one = run_single(plane, custom, args, work)
        console.print(f"[bold]{args.sharded_pools:,} pools on {args.replicas} replicas[/bold]")
        many = run_sharded(plane, custom, args, work)
        api.close()
    table, plane_cpu, kill = report(args, one, many)
    print(table, plane_cpu, kill, sep="\n\n")
    if not args.no_write:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        write_section(
            "operator",
            f"## Operator at scale: {args.pools:,} pools on one process, "
            f"{args.sharded_pools:,} on {args.replicas} sharded replicas\n\n"
            f"`make bench-operator` ({when}, {os.cpu_count()} CPUs), which runs "
            f"`python tools/bench_operator.py --pools {args.pools} --sharded-pools "
            f"{args.sharded_pools} --replicas {args.replicas} --shards {args.shards}` on the "
            "local control plane, every component on the same CPUs. Real operator processes "
            "(`gpufleet run`, no Prometheus, the default API limits of 100 requests a second "
            "with bursts of 200), pools of two tiers (one replica at least each) and two "
            f"classes with `intervalSeconds: {INTERVAL_SECONDS}`, kwok GPU nodes enough for "
            "all. Converged = status written for the pool's generation, by a replica that "
            "runs now, and every desired replica Ready. The sharded run starts from the "
            f"first run's {args.pools:,} converged pools (their operator stopped) and adds "
            f"{args.sharded_pools - args.pools:,}; its replicas start together. Spec changes: "
            f"{SPEC_CHANGES} pools' `scaleDownDelaySeconds` changed one every 0.2 s, timed "
            "from the patch to the first status write for the new generation seen on a "
            "watch. Histogram figures are Prometheus's `histogram_quantile` over the "
            "operator's own buckets, so they are as fine as the buckets.\n\n"
            f"{table}\n\n{kill}\n\nThe plane's CPU, in cores used on average over each "
            f"phase ({os.cpu_count()} in all):\n\n{plane_cpu}\n",
        )
        print("Wrote the operator section of BENCHMARKS.md")
    return 0 if one["done"] == args.pools and many["done"] == args.sharded_pools else 1


if __name__ == "__main__":
    sys.exit(main())
