"""Operator scale benchmark: N pools on the local control plane, one real operator process.

Reports the time until every pool has converged (status written, desired replicas Ready),
reconcile passes per second, API writes per idle interval, and the operator's peak memory.
Run with `make bench-operator` (N=200 by default); it starts and stops its own plane.
"""

from __future__ import annotations

import argparse
import os
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness import OperatorProcess, install_crd  # noqa: E402
from tests.pools import pool, tier, traffic_class  # noqa: E402

from tools.benchmarks_md import write_section  # noqa: E402

INTERVAL_SECONDS = 10


def bench_pool(index: int, namespace: str) -> dict[str, Any]:
    body = pool(
        f"pool-{index:04d}",
        namespace=namespace,
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


def peak_rss_mib(pid: int) -> float:
    """VmHWM (peak resident set) of the process and its children, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def converged(item: dict[str, Any]) -> bool:
    status = item.get("status", {})
    tiers = status.get("tiers", [])
    return (
        status.get("observedGeneration") == item["metadata"]["generation"]
        and bool(tiers)
        and all(t.get("readyReplicas") == t.get("desiredReplicas") for t in tiers)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="gpufleet-bench-"))
    with ControlPlane() as plane:
        api = plane.api_client()
        install_crd(api)
        h100 = nodes.Pool(
            "h100",
            {"gpufleet.dev/accelerator": "h100"},
            {"cpu": "192", "memory": "1536Gi", "pods": "250"},
        )
        rtx = nodes.Pool(
            "rtx4090",
            {"gpufleet.dev/accelerator": "rtx4090"},
            {"cpu": "64", "memory": "256Gi", "pods": "250"},
        )
        count = (args.pools + 7) // 8 + 1
        specs = [h100.node(f"bench-h100-{i}", 8) for i in range(count)]
        specs += [rtx.node(f"bench-rtx-{i}", 8) for i in range(count)]
        nodes.add_nodes(api, specs, wait_ready_s=120)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "bench"}})
        custom = client.CustomObjectsApi(api)

        operator = OperatorProcess(
            plane.kubeconfig, work / "operator.log", "--no-leader-election"
        ).start()
        try:
            started = time.monotonic()
            with ThreadPoolExecutor(8) as pool_creator:
                list(
                    pool_creator.map(
                        lambda i: custom.create_namespaced_custom_object(
                            GROUP, VERSION, "bench", PLURAL, bench_pool(i, "bench")
                        ),
                        range(args.pools),
                    )
                )
            created = time.monotonic() - started
            done = 0
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("Pools converged", total=args.pools)
                while done < args.pools and time.monotonic() - started < args.timeout:
                    items = custom.list_namespaced_custom_object(GROUP, VERSION, "bench", PLURAL)[
                        "items"
                    ]
                    done = sum(1 for item in items if converged(item))
                    progress.update(task, completed=done)
                    time.sleep(1)
            converge_s = time.monotonic() - started
            passes_at_converge = operator.metric("gpufleet_reconcile_duration_seconds_count")
            # Idle: three intervals with nothing changing.
            time.sleep(INTERVAL_SECONDS)
            writes_before = operator.pool_writes()
            passes_before = operator.metric("gpufleet_reconcile_duration_seconds_count")
            time.sleep(3 * INTERVAL_SECONDS)
            idle_writes = (operator.pool_writes() - writes_before) / 3
            passes = operator.metric("gpufleet_reconcile_duration_seconds_count") - passes_before
            rate = passes / (3 * INTERVAL_SECONDS)
            assert operator.proc is not None
            memory = peak_rss_mib(operator.proc.pid)
        finally:
            operator.stop()
        api.close()

    rows = [
        ("pools", f"{args.pools}"),
        ("pools converged", f"{done}/{args.pools}"),
        ("time to create all pools", f"{created:.1f} s"),
        ("time until every pool converged", f"{converge_s:.1f} s"),
        ("reconcile passes until converged", f"{passes_at_converge:.0f}"),
        (f"reconcile passes per second, idle (interval {INTERVAL_SECONDS} s)", f"{rate:.1f}"),
        ("API writes per idle interval", f"{idle_writes:.1f}"),
        ("operator peak memory (VmHWM)", f"{memory:.0f} MiB"),
    ]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    if not args.no_write:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        table = "\n".join(f"| {k} | {v} |" for k, v in rows)
        write_section(
            "operator",
            f"## Operator at scale: {args.pools} pools on the local control plane\n\n"
            f"`make bench-operator` ({when}, {os.cpu_count()} CPUs), which runs "
            f"`python tools/bench_operator.py --pools {args.pools}`: one real operator "
            "process (`gpufleet run`, no Prometheus), pools of two tiers and two classes "
            "created 8 at a time, kwok GPU nodes enough for all of them. Converged = status "
            "written for the pool's generation and every desired replica Ready.\n\n"
            f"| measure | value |\n|---|---|\n{table}\n",
        )
        print("Wrote the operator section of BENCHMARKS.md")
    return 0 if done == args.pools else 1


if __name__ == "__main__":
    sys.exit(main())
