"""Reorder windows: event-time order, duplicates, late events, seq, bounds, restarts."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.otel.window import ReorderWindow


def ev(name: str) -> bytes:
    return msgspec.json.encode({"type": "text", "session": "s", "text": name})


def names(released: list) -> list[str]:
    return [msgspec.json.decode(r.data)["text"] for r in released]


def test_out_of_order_batches_are_released_in_event_time_order_with_dense_seq() -> None:
    w = ReorderWindow(window_s=1.0)
    w.add("s", "k3", [(300, 1, ev("c"))], offset=0, now=0.0)
    w.add("s", "k1", [(100, 1, ev("a"))], offset=1, now=0.5)
    assert w.release(0.9) == []
    w.add("s", "k2", [(200, 1, ev("b"))], offset=2, now=1.2)
    out = w.release(1.0)  # k3 is due: everything of the session up to it goes
    assert names(out) == ["a", "b", "c"]
    assert [r.seq for r in out] == [1, 2, 3]
    assert [msgspec.json.decode(r.data)["seq"] for r in out] == [1, 2, 3]
    assert w.low_offset() is None


def test_duplicates_are_dropped_pending_or_released() -> None:
    w = ReorderWindow(window_s=0.0)
    w.add("s", "k1", [(100, 1, ev("a"))], offset=0, now=0.0)
    w.add("s", "k1", [(100, 1, ev("a"))], offset=1, now=0.0)  # exporter retry, still pending
    assert names(w.release(0.0)) == ["a"]
    w.add("s", "k1", [(100, 1, ev("a"))], offset=2, now=1.0)  # retry after release
    assert w.release(2.0) == []
    assert w.stats.duplicates == 2


def test_late_events_are_released_and_counted_never_lost() -> None:
    w = ReorderWindow(window_s=0.0)
    w.add("s", "k2", [(200, 1, ev("b"))], offset=0, now=0.0)
    assert names(w.release(0.0)) == ["b"]
    w.add("s", "k1", [(100, 1, ev("a"))], offset=1, now=1.0)
    out = w.release(1.0)
    assert names(out) == ["a"] and out[0].late and out[0].seq == 2
    assert w.stats.late == 1


def test_sessions_are_independent() -> None:
    w = ReorderWindow(window_s=0.0)
    w.add("s", "k1", [(100, 1, ev("a"))], offset=0, now=0.0)
    w.add("t", "k1", [(100, 1, ev("a"))], offset=1, now=0.0)
    out = w.release(0.0)
    assert sorted((r.session, r.seq) for r in out) == [("s", 1), ("t", 1)]


def test_a_restart_drops_what_was_released_and_rederives_what_was_pending() -> None:
    w = ReorderWindow(window_s=1.0)
    w.add("s", "k1", [(100, 1, ev("call")), (150, 2, ev("result"))], offset=0, now=0.0)
    w.add("s", "k2", [(400, 1, ev("later"))], offset=1, now=0.0)
    w.add("s", "k3", [(500, 1, ev("pending"))], offset=2, now=5.0)
    # release k1, k2 only (due at 1.0); k3 pending
    assert names(w.release(1.0)) == ["call", "result", "later"]
    assert w.low_offset() == 2
    snapshot = {s: w.snapshot(s) for s in w.take_changed()}
    # a new owner restores the snapshot and reads again from the commit (offset 2)... and a
    # rebalance that committed less (offset 0) is just as safe
    fresh = ReorderWindow(window_s=1.0)
    for session, value in snapshot.items():
        fresh.restore(session, value)
    fresh.add("s", "k1", [(100, 1, ev("call")), (150, 2, ev("result"))], offset=0, now=10.0)
    fresh.add("s", "k2", [(400, 1, ev("later"))], offset=1, now=10.0)
    fresh.add("s", "k3", [(500, 1, ev("pending"))], offset=2, now=10.0)
    out = fresh.release(11.0)
    assert names(out) == ["pending"] and out[0].seq == 4


def test_a_record_released_in_part_before_a_restart_yields_only_the_rest() -> None:
    w = ReorderWindow(window_s=0.0, max_pending_per_session=1)
    early = w.add("s", "k1", [(100, 1, ev("call")), (900, 2, ev("result"))], offset=0, now=0.0)
    assert names(early) == ["call"]  # the pending bound forced the call out
    snapshot = w.snapshot("s")
    fresh = ReorderWindow(window_s=0.0)
    fresh.restore("s", snapshot)
    fresh.add("s", "k1", [(100, 1, ev("call")), (900, 2, ev("result"))], offset=0, now=1.0)
    out = fresh.release(1.0)
    assert names(out) == ["result"] and out[0].seq == 2


def test_the_same_input_after_a_crash_gets_the_same_seq() -> None:
    """Released after the last snapshot, then lost in a crash: released again with the
    same seq, which the processor skips as a replay."""
    def run(window: ReorderWindow) -> list[tuple[str, int]]:
        window.add("s", "k1", [(100, 1, ev("a"))], offset=0, now=0.0)
        window.add("s", "k2", [(200, 1, ev("b"))], offset=1, now=0.0)
        return [(r.data.decode(), r.seq) for r in window.release(0.0)]

    assert run(ReorderWindow(window_s=0.0)) == run(ReorderWindow(window_s=0.0))


def test_state_is_bounded() -> None:
    w = ReorderWindow(window_s=100.0, max_pending_per_session=3, max_seen=4, max_sessions=2)
    forced = []
    for i in range(5):
        forced += w.add("s", f"k{i}", [(i, 1, ev(str(i)))], offset=i, now=0.0)
    assert names(forced) == ["0", "1"] and w.stats.forced == 2
    for i in range(5):
        w.add("idle", f"i{i}", [(i, 1, ev(str(i)))], offset=10 + i, now=0.0)
    w.flush()
    assert len(w.sessions["s"].seen) == 4
    w.add("third", "t", [(1, 1, ev("t"))], offset=20, now=1.0)
    assert len(w.sessions) == 2 and w.stats.evicted == 1
    assert w.sweep(now=100.0 + 8 * 24 * 3600.0) == 1  # the idle one expired, "third" pending


def _released(released: list) -> list[tuple[str, int, bytes, int, bool]]:
    return [(r.session, r.seq, r.data, r.offset, r.late) for r in released]


def test_a_sessions_record_added_at_once_is_the_same_as_entry_by_entry() -> None:
    """add_entries (one call per sessions-topic record) against add (one per span):
    duplicates inside the record, three-event records, forced releases and the
    session bound forgetting the session meanwhile all come out the same."""
    records = [
        ("s", [("k1", [(200, 2, ev("r1")), (100, 1, ev("c1"))]), ("k2", [(150, 3, ev("u2"))])]),
        ("t", [("k3", [(50, 1, ev("x")), (60, 2, ev("y")), (55, 4, ev("z"))])]),
        ("s", [("k1", [(200, 2, ev("r1")), (100, 1, ev("c1"))]), ("k4", [(90, 1, ev("late"))])]),
        ("u", [("k5", [(10, 1, ev("a"))]), ("k6", [(11, 1, ev("b"))]), ("k7", [(12, 1, ev("c"))])]),
        ("s", [("k8", [(300, 1, ev("d"))]), ("k8", [(300, 1, ev("d"))])]),
    ]
    for bounds in ({}, {"max_pending_per_session": 2}, {"max_sessions": 1}):
        one, each = ReorderWindow(window_s=1.0, **bounds), ReorderWindow(window_s=1.0, **bounds)
        out_one: list = []
        out_each: list = []
        for offset, (session, entries) in enumerate(records):
            out_one += one.add_entries(session, entries, offset, float(offset))
            for key, items in entries:
                out_each += each.add(session, key, items, offset, float(offset))
            if offset == 2:
                out_one += one.release(2.5)
                out_each += each.release(2.5)
        out_one += one.flush()
        out_each += each.flush()
        assert _released(out_one) == _released(out_each)
        for field in ("duplicates", "late", "forced", "evicted", "released"):
            assert getattr(one.stats, field) == getattr(each.stats, field), (bounds, field)
        assert list(one.sessions) == list(each.sessions)
    assert _released(out_one)  # the scenario releases events at all


def test_a_new_session_is_never_forgotten_by_the_bound_it_arrives_at() -> None:
    """Every other session holds pending events: the bound cannot make room, and
    the arriving session is kept (over the bound) rather than losing its events."""
    w = ReorderWindow(window_s=1.0, max_sessions=1)
    w.add("s", "k1", [(100, 1, ev("a"))], offset=0, now=0.0)
    w.add("t", "k2", [(200, 1, ev("b"))], offset=1, now=0.0)
    assert set(w.sessions) == {"s", "t"}
    assert sorted(names(w.release(1.0))) == ["a", "b"]
    assert w.low_offset() is None  # nothing stuck: commits can move past both
    w.add("u", "k3", [(300, 1, ev("c"))], offset=2, now=2.0)
    assert "u" in w.sessions and len(w.sessions) == 1  # idle ones make room


def test_offsets_and_keys_are_counted_right_through_forced_releases() -> None:
    """A record's events are counted against its offset once, and released events
    settled by runs: a record forced out in part holds back its offset (and only its
    own), the rest is released in event order, and nothing stays counted."""
    w = ReorderWindow(window_s=10.0, max_pending_per_session=2, max_seen=8)
    early = w.add_entries("s", [("k1", [(5, 1, ev("a")), (9, 2, ev("b"))]), ("k2", [(1, 1, ev("c"))])], 7, 0.0)
    assert names(early) == ["c"]  # three pending, two allowed: the earliest goes
    assert (w.low_offset(), w.pending_count()) == (7, 2)
    assert names(w.add_entries("t", [("k3", [(2, 1, ev("d"))])], 8, 0.0)) == []
    assert (w.low_offset(), w.pending_count()) == (7, 3)
    assert names(w.release(10.0)) == ["a", "b", "d"]  # the record fell due: both sessions
    assert (w.low_offset(), w.pending_count()) == (None, 0)
    assert dict(w.sessions["s"].seen) == {"k2": 1, "k1": 2} and not w.sessions["s"].pending_keys
    # the same record read again after a restart is a duplicate, all of it
    assert w.add_entries("s", [("k1", [(5, 1, ev("a")), (9, 2, ev("b"))])], 7, 11.0) == []
    assert w.stats.duplicates == 1 and w.low_offset() is None


def test_seq_is_written_past_the_endings_made_ahead() -> None:
    """The ``,"seq":N}`` endings of a session's first events are made once at import;
    past them each is formatted. Either way the event's JSON ends with its own seq."""
    from streamguard.otel.window import _SEQ_ENDINGS, with_seq

    bound = len(_SEQ_ENDINGS)
    for seq in (-1, 0, 1, bound - 1, bound, bound + 1, 2**53):
        assert msgspec.json.decode(with_seq(b'{"type":"text"}', seq)) == {"type": "text", "seq": seq}
    window = ReorderWindow(window_s=0.0, max_pending_per_session=bound + 10)
    for n in range(bound + 3):
        window.add("s", f"k{n}", [(n, 1, b'{"type":"text","n":%d}' % n)], n, 0.0)
    released = window.release(0.0)
    assert [msgspec.json.decode(r.data) for r in released[-4:]] == [
        {"type": "text", "n": n, "seq": n + 1} for n in range(bound - 1, bound + 3)
    ]
    assert [r.seq for r in released] == list(range(1, bound + 4))


