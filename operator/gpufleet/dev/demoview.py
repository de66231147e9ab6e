"""What `gpufleet dev demo` shows: the live table, the summary and the plot."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gpufleet.dev.fleetview import Sample

HISTORY_ROWS = 14


@dataclass
class PhaseMark:
    name: str
    at: float  # monotonic
    load: dict[str, float]
    nodes: str


class DemoView:
    """Prints progress, the live table of the story, then the summary."""

    def __init__(self, config: Any, *, live: bool | None = None) -> None:
        self.config = config
        self.console = Console()
        if not self.console.is_terminal:  # a CI log: wide lines rather than folded tables
            self.console = Console(width=180)
        self.live_enabled = self.console.is_terminal if live is None else live
        self.operator: Any = None
        self._live: Live | None = None
        self._rows: list[Sample] = []
        self._current: Sample | None = None
        self._marks: list[PhaseMark] = []
        self._t0 = time.monotonic()
        self._wall0 = datetime.now(UTC)
        self._interval = 10.0
        self._last_row_at = -math.inf

    # -- progress --------------------------------------------------------------------------

    def note(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text)
        else:
            self.console.print(text)

    def begin(self, world: Any) -> None:
        self._t0 = time.monotonic()
        self._wall0 = datetime.now(UTC)
        scaling = world.body["spec"].get("scaling", {})
        self._interval = float(scaling.get("intervalSeconds", 30))
        if self.live_enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=2)
            self._live.start()

    def phase(self, phase: Any, at: float) -> None:
        nodes = ""
        if phase.remove_nodes:
            nodes = f"nodes leave: {', '.join(phase.remove_nodes)}"
        if phase.add_nodes:
            nodes = f"nodes return: {', '.join(phase.add_nodes)}"
        load = {c: v.tokens_per_second for c, v in phase.load.items()}
        self._marks.append(PhaseMark(phase.name, at, load, nodes))
        loads = ", ".join(f"{c} {v:.0f} tok/s" for c, v in load.items())
        self.note(f"[bold]t={at - self._t0:5.0f}s  {phase.name}[/bold]: {loads}. {nodes}")

    def update(self, sample: Sample) -> None:
        self._current = sample
        if sample.at - self._last_row_at >= self._interval:
            self._rows.append(sample)
            self._last_row_at = sample.at
            if self._live is None:
                self.console.print(sample.line(self._t0), soft_wrap=True)
        if self._live is not None:
            self._live.update(self._render())

    def end(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()
            self._live = None

    def _render(self) -> Any:
        table = Table(
            title="kubectl get gpool -o wide (every decision interval), P99 from Prometheus",
            title_justify="left",
            expand=False,
        )
        for column in ("TIME", "PHASE", "TIERS ready/desired", "WEIGHTS"):
            table.add_column(column, no_wrap=True)
        classes = list(self._current.objective_ms) if self._current else []
        for cls in classes:
            table.add_column(f"P99 {cls}", justify="right", no_wrap=True)
        for column in ("$/h", "$/Mtok", "OBJECTIVES", "DEGRADED", "METRICS", "DECISION"):
            table.add_column(column, no_wrap=True)
        rows = self._rows[-HISTORY_ROWS:]
        if self._current is not None and (not rows or rows[-1] is not self._current):
            rows = [*rows, self._current]
        for s in rows:
            cells: list[Any] = [
                f"{s.at - self._t0:4.0f}s",
                s.phase,
                " ".join(f"{t.name}:{t.ready}/{t.desired}" for t in s.tiers),
                s.weights_text(),
            ]
            for cls in classes:
                cells.append(_p99_cell(s.p99_ms.get(cls), s.objective_ms[cls]))
            cells += [
                "-" if s.cost_per_hour is None else f"{s.cost_per_hour:.2f}",
                "-" if s.cost_per_million_tokens is None else f"{s.cost_per_million_tokens:.3f}",
                _condition_cell(s.condition("ObjectivesMet"), good="True"),
                _condition_cell(s.condition("Degraded"), good="False"),
                _condition_cell(s.condition("MetricsAvailable"), good="True"),
                s.decision,
            ]
            table.add_row(*cells, style="bold" if s is self._current else None)
        return Group(table)

    # -- the end ---------------------------------------------------------------------------

    def summary(
        self, world: Any, samples: Sequence[Sample], output_dir: Path, started: float
    ) -> None:
        if not samples:
            return
        self._print_events(world)
        self._print_attainment(world, samples)
        plot = output_dir / "gpufleet-demo.png"
        self._plot(samples, plot)
        self.console.print(f"Plot: {plot.resolve()}")
        self.console.print(f"Demo wall time so far: {time.monotonic() - started:.0f} s")

    def _print_events(self, world: Any) -> None:
        from kubernetes import client

        listed: Any = client.CoreV1Api(world.api).list_namespaced_event(
            world.namespace, field_selector=f"involvedObject.name={world.name}"
        )
        rows: list[tuple[float, str, str]] = []
        moved = 0
        for event in listed.items:
            if event.reason == "TrafficMoved":  # every weight change: the plot shows them
                moved += 1
                continue
            when = event.last_timestamp or event.first_timestamp or event.event_time
            if when is None:
                continue
            offset = (when - self._wall0).total_seconds()
            rows.append((offset, str(event.reason), str(event.message or "")))
        for mark in self._marks:
            rows.append((mark.at - self._t0, "Phase", f"{mark.name} {mark.nodes}".strip()))
        rows.sort(key=lambda r: r[0])
        table = Table(title="What happened when (pool Events, story phases)", title_justify="left")
        table.add_column("t", justify="right")
        table.add_column("reason")
        table.add_column("message", overflow="ellipsis", no_wrap=True, max_width=110)
        for offset, reason, message in rows:
            if offset < -5:
                continue
            style = "bold cyan" if reason == "Phase" else None
            table.add_row(f"{offset:.0f}s", reason, message, style=style)
        self.console.print(table)
        self.console.print(f"({moved} TrafficMoved events not shown: see the plot's weights)")

    def _print_attainment(self, world: Any, samples: Sequence[Sample]) -> None:
        classes = list(samples[-1].objective_ms)
        table = Table(
            title="SLO attainment per phase (every request's exact TTFT, from the twin) and cost",
            title_justify="left",
        )
        table.add_column("phase")
        for cls in classes:
            objective = samples[-1].objective_ms[cls]
            table.add_column(f"{cls} within {objective} ms", justify="right")
            table.add_column(f"{cls} P99", justify="right")
        table.add_column("replicas at end", no_wrap=True)
        table.add_column("mean $/h", justify="right")
        ends = [m.at for m in self._marks[1:]] + [samples[-1].at + 1.0]
        totals = {c: [0, 0] for c in classes}
        dollars = 0.0
        for mark, end in zip(self._marks, ends, strict=True):
            cells = [mark.name]
            for cls in classes:
                w = world.twin.window(world.namespace, world.name, cls, mark.at, end)
                totals[cls][0] += w.within
                totals[cls][1] += w.requests
                cells.append("-" if w.attainment is None else f"{100 * w.attainment:.1f}%")
                cells.append(_ms(w.p99_seconds))
            inside = [s for s in samples if mark.at <= s.at < end]
            costs = [s.cost_per_hour for s in inside if s.cost_per_hour is not None]
            last = inside[-1] if inside else samples[-1]
            cells.append(" ".join(f"{t.name}:{t.ready}/{t.desired}" for t in last.tiers))
            cells.append(f"{sum(costs) / len(costs):.2f}" if costs else "-")
            table.add_row(*cells)
        for before, now in itertools.pairwise(samples):
            if before.cost_per_hour is not None:
                dollars += before.cost_per_hour * (now.at - before.at) / 3600.0
        row = ["whole story"]
        for cls in classes:
            within, count = totals[cls]
            row += [f"{100 * within / count:.1f}%" if count else "-", ""]
        table.add_row(*row, "", f"{dollars * 3600 / max(samples[-1].at - samples[0].at, 1):.2f}")
        self.console.print(table)
        tokens = world.twin.served_tokens(world.namespace, world.name)
        per_million = dollars / (tokens / 1e6) if tokens else math.nan
        self.console.print(
            f"Cost of the story: ${dollars:.4f} for {tokens / 1e6:.2f} M tokens served "
            f"= ${per_million:.4f}/Mtok (replicas as desired, from status.costPerHour)"
        )

    def _plot(self, samples: Sequence[Sample], path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path.parent.mkdir(parents=True, exist_ok=True)
        t = [s.at - self._t0 for s in samples]
        fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
        ax = axes[0]
        for tier in [x.name for x in samples[-1].tiers]:
            ax.plot(t, [s.tier(tier).ready for s in samples], label=f"{tier} ready")
            ax.plot(t, [s.tier(tier).desired for s in samples], "--", label=f"{tier} desired")
        ax.set_ylabel("replicas")
        ax.legend(loc="upper left", fontsize=8)
        ax = axes[1]
        for cls, objective in samples[-1].objective_ms.items():
            values = [s.p99_ms.get(cls) for s in samples]
            (line,) = ax.plot(t, [math.nan if v is None else v for v in values], label=f"{cls} P99")
            ax.axhline(objective, color=line.get_color(), linestyle=":", label=f"{cls} objective")
        ax.set_yscale("log")
        ax.set_ylabel("P99 TTFT (ms, Prometheus)")
        ax.legend(loc="upper left", fontsize=8)
        ax = axes[2]
        ax.plot(
            t,
            [math.nan if s.cost_per_hour is None else s.cost_per_hour for s in samples],
            label="$/h",
        )
        ax.set_ylabel("$/hour")
        share = ax.twinx()
        for cls in samples[-1].objective_ms:
            tiers = [x.name for x in samples[-1].tiers]
            first = tiers[0] if tiers else ""
            share.plot(
                t,
                [s.weights.get(cls, {}).get(first, 0) for s in samples],
                ":",
                label=f"{cls} weight on {first}",
            )
        share.set_ylabel("weight (%)")
        share.legend(loc="upper right", fontsize=8)
        ax.set_xlabel("seconds")
        for a in axes:
            for mark in self._marks:
                a.axvline(mark.at - self._t0, color="grey", alpha=0.4)
        for mark in self._marks:
            where = (mark.at - self._t0, 1.0)
            axes[0].annotate(
                mark.name, where, xycoords=("data", "axes fraction"), fontsize=8, va="bottom"
            )
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return "inf" if math.isinf(seconds) else f"{seconds * 1000:.0f} ms"


def _p99_cell(value: float | None, objective: int) -> Text:
    if value is None:
        return Text("-")
    shown = "inf" if math.isinf(value) else f"{value:.0f}"
    return Text(f"{shown}/{objective}ms", style="red" if value > objective else "green")


def _condition_cell(condition: tuple[str, str], *, good: str) -> Text:
    status, reason = condition
    if not status:
        return Text("-")
    return Text(reason, style="green" if status == good else "yellow")
