"""Fixtures for the Kafka suite: one real broker per test session, fresh topics per test.

The broker is Tansu on a free loopback port with in-memory storage
(:class:`streamguard.kafka.broker.LocalBroker`). Each test gets its own topic
names and consumer-group id, so tests never see each other's records or
offsets and need no clean-up.

Helpers here wait on conditions with deadlines (``poll_until``,
``Topics.read_until``): the suite never sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streamguard.events import output_decoder
from streamguard.kafka.broker import LocalBroker, free_port
from streamguard.kafka.changelog import iter_to_end
from streamguard.kafka.config import ProcessorConfig
from streamguard.kafka.processor import Processor
from streamguard.kafka.topics import create_processor_topics

_counter = itertools.count()
REPO_ROOT = Path(__file__).resolve().parents[2]

# Group timings tuned for a loaded 2-core test machine: fast failure detection,
# still comfortably above scheduling hiccups.
FAST_GROUP = {
    "session_timeout_ms": 4000,
    "heartbeat_interval_ms": 400,
    "rebalance_timeout_ms": 8000,
}


@pytest.fixture(scope="session")
def broker() -> Iterator[LocalBroker]:
    with LocalBroker() as running:
        yield running


class Topics:
    """One test's topic names plus produce/read helpers against them."""

    def __init__(self, bootstrap: str, prefix: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.partitions = partitions
        self.events = f"{prefix}.events"
        self.control = f"{prefix}.control"
        self.alerts = f"{prefix}.alerts"
        self.dlq = f"{prefix}.dlq"
        self.changelog = f"{prefix}.changelog"
        self.fleet_facts = f"{prefix}.fleet.facts"
        self.fleet_state = f"{prefix}.fleet.state"
        self.fleet_circuits = f"{prefix}.fleet.circuits"
        self.group = f"{prefix}.group"
        self._producer: AIOKafkaProducer | None = None

    def all(self) -> list[str]:
        return [self.events, self.control, self.alerts, self.dlq, self.changelog]

    async def create(self) -> None:
        await create_processor_topics(self.config(), self.partitions)

    def config(self, **overrides: Any) -> ProcessorConfig:
        raw: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "group_id": self.group,
            "events_topic": self.events,
            "control_topic": self.control,
            "alerts_topic": self.alerts,
            "dlq_topic": self.dlq,
            "changelog_topic": self.changelog,
            "fleet_facts_topic": self.fleet_facts,
            "fleet_state_topic": self.fleet_state,
            "fleet_circuits_topic": self.fleet_circuits,
            "metrics_host": "127.0.0.1",
            "metrics_port": 0,
            "checkpoint_interval_ms": 200,
            "linger_ms": 0,
            **FAST_GROUP,
        }
        raw.update(overrides)
        return ProcessorConfig.build(raw)

    async def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            self._producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=False
            )
            await self._producer.start()
        return self._producer

    async def send(
        self,
        topic: str,
        value: Any,
        *,
        key: str | bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int | None = None,
    ) -> Any:
        """Produce one record; dict/Struct values are JSON-encoded, key defaults to the session."""
        if isinstance(value, msgspec.Struct | dict):
            if key is None:
                session = value["session"] if isinstance(value, dict) else value.session
                key = session
            value = msgspec.json.encode(value)
        if isinstance(key, str):
            key = key.encode()
        producer = await self.producer()
        return await producer.send_and_wait(
            topic,
            value=value,
            key=key,
            partition=partition,
            headers=headers,
            timestamp_ms=timestamp_ms,
        )

    async def send_events(self, events: list[Any], **kwargs: Any) -> None:
        for event in events:
            await self.send(self.events, event, **kwargs)

    async def read_all(self, topic: str, *, timeout: float = 5.0) -> list[Any]:
        """Every record currently in ``topic`` (to the end seen when reading starts)."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(self.partitions)]
            records: list[Any] = []

            async def collect() -> None:
                async for _, batch in iter_to_end(consumer, tps):
                    records.extend(batch)

            await asyncio.wait_for(collect(), timeout)
            return records
        finally:
            # Bounded: aiokafka 0.14's fetcher can hang in stop() after a fetch was
            # cancelled (the timeout above), and a hung helper would hang the suite.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(consumer.stop(), 10)

    async def read_until(
        self,
        topic: str,
        predicate: Callable[[list[Any]], bool],
        *,
        timeout: float = 20.0,
        what: str = "expected records",
    ) -> list[Any]:
        """Re-read ``topic`` until ``predicate(records)`` holds; fail at the deadline."""
        deadline = time.monotonic() + timeout
        records: list[Any] = []
        while time.monotonic() < deadline:
            records = await self.read_all(topic)
            if predicate(records):
                return records
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; have {len(records)}")

    async def outputs(self) -> list[Any]:
        return [output_decoder.decode(r.value) for r in await self.read_all(self.alerts)]

    async def end_offsets(self, topic: str) -> dict[int, int]:
        """Offset after the last record of each partition (read, not listed: see iter_to_end)."""
        ends = dict.fromkeys(range(self.partitions), 0)
        for record in await self.read_all(topic):
            ends[record.partition] = max(ends[record.partition], record.offset + 1)
        return ends

    async def committed(self, topic: str) -> dict[int, int]:
        """The group's committed offsets (-1: none). Tansu does not answer the admin
        client's OffsetFetch, so this asks through a group-less-joined consumer."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False
        )
        await consumer.start()
        try:
            out = {}
            for p in range(self.partitions):
                offset = await consumer.committed(TopicPartition(topic, p))
                out[p] = -1 if offset is None else offset
            return out
        finally:
            await consumer.stop()

    async def wait_committed(
        self, *, timeout: float = 20.0, topics: list[str] | None = None
    ) -> None:
        """Wait until the group has committed everything currently in the input topics."""
        deadline = time.monotonic() + timeout
        topics = topics or [self.events, self.control]
        targets = {t: await self.end_offsets(t) for t in topics}
        while True:
            done = True
            for topic, ends in targets.items():
                committed = await self.committed(topic)
                for partition, end in ends.items():
                    if end > 0 and committed.get(partition, -1) < end:
                        done = False
            if done:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"group {self.group} did not commit {targets} in {timeout} s")
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None


