"""The Prometheus configuration and rules: valid, unit-tested, documented."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.deploy.promql import (
    DOCS,
    PROMETHEUS_CONFIG,
    RULES,
    RULES_TEST,
    alert_rules,
    exported_names,
    load_yaml,
    metric_names,
    recording_rules,
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def test_promtool_check_rules(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass(promtool: str) -> None:
    result = run(promtool, "test", "rules", str(RULES_TEST))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout + result.stderr


def test_promtool_unit_tests_can_fail(promtool: str, tmp_path) -> None:
    """The unit tests pin behaviour: a weakened threshold makes them fail."""
    broken = RULES.read_text().replace("> 10\n", "> 1000\n")
    assert broken != RULES.read_text()
    (tmp_path / "rules.yml").write_text(broken)
    (tmp_path / "rules_test.yml").write_text(RULES_TEST.read_text())
    result = run(promtool, "test", "rules", str(tmp_path / "rules_test.yml"))
    assert result.returncode != 0
    assert "StreamguardDeadLettersSpiking" in result.stdout + result.stderr


def test_promtool_check_compose_prometheus_config(promtool: str) -> None:
    result = run(promtool, "check", "config", str(PROMETHEUS_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_that_fires_and_one_that_does_not(yaml_module) -> None:
    tests = load_yaml(RULES_TEST)["tests"]
    firing: set[str] = set()
    silent: set[str] = set()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    alerts = set(alert_rules())
    assert alerts, "rules.yml defines no alert"
    assert alerts - firing == set(), "alerts never shown to fire in rules_test.yml"
    assert alerts - silent == set(), "alerts never shown to stay silent in rules_test.yml"
    assert (firing | silent) <= alerts, "rules_test.yml tests an alert rules.yml lacks"


def test_every_recording_rule_has_a_unit_test(yaml_module) -> None:
    tested = {
        check["expr"]
        for case in load_yaml(RULES_TEST)["tests"]
        for check in case.get("promql_expr_test", [])
    }
    untested = {
        name for name in recording_rules() if name not in tested and "offset" not in recording_rules()[name]
    }
    assert untested == set()


def test_rules_reference_only_exported_metrics(yaml_module) -> None:
    known = exported_names() | {"up"} | set(recording_rules())
    for name, expr in recording_rules().items():
        assert metric_names(expr) <= known, f"{name}: {metric_names(expr) - known}"
        assert metric_names(expr), f"{name} selects no metric"
    for name, rule in alert_rules().items():
        assert metric_names(rule["expr"]) <= known, f"{name}: {metric_names(rule['expr']) - known}"


def test_recording_rules_follow_the_naming_convention(yaml_module) -> None:
    for name in recording_rules():
        level, metric, operations = name.split(":")
        assert level and operations, name
        assert metric.startswith("streamguard_"), name


def test_alerts_are_labelled_and_annotated(yaml_module) -> None:
    for name, rule in alert_rules().items():
        assert re.fullmatch(r"Streamguard[A-Z][A-Za-z]+", name), name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        annotations = rule["annotations"]
        assert {"summary", "description", "runbook"} <= set(annotations), name
        assert annotations["runbook"] == f"docs/deploy.md#{name.lower()}", name


ALERT_NAMES = sorted(re.findall(r"^\s*- alert: (\w+)$", RULES.read_text(), re.M))


def test_alert_names_are_found() -> None:
    assert len(ALERT_NAMES) >= 5


@pytest.mark.parametrize("name", ALERT_NAMES)
def test_every_alert_has_a_runbook_entry(name: str) -> None:
    text = DOCS.read_text()
    match = re.search(rf"^### {name}\n(.*?)(?=^#{{1,3}} |\Z)", text, re.M | re.S)
    assert match, f"docs/deploy.md has no `### {name}` runbook section"
    assert len(match.group(1).split()) > 40, f"the runbook of {name} is too thin"
