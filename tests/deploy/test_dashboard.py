"""The Grafana dashboard: well-formed, every query valid PromQL, every metric documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .dashboard import (
    DASHBOARD,
    GRAFANA_VARIABLES,
    STANDARD_PREFIXES,
    dashboard_metric_names,
    dashboard_queries,
    documented_metrics,
    documented_name,
    load_dashboard,
    panels,
    promql_metric_names,
)
from .tools import require_tool, run

GRID_COLUMNS = 24
# What the dashboard must show (the deployment issue's list), as the metrics that carry it.
REQUIRED = {
    "time to first audio": "streamtts_synth_time_to_first_audio_seconds_bucket",
    "per-chunk synthesis latency": "streamtts_synth_chunk_seconds_bucket",
    "real-time factor": "streamtts_synth_rtf_ratio_bucket",
    "queue depth": "streamtts_synth_queue_depth",
    "consumer lag": "streamtts_synth_consumer_lag",
    "active casts": "streamtts_synth_active_casts",
    "lead": "streamtts_synth_lead_seconds_bucket",
    "underruns": "streamtts_synth_underruns_total",
    "intake latency": "streamtts_intake_submit_seconds_bucket",
    "intake rate by status": "streamtts_intake_requests_total",
    "edge listeners": "streamtts_edge_listeners",
    "edge delivery latency": "streamtts_edge_delivery_seconds_bucket",
    "retries": "streamtts_synth_retries_total",
    "dead letters": "streamtts_synth_dead_letters_total",
    "redis memory": "streamtts_redis_used_memory_bytes",
    "releases running": "streamtts_build_info",
}
SCOPE = ('job=~"$job"', 'instance=~"$instance"', 'namespace=~"$namespace"')


def test_dashboard_is_well_formed() -> None:
    dashboard = load_dashboard()
    assert dashboard["uid"] == "streamtts"
    assert dashboard.get("id") is None  # provisioned and importable anywhere
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= GRID_COLUMNS, panel["title"]
        area = {
            (grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
        if panel["type"] != "row":
            assert panel["title"] and panel.get("description"), panel["id"]
            assert panel["targets"], panel["title"]


def test_queries_use_the_datasource_variable() -> None:
    dashboard = load_dashboard()
    variable = dashboard["templating"]["list"][0]
    assert (variable["name"], variable["type"], variable["query"]) == ("datasource", "datasource",
                                                                       "prometheus")
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]


def test_namespace_job_and_instance_variables_scope_every_query() -> None:
    """One dashboard for compose (jobs intake, edge, synth) and for k3s (a namespace per install):
    every selector of every query is narrowed by the three variables, which list the values of
    streamtts_build_info (every service exports it)."""
    dashboard = load_dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"][1:]}
    assert set(variables) == {"namespace", "job", "instance"}
    for variable in variables.values():
        assert variable["type"] == "query" and variable["datasource"]["uid"] == "${datasource}"
        assert variable["query"]["query"].startswith("label_values(streamtts_build_info")
        assert variable["includeAll"] and variable["allValue"] == ".*"
    for query in dashboard_queries():
        for name in promql_metric_names(query.promql):
            for selector in re.findall(rf"(?<![\w:]){name}(\{{[^}}]*\}})?", query.expr):
                assert all(part in selector for part in SCOPE), f"{query.panel}: {name} is not scoped"


def test_panels_mixing_units_put_each_on_its_own_axis() -> None:
    """casts/s and bytes/s on one axis hid the casts: a panel whose queries differ in unit
    gives the other unit its own axis (a per-query override with a unit and a placement)."""
    units = {"bytes": "Bps", "casts": "ops"}
    for panel in panels(load_dashboard()):
        legends = {t["refId"]: t.get("legendFormat", "") for t in panel.get("targets", [])}
        if not any("bytes/s" in legend for legend in legends.values()) or len(legends) < 2:
            continue
        overrides = panel["fieldConfig"]["overrides"]
        for ref, legend in legends.items():
            if "bytes/s" in legend:
                [override] = [o for o in overrides if o["matcher"]["options"] == ref]
                props = {p["id"]: p["value"] for p in override["properties"]}
                assert props["unit"] == units["bytes"] and props["custom.axisPlacement"] == "right"
        assert panel["fieldConfig"]["defaults"]["unit"] == units["casts"], panel["title"]


def test_queries_use_only_known_grafana_variables() -> None:
    for query in dashboard_queries():
        assert "$" not in query.promql, f"{query.panel}: unknown variable in {query.expr}"


def test_every_query_passes_promtool(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "apt-get install prometheus")
    queries = dashboard_queries()
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": query.promql} for n, query in enumerate(queries)
    ]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = run([promtool, "check", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout


def test_promtool_check_can_fail(tmp_path: Path) -> None:
    promtool = require_tool("promtool", "apt-get install prometheus")
    path = tmp_path / "broken.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "x:y", "expr": "histogram_quantile(0.5, rate(foo_bucket))"}]}]}))
    assert run([promtool, "check", "rules", str(path)]).returncode != 0


def test_every_metric_is_documented() -> None:
    names = dashboard_metric_names()
    assert names
    undocumented = {
        name for name in names
        if documented_name(name) is None and not name.startswith(STANDARD_PREFIXES)
    }
    assert not undocumented, f"not in docs/metrics.md: {sorted(undocumented)}"


def test_every_documented_metric_is_on_the_dashboard() -> None:
    shown = {documented_name(name) for name in dashboard_metric_names()}
    current = {name for name, metric in documented_metrics().items() if not metric.deprecated}
    assert not current - shown
    assert "streamtts_synth_rtf" not in current  # renamed to streamtts_synth_rtf_ratio


@pytest.mark.parametrize("view", sorted(REQUIRED))
def test_dashboard_shows(view: str) -> None:
    assert REQUIRED[view] in dashboard_metric_names()


@pytest.mark.parametrize(
    ("metric", "quantiles"),
    [
        ("streamtts_synth_time_to_first_audio_seconds_bucket", {"0.5", "0.95", "0.99"}),
        ("streamtts_intake_submit_seconds_bucket", {"0.5", "0.95", "0.99"}),
        ("streamtts_edge_delivery_seconds_bucket", {"0.5", "0.95", "0.99"}),
    ],
)
def test_latencies_show_p50_p95_p99(metric: str, quantiles: set[str]) -> None:
    shown = {
        query.expr.split("(", 1)[1].split(",", 1)[0]
        for query in dashboard_queries()
        if metric in query.expr and query.expr.startswith("histogram_quantile(")
    }
    assert quantiles <= shown


def test_documented_metrics_are_parsed() -> None:
    metrics = documented_metrics()
    assert metrics["streamtts_edge_listeners"].type == "gauge"
    assert metrics["streamtts_edge_listeners"].labels == {"kind": ["sse", "mp3", "poll"]}
    assert metrics["streamtts_intake_requests_total"].labels == {"route": [], "status": []}
    assert metrics["streamtts_synth_chunk_seconds"].service == "synth"
    assert {m.type for m in metrics.values()} == {"counter", "gauge", "histogram"}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le) (rate(a_bucket{job=~"x|y", le!="1"}[5m]))', {"a_bucket"}),
        ("histogram_quantile(0.95, sum(rate(b_bucket[1m])) by (le, stage))", {"b_bucket"}),
        ("sum(rate(c_sum[1m])) / sum(rate(c_count[1m] offset 5m))", {"c_sum", "c_count"}),
        ("d and on (job, instance) (e or f:recorded)", {"d", "e", "f:recorded"}),
        ("max by (instance) (g2_total) > bool 0.5e3", {"g2_total"}),
        ('label_replace(h, "dst", "$1", "src", "(.*)")', {"h"}),
    ],
)
def test_metric_names_are_extracted_from_promql(expr: str, names: set[str]) -> None:
    assert promql_metric_names(expr) == names


def test_grafana_variables_are_prometheus_durations() -> None:
    for value in GRAFANA_VARIABLES.values():
        assert value[-1] in "smh" and value[:-1].isdigit()
    assert DASHBOARD.name == "streamtts.json"