@pytest.fixture
async def topics(broker: LocalBroker, request: pytest.FixtureRequest) -> AsyncIterator[Topics]:
    name = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    prefix = f"t{next(_counter)}-{name}-{int(time.time() * 1000) % 100000}"
    partitions = getattr(request, "param", None) or 4
    made = Topics(broker.bootstrap_servers, prefix, partitions)
    await made.create()
    try:
        yield made
    finally:
        await made.close()


class ManualClock:
    """A processing-time clock that moves only when the test says so."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Running:
    """A processor running as a task in the test's event loop."""

    def __init__(self, processor: Processor) -> None:
        self.processor = processor
        self.task: asyncio.Task[None] = asyncio.create_task(processor.run())

    async def wait_ready(self, timeout: float = 30.0) -> None:
        await poll_until(lambda: self.processor.ready, timeout, "processor ready", task=self.task)

    async def stop(self, timeout: float = 30.0) -> None:
        self.processor.request_stop()
        await asyncio.wait_for(self.task, timeout)

    async def crashed(self, timeout: float = 30.0) -> BaseException:
        """Wait for the task to fail; return its exception."""
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        assert self.task.done(), "the processor did not stop"
        exc = self.task.exception()
        assert exc is not None, "the processor stopped without an error"
        return exc

    async def metrics_text(self) -> str:
        status, body = await http_get(self.processor.metrics_port, "/metrics")
        assert status == 200
        return body


async def http_get(port: int | None, path: str, host: str = "127.0.0.1") -> tuple[int, str]:
    """A minimal async GET (the server runs on the test's own event loop)."""
    assert port is not None
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, body.decode()


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text output (None: absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        if series == name and not labels:
            return float(value)
        if series.startswith(name + "{") and all(f'{k}="{v}"' in series for k, v in labels.items()):
            return float(value)
    return None


async def poll_until(
    condition: Callable[[], bool | Awaitable[bool]],
    timeout: float,
    what: str,
    *,
    task: asyncio.Task[Any] | None = None,
    interval: float = 0.05,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if task is not None and task.done():
            exc = task.exception()
            raise AssertionError(f"processor stopped while waiting for {what}: {exc!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


@pytest.fixture
async def start_processor(topics: Topics) -> AsyncIterator[Callable[..., Awaitable[Running]]]:
    """Start processors on the test's topics; any still running are stopped at teardown."""
    running: list[Running] = []

    async def start(
        *,
        ready: bool = True,
        fault: Any = None,
        clock: Callable[[], float] = time.time,
        **overrides: Any,
    ) -> Running:
        processor = Processor(topics.config(**overrides), fault=fault, clock=clock)
        handle = Running(processor)
        running.append(handle)
        if ready:
            await handle.wait_ready()
        return handle

    yield start
    for handle in running:
        if not handle.task.done():
            with contextlib.suppress(BaseException):
                await handle.stop()


class ProcessorProcess:
    """``streamguard run`` in a child process (for real SIGKILL / SIGTERM)."""

    def __init__(self, topics: Topics, name: str, log_dir: Any, **overrides: Any) -> None:
        self.name = name
        self.port = free_port()
        config = topics.config(metrics_port=self.port, **overrides)
        args = [sys.executable, "-m", "streamguard.cli", "run"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGUARD_")}
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        defaults = ProcessorConfig()
        for field in msgspec.structs.fields(ProcessorConfig):
            value = getattr(config, field.name)
            if value == getattr(defaults, field.name):
                continue
            if isinstance(value, bool):
                args.append(
                    ProcessorConfig.flag(field.name)
                    if value
                    else "--no-" + field.name.replace("_", "-")
                )
            elif isinstance(value, list):
                args += [ProcessorConfig.flag(field.name), ",".join(value)]
            else:
                args += [ProcessorConfig.flag(field.name), str(value)]
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    async def metrics(self) -> str | None:
        try:
            status, body = await http_get(self.port, "/metrics")
        except OSError:
            return None
        return body if status == 200 else None

    async def ready(self) -> bool:
        try:
            return (await http_get(self.port, "/readyz"))[0] == 200
        except OSError:
            return False

    async def value(self, name: str, **labels: str) -> float:
        text = await self.metrics()
        assert text is not None, f"{self.name} is not serving metrics"
        return metric_value(text, name, **labels) or 0.0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def log_tail(self, lines: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@pytest.fixture
def spawn_processor(topics: Topics, tmp_path: Any) -> Iterator[Callable[..., ProcessorProcess]]:
    spawned: list[ProcessorProcess] = []

    def spawn(name: str, **overrides: Any) -> ProcessorProcess:
        child = ProcessorProcess(topics, name, tmp_path, **overrides)
        spawned.append(child)
        return child

    yield spawn
    for child in spawned:
        child.close()