def _snapshot(*fields: object) -> bytes:
    return msgspec.msgpack.encode(list(fields))


FORGED_SNAPSHOTS = {
    "not a list": msgspec.msgpack.encode({"next_seq": 5}),
    "empty": _snapshot(),
    "an unknown version": _snapshot(3, 5, 100, 1, [], 0.0, 7),
    "version 2 without its offset": _snapshot(2, 5, 100, 1, [], 0.0),
    "version 1 with an offset": _snapshot(1, 5, 100, 1, [], 0.0, 7),
    "an offset below the start": _snapshot(2, 5, 100, 1, [], 0.0, -2),
    "an offset not a number": _snapshot(2, 5, 100, 1, [], 0.0, "7"),
    "a field short": _snapshot(1, 5, 100, 1, []),
    "a field more": _snapshot(1, 5, 100, 1, [], 0.0, "x"),
    "seq null": _snapshot(1, None, 100, 1, [], 0.0),
    "seq a string": _snapshot(1, "5", 100, 1, [], 0.0),
    "seq zero": _snapshot(1, 0, 100, 1, [], 0.0),
    "seq negative": _snapshot(1, -7, 100, 1, [], 0.0),
    "seen not a list": _snapshot(1, 5, 100, 1, 3, 0.0),
    "a seen entry not a pair": _snapshot(1, 5, 100, 1, [["k"]], 0.0),
    "a seen count of zero": _snapshot(1, 5, 100, 1, [["k", 0]], 0.0),
    "a seen key not a string": _snapshot(1, 5, 100, 1, [[7, 1]], 0.0),
    "a time below the start": _snapshot(1, 5, -2, 1, [], 0.0),
    "a rank below the start": _snapshot(1, 5, 100, -2, [], 0.0),
    "last activity not finite": _snapshot(1, 5, 100, 1, [], float("nan")),
    "not msgpack": b"\xc1\xc1\xc1",
}


