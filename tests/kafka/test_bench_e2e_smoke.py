"""The end-to-end benchmark runs against the suite's broker and reports every field.

Timing figures depend on the machine: they are checked for presence and type,
never against thresholds.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.kafka


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_e2e", ROOT / "bench" / "e2e.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _quick_run(broker, *flags: str) -> dict:
    """``bench/e2e.py --quick --json`` against the suite's broker; its JSON result."""
    done = subprocess.run(
        [sys.executable, "bench/e2e.py", "--quick", "--json",
         "--bootstrap", broker.bootstrap_servers, *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_quick_run_reports_every_field(broker) -> None:
    result = _quick_run(broker, "--latency-runs", "2")

    assert set(result["machine"]) >= {"cpu", "nproc", "python", "load_average"}
    assert result["settings"]["processor"] == "subprocess"
    fleet = result["fleet"]
    assert fleet["events"] > fleet["sessions"] == 300
    assert _positive_int(fleet["peak_open_sessions"])
    assert _positive_int(fleet["engine_only_events_per_s"])
    assert isinstance(fleet["expected_outputs"], int)

    for phase in ("preload", "bare_consume", "consume_decode"):
        assert result[phase]["events"] == fleet["events"], phase
        assert _positive_int(result[phase]["events_per_s"]), phase

    tput = result["throughput"]
    assert tput["events"] == fleet["events"]
    for field in ("events_per_s_sustained", "events_per_s_overall", "checkpoints",
                  "changelog_records", "active_sessions"):
        assert _positive_int(tput[field]), field
    assert tput["seconds"] > 0 and tput["seconds_to_committed"] >= tput["seconds"]
    # the same events through the processor give the engine's outputs, no more, no less
    assert tput["outputs"] == fleet["expected_outputs"]
    assert tput["dead_letters"] == 0

    lat = result["latency"]
    assert _positive_int(lat["offered"]) and _positive_int(lat["offered_per_s"])
    assert lat["outputs_unmatched"] == 0
    assert lat["outputs_measured"] <= lat["outputs_expected"]
    assert lat["outputs_measured"] > 0  # the quick fleet fails early and often
    for prefix in ("", "from_send_", "record_ts_", "floor_", "floor_from_send_"):
        values = [lat[f"{prefix}{q}_ms"] for q in ("p50", "p90", "p99", "max")]
        assert all(isinstance(v, int | float) for v in values), prefix
        assert 0 <= values[0] <= values[1] <= values[2] <= values[3], prefix
    assert lat["histogram_count"] >= lat["outputs_measured"]
    assert lat["floor_events"] == lat["offered"]
    assert len(lat["by_tenth"]) == 10
    assert lat["checkpoint_pause_mean_ms"] >= 0

    runs = result["latency_runs"]
    assert len(runs) == 2
    assert runs[0]["p99_ms"] == lat["p99_ms"]  # the first run is the one reported in full
    assert all(set(run) == set(_load_bench().REPEAT_FIELDS) for run in runs)
    low, high = sorted(run["p99_ms"] for run in runs)
    assert result["latency_p99_ms_median"] == pytest.approx((low + high) / 2, abs=0.06)

    assert set(result["ratios"]) == {
        "processor_vs_bare_consume",
        "processor_vs_consume_decode",
        "processor_vs_preload",
        "processor_vs_engine_only",
    }
    assert set(result["targets"]) >= {"throughput_met", "latency_met", "outputs_match"}
    assert result["targets"]["outputs_match"] is True

    table = _load_bench().render(result)
    for label in ("processor", "bare consume", "latency", "broker floor", "events/s", "p99",
                  "run 2", "median p99"):
        assert label in table


def test_latency_helpers() -> None:
    bench = _load_bench()
    values = [float(v) for v in range(1, 101)]
    assert bench.quantile(values, 0.5) == 50.0
    assert bench.quantile(values, 0.99) == 99.0
    assert bench.quantile([], 0.99) == 0.0
    text = "\n".join([
        'x_seconds_bucket{le="0.01"} 50.0',
        'x_seconds_bucket{le="0.1"} 100.0',
        'x_seconds_bucket{le="+Inf"} 100.0',
        "x_seconds_sum 2.0",
        "x_seconds_count 100.0",
    ])
    buckets, total, count = bench.histogram(text, "x_seconds")
    assert (total, count) == (2.0, 100.0)
    assert bench.histogram_quantile(buckets, 0.5) == pytest.approx(0.01)
    assert bench.histogram_quantile(buckets, 0.75) == pytest.approx(0.055)
    samples = [(0.0, 0.0), (0.5, 50.0), (1.0, 100.0), (1.5, 150.0), (2.0, 200.0), (2.5, 250.0)]
    assert bench.window_rates(samples) == [100.0, 100.0]
    assert bench.metric_sum('a{t="x"} 2.0\na{t="y"} 3.0\nab 7.0\na 1.0', "a") == 6.0


def test_latency_only_run_skips_the_throughput_phases(broker) -> None:
    """The control for checkpoints: with them switched off nothing is committed, so only
    the latency phase can run."""
    result = _quick_run(broker, "--latency-only",
                        "--processor-flag=--checkpoint-interval-ms=600000",
                        "--processor-flag=--checkpoint-every-events=10000000")
    assert not {"preload", "bare_consume", "consume_decode", "throughput", "ratios"} & set(result)
    lat = result["latency"]
    assert lat["outputs_unmatched"] == 0 and lat["outputs_measured"] > 0
    assert lat["checkpoints"] == 0  # switched off for the whole run
    assert "latency_met" in result["targets"] and "throughput_met" not in result["targets"]
    table = _load_bench().render(result)
    assert "latency" in table and "processor" not in table.split("latency", 1)[0]
