"""docs/deploy.md stays in step with the code and the deploy assets."""

from __future__ import annotations

import re

from tests.deploy.metrics_doc import current_block, render_block
from tests.deploy.promql import DOCS, REPO, RULES, code_metrics

PROCESSOR = REPO / "streamguard" / "kafka" / "processor.py"


def test_metrics_reference_table_is_current() -> None:
    block = current_block(DOCS.read_text())
    assert block is not None, "docs/deploy.md lost its metrics table markers"
    assert block == render_block(), "stale metrics table: run `python -m tests.deploy.metrics_doc`"


def test_metrics_table_lists_every_metric_with_its_labels() -> None:
    table = render_block()
    for metric in code_metrics():
        assert f"`{metric._name}" in table
        for label in metric._labelnames:
            assert f"`{label}`" in table


def test_docs_name_the_broker_settings_the_guarantees_need() -> None:
    text = DOCS.read_text()
    for setting in ("acks=all", "min.insync.replicas=2", "cleanup.policy=compact"):
        assert setting in text, setting
    assert re.search(r"replication factor (of )?3", text, re.I)
    for platform in ("Apache Kafka", "Redpanda", "MSK"):
        assert platform in text, platform


def test_docs_link_only_to_files_that_exist() -> None:
    root = DOCS.parent.parent
    for target in re.findall(r"\]\((?!https?://|#)([^)#\s]+)", DOCS.read_text()):
        assert (DOCS.parent / target).exists() or (root / target).exists(), target


def test_runbook_covers_exactly_the_alerts() -> None:
    alerts = set(re.findall(r"^\s*- alert: (\w+)$", RULES.read_text(), re.M))
    documented = set(re.findall(r"^### (Streamguard\w+)$", DOCS.read_text(), re.M))
    assert documented == alerts


def test_label_values_the_processor_uses_are_documented() -> None:
    source = PROCESSOR.read_text()
    table = {
        row.split("|")[1].strip(" `"): row.split("|")[3]
        for row in DOCS.read_text().splitlines()
        if row.startswith("| `streamguard_") and row.count("|") == 4
    }
    found = {
        "streamguard_dead_letters_total": re.findall(r'_dead_letter\(\s*tp,\s*record,\s*"(\w+)"', source),
        "streamguard_events_skipped_total": re.findall(r'_skip\("(\w+)"\)|skipped\.labels\("(\w+)"\)', source),
        "streamguard_security_events_total": re.findall(r'security_events\.labels\("(\w+)"\)', source),
        "streamguard_changelog_records_total": re.findall(r'changelog_records\.labels\("(\w+)"\)', source),
    }
    for metric, values in found.items():
        flat = {v for item in values for v in (item if isinstance(item, tuple) else (item,)) if v}
        assert flat, f"no label value of {metric} found in processor.py"
        documented = set(re.findall(r"`(\w+)`", table[metric]))
        assert flat <= documented, f"{metric}: undocumented {flat - documented}"
