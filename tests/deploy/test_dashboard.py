"""The Grafana dashboard: well-formed, datasource-agnostic, and only about metrics that exist."""

from __future__ import annotations

import itertools

from tests.deploy.promql import (
    bridge_metrics,
    code_metrics,
    dashboard,
    dashboard_exprs,
    dashboard_panels,
    exported_names,
    metric_names,
)

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_dashboard_identity() -> None:
    board = dashboard()
    assert board["uid"] == "streamguard"
    assert board["title"]
    assert isinstance(board["schemaVersion"], int)


def test_dashboard_selects_its_datasource_through_a_variable() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in dashboard_panels(board):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    text = str(board)
    assert "${DS_" not in text, "exported-dashboard placeholders do not work with provisioning"


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = list(dashboard_panels())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x, y in itertools.product(range(pos["x"], pos["x"] + pos["w"]), range(pos["y"], pos["y"] + pos["h"])):
            assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
            cells[(x, y)] = panel["title"]
    titles = [p["title"] for p in panels]
    assert len(titles) == len(set(titles))


def test_every_expression_selects_only_metrics_the_code_exports() -> None:
    known = exported_names() | {"up"}
    for title, expr in dashboard_exprs():
        names = metric_names(expr)
        assert names, f"{title}: {expr} selects no metric"
        assert names <= known, f"{title}: unknown metrics {names - known}"


def test_every_exported_metric_is_on_the_dashboard() -> None:
    used = set().union(*(metric_names(e) for _, e in dashboard_exprs()))
    for metric in code_metrics():
        family = {metric._name, metric._name + "_total", metric._name + "_bucket"}
        assert family & used, f"{metric._name} is exported but on no panel"


def test_every_bridge_metric_is_on_the_dashboard() -> None:
    used = set().union(*(metric_names(e) for _, e in dashboard_exprs()))
    for metric in bridge_metrics():
        family = {metric._name, metric._name + "_total", metric._name + "_bucket"}
        assert family & used, f"{metric._name} is exported by the bridge but on no panel"


def test_the_required_views_are_there() -> None:
    exprs = [e for _, e in dashboard_exprs()]

    def has(*needles: str) -> bool:
        return any(all(n in e for n in needles) for e in exprs)

    assert has("sum by (signal)", "streamguard_guardrail_trips_total")
    assert has("sum by (agent)", "streamguard_guardrail_trips_total")
    assert has("sum by (severity)", "streamguard_alerts_total")
    assert has("streamguard_sessions_halted")
    assert has("streamguard_active_sessions")
    assert has("streamguard_consumer_lag")
    assert has("histogram_quantile(0.5,", "streamguard_event_to_output_latency_seconds_bucket")
    assert has("histogram_quantile(0.99,", "streamguard_event_to_output_latency_seconds_bucket")
    assert has("sum by (reason)", "streamguard_dead_letters_total")
    assert has("streamguard_restored_sessions_total")
    assert has("streamguard_rebalances_total")
    assert has("sum by (kind)", "streamguard_security_events_total")
    assert has('signal="halt-ignored"')


def test_metric_name_scanner() -> None:
    assert metric_names('sum by (le) (rate(a_bucket{x="b c"}[$__rate_interval]))') == {"a_bucket"}
    assert metric_names("x:y:z > 3 * (w offset 1d) unless on (instance) up") == {"x:y:z", "w", "up"}
    assert metric_names("time() - (max by (instance) (g) > 0)") == {"g"}
    assert metric_names('histogram_quantile(0.99, sum without (pod) (rate(h[5m])))') == {"h"}
