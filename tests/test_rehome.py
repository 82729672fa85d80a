"""Planning `streamguard rehome`: every readable snapshot ends on its session's home
partition, its state unchanged, the old partitions' offsets forgotten (pure)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.engine import Engine
from streamguard.kafka.changelog import decode_entry, encode_entry, rehomed_entry
from streamguard.kafka.inspect import home_partition
from streamguard.kafka.rehome import BRIDGE, RehomePlan, SnapshotKind, plan_rehome
from streamguard.policy import load_policy_set
from streamguard.replay import replay_lines


def snapshot(session: str, *, halted: bool = False) -> bytes:
    """A session's changelog value as the processor writes it."""
    engine = Engine(load_policy_set(None))
    calls = 6 if halted else 1
    lines = [
        json.dumps({"type": "tool_call", "session": session, "agent": "coder", "tool": "read_file",
                    "args": {"path": "main.go"}, "ts": 1_700_000_000 + i}).encode()
        for i in range(calls)
    ]
    list(replay_lines(lines, engine))
    assert engine.is_halted(session) is halted
    state = engine.snapshot(session)
    assert state is not None
    return encode_entry(41, 7, 1_700_000_100.0, state)


def away_from_home(partitions: int, old: int, count: int) -> list[str]:
    """Sessions whose home among ``partitions`` differs from their home among ``old``."""
    found = []
    n = 0
    while len(found) < count:
        name = f"s-{n}"
        if home_partition(name, partitions) != home_partition(name, old):
            found.append(name)
        n += 1
    return found


def apply(latest: dict[int, dict[str, bytes]], plan: RehomePlan) -> dict[int, dict[str, bytes]]:
    """The changelog after the plan is written (what compaction would keep)."""
    after = {p: dict(entries) for p, entries in latest.items()}
    for move in plan.moves:
        if move.value is not None:
            after.setdefault(move.target, {})[move.session] = move.value
    for move in plan.moves:
        after[move.source].pop(move.session, None)
    return after


def test_a_snapshot_away_from_home_moves_there_with_its_halt_and_without_the_old_offsets() -> None:
    moved, stays = away_from_home(4, 2, 1)[0], next(
        f"h-{n}" for n in range(100) if home_partition(f"h-{n}", 4) == home_partition(f"h-{n}", 2)
    )
    old_home = home_partition(moved, 2)
    value = snapshot(moved, halted=True)
    latest: dict[int, dict[str, bytes]] = {old_home: {moved: value}}
    latest.setdefault(home_partition(stays, 4), {})[stays] = snapshot(stays)
    plan = plan_rehome(latest, 4)
    assert plan.sessions == 2 and plan.at_home == 1 and not plan.unreadable
    [move] = plan.moves
    assert (move.session, move.source, move.target, move.halted) == (moved, old_home, home_partition(moved, 4), True)
    assert move.value is not None
    before, after = decode_entry(value), decode_entry(move.value)
    assert after.state == before.state and after.last_seen == before.last_seen
    assert (after.events_offset, after.control_offset) == (-1, -1)
    # restored, the moved state is the halted session it was
    engine = Engine(load_policy_set(None))
    engine.restore(moved, after.state)
    assert engine.is_halted(moved)


def test_a_copy_already_at_home_wins_and_the_stray_one_is_only_tombstoned() -> None:
    session = away_from_home(4, 2, 1)[0]
    home, old = home_partition(session, 4), home_partition(session, 2)
    newer = snapshot(session)
    plan = plan_rehome({old: {session: snapshot(session, halted=True)}, home: {session: newer}}, 4)
    [move] = plan.moves
    assert move.value is None and (move.source, move.target) == (old, home)
    assert plan.superseded == [move] and plan.moved == []
    assert apply({old: {session: b"x"}, home: {session: newer}}, plan) == {old: {}, home: {session: newer}}


def test_an_unreadable_snapshot_is_left_where_it_is_and_reported() -> None:
    session = away_from_home(4, 2, 1)[0]
    old = home_partition(session, 2)
    plan = plan_rehome({old: {session: b"\x93\x01\x02"}}, 4)
    assert plan.moves == []
    [(partition, name, reason)] = plan.unreadable
    assert (partition, name) == (old, session) and reason


