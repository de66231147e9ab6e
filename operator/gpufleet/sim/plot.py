"""The simulation as a picture: replicas per tier, P99 per class against its objective, cost.

gpufleet is drawn solid; the other policies, when present, thin and dashed in the cost
panel only (their replicas and latency would crowd the first two panels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from gpufleet.api.types import InferencePoolSpec
from gpufleet.sim.engine import RunResult


def plot(results: Sequence[RunResult], spec: InferencePoolSpec, path: Path) -> None:
    """Write a PNG with three panels sharing the time axis (minutes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = next((r for r in results if r.policy == "gpufleet"), results[0])
    minutes = [t / 60.0 for t in main.timeline.time]
    fig, (ax_replicas, ax_latency, ax_cost) = plt.subplots(
        3, 1, figsize=(10, 10), sharex=True, constrained_layout=True
    )

    for tier, counts in main.timeline.desired.items():
        (line,) = ax_replicas.step(minutes, counts, where="post", label=f"{tier} desired")
        ax_replicas.step(
            minutes,
            main.timeline.ready[tier],
            where="post",
            linestyle=":",
            color=line.get_color(),
            label=f"{tier} Ready",
        )
    ax_replicas.set_ylabel("replicas")
    ax_replicas.set_title(f"{main.policy}: replicas per tier")
    ax_replicas.legend(loc="upper left", fontsize="small")

    for traffic_class in spec.traffic_classes:
        values = main.timeline.class_p99.get(traffic_class.name)
        if values is None:
            continue
        shown = [v * 1000.0 if not math.isnan(v) else math.nan for v in values]
        (line,) = ax_latency.plot(minutes, shown, label=f"{traffic_class.name} P99")
        ax_latency.axhline(
            traffic_class.ttft_p99_objective_milliseconds,
            color=line.get_color(),
            linestyle="--",
            linewidth=1,
            label=f"{traffic_class.name} objective",
        )
    ax_latency.set_yscale("log")
    ax_latency.set_ylabel("TTFT P99 per interval (ms)")
    ax_latency.set_title(f"{main.policy}: P99 time to first token per class")
    ax_latency.legend(loc="upper left", fontsize="small")

    for result in results:
        ours = result is main
        ax_cost.plot(
            [t / 60.0 for t in result.timeline.time],
            result.timeline.cost,
            label=result.policy,
            linewidth=2.0 if ours else 1.0,
            linestyle="-" if ours else "--",
        )
    ax_cost.set_ylabel("cost so far ($)")
    ax_cost.set_xlabel("minutes")
    ax_cost.set_title("cost over time")
    ax_cost.legend(loc="upper left", fontsize="small")
    fig.savefig(path, dpi=100)
    plt.close(fig)
