"""The dashboard picture's pieces: variables filled as Grafana fills them, legends from
legendFormat, the chart's panels found by title (the live loop test draws it for real)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpufleet.dev import dashboard

CHART_DASHBOARD = Path(__file__).resolve().parents[3] / "charts/gpufleet/dashboards/gpufleet.json"


def test_variables_are_filled_for_one_pool() -> None:
    expr = 'sum(rate(x{namespace="$namespace",pool="$pool"}[$__rate_interval]))'
    assert dashboard.fill(expr, "llm", "llama3-8b") == (
        'sum(rate(x{namespace="llm",pool="llama3-8b"}[10s]))'
    )


def test_legend_follows_legend_format() -> None:
    labels = {"traffic_class": "batch", "tier": "rtx4090"}
    assert dashboard.legend("{{traffic_class}} -> {{ tier }}", labels) == "batch -> rtx4090"
    assert dashboard.legend("", {"b": "2", "a": "1"}) == "a=1,b=2"


def test_every_key_panel_is_in_the_chart_s_dashboard() -> None:
    board = dashboard.load(CHART_DASHBOARD)
    chosen = dashboard.panels(board, dashboard.KEY_PANELS)
    assert [p["title"] for p in chosen] == list(dashboard.KEY_PANELS)
    assert all(p.get("targets") for p in chosen)
    with pytest.raises(KeyError, match="no panel Gone"):
        dashboard.panels(board, ["Gone"])


def test_render_draws_each_series_a_query_returns(tmp_path: Path) -> None:
    board = dashboard.load(CHART_DASHBOARD)
    asked: list[str] = []

    def query_range(promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        asked.append(promql)
        if "attainment" not in promql:
            return []
        values = [[start + i, "0.99"] for i in range(5)]
        return [{"metric": {"traffic_class": c}, "values": values} for c in ("realtime", "batch")]

    drawn = dashboard.render(
        board,
        query_range,
        namespace="llm",
        pool="p",
        start=1000.0,
        end=1004.0,
        path=tmp_path / "d.png",
        titles=["Attainment per class", "Traffic weights"],
    )
    assert drawn == [
        dashboard.Drawn("Attainment per class", ("realtime", "batch")),
        dashboard.Drawn("Traffic weights", ()),
    ]
    assert all('namespace="llm",pool="p"' in q for q in asked)
    assert (tmp_path / "d.png").stat().st_size > 0
