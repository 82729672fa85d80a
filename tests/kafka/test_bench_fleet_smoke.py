"""The fleet-guardrail delay benchmark runs against the suite's broker and reports its figures.

Timing figures depend on the machine: they are checked for presence and order, never
against thresholds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.kafka


def test_quick_run_trips_every_session_of_each_trial(broker) -> None:
    done = subprocess.run(
        [sys.executable, "bench/fleet.py", "--quick", "--json", "--bootstrap", broker.bootstrap_servers],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    settings = result["settings"]
    assert result["samples"] == settings["trials"] * settings["scope_sessions"] == 12
    delay = result["delay_ms"]
    assert 0 < delay["p50"] <= delay["p90"] <= delay["p99"] <= delay["max"]
    assert result["all_sessions_tripped_ms"]["max"] == delay["max"]
    assert result["background_events_sent"] > 0
