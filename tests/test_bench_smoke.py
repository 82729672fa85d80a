"""The engine benchmark runs and reports its fields (never a timing threshold)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_reports_every_field():
    done = subprocess.run(
        [sys.executable, "bench/engine.py", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout)
    for field in (
        "engine_events_per_s",
        "decode_engine_events_per_s",
        "engine_by_session_events_per_s",
        "peak_active_sessions",
        "state_bytes_per_session",
        "snapshot_bytes_mean",
        "snapshot_bytes_median",
        "snapshot_bytes_max",
    ):
        assert isinstance(result[field], int) and result[field] > 0, field
    assert result["events"] > result["sessions"] > 0
    assert result["state_sessions"] == 2_000
    assert result["passes"] == 2 and len(result["engine_pass_s"]) == 2
    assert set(result["machine"]) >= {"cpu", "nproc", "python"}
    assert set(result["targets"]) >= {"engine_met", "state_met"}


def test_table_names_every_figure():
    spec = importlib.util.spec_from_file_location("bench_engine", ROOT / "bench" / "engine.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.throughput(n_sessions=20, seed=1, loops_fraction=0.1, passes=1)
    result.update(bench.state_size(n_sessions=50, seed=1, loops_fraction=0.1, templates=10))
    result["machine"] = bench.machine()
    table = bench.render(result)
    for label in ("engine", "decode+engine", "by session", "state", "snapshot", "events/s",
                  "target"):
        assert label in table