def test_nothing_moves_when_every_snapshot_is_at_home() -> None:
    sessions = [f"s-{n}" for n in range(20)]
    latest: dict[int, dict[str, bytes]] = {p: {} for p in range(3)}
    value = snapshot("s-0")
    for s in sessions:
        latest[home_partition(s, 3)][s] = value
    plan = plan_rehome(latest, 3)
    assert plan.moves == [] and plan.at_home == plan.sessions == 20


@settings(max_examples=60, deadline=None)
@given(
    placement=st.lists(
        st.tuples(st.integers(0, 60), st.integers(0, 5), st.booleans()), min_size=0, max_size=40
    ),
    partitions=st.integers(1, 6),
)
def test_after_the_plan_every_session_is_once_on_its_home_and_a_second_run_moves_nothing(
    placement: list[tuple[int, int, bool]], partitions: int
) -> None:
    # any placement, as count changes would leave it: a session on one or more
    # partitions, each copy's state told apart by its bytes; some copies unreadable
    latest: dict[int, dict[str, bytes]] = {}
    for n, where, unreadable in placement:
        session = f"s-{n}"
        value = b"\xc1" if unreadable else encode_entry(where, where, float(n % 3 + where % 2), f"{session}@{where}".encode())
        latest.setdefault(where, {})[session] = value
    partitions = max([partitions, *(p + 1 for p in latest)])
    plan = plan_rehome_tolerant(latest, partitions)
    after = apply(latest, plan)
    for session in {s for entries in latest.values() for s in entries}:
        home = home_partition(session, partitions)
        copies = {p: entries[session] for p, entries in latest.items() if session in entries}
        readable = {p for p, value in copies.items() if value != b"\xc1"}
        held = {p for p, entries in after.items() if session in entries}
        if not readable:
            assert held == set(copies)  # nothing it could read was touched
            continue
        # its readable state on its home; only unreadable strays elsewhere
        assert after[home][session] != b"\xc1"
        assert all(after[p][session] == b"\xc1" for p in held - {home})
        kept = decode_entry(after[home][session])
        if home in readable:
            assert after[home][session] == latest[home][session]  # the copy at home wins
        else:
            [source] = [m.source for m in plan.moves if m.session == session and m.value is not None]
            # the copy seen last, the lowest partition on a tie
            assert source == max(readable, key=lambda p: (decode_entry(copies[p]).last_seen, -p))
            assert kept.state == decode_entry(latest[source][session]).state
            assert (kept.events_offset, kept.control_offset) == (-1, -1)
    assert plan_rehome_tolerant(after, partitions).moves == []


def plan_rehome_tolerant(latest: dict[int, dict[str, bytes]], partitions: int) -> RehomePlan:
    """plan_rehome over snapshots whose state is not an engine's: no halt to read."""
    return plan_rehome(latest, partitions, SnapshotKind("test", rehomed_entry, lambda value: False))


def test_a_bridge_session_moves_with_its_seq_and_keys_and_without_the_old_offset() -> None:
    from streamguard.otel.window import ReorderWindow

    session = away_from_home(4, 2, 1)[0]
    window = ReorderWindow(window_s=0.0)
    window.add(session, "trace:span-1", [(1_000, 1, b'{"type":"text"}'), (2_000, 2, b'{"type":"text"}')], 40, 5.0)
    window.release(5.0)
    value = window.snapshot(session)
    assert value is not None
    old = home_partition(session, 2)
    plan = plan_rehome({old: {session: value}}, 4, BRIDGE)
    [move] = plan.moves
    assert move.target == home_partition(session, 4) and move.value is not None and not move.halted
    moved = ReorderWindow(window_s=0.0)
    moved.restore(session, move.value)
    state = moved.sessions[session]
    assert state.next_seq == 3 and dict(state.seen) == {"trace:span-1": 2}
    assert state.done_offset == -1  # an offset of the old partition, forgotten
    # a record at a low offset of the new partition is new, not a replay
    assert len(moved.add(session, "trace:span-2", [(3_000, 1, b'{"type":"text"}')], 0, 6.0)) == 0
    assert [r.seq for r in moved.release(6.0)] == [3]
    # the same span again is still known
    moved.add(session, "trace:span-1", [(1_000, 1, b'{"type":"text"}')], 1, 7.0)
    assert moved.release(7.0) == []


