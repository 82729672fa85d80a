"""Helpers shared by the deploy tests: where the assets are, what they query.

``metric_names`` is a small PromQL scanner, good enough for the expressions in
the dashboard and the rules: it drops strings, label matchers, range and
subquery brackets, grouping label lists and function calls, and returns the
identifiers left, which are the selected metric names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.metrics import MetricWrapperBase

from streamguard.kafka.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
RULES = DEPLOY / "prometheus" / "rules.yml"
RULES_TEST = DEPLOY / "prometheus" / "rules_test.yml"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
DASHBOARD = DEPLOY / "grafana" / "streamguard.json"
COMPOSE = DEPLOY / "docker-compose.yml"
K8S = DEPLOY / "k8s"
DOCS = REPO / "docs" / "deploy.md"

# Grafana's built-in variables, replaced the way a 1 s scrape interval would.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
}

KEYWORDS = frozenset(
    {
        "and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
        "group_right", "offset", "bool", "inf", "nan", "atan2", "start", "end",
    }
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[a-zA-Z]*|[A-Za-z_:][A-Za-z0-9_:]*|\S")


def substitute(expr: str) -> str:
    """The expression with Grafana's interval variables replaced."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (``up`` included, functions and labels not)."""
    text = _STRING.sub('""', substitute(expr))
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    tokens = _TOKEN.findall(text)
    names = set()
    for i, token in enumerate(tokens):
        if not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", token) or token in KEYWORDS:
            continue
        if i + 1 < len(tokens) and tokens[i + 1] == "(":
            continue  # a function or an aggregation
        names.add(token)
    return names


# ------------------------------------------------------------------ the code


def code_metrics() -> list[MetricWrapperBase]:
    """The processor's metric objects, in the order metrics.py declares them."""
    metrics = Metrics()
    return [v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase)]


def bridge_metrics() -> list[MetricWrapperBase]:
    """The OpenTelemetry bridge's metric objects (its own registry, its own job)."""
    from streamguard.otel.bridge import BridgeMetrics

    metrics = BridgeMetrics()
    return [v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase)]


def exported_names() -> set[str]:
    """Every sample name the processor's and the bridge's registries can expose."""
    names: set[str] = set()
    for metric in [*code_metrics(), *bridge_metrics()]:
        base = metric._name
        kind = metric._type
        if kind == "counter":
            names |= {base + "_total", base + "_created"}
        elif kind == "histogram":
            names |= {base + "_bucket", base + "_sum", base + "_count", base + "_created"}
        else:
            names.add(base)
    return names


# ------------------------------------------------------------------ the assets


def load_yaml(path: Path) -> Any:
    import yaml

    return yaml.safe_load(path.read_text())


def load_yaml_all(path: Path) -> list[Any]:
    import yaml

    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels(board: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    board = board if board is not None else dashboard()
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs(board: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(panel title, expression) for every query target of the dashboard."""
    out = []
    for panel in dashboard_panels(board):
        for target in panel.get("targets", []):
            expr = target.get("expr")
            if expr:
                out.append((panel["title"], expr))
    return out


def rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(RULES)["groups"] for rule in group["rules"]]


def recording_rules() -> dict[str, str]:
    return {r["record"]: r["expr"] for r in rules() if "record" in r}


def alert_rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in rules() if "alert" in r}
