"""Several processors in one consumer group: hand-over, take-over, shutdown."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.partitioner import murmur2

from streamguard.events import Alert, ToolCall
from tests.kafka.conftest import metric_value, poll_until
from tests.kafka.scenarios import T0, by_id, calm, expected_outputs, repeat_loop

pytestmark = pytest.mark.kafka


def home(session: str, partitions: int) -> int:
    return (murmur2(session.encode()) & 0x7FFFFFFF) % partitions


def fleet(partitions: int, per_partition: int = 2) -> dict[str, list]:
    """Sessions covering every partition: one halting loop and calm ones on each."""
    chosen: dict[int, list[str]] = {p: [] for p in range(partitions)}
    i = 0
    while any(len(v) < per_partition for v in chosen.values()):
        session = f"s-{i}"
        i += 1
        bucket = chosen[home(session, partitions)]
        if len(bucket) < per_partition:
            bucket.append(session)
    streams = {}
    for sessions in chosen.values():
        for j, session in enumerate(sessions):
            streams[session] = repeat_loop(session) if j == 0 else calm(session)
    return streams


async def send_interleaved(topics, streams: dict[str, list]) -> None:
    longest = max(len(e) for e in streams.values())
    for i in range(longest):
        for events in streams.values():
            if i < len(events):
                await topics.send(topics.events, events[i])


async def test_partition_handed_back_keeps_its_sessions(topics, start_processor) -> None:
    """Eager rebalances revoke everything; partitions that come straight back are not reloaded."""
    n = topics.partitions
    streams = fleet(n)
    halting = {s for s, e in streams.items() if len(e) == 6 and e[1].args == {"path": "main.go"}}
    a = await start_processor()
    await send_interleaved(topics, streams)
    await topics.wait_committed()
    pa = a.processor
    assert set(pa.engine.sessions) == set(streams)
    first_restore = pa.metrics.restored_sessions._value.get()

    b = await start_processor(ready=False)
    pb = b.processor

    def split() -> bool:
        mine, theirs = set(pa.sessions.partitions), set(pb.sessions.partitions)
        return (
            pa.ready
            and pb.ready
            and mine | theirs == set(range(n))
            and not mine & theirs
            and bool(mine)
            and bool(theirs)
        )

    await poll_until(split, 30, "the partitions to be split", task=b.task)
    kept = set(pa.sessions.partitions)
    for session in streams:
        owner = pa if home(session, n) in kept else pb
        other = pb if owner is pa else pa
        assert session in owner.engine.sessions
        assert session not in other.engine.sessions
        assert owner.engine.is_halted(session) == (session in halting)
    assert pa.metrics.restored_sessions._value.get() == first_restore  # nothing reloaded
    moved = [s for s in streams if home(s, n) not in kept]
    assert pb.metrics.restored_sessions._value.get() == len(moved)

    await b.stop()
    await poll_until(lambda: pa.ready and set(pa.sessions.partitions) == set(range(n)), 30, "take-back")
    assert set(pa.engine.sessions) == set(streams)
    assert {s for s in streams if pa.engine.is_halted(s)} == halting
    # only the partitions that were away are read back
    assert pa.metrics.restored_sessions._value.get() == first_restore + len(moved)


@pytest.mark.parametrize("topics", [6], indirect=True)
async def test_three_processors_share_and_take_over_with_halts_intact(
    topics, spawn_processor
) -> None:
    n = topics.partitions
    members = [spawn_processor(f"p{i}") for i in range(3)]

    async def settled(ms, each: int | None = None) -> bool:
        if not all(m.alive() for m in ms):
            raise AssertionError("a processor died:\n" + "\n".join(m.log_tail() for m in ms))
        # Ownership first, readiness second: an assignment records its partitions
        # (as restoring) before it publishes the new count, so a member that shows
        # the count and then reports ready has restored them. The other order can
        # pair a stale "ready" with the count of an assignment still restoring.
        texts = [await m.metrics() for m in ms]
        if any(text is None for text in texts):
            return False  # still starting
        counts = [metric_value(text, "streamguard_owned_partitions") or 0.0 for text in texts]
        if sum(counts) != n or (each is not None and any(c != each for c in counts)):
            return False
        return all([await m.ready() for m in ms])

    await poll_until(lambda: settled(members, 2), 60, "three members with two partitions each")

    streams = fleet(n)
    halting = {s for s, e in streams.items() if len(e) == 6 and e[1].args == {"path": "main.go"}}
    await send_interleaved(topics, streams)
    await topics.wait_committed()

    async def total(name: str, ms) -> float:
        return sum([await m.value(name) for m in ms])

    assert await total("streamguard_sessions_halted", members) == len(halting)
    assert await total("streamguard_active_sessions", members) == len(streams)

    # SIGKILL one member: no flush, no commit, no leave. The others take over.
    victim, survivors = members[1], [members[0], members[2]]
    victim.kill()
    await poll_until(lambda: settled(survivors), 60, "survivors to take over")
    assert await total("streamguard_sessions_halted", survivors) == len(halting)
    assert await total("streamguard_active_sessions", survivors) == len(streams)

    # The halts are live: every halted agent that carries on is flagged.
    extra = {s: ToolCall(session=s, agent="coder", tool="ls", args={}, ts=T0 + 60) for s in halting}
    for event in extra.values():
        await topics.send(topics.events, event)
    expected: dict = {}
    for session, events in streams.items():
        expected.update(
            by_id(expected_outputs(events + ([extra[session]] if session in extra else [])))
        )
    await topics.read_until(
        topics.alerts,
        lambda rs: len({r.value for r in rs}) >= len(expected),
        what="outputs after the take-over",
        timeout=30,
    )
    outputs = await topics.outputs()
    assert by_id(outputs) == expected
    flagged = {o.session for o in outputs if isinstance(o, Alert) and o.signal == "halt-ignored"}
    assert flagged == halting

    # SIGTERM: stop fetching, flush, commit, leave; the last member ends up with everything.
    await topics.wait_committed()
    code = await asyncio.to_thread(survivors[0].terminate)
    assert code == 0, survivors[0].log_tail()
    last = survivors[1]
    await poll_until(lambda: settled([last], n), 60, "the last member to own every partition")
    assert await last.value("streamguard_sessions_halted") == len(halting)
    assert await last.value("streamguard_active_sessions") == len(streams)
    code = await asyncio.to_thread(last.terminate)
    assert code == 0, last.log_tail()
    await topics.wait_committed()
