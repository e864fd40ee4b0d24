"""The Grafana dashboard's queries and the metric names they use, checked against docs/metrics.md.

`dashboard_metric_names()` is also for the live test: every name it returns must appear on the
running services' /metrics. Names are as exposed: `..._bucket` / `_sum` / `_count` for
histograms, counters with their `_total`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "compose" / "grafana" / "dashboards" / "streamtts.json"
METRICS_DOC = REPO / "docs" / "metrics.md"

# Grafana's built-in variables, replaced by values Prometheus accepts so that promtool (and a
# real Prometheus) can check the queries. Any other `$` in a query fails the tests.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
}
# The dashboard's own variables (namespace, job, instance): label regexes, "All" is `.*`.
LABEL_VARIABLES = {"$namespace": ".*", "$job": ".*", "$instance": ".*"}
# Metric families every prometheus_client process exports; the dashboard may use them too.
STANDARD_PREFIXES = ("process_", "python_")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "atan2", "inf", "nan",
}
_STRING = re.compile(r'"(?:\\.|[^"\\])*"' r"|'(?:\\.|[^'\\])*'" r"|`[^`]*`")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_:.])\d[\w.]*")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


@dataclass(frozen=True)
class Query:
    panel: str
    ref_id: str
    expr: str

    @property
    def promql(self) -> str:
        """The expression with Grafana's variables substituted."""
        expr = self.expr
        for variable, value in {**GRAFANA_VARIABLES, **LABEL_VARIABLES}.items():
            expr = expr.replace(variable, value)
        return expr


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows."""
    out = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def dashboard_queries(path: Path = DASHBOARD) -> list[Query]:
    return [
        Query(panel["title"], target.get("refId", ""), target["expr"])
        for panel in panels(load_dashboard(path))
        for target in panel.get("targets", [])
        if target.get("expr")
    ]


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (not functions, keywords or label names)."""
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group()
        if name in PROMQL_KEYWORDS or text[match.end():].lstrip().startswith("("):
            continue  # an aggregation or function call
        names.add(name)
    return names


def dashboard_metric_names(path: Path = DASHBOARD) -> set[str]:
    """Every metric name the dashboard queries, as it appears on a service's /metrics."""
    names: set[str] = set()
    for query in dashboard_queries(path):
        names |= promql_metric_names(query.promql)
    return names


@dataclass(frozen=True)
class DocumentedMetric:
    name: str
    type: str  # counter, gauge or histogram
    labels: dict[str, list[str]]  # label name -> example values from the doc ([] if none given)
    service: str
    deprecated: bool = False  # kept for one release under an old name; not on the dashboard


@cache
def documented_metrics(path: Path = METRICS_DOC) -> dict[str, DocumentedMetric]:
    """The metric tables of docs/metrics.md, by name (the `## service` heading above each)."""
    metrics = {}
    service = ""
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            service = line[3:].strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        metrics[name] = DocumentedMetric(name, cells[1], _labels(cells[2]), service,
                                         "**deprecated**" in cells[3])
    return metrics


def _labels(cell: str) -> dict[str, list[str]]:
    """"`kind` (`sse`, `mp3`)` -> {"kind": ["sse", "mp3"]}."""
    labels: dict[str, list[str]] = {}
    for match in re.finditer(r"`([a-z_]+)`\s*(?:\(([^)]*)\))?", cell):
        values = re.findall(r"`([^`]*)`", match.group(2) or "")
        labels[match.group(1)] = values
    return labels


def documented_name(exposed: str) -> str | None:
    """The docs/metrics.md entry an exposed name belongs to, or None."""
    metrics = documented_metrics()
    if exposed in metrics:
        return exposed
    for suffix in HISTOGRAM_SUFFIXES:
        base = exposed.removesuffix(suffix)
        if base != exposed and metrics.get(base, None) and metrics[base].type == "histogram":
            return base
    return None