def test_a_bridge_snapshot_the_bridge_would_refuse_is_left_in_place() -> None:
    session = away_from_home(4, 2, 1)[0]
    import msgspec

    # seq 0: restored, its events would read as replays of ones the processor never saw
    refused = msgspec.msgpack.encode([2, 0, -1, -1, [], 5.0, -1])
    plan = plan_rehome({home_partition(session, 2): {session: refused}}, 4, BRIDGE)
    assert plan.moves == []
    [(_, name, reason)] = plan.unreadable
    assert name == session and "out of range" in reason


def test_a_bridge_copy_at_home_is_merged_with_the_stray_so_the_seq_goes_on() -> None:
    from streamguard.otel.window import ReorderWindow

    session = away_from_home(4, 2, 1)[0]
    old, home = home_partition(session, 2), home_partition(session, 4)

    def state(keys: list[str], offset: int, now: float) -> bytes:
        window = ReorderWindow(window_s=0.0)
        for n, key in enumerate(keys):
            window.add(session, key, [(1_000 * (n + 1), 1, b'{"type":"text"}')], offset + n, now)
        window.release(now)
        value = window.snapshot(session)
        assert value is not None
        return value

    stray = state([f"old-{n}" for n in range(29)], 500, 10.0)  # next seq 30
    at_home = state(["new-0", "new-1", "new-2"], 7, 20.0)  # numbered from 1 again: next seq 4
    plan = plan_rehome({old: {session: stray}, home: {session: at_home}}, 4, BRIDGE)
    [move] = plan.moves
    assert move.merged and move.value is not None and (move.source, move.target) == (old, home)
    merged = ReorderWindow(window_s=0.0)
    merged.restore(session, move.value)
    kept = merged.sessions[session]
    assert kept.next_seq == 30
    assert set(kept.seen) == {*(f"old-{n}" for n in range(29)), "new-0", "new-1", "new-2"}
    assert kept.done_offset == 9  # the home partition's, not the old one's
    assert kept.last_active == 20.0


def test_a_processor_copy_at_home_whose_state_cannot_be_read_is_replaced_by_the_stray() -> None:
    session = away_from_home(4, 2, 1)[0]
    old, home = home_partition(session, 2), home_partition(session, 4)
    broken = encode_entry(3, -1, 1.0, b"not a snapshot")  # the envelope reads, the state does not
    plan = plan_rehome({old: {session: snapshot(session, halted=True)}, home: {session: broken}}, 4)
    [move] = plan.moves
    assert move.value is not None and move.halted and not move.merged


async def test_no_tombstone_is_sent_when_a_moved_copy_is_not_acknowledged() -> None:
    import asyncio

    from streamguard.kafka.rehome import apply_plan

    session = away_from_home(4, 2, 1)[0]
    plan = plan_rehome({home_partition(session, 2): {session: snapshot(session)}}, 4)
    sent: list[tuple[bytes | None, int]] = []

    class Producer:
        async def send(self, topic: str, value: bytes | None, *, key: bytes, partition: int) -> asyncio.Future[None]:
            sent.append((value, partition))
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_exception(OSError("broker gone"))
            return done

    with pytest.raises(OSError, match="broker gone"):
        await apply_plan(Producer(), "changelog", plan)  # type: ignore[arg-type]
    assert sent == [(plan.moves[0].value, home_partition(session, 4))]  # no tombstone followed


@pytest.mark.parametrize(
    ("listed", "assigned", "changed_to"),
    [
        ({0, 1, 2, 3}, {0, 1}, "4"),  # this member's metadata already lists the new count
        ({0, 1}, {1, 3}, "at least 4"),  # the leader saw it first and handed out partition 3
        (None, {2}, "at least 3"),  # no metadata at all, a partition beyond the count
    ],
)
def test_a_changed_partition_count_is_seen_by_either_sign(
    listed: set[int] | None, assigned: set[int], changed_to: str
) -> None:
    from types import SimpleNamespace

    from streamguard.kafka.config import ProcessorConfig
    from streamguard.kafka.rebalance import Rebalancer
    from streamguard.kafka.topics import PartitionCountChanged

    consumer = SimpleNamespace(partitions_for_topic=lambda topic: listed)
    host = SimpleNamespace(partition_count=2, consumer=consumer)
    rebalancer = Rebalancer(ProcessorConfig(), None, None, None, None, host)  # type: ignore[arg-type]
    with pytest.raises(PartitionCountChanged, match=f"changed from 2 to {changed_to} while running"):
        rebalancer._check_partition_count(assigned)
    # started with the count the metadata lists and the assignment fits: nothing to say
    count = max(len(listed or ()), max(assigned) + 1)
    host.partition_count = count
    consumer.partitions_for_topic = lambda topic: set(range(count))
    rebalancer._check_partition_count(assigned)


