"""Fleet guardrails' delay: from the fact that crosses a limit to the trips of the scope's sessions.

Usage::

    python bench/fleet.py                 # 3 instances, 6 partitions, 10 trials, 300 events/s of background
    python bench/fleet.py --quick         # a smoke run
    python bench/fleet.py --json          # the result as JSON

A local broker is started unless ``--bootstrap`` names one. ``--instances``
processes of ``streamguard run`` (each also a fleet-stage member) share the
partitions, under a policy with one ``[[fleet]]`` rule over every agent:
an ``alert`` limit at 8 USD and a ``halt`` limit at 10 USD of spend per agent
in a rolling hour. A paced producer offers ``--rate`` events/s of background
sessions (tool calls and usage, their own agents, never near a limit) for the
whole run: the fixed load.

Each trial takes a fresh agent (a fresh scope) with ``--scope-sessions``
sessions spread over every partition, brings its spend to 9 USD (and waits for
the 8 USD ``fleet_alert``: the window holds it), then publishes the crossing
usage event of 2 USD in one session. Measured per session of the scope: from
the broker's acknowledgement of that event to a consumer receiving the
session's fleet trip (``delay``), and to the trip record's own timestamp (when
the instance holding the session produced it). The spend of the crossing
event reaches the fleet stage with its session stage's next checkpoint
(``--checkpoint-interval-ms``, 1 s by default): that flush is most of the
delay, by design (docs/fleet.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import murmur2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.e2e import RunTopics, free_port, machine, quantile  # noqa: E402
from streamguard.events import FleetAlert, GuardrailTrip, output_decoder  # noqa: E402
from streamguard.kafka.topics import create_processor_topics  # noqa: E402

POLICY = """
[[fleet]]
name = "spend"
by = "agent"
match = "*"
window_s = 3600
[[fleet.limits]]
metric = "spend_usd"
above = 8
action = "alert"
[[fleet.limits]]
metric = "spend_usd"
above = 10
action = "halt"
"""


def log(message: str) -> None:
    print(f"[fleet-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def spread(prefix: str, partitions: int, count: int) -> list[str]:
    """``count`` session ids whose home partitions cover every partition, round-robin."""
    by_partition: dict[int, list[str]] = {p: [] for p in range(partitions)}
    i = 0
    need = -(-count // partitions)
    while any(len(v) < need for v in by_partition.values()):
        name = f"{prefix}-{i}"
        bucket = by_partition[(murmur2(name.encode()) & 0x7FFFFFFF) % partitions]
        if len(bucket) < need:
            bucket.append(name)
        i += 1
    ordered = [by_partition[p][j] for j in range(need) for p in range(partitions)]
    return ordered[:count]


class Child:
    def __init__(self, bootstrap: str, topics: RunTopics, policy: str, log_dir: Path, name: str,
                 extra: list[str]) -> None:
        self.port = free_port()
        args = [
            sys.executable, "-m", "streamguard.cli", "run", "--bootstrap-servers", bootstrap,
            *topics.flags(), "--policy", policy, "--metrics-host", "127.0.0.1",
            "--metrics-port", str(self.port), "--fetch-max-wait-ms", "10",
            "--session-timeout-ms", "6000", "--heartbeat-interval-ms", "500", *extra,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    async def ready(self) -> bool:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return False
        try:
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.read(64), 5)
        finally:
            writer.close()
        return b" 200 " in head

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


class Follower:
    """Reads the alerts topic as it grows: fleet alerts and fleet trips, with receive times."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                         fetch_max_wait_ms=10)
        self.topic = topic
        self.partitions = partitions
        self.alerts: dict[str, float] = {}  # scope -> receive time of its first fleet alert
        self.trips: dict[str, tuple[float, float]] = {}  # session -> (received, record ts)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        self.consumer.assign(tps)
        await self.consumer.seek_to_beginning(*tps)
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=50)
            now = time.time()
            for records in batch.values():
                for record in records:
                    kind = dict(record.headers or ()).get("type")
                    if kind not in (b"fleet_alert", b"guardrail_trip"):
                        continue
                    output = output_decoder.decode(record.value)
                    if isinstance(output, FleetAlert):
                        self.alerts.setdefault(output.session, now)
                    elif isinstance(output, GuardrailTrip) and output.guardrail == "fleet":
                        self.trips.setdefault(output.session, (now, record.timestamp / 1000.0))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        await self.consumer.stop()


async def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.01)


