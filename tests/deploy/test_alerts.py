"""The alert rules: valid, unit-tested by promtool, the same for compose and k3s, each with a
sensible `for:`, documented metrics and a runbook section in docs/troubleshooting.md."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from .dashboard import STANDARD_PREFIXES, documented_name, promql_metric_names
from .tools import COMPOSE, K3S, REPO, require_tool, run

RULES = COMPOSE / "prometheus" / "alerts.yml"
RULE_TESTS = COMPOSE / "prometheus" / "alerts.test.yml"
PROMETHEUS_RULE = K3S / "extras" / "prometheusrule.yaml"
TROUBLESHOOTING = REPO / "docs" / "troubleshooting.md"
# The conditions an operator must hear about (the operations issue's list), by alert.
REQUIRED = {
    "no worker has published voices": "StreamTTSNoVoicesPublished",
    "dead letters rising": "StreamTTSDeadLettersRising",
    "listeners underrunning": "StreamTTSListenersUnderrunning",
    "redis near maxmemory": "StreamTTSRedisNearMaxmemory",
    "synth down": "StreamTTSSynthDown",
    "archiving failing": "StreamTTSArchivingFailing",
    "5xx climbing": "StreamTTSErrorsClimbing",
}
DURATION = re.compile(r"^(\d+)([smh])$")


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def seconds(duration: str) -> int:
    match = DURATION.match(duration)
    assert match, duration
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.M):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        out.add(text.replace(" ", "-"))
    return out


def promtool() -> str:
    return require_tool("promtool", "apt-get install prometheus")


def test_rules_pass_promtool_check() -> None:
    result = run([promtool(), "check", "rules", str(RULES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in result.stdout


def test_rules_pass_their_unit_tests() -> None:
    result = run([promtool(), "test", "rules", str(RULE_TESTS)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_unit_tests_can_fail(tmp_path: Path) -> None:
    """A rule that waits longer than its test expects is caught."""
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    rules = RULES.read_text().replace("expr: max(streamtts_synth_voices_published) < 1\n        for: 10m",
                                      "expr: max(streamtts_synth_voices_published) < 1\n        for: 30m")
    assert rules != RULES.read_text()
    (tmp_path / RULES.name).write_text(rules)
    assert run([promtool(), "test", "rules", str(tmp_path / RULE_TESTS.name)]).returncode != 0


@pytest.mark.parametrize("condition", sorted(REQUIRED))
def test_an_alert_covers(condition: str) -> None:
    assert REQUIRED[condition] in {rule["alert"] for rule in alerts()}


def test_every_alert_fires_in_a_unit_test_and_stays_quiet_in_another() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    for name in {rule["alert"] for rule in alerts()}:
        assert any(c["alertname"] == name and c["exp_alerts"] for c in cases), f"{name} never fires"
        assert any(c["alertname"] == name and not c["exp_alerts"] for c in cases), f"{name} never quiet"


def test_every_alert_waits_labels_its_severity_and_links_its_runbook() -> None:
    sections = anchors(TROUBLESHOOTING.read_text())
    for rule in alerts():
        assert 60 <= seconds(rule["for"]) <= 3600, rule["alert"]  # no flapping, no sleeping
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/troubleshooting.md" and anchor in sections, rule["alert"]


def test_alerts_use_documented_metrics_only() -> None:
    for rule in alerts():
        for name in promql_metric_names(rule["expr"]):
            assert documented_name(name) or name.startswith(STANDARD_PREFIXES), (rule["alert"], name)


def test_compose_prometheus_loads_the_rules() -> None:
    config = yaml.safe_load((COMPOSE / "prometheus" / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    compose = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    mounts = {v["source"]: v["target"] for v in compose["services"]["prometheus"]["volumes"] if v["type"] == "bind"}
    assert mounts["./prometheus/alerts.yml"] == "/etc/prometheus/alerts.yml"
    assert mounts["./prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"


def test_k3s_prometheusrule_carries_the_same_rules() -> None:
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["namespace"] == "streamtts"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