def test_every_bridge_copy_of_a_session_is_folded_in_so_no_seq_goes_back() -> None:
    """Two count changes (2, then 3, then 4) left two stray states: the newer one was
    numbered from 1 again after the first change. The seq goes on from the higher."""
    from streamguard.otel.window import ReorderWindow

    session = next(
        f"s-{n}" for n in range(10_000)
        if len({home_partition(f"s-{n}", count) for count in (2, 3, 4)}) == 3
    )
    first, second, home = (home_partition(session, count) for count in (2, 3, 4))

    def state(count: int, now: float) -> bytes:
        window = ReorderWindow(window_s=0.0)
        for n in range(count):
            window.add(session, f"{now}-{n}", [(1_000 * (n + 1), 1, b'{"type":"text"}')], n, now)
        window.release(now)
        value = window.snapshot(session)
        assert value is not None
        return value

    older, newer = state(29, 10.0), state(3, 20.0)  # next seq 30, then 4
    plan = plan_rehome({first: {session: older}, second: {session: newer}}, 4, BRIDGE)
    assert {m.source for m in plan.moves} == {first, second}
    [moved] = plan.moved
    assert moved.merged and moved.source == second and moved.target == home  # the newer one carries it
    folded = ReorderWindow(window_s=0.0)
    folded.restore(session, moved.value)  # type: ignore[arg-type]
    assert folded.sessions[session].next_seq == 30
    assert folded.sessions[session].done_offset == -1  # no copy was at home: no offset to keep
    assert list(folded.sessions[session].seen)[-3:] == ["20.0-0", "20.0-1", "20.0-2"]  # the newest last


def test_among_processor_strays_the_one_seen_last_moves_and_the_others_name_it() -> None:
    session = next(
        f"s-{n}" for n in range(10_000)
        if len({home_partition(f"s-{n}", count) for count in (2, 3, 4)}) == 3
    )
    first, second, home = (home_partition(session, count) for count in (2, 3, 4))
    state = decode_entry(snapshot(session, halted=True)).state
    older = encode_entry(5, -1, 100.0, state)
    newer = encode_entry(9, -1, 200.0, state)
    plan = plan_rehome({first: {session: older}, second: {session: newer}}, 4)
    by_source = {m.source: m for m in plan.moves}
    assert by_source[second].value is not None and by_source[first].value is None
    assert by_source[first].kept == by_source[second].kept == second
    assert decode_entry(by_source[second].value).last_seen == 200.0  # type: ignore[arg-type]
    assert all(m.target == home for m in plan.moves)


def test_a_fleet_scope_moves_with_its_windows_and_circuit_and_without_the_facts_offset() -> None:
    from streamguard.fleet_windows import Circuit, ScopeState, decode_scope, encode_scope
    from streamguard.kafka.rehome import FLEET

    scope = next(
        f"spend:agent=bot-{n}" for n in range(1000)
        if home_partition(f"spend:agent=bot-{n}", 4) != home_partition(f"spend:agent=bot-{n}", 2)
    )
    state = ScopeState(
        scope=scope, rule="spend", watermark=1_700_000_500.0, crossings=2,
        circuit=Circuit(state="open"), offset=812,
    )
    plan = plan_rehome({home_partition(scope, 2): {scope: encode_scope(state)}}, 4, FLEET)
    [move] = plan.moves
    assert move.target == home_partition(scope, 4) and move.halted  # its circuit is open
    moved = decode_scope(move.value)  # type: ignore[arg-type]
    assert moved.offset == -1
    assert (moved.crossings, moved.circuit.state, moved.watermark) == (2, "open", 1_700_000_500.0)
