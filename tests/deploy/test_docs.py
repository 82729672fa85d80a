"""docs/deploy.md stays in step with the code and the deploy assets."""

from __future__ import annotations

import re
from typing import get_args

from streamguard.kafka import routing
from streamguard.kafka.sessions import EvictionKind
from tests.deploy.metrics_doc import current_block, render_block
from tests.deploy.promql import DOCS, REPO, RULES, code_metrics


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


def test_every_routing_reason_is_documented() -> None:
    """The reasons are Literal types in kafka/routing.py: each value is a label the
    processor can export, so each must be in the label-values table."""
    table = {
        row.split("|")[1].strip(" `"): row.split("|")[3]
        for row in DOCS.read_text().splitlines()
        if row.startswith("| `streamguard_") and row.count("|") == 4
    }
    declared = {
        "streamguard_dead_letters_total": routing.DEAD_LETTER_REASONS,
        "streamguard_events_skipped_total": routing.SKIP_REASONS,
        "streamguard_security_events_total": routing.SECURITY_KINDS,
        "streamguard_changelog_records_total": ("snapshot", "tombstone"),
        "streamguard_sessions_evicted_total": get_args(EvictionKind),
    }
    for metric, values in declared.items():
        documented = set(re.findall(r"`(\w+)`", table[metric]))
        assert set(values) <= documented, f"{metric}: undocumented {set(values) - documented}"


def test_the_processor_uses_only_declared_reasons() -> None:
    """A literal reason string in the shell that routing does not declare would
    be an undocumented label value (the type checker sees the same)."""
    sources = "".join(
        (REPO / "streamguard" / "kafka" / name).read_text()
        for name in ("processor.py", "outbox.py", "routing.py", "rebalance.py")
    )
    used = set(re.findall(r'dead_letter\(\s*tp,\s*record,\s*"(\w+)"', sources))
    used |= set(re.findall(r'DeadLetter\(\s*"(\w+)"', sources))
    used |= set(re.findall(r'dead_letters\.labels\("(\w+)"\)', sources))
    assert used and used <= set(routing.DEAD_LETTER_REASONS), used - set(routing.DEAD_LETTER_REASONS)
    skipped = set(re.findall(r'Skip\("(\w+)"\)|_skip\("(\w+)"\)|skipped\.labels\("(\w+)"\)', sources))
    flat = {v for item in skipped for v in item if v}
    assert flat and flat <= set(routing.SKIP_REASONS), flat - set(routing.SKIP_REASONS)
    kinds = set(re.findall(r'security(?:_events\.labels\(|=)"(\w+)"', sources))
    assert kinds and kinds <= set(routing.SECURITY_KINDS), kinds - set(routing.SECURITY_KINDS)
