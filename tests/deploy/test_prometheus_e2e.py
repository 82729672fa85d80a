"""A real Prometheus scraping a real processor: every query of the dashboard and
of the rules must work against what the code actually exports.

The processor runs against the test broker and is fed events that cause each
kind of series: alerts (warn, critical, halt-ignored), guardrail trips, a reset
on the control topic, a dead letter, a security event, an unknown event type, a
misrouted record and an idle eviction. Prometheus (Debian's ``prometheus``
binary) scrapes it every second with rules.yml loaded and evaluated every
second. The test then waits, by polling with a deadline, until:

* ``up{job="streamguard"}`` is 1;
* every metric name the dashboard or the rules select has series;
* every dashboard expression returns series (rates need two scrapes);
* every rule has been evaluated without error, and every recording rule that
  does not look a day back returns series;
* the two alerts this traffic must raise at once (halt ignored, security event)
  are firing.

Alert expressions and the day-old baseline legitimately return nothing here;
for them the test checks that they evaluate without error and that every name
they select exists (as a series, or as a recording rule whose inputs do).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiokafka.partitioner import murmur2

from streamguard.events import Reset, ToolCall, TurnStart, Usage
from streamguard.kafka.broker import free_port
from tests.deploy.promql import (
    RULES,
    alert_rules,
    dashboard_exprs,
    metric_names,
    recording_rules,
    substitute,
)
from tests.kafka.scenarios import T0, cycle_loop, failure_streak, repeat_loop

pytestmark = pytest.mark.kafka

DEADLINE_S = 45.0
FLEET_POLICY = """
[[fleet]]
name = "spend"
[[fleet.limits]]
metric = "spend_usd"
above = 1.0
action = "halt"
"""


class Prometheus:
    """A Prometheus server on a free loopback port, scraping one target."""

    def __init__(self, binary: str, workdir: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            json.dumps(  # JSON is YAML
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(RULES)],
                    "scrape_configs": [
                        {"job_name": "streamguard", "static_configs": [{"targets": [target]}]}
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

    def _get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 400/422: a bad query, with its error
            return json.loads(exc.read())

    async def get(self, path: str, **params: str) -> Any:
        # In a thread: the processor's HTTP endpoint runs on this event loop.
        return await asyncio.to_thread(self._get, path, **params)

    async def query(self, expr: str) -> list[dict[str, Any]]:
        answer = await self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", f"{expr}: {answer.get('error')}"
        return answer["data"]["result"]

    async def ready(self) -> bool:
        try:
            await asyncio.to_thread(urllib.request.urlopen, f"{self.url}/-/ready", timeout=2)
        except OSError:
            return False
        return True

    def log_tail(self) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def partition_of(key: str, partitions: int) -> int:
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


async def feed(topics: Any) -> None:
    """Events that bring every labelled series of the processor into existence."""
    n = topics.partitions
    halted = repeat_loop("s-repeat")
    halted.append(
        ToolCall(session="s-repeat", agent="coder", tool="read_file", args={"path": "main.go"}, ts=T0 + 10)
    )  # after the halt: halt-ignored
    for stream in (halted, cycle_loop("s-cycle"), failure_streak("s-fail", agent="ops")):
        await topics.send_events(stream)
    await topics.send(topics.events, b"{not json", key="s-bad")  # dead letter: malformed
    # too large to copy whole into its dead letter: cut, and counted
    await topics.send(topics.events, b"[" * 100_000, key="s-huge")
    await topics.send(topics.events, {"type": "reset", "session": "s-sec"})  # security event
    await topics.send(topics.events, {"type": "from_the_future", "session": "s-new"})  # skipped
    wrong = (partition_of("s-mis", n) + 1) % n
    await topics.send(topics.events, TurnStart(session="s-mis", agent="coder", ts=T0), partition=wrong)
    await topics.send(topics.control, Reset(session="s-cycle", by="test"))
    # s-fail is idle past the TTL (5 s of processing time) and is evicted by the
    # processor's timer sweep. A record stamped an hour ahead is clamped (and
    # counted), and evicts nothing by itself.
    late = next(f"s-late-{i}" for i in range(1000) if partition_of(f"s-late-{i}", n) == partition_of("s-fail", n))
    await topics.send(
        topics.events,
        TurnStart(session=late, agent="ops", ts=T0 + 60),
        timestamp_ms=int(time.time() * 1000) + 3_600_000,
    )
    # Fleet guardrails: one agent's spend over its [[fleet]] limit opens its circuit
    # (a fleet alert, fleet trips); a fact dated two days back falls outside the window.
    await topics.send(topics.events, Usage(session="s-spend", agent="coder", cost_usd=2.0, ts=time.time()))
    await topics.send(
        topics.events, Usage(session="s-old", agent="ops", cost_usd=0.1, ts=time.time() - 172_800)
    )
    await topics.send(topics.events, Usage(session="s-new-ops", agent="ops", cost_usd=0.1, ts=time.time()))
    await topics.send(
        topics.events, Usage(session="s-older", agent="ops", cost_usd=0.1, ts=time.time() - 172_800)
    )


async def test_prometheus_scrapes_the_processor_and_every_query_works(
    prometheus_bin, yaml_module, topics, start_processor, tmp_path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(FLEET_POLICY)
    running = await start_processor(
        session_idle_ttl_s=5,
        halted_session_ttl_s=3600,
        max_output_bytes=64 * 1024,
        policy=str(policy),
    )
    prometheus = Prometheus(prometheus_bin, tmp_path, f"127.0.0.1:{running.processor.metrics_port}")
    try:
        await feed(topics)
        await check(prometheus)
    except BaseException:
        print("prometheus log:\n" + prometheus.log_tail())
        raise
    finally:
        prometheus.stop()
    await running.stop()


async def check(prometheus: Prometheus) -> None:
    # The bridge's row is about another job (streamguard bridge), not scraped here;
    # test_dashboard checks its names against the bridge's registry.
    dashboard = [
        (title, substitute(expr))
        for title, expr in dashboard_exprs()
        if not all(name.startswith("streamguard_bridge_") for name in metric_names(expr))
    ]
    recording = recording_rules()
    alerts = {name: rule["expr"] for name, rule in alert_rules().items()}
    wanted_raw = set().union(
        *(metric_names(e) for _, e in dashboard),
        *(metric_names(e) for e in recording.values()),
        *(metric_names(e) for e in alerts.values()),
    ) - set(recording)
    must_return = [*dashboard, *((name, e) for name, e in recording.items() if "offset" not in e)]

    deadline = time.monotonic() + DEADLINE_S
    while not await prometheus.ready():
        assert prometheus.proc.poll() is None, "prometheus exited:\n" + prometheus.log_tail()
        assert time.monotonic() < deadline, "prometheus never became ready"
        await asyncio.sleep(0.2)
    started = time.time()

    missing: list[str] = []
    while True:
        missing = []
        up = await prometheus.query('up{job="streamguard"}')
        if [s["value"][1] for s in up] != ["1"]:
            missing.append(f"up is {up}")
        present = {
            s["metric"]["__name__"]
            for s in await prometheus.query('count by (__name__) ({__name__=~"streamguard_.*|up"})')
        }
        missing += [f"no series of {name}" for name in sorted(wanted_raw - present)]
        for title, expr in must_return:
            if not await prometheus.query(expr):
                missing.append(f"{title}: no result for {expr}")
        rules = await prometheus.get("/api/v1/rules")
        for group in rules["data"]["groups"]:
            for rule in group["rules"]:
                assert rule["health"] != "err", f"{rule['name']}: {rule.get('lastError')}"
                if rule["health"] != "ok":
                    missing.append(f"rule {rule['name']} not evaluated yet")
        firing = {
            (a["labels"]["alertname"], a["labels"].get("agent") or a["labels"].get("kind"))
            for a in (await prometheus.get("/api/v1/alerts"))["data"]["alerts"]
            if a["state"] == "firing"
        }
        for expected in (("StreamguardHaltIgnored", "coder"), ("StreamguardSecurityEvent", "control_on_events_topic")):
            if expected not in firing:
                missing.append(f"{expected} not firing")
        if not missing:
            break
        assert time.monotonic() < deadline, f"after {DEADLINE_S} s: " + "; ".join(missing)
        await asyncio.sleep(0.5)

    # Every expression evaluates without error (query() asserts success); alert
    # expressions may be empty, but only ones whose names all exist.
    for name, expr in alerts.items():
        await prometheus.query(expr)
        for metric in metric_names(expr):
            assert metric in present or metric in recording, f"{name}: {metric} does not exist"
    assert ("StreamguardInstanceDown", None) not in firing
    assert ("StreamguardAllInstancesDown", None) not in firing
    assert time.time() - started < DEADLINE_S
