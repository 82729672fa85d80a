"""Parts of the processor against what a hostile writer or client can send: the session table
restored from a changelog, and the HTTP endpoint."""

from __future__ import annotations

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
