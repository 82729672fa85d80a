"""State across restarts and crashes: halts persist, nothing is lost, nothing is applied twice."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from streamguard.events import Alert, ToolCall
from streamguard.kafka.processor import Processor, SimulatedCrash
from tests.kafka.conftest import metric_value, poll_until
from tests.kafka.scenarios import T0, by_id, expected_outputs, repeat_loop

pytestmark = pytest.mark.kafka


async def test_halt_survives_a_restart(topics, start_processor) -> None:
    first = await start_processor()
    events = repeat_loop("s-halt")
    await topics.send_events(events)
    await poll_until(lambda: first.processor.engine.is_halted("s-halt"), 20, "the halt")
    await first.stop()

    second = await start_processor()
    assert second.processor.engine.is_halted("s-halt")
    state = second.processor.engine.sessions["s-halt"]
    assert state.applied == len(events)
    text = await second.metrics_text()
    assert metric_value(text, "streamguard_restored_sessions_total") == 1.0
    assert metric_value(text, "streamguard_sessions_halted") == 1.0

    # The restored halt is live: another call from the halted agent is flagged.
    extra = ToolCall(session="s-halt", agent="coder", tool="ls", args={}, ts=T0 + 50)
    await topics.send(topics.events, extra)
    expected = by_id(expected_outputs([*events, extra]))
    await topics.read_until(topics.alerts, lambda rs: len(rs) >= len(expected))
    outputs = await topics.outputs()
    assert by_id(outputs) == expected
    assert len(outputs) == len(expected)
    assert any(isinstance(o, Alert) and o.signal == "halt-ignored" for o in outputs)


# Where the crash hits, and how many copies of the crashed cycle's outputs the
# alerts topic must end up with:
CRASH_POINTS = {
    # after the outputs were acknowledged, before the snapshot: the replay
    # re-emits them (same ids) but applies nothing twice
    "outputs_acked": 2,
    # after the snapshot, before the commit: the snapshot's offsets make the
    # replay skip the records, so nothing is re-emitted
    "changelog_acked": 1,
    # in the middle of a batch, before anything was sent
    "record_processed": 1,
    # right after the commit: nothing to replay
    "committed": 1,
}


class CrashAt:
    """A fault hook: crash at ``point`` once ``session`` has applied ``applied`` events."""

    def __init__(self, point: str, session: str, applied: int) -> None:
        self.point = point
        self.session = session
        self.applied = applied
        self.armed = False
        self.processor: Processor | None = None

    def __call__(self, where: str) -> None:
        if not self.armed or where != self.point or self.processor is None:
            return
        state = self.processor.engine.sessions.get(self.session)
        if state is not None and state.applied == self.applied:
            self.armed = False
            raise SimulatedCrash(where)


async def test_crash_at_any_point_loses_nothing_and_applies_nothing_twice(
    topics, start_processor
) -> None:
    """One processor per crash point, each crashing on its own session, in one group."""
    streams = {point: repeat_loop(f"s-{point}") for point in CRASH_POINTS}
    for point, events in streams.items():
        crash = CrashAt(point, f"s-{point}", len(events))
        running = await start_processor(fault=crash)
        crash.processor = running.processor
        await topics.send_events(events[:4])  # turn start + 3 calls: no output yet
        await topics.wait_committed()
        crash.armed = True
        await topics.send_events(events[4:])  # calls 4 and 5: alert + trip at the 5th
        exc = await running.crashed()
        assert isinstance(exc, SimulatedCrash) and str(exc) == point

    final = await start_processor()
    await topics.wait_committed()
    engine = final.processor.engine
    outputs = await topics.outputs()
    for point, events in streams.items():
        session = f"s-{point}"
        assert engine.sessions[session].applied == len(events), f"{point}: applied twice or lost"
        assert engine.is_halted(session)
        expected = by_id(expected_outputs(events))
        mine = [o for o in outputs if o.session == session]
        for output in mine:
            assert output == expected[output.id]
        counts = Counter(o.id for o in mine)
        assert set(counts) == set(expected), point
        assert set(counts.values()) == {CRASH_POINTS[point]}, point

    # and a crashed session carries on exactly as an uninterrupted one would
    events = streams["outputs_acked"]
    extra = ToolCall(session="s-outputs_acked", agent="coder", tool="ls", args={}, ts=T0 + 50)
    await topics.send(topics.events, extra)
    expected = by_id(expected_outputs([*events, extra]))

    def complete(records) -> bool:
        ids = {msgspec.json.decode(r.value)["id"] for r in records}
        return set(expected) <= ids

    await topics.read_until(topics.alerts, complete, what="the halt-ignored alert")
    mine = by_id(o for o in await topics.outputs() if o.session == "s-outputs_acked")
    assert mine == expected


class CrashOnce:
    """A fault hook: crash at ``point`` the first time it is reached once armed."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.armed = False

    def __call__(self, where: str) -> None:
        if self.armed and where == self.point:
            self.armed = False
            raise SimulatedCrash(where)


