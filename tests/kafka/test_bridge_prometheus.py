"""A real Prometheus scraping a running bridge and processor: the dashboard's
bridge row must work against what the bridge actually exports.

The sibling of ``tests/deploy/test_prometheus_e2e.py`` (which scrapes a processor
alone): here ``streamguard bridge`` runs beside ``streamguard run`` on the test
broker, and Prometheus (Debian's ``prometheus`` binary) scrapes both every
second as the deployed configuration does (jobs ``streamguard`` and
``streamguard-bridge``), with the rules loaded. The bridge gets traffic that
brings its labelled series into existence: spans through the Collector path
(protobuf and JSON, one batch twice, one garbage record) and through the OTLP/HTTP
receiver (the SDK's exporter, chunked). The test waits, polling with a deadline,
until both targets are up, every name of the dashboard's bridge row has series,
every expression of the row returns series, and the counters say what the
traffic was: the garbage dead-lettered ``malformed_otlp``, the repeated batch a
duplicate, the HTTP export a 200, the events published, the bridge ready.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from streamguard.kafka.broker import free_port
from tests.deploy.conftest import prometheus_bin  # noqa: F401 (fixture)
from tests.deploy.promql import RULES, dashboard_exprs, metric_names, recording_rules, substitute
from tests.deploy.test_prometheus_e2e import Prometheus

from ..otel.agent import LOOP, SWEEP, provider, run_agent
from ..otel.otlp_fixtures import spans_json, spans_proto
from ..otel.test_otel_receiver import ChunkingSession
from .conftest import Topics
from .test_bridge import EVENTS_PER_RUN, sdk_spans, start_bridge, wait_events  # noqa: F401 (fixture)

pytestmark = pytest.mark.kafka

DEADLINE_S = 60.0


class FleetPrometheus(Prometheus):
    """Prometheus scraping a processor and a bridge under the deployed job names
    (``deploy/prometheus/prometheus.yml``: the rules select ``job="streamguard"``)."""

    def __init__(self, binary: str, workdir: Path, processor: str, bridge: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            json.dumps(  # JSON is YAML
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(RULES)],
                    "scrape_configs": [
                        {"job_name": "streamguard", "static_configs": [{"targets": [processor]}]},
                        {"job_name": "streamguard-bridge", "static_configs": [{"targets": [bridge]}]},
                    ],
                }
            )
        )
        self.log_path = workdir / "prometheus.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )


def bridge_row() -> list[tuple[str, str]]:
    """The dashboard's expressions over the bridge's series, Grafana variables replaced."""
    return [
        (title, substitute(expr))
        for title, expr in dashboard_exprs()
        if any(name.startswith("streamguard_bridge_") for name in metric_names(expr))
    ]


async def feed(topics: Topics, spans_topic: str, http_port: int) -> None:
    loop_spans = sdk_spans("prom-loop", LOOP)
    await topics.send(spans_topic, spans_proto(loop_spans))
    await topics.send(spans_topic, spans_proto(loop_spans))  # an exporter retry: duplicates
    await topics.send(spans_topic, spans_json(sdk_spans("prom-sweep", SWEEP)))
    await topics.send(spans_topic, b"\x0a\xff\xff garbage")  # dead-lettered, malformed_otlp

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    def agent_over_http() -> None:
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{http_port}/v1/traces", timeout=10, session=ChunkingSession(size=64)
        )
        tp = provider(exporter, processor=SimpleSpanProcessor(exporter))
        run_agent(tp, "prom-http", SWEEP)
        tp.shutdown()

    await asyncio.to_thread(agent_over_http)


async def value_of(prometheus: Prometheus, expr: str) -> float | None:
    result = await prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


async def test_prometheus_scrapes_the_bridge_and_its_dashboard_row_works(
    prometheus_bin: str, topics: Topics, start_processor: Any, start_bridge: Any, tmp_path: Path,  # noqa: F811
) -> None:
    processor = await start_processor()
    bridge = await start_bridge(otlp_http_host="127.0.0.1", otlp_http_port=0)
    assert bridge.http_port is not None
    prometheus = FleetPrometheus(
        prometheus_bin, tmp_path,
        f"127.0.0.1:{processor.processor.metrics_port}", f"127.0.0.1:{bridge.metrics_port}",
    )
    try:
        await feed(topics, bridge.config.spans_topic, bridge.http_port)
        await wait_events(topics, {"prom-loop": EVENTS_PER_RUN, "prom-sweep": EVENTS_PER_RUN, "prom-http": EVENTS_PER_RUN})
        await check(prometheus)
    except BaseException:
        print("prometheus log:\n" + prometheus.log_tail())
        raise
    finally:
        prometheus.stop()
    assert bridge.fatal is None and processor.processor.fatal is None


async def check(prometheus: Prometheus) -> None:
    row = bridge_row()
    assert row, "the dashboard has no bridge row"
    wanted = set().union(*(metric_names(expr) for _, expr in row)) - set(recording_rules())
    # what the traffic must show (counter values are cumulative: no rate needed)
    expected = {
        'up{job="streamguard-bridge"}': lambda v: v == 1,
        'up{job="streamguard"}': lambda v: v == 1,
        'sum(streamguard_bridge_dead_letters_total{reason="malformed_otlp"})': lambda v: v == 1,
        'sum(streamguard_bridge_records_total{outcome="dead_lettered"})': lambda v: v == 1,
        'sum(streamguard_bridge_duplicates_total)': lambda v: v >= 1,
        'sum(streamguard_bridge_events_total)': lambda v: v >= 3 * EVENTS_PER_RUN,
        'sum(streamguard_bridge_http_requests_total{path="/v1/traces",code="200"})': lambda v: v >= 1,
        'sum(streamguard_bridge_ready)': lambda v: v == 1,
        'sum(streamguard_bridge_checkpoint_duration_seconds_count)': lambda v: v >= 1,
    }

    deadline = time.monotonic() + DEADLINE_S
    while not await prometheus.ready():
        assert prometheus.proc.poll() is None, "prometheus exited:\n" + prometheus.log_tail()
        assert time.monotonic() < deadline, "prometheus never became ready"
        await asyncio.sleep(0.2)

    while True:
        missing: list[str] = []
        present = {
            s["metric"]["__name__"]
            for s in await prometheus.query('count by (__name__) ({__name__=~"streamguard_bridge_.*"})')
        }
        missing += [f"no series of {name}" for name in sorted(wanted - present)]
        for title, expr in row:
            if not await prometheus.query(expr):
                missing.append(f"{title}: no result for {expr}")
        for expr, holds in expected.items():
            value = await value_of(prometheus, expr)
            if value is None or not holds(value):
                missing.append(f"{expr} is {value}")
        if not missing:
            break
        assert time.monotonic() < deadline, f"after {DEADLINE_S} s: " + "; ".join(missing)
        await asyncio.sleep(0.5)