async def background(producer: AIOKafkaProducer, topic: str, rate: float, sessions: int,
                     stop: asyncio.Event, sent: list[int]) -> None:
    """``rate`` events/s over ``sessions`` background sessions: a tool call, then its usage."""
    interval = 1.0 / rate
    seq: dict[str, int] = {}
    i = 0
    start = time.monotonic()
    while not stop.is_set():
        session = f"bg-{i % sessions}"
        n = seq.get(session, 0) + 1
        seq[session] = n
        agent = f"bg-agent-{i % 7}"
        if n % 2:
            event = {"type": "tool_call", "session": session, "agent": agent, "seq": n,
                     "tool": "read_file", "args": {"path": f"src/{n}.py"}}
        else:
            event = {"type": "usage", "session": session, "agent": agent, "seq": n,
                     "input_tokens": 2000, "output_tokens": 100, "cost_usd": 0.0001}
        await producer.send(topic, msgspec.json.encode(event), key=session.encode())
        i += 1
        sent[0] = i
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from streamguard.kafka.broker import LocalBroker

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = stack.enter_context(LocalBroker())
            bootstrap = broker.bootstrap_servers
        topics = RunTopics(f"fleetbench-{int(time.time())}", args.partitions)
        await create_processor_topics(topics.config(bootstrap), args.partitions)
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-bench-")))
        policy = work / "policy.toml"
        policy.write_text(POLICY)
        children = [Child(bootstrap, topics, str(policy), work, f"run-{i}", args.processor_flags)
                    for i in range(args.instances)]
        stack.callback(lambda: [c.stop() for c in children])
        deadline = time.monotonic() + 90
        while not all([await c.ready() for c in children]):
            if time.monotonic() > deadline or any(c.proc.poll() is not None for c in children):
                raise RuntimeError("instances not ready: " + children[0].log_path.read_text()[-2000:])
            await asyncio.sleep(0.2)
        log(f"{args.instances} instances ready")
        follower = Follower(bootstrap, topics.alerts, args.partitions)
        await follower.start()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False,
                                    linger_ms=5)
        await producer.start()
        stop = asyncio.Event()
        sent = [0]
        load = asyncio.create_task(background(producer, topics.events, args.rate, args.background_sessions,
                                              stop, sent))
        delays: list[float] = []
        produced: list[float] = []
        all_tripped: list[float] = []
        try:
            await asyncio.sleep(args.warmup_s)  # the background load reaches its pace first
            for trial in range(args.trials):
                agent = f"hot-{trial}"
                scope = f"spend:agent={agent}"
                sessions = spread(agent, args.partitions, args.scope_sessions)
                for session in sessions:
                    event = {"type": "usage", "session": session, "agent": agent, "seq": 1,
                             "cost_usd": 9.0 / len(sessions)}
                    await producer.send_and_wait(topics.events, msgspec.json.encode(event),
                                                 key=session.encode())
                await wait_for(lambda scope=scope: scope in follower.alerts, 60, f"the 8 USD alert of {scope}")
                crossing = {"type": "usage", "session": sessions[0], "agent": agent, "seq": 2, "cost_usd": 2.0}
                await producer.send_and_wait(topics.events, msgspec.json.encode(crossing),
                                             key=sessions[0].encode())
                acked = time.time()
                await wait_for(lambda ss=sessions: all(s in follower.trips for s in ss), 60,
                               f"the fleet trips of {scope}")
                trial_delays = [follower.trips[s][0] - acked for s in sessions]
                delays += trial_delays
                produced += [follower.trips[s][1] - acked for s in sessions]
                all_tripped.append(max(trial_delays))
                log(f"trial {trial}: {len(sessions)} sessions tripped, "
                    f"median {statistics.median(trial_delays) * 1000:.0f} ms, "
                    f"last {max(trial_delays) * 1000:.0f} ms")
        finally:
            stop.set()
            load.cancel()
            with contextlib.suppress(BaseException):
                await load
            await producer.stop()
            await follower.stop()
        delays.sort()
        produced.sort()
        all_tripped.sort()
        return {
            "machine": machine(),
            "command": " ".join(["python", "bench/fleet.py", *args.argv]),
            "settings": {
                "instances": args.instances, "partitions": args.partitions, "trials": args.trials,
                "scope_sessions": args.scope_sessions, "background_rate": args.rate,
                "background_sessions": args.background_sessions, "processor_flags": args.processor_flags,
            },
            "background_events_sent": sent[0],
            "samples": len(delays),
            "delay_ms": {q: round(quantile(delays, v) * 1000, 1) for q, v in
                         (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
            "produced_ms": {q: round(quantile(produced, v) * 1000, 1) for q, v in
                            (("p50", 0.5), ("p99", 0.99))},
            "all_sessions_tripped_ms": {q: round(quantile(all_tripped, v) * 1000, 1) for q, v in
                                        (("p50", 0.5), ("p99", 0.99), ("max", 1.0))},
        }


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    d, p, a = result["delay_ms"], result["produced_ms"], result["all_sessions_tripped_ms"]
    return "\n".join([
        f"fleet guardrail delay: {s['instances']} instances, {s['partitions']} partitions, "
        f"{s['trials']} trials x {s['scope_sessions']} sessions, background {s['background_rate']:g} events/s",
        f"  crossing event acked -> trip received: p50 {d['p50']} ms, p90 {d['p90']} ms, "
        f"p99 {d['p99']} ms, max {d['max']} ms ({result['samples']} trips)",
        f"  crossing event acked -> trip produced: p50 {p['p50']} ms, p99 {p['p99']} ms",
        f"  until every session of the scope tripped: p50 {a['p50']} ms, p99 {a['p99']} ms",
    ])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--scope-sessions", type=int, default=12)
    parser.add_argument("--rate", type=float, default=300.0, help="background events/s")
    parser.add_argument("--background-sessions", type=int, default=300)
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--processor-flag", dest="processor_flags", action="append", default=[],
                        metavar="FLAG", help="extra `streamguard run` flag (repeat)")
    parser.add_argument("--quick", action="store_true", help="2 trials, 6 sessions, 100 events/s")
    parser.add_argument("--json", action="store_true")
    if parser.parse_args(argv).quick:
        parser.set_defaults(trials=2, scope_sessions=6, rate=100.0, partitions=4, warmup_s=1.0)
    args = parser.parse_args(argv)
    args.argv = argv
    args.processor_flags = [f for flag in args.processor_flags for f in flag.split("=", 1)]
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