async def run_last_calls_then_arm(topics, engine, crash: CrashOnce, session, events, expected):
    """From inside a checkpoint: send the loop's last two calls, wait until they are
    applied and their outputs are on the alerts topic, then arm the crash."""
    await topics.send_events(events[4:])
    await poll_until(lambda: engine.sessions[session].applied == len(events), 20, "the calls")
    await topics.read_until(
        topics.alerts, lambda rs: len(rs) >= len(expected), what="their alert and trip"
    )
    crash.armed = True


async def assert_replayed_once(topics, start_processor, session, events, expected) -> None:
    """After the crash, a new processor has applied every event exactly once, and each
    output is on the alerts topic twice with the same id: emitted before the crash
    and again by the replay of the last two calls."""
    final = await start_processor()
    await topics.wait_committed()
    engine = final.processor.engine
    assert engine.sessions[session].applied == len(events)
    assert engine.is_halted(session)
    mine = [o for o in await topics.outputs() if o.session == session]
    for output in mine:
        assert output == expected[output.id]
    assert Counter(o.id for o in mine) == dict.fromkeys(expected, 2)


@pytest.mark.parametrize("point", ["changelog_acked", "committed"])
async def test_records_processed_while_a_checkpoint_is_pending_survive_its_crash(
    topics, start_processor, point
) -> None:
    """A checkpoint covers what was processed when it started; a crash before its
    commit must still replay everything processed after that, exactly once."""
    session = "s-overlap"
    events = repeat_loop(session)
    expected = by_id(expected_outputs(events))
    crash = CrashOnce(point)
    running = await start_processor(fault=crash)
    engine = running.processor.engine
    await topics.send_events(events[:4])  # turn start + 3 calls: no output yet
    await topics.wait_committed()
    gate_opened = []

    async def gate() -> None:
        # This checkpoint was staged before the calls below were even sent.
        if gate_opened:
            return
        gate_opened.append(engine.sessions[session].applied)
        await run_last_calls_then_arm(topics, engine, crash, session, events, expected)

    running.processor.checkpoint_gate = gate
    # Work for a checkpoint to cover (another session), so that one starts.
    await topics.send(topics.events, ToolCall(session="s-other", agent="coder", tool="ls", ts=T0))
    exc = await running.crashed()
    assert isinstance(exc, SimulatedCrash) and str(exc) == point
    assert gate_opened == [4]
    # The checkpoint's offsets stop before the two calls: the replay applies them
    # again, once, and emits their outputs again.
    await assert_replayed_once(topics, start_processor, session, events, expected)


@pytest.mark.parametrize("point", ["changelog_acked", "committed"])
async def test_a_covered_session_is_snapshotted_as_it_was_when_the_checkpoint_started(
    topics, start_processor, point
) -> None:
    """Snapshots are encoded after the checkpoint starts, while records flow: a
    session that takes a record before its turn must be encoded as it was."""
    session = "s-cow"
    events = repeat_loop(session)
    expected = by_id(expected_outputs(events))
    crash = CrashOnce(point)
    running = await start_processor(fault=crash)
    processor = running.processor
    engine = processor.engine
    opened = []

    async def gate() -> None:
        # The checkpoint that covers the session after its first four records,
        # before it has encoded anything.
        state = engine.sessions.get(session)
        if opened or state is None or state.applied != 4 or session not in processor.checkpointer.unstaged:
            return
        opened.append(True)
        await run_last_calls_then_arm(topics, engine, crash, session, events, expected)

    processor.checkpoint_gate = gate
    await topics.send_events(events[:4])  # turn start + 3 calls: no output yet
    exc = await running.crashed()
    assert isinstance(exc, SimulatedCrash) and str(exc) == point
    # The snapshot held the state before calls 4 and 5, so the replay applies them
    # again and re-emits their outputs; a snapshot taken after them would have made
    # the replay skip them (one copy each).
    await assert_replayed_once(topics, start_processor, session, events, expected)
