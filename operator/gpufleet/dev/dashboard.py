"""The chart's Grafana dashboard drawn from the same queries, for people without a Grafana.

`render` reads the dashboard JSON the chart ships (charts/gpufleet/dashboards/gpufleet.json),
runs the chosen panels' queries as range queries against a Prometheus that scrapes the
operator (the demo's), fills the variables for one pool as Grafana would, and draws one
matplotlib panel per dashboard panel, legends from each target's `legendFormat`. The demo
writes it beside its own plot; docs/dashboard.png is one run's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The panels a reader sees first: service, cost and fleet, two of each.
KEY_PANELS = (
    "P99 TTFT against objective, per class",
    "Attainment per class",
    "Cost per hour against budget",
    "Cost per million tokens against target",
    "Replicas per tier: desired and ready",
    "Traffic weights",
)
# Grafana unit ids as an axis label ("short" is a plain count).
UNITS = {"s": "seconds", "percentunit": "share", "currencyUSD": "dollars", "short": ""}
RATE_INTERVAL = "10s"  # $__rate_interval for a 1 s scrape (four scrapes and some)

# (promql, start, end, step) -> Prometheus's range query result (matrix)
RangeQuery = Callable[[str, float, float, float], list[dict[str, Any]]]


@dataclass(frozen=True)
class Drawn:
    """What one panel drew: its title and the legend of each series."""

    title: str
    series: tuple[str, ...]


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def fill(expr: str, namespace: str, pool: str) -> str:
    """A panel's query with the dashboard variables set for one pool."""
    return (
        expr.replace("$namespace", namespace)
        .replace("$pool", pool)
        .replace("$__rate_interval", RATE_INTERVAL)
    )


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's legendFormat: {{label}} replaced by the series' label value."""
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)
    return text.strip() or ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def panels(dashboard: dict[str, Any], titles: Sequence[str]) -> list[dict[str, Any]]:
    """The dashboard's panels with these titles, in the order given; KeyError if one is gone."""
    by_title = {p["title"]: p for p in dashboard["panels"]}
    missing = [t for t in titles if t not in by_title]
    if missing:
        raise KeyError(f"the dashboard has no panel {', '.join(missing)}")
    return [by_title[t] for t in titles]


def render(
    dashboard: dict[str, Any],
    query_range: RangeQuery,
    *,
    namespace: str,
    pool: str,
    start: float,
    end: float,
    path: Path,
    titles: Sequence[str] = KEY_PANELS,
    step: float = 2.0,
) -> list[Drawn]:
    """Draw the panels for one pool over [start, end] (Unix seconds) into `path` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = panels(dashboard, titles)
    columns = 2
    rows = (len(chosen) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(13, 3.2 * rows), squeeze=False)
    drawn = []
    for axis, panel in zip(axes.flat, chosen, strict=False):
        names = []
        for target in panel.get("targets", []):
            for series in query_range(fill(target["expr"], namespace, pool), start, end, step):
                name = legend(target.get("legendFormat", ""), series["metric"])
                times = [float(t) - start for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                axis.plot(times, values, label=name, linewidth=1.4)
                names.append(name)
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        axis.set_title(panel["title"], fontsize=10)
        axis.set_xlabel("seconds into the run", fontsize=8)
        label = UNITS.get(unit, unit)
        if label:
            axis.set_ylabel(label, fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
        if names:
            axis.legend(fontsize=7, loc="best")
        drawn.append(Drawn(panel["title"], tuple(names)))
    for axis in list(axes.flat)[len(chosen) :]:
        axis.set_visible(False)
    figure.suptitle(f"gpufleet dashboard: {namespace}/{pool} (key panels)", fontsize=12)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return drawn
