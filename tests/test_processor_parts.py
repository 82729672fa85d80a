"""Parts of the processor against what a hostile writer or client can send: the session table
restored from a changelog, and the HTTP endpoint."""

from __future__ import annotations

from typing import Any

from streamguard.engine import Engine
from streamguard.events import TurnStart
from streamguard.kafka.changelog import ChangelogEntry
from streamguard.kafka.sessions import OwnedPartition, PartitionStatus, SessionTable
from streamguard.policy import PolicySet

DAY = 86_400.0


def test_a_restored_last_activity_from_the_future_does_not_block_eviction() -> None:
    engine = Engine(PolicySet())
    evicted: list[str] = []
    table = SessionTable(engine, lambda session, part: evicted.append(session), lambda kind: None)
    part = OwnedPartition(0, PartitionStatus.ACTIVE)
    table.partitions[0] = part
    now = 1_760_000_000.0
    entries = []
    for name, last_seen in [("forged", 1e300), ("nan", float("nan")), ("old-1", now - 2 * DAY),
                            ("old-2", now - 2 * DAY + 1)]:
        engine.process(TurnStart(session=name))
        entries.append((name, ChangelogEntry(1, 5, 0, last_seen, b"")))
    assert table.install(part, entries, now) == 4
    # a forged time reads as the restore's own: the old sessions behind it still expire
    assert table.meta["forged"].last_seen == now and table.meta["nan"].last_seen == now
    table.sweep(now + DAY / 2, idle_ttl=DAY, halted_ttl=7 * DAY, budget=100)
    assert evicted == ["old-1", "old-2"]
    table.sweep(now + 2 * DAY, idle_ttl=DAY, halted_ttl=7 * DAY, budget=100)
    assert sorted(evicted) == ["forged", "nan", "old-1", "old-2"]


async def test_the_endpoint_answers_a_request_line_past_its_limit_with_a_400() -> None:
    import asyncio

    from prometheus_client import CollectorRegistry

    from streamguard.kafka.health import HealthServer

    server = HealthServer(CollectorRegistry(), liveness=lambda: (True, ""), readiness=lambda: (True, ""))
    await server.start()
    try:
        async def ask(request: bytes) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            return answer

        assert (await ask(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await ask(b"GET /healthz HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")
    finally:
        await server.close()


def test_a_partition_holds_at_most_its_bound_and_never_evicts_a_halt_for_room() -> None:
    from streamguard.events import ToolCall

    engine = Engine(PolicySet())
    evicted: list[tuple[str, str]] = []
    dropped: list[str] = []
    table = SessionTable(engine, lambda session, part: dropped.append(session),
                         lambda kind: evicted.append((kind, "")), max_per_partition=3)
    part = OwnedPartition(0, PartitionStatus.ACTIVE)
    table.partitions[0] = part

    def record(session: str, now: float, *events: Any) -> None:
        for event in events or (TurnStart(session=session),):
            engine.process(event)
        table.touch(part, session, table.meta.get(session), now)

    # "halted" trips repeated-tool-call and is held halted
    record("halted", 1.0, *[ToolCall(session="halted", tool="read_file", args={"path": "a"}) for _ in range(5)])
    assert engine.is_halted("halted")
    for i, name in enumerate(["a", "b", "c", "d"]):
        record(name, 2.0 + i)
    # bound 3: the oldest idle ones went, the halt was parked (kept), the newest stays
    assert set(table.meta) == {"halted", "c", "d"} and engine.is_halted("halted")
    assert dropped == ["a", "b"] and [k for k, _ in evicted] == ["capacity", "capacity"]
    assert "a" not in engine.sessions  # its state is gone with it: memory, not only bookkeeping
    record("c", 10.0)  # activity moves a session to the back of the idle order
    record("e", 11.0)
    assert set(table.meta) == {"halted", "c", "e"}