@pytest.mark.parametrize("name", sorted(FORGED_SNAPSHOTS))
def test_a_forged_changelog_value_is_refused_and_installs_nothing(name: str) -> None:
    """The bridge skips a changelog value restore refuses (ValueError or DecodeError) and
    goes on: anything else raised would stop it at every start. Nothing is installed, and
    a session restored before keeps its state."""
    w = ReorderWindow(window_s=0.0)
    good = ReorderWindow(window_s=0.0)
    good.add("other", "k", [(100, 1, ev("a"))], offset=0, now=0.0)
    good.release(0.0)
    w.restore("other", good.snapshot("other"))
    with pytest.raises((ValueError, msgspec.DecodeError)):
        w.restore("s", FORGED_SNAPSHOTS[name])
    assert "s" not in w.sessions
    assert w.sessions["other"].next_seq == 2


_ANY_MSGPACK = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=7),
    max_leaves=20,
)


_NUMBER = st.integers(-(2**63), 2**63 - 1)


# any value at all; values of the snapshot's own shapes (version 1, six fields; version
# 2, seven) with any field forged, where a check that is missing shows; and values of
# their types with any numbers, some of which are installed
@given(
    _ANY_MSGPACK
    | st.tuples(st.just(1), *[_ANY_MSGPACK] * 5).map(list)
    | st.tuples(st.just(2), *[_ANY_MSGPACK] * 6).map(list)
    | st.tuples(st.just(1), _NUMBER, _NUMBER, st.integers(-3, 5),
                st.lists(st.tuples(st.text(max_size=4), _NUMBER), max_size=4),
                st.floats()).map(list)
    | st.tuples(st.just(2), _NUMBER, _NUMBER, st.integers(-3, 5),
                st.lists(st.tuples(st.text(max_size=4), _NUMBER), max_size=4),
                st.floats(), st.integers(-3, 2**63 - 1)).map(list)
)
@settings(max_examples=300, deadline=None)
def test_restore_of_any_msgpack_value_installs_a_valid_state_or_refuses(value: object) -> None:
    w = ReorderWindow(window_s=0.0)
    try:
        w.restore("s", msgspec.msgpack.encode(value))
    except (ValueError, msgspec.DecodeError):
        assert "s" not in w.sessions
        return
    state = w.sessions["s"]
    assert state.next_seq >= 1 and state.last_time >= -1 and state.last_rank >= -1
    assert state.done_offset >= -1
    assert all(n >= 1 for n in state.seen.values())
    INSTALLED.append(1)


