"""bench/bridge.py runs and reports its fields (never a timing threshold)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_bridge_bench_reports_every_field() -> None:
    done = subprocess.run(
        [sys.executable, "bench/bridge.py", "--quick", "--batches", "4", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )
    result = json.loads(done.stdout)
    for encoding in ("proto", "json"):
        for field in ("floor_spans_per_s", "decode_spans_per_s", "bridge_spans_per_s", "bridge_over_floor"):
            assert result[encoding][field] > 0
    assert result["events_per_pass"] > result["spans"]  # a tool span is a call and a result
