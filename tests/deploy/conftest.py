"""Fixtures of the deploy tests.

The Kafka fixtures (a real broker, per-test topics, running processors) are the
Kafka suite's own, re-exported here for the end-to-end scrape test. Tools that
come from the system (``promtool`` and ``prometheus`` from Debian's
``prometheus`` package) are looked up on PATH; tests that need them skip with
the install command when they are missing.
"""

from __future__ import annotations

import shutil

import pytest

from tests.kafka.conftest import broker, start_processor, topics  # noqa: F401 (fixtures)

INSTALL_HINT = "apt-get install -y --no-install-recommends prometheus"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"`{name}` is not installed (Debian: {INSTALL_HINT})")
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    return _tool("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return _tool("prometheus")


@pytest.fixture(scope="session")
def yaml_module():
    return pytest.importorskip("yaml", reason="PyYAML is needed (pip install pyyaml)")