INSTALLED: list[int] = []


def test_some_generated_snapshots_are_installed() -> None:
    """The property above reads installed states too, not only refusals."""
    INSTALLED.clear()
    test_restore_of_any_msgpack_value_installs_a_valid_state_or_refuses()
    assert INSTALLED


def _tool_span(i: int) -> list[tuple[int, int, bytes]]:
    t = 1_000_000 + i * 1_000
    return [
        (t, 1, msgspec.json.encode({"type": "tool_call", "session": "S", "tool": "t", "args": {"n": i}})),
        (t + 1, 2, msgspec.json.encode({"type": "tool_result", "session": "S", "tool": "t", "n": i})),
    ]


def test_records_read_again_far_behind_the_commit_are_not_released_twice() -> None:
    """The commit stops at the lowest record any session holds: a session that
    released more keys than it remembers above another's pending record reads them
    all again after a restart. Its offset mark drops them; seq goes on densely."""
    def feed(w: ReorderWindow) -> list:
        out = w.add("T", "t:0", [(10**15, 3, ev("later"))], 0, now=0.0)  # held: the commit stops here
        for i in range(1, 801):  # forced out by the bound, far past max_seen keys
            out += w.add("S", f"trace:{i}", _tool_span(i), i, now=0.5)
        return out

    w = ReorderWindow(window_s=2.0, max_pending_per_session=1000, max_seen=256)
    first = feed(w)
    assert w.low_offset() == 0 and len(first) == 600
    snapshot = w.snapshot("S")
    restarted = ReorderWindow(window_s=2.0, max_pending_per_session=1000, max_seen=256)
    restarted.restore("S", snapshot)
    again = [r for r in feed(restarted) + restarted.flush() if r.session == "S"]
    bodies = {r.data.rsplit(b',"seq"', 1)[0] for r in first}
    assert not [r for r in again if r.data.rsplit(b',"seq"', 1)[0] in bodies]
    assert [r.seq for r in again] == list(range(601, 1601))  # the 1,000 still pending, once


def test_a_snapshot_of_the_first_version_is_still_restored() -> None:
    w = ReorderWindow(window_s=0.0)
    w.restore("s", msgspec.msgpack.encode([1, 5, 100, 1, [["k", 1]], 0.0]))
    assert w.sessions["s"].next_seq == 5 and w.sessions["s"].done_offset == -1
    w.add("s", "k", [(200, 1, ev("again"))], offset=3, now=0.0)  # remembered by key
    w.add("s", "k2", [(200, 1, ev("new"))], offset=4, now=0.0)
    assert [(r.seq, names([r])) for r in w.release(0.0)] == [(5, ["new"])]


def test_deadlines_counted_on_a_ticker_survive_a_wall_clock_stepped_back() -> None:
    """The wall clock stamps activity; deadlines run on the monotonic ticker, so a
    wall clock set back an hour holds no session behind another's deadline."""
    w = ReorderWindow(window_s=2.0)
    w.add_entries("A", [("a:1", [(1, 1, ev("a1"))])], 0, now=1_000_003.0, tick=50.0)
    w.add_entries("B", [("b:1", [(3, 1, ev("b1"))])], 1, now=996_403.5, tick=50.5)  # wall stepped back
    assert names(w.release(52.6)) == ["a1", "b1"]
    assert w.low_offset() is None
    assert w.sessions["B"].last_active == 996_403.5
