"""Each session's reorder window, duplicate filter and ``seq`` counter (pure).

Spans reach the bridge when they end, in export batches, out of order across
batches and sometimes twice (exporters retry). One :class:`ReorderWindow`
holds the sessions of one partition of the bridge's session topic:

* a record's events wait ``window_s`` of processing time after they arrive;
  when a record falls due, every pending event of its session up to it, in
  event-time order, is released — including events that arrived later but
  happened earlier. The clock is an argument: this module reads none;
* a record whose key (trace and span id, or a log record's digest) the session
  already holds, pending or among its last ``max_seen`` released ones, is a
  duplicate: dropped and counted; so is a record at an input offset the session
  had wholly released when its state was snapshotted (read again after a restart);
* released events get the session's next ``seq`` (1, 2, 3...: dense, as the
  processor's replay mark wants). An event that happened before one already
  released is *late*: it is released all the same, with the next ``seq``, and
  counted;
* everything is bounded: pending events per session (beyond, the oldest are
  released early, counted), remembered keys per session, sessions per window
  (beyond, the least recently active sessions without pending events are
  forgotten, counted), and idle sessions expire after ``session_ttl_s``.

What survives a restart is :meth:`ReorderWindow.snapshot` of each changed
session (its next ``seq``, its last released position, the keys it remembers,
its last activity, and the input offset up to which its records were wholly
released), written by the bridge to a compacted changelog after the
events it released are acknowledged and before the input offsets are
committed. Pending events are not snapshotted: their input records are not
committed yet (:meth:`ReorderWindow.low_offset`), so they are read again and
re-derived. The commit stops at the lowest record any session still holds, so
after a restart one session's records may be read again far behind what it
released: more keys than ``max_seen`` remembers. The offset mark, not the keys,
keeps those from being released twice with new ``seq``s. It is an offset of the
sessions topic: a sessions topic deleted and made anew needs the bridge's
changelog deleted with it.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_right
from collections import OrderedDict, deque
from itertools import islice

import msgspec

SNAPSHOT_VERSION = 2
"""2 added the released-through offset; a version-1 snapshot is still read (no mark)."""

Item = tuple[int, int, str, int, bytes, int]
"""One pending event: ``(time_ns, rank, key, index, data, offset)``, where ``data``
is the event's JSON without ``seq`` and ``offset`` the input record it came from.
Plain tuples sort by (time, rank, key, index) in C: deterministic, and no object
of our own per event."""


class Released(msgspec.Struct, gc=False):
    session: str
    seq: int
    data: bytes  # the event's JSON with its seq
    offset: int
    late: bool


class WindowStats:
    __slots__ = ("duplicates", "evicted", "expired", "forced", "late", "released")

    def __init__(self) -> None:
        self.duplicates = 0
        self.late = 0
        self.forced = 0
        self.evicted = 0
        self.expired = 0
        self.released = 0


class SessionWindow:
    __slots__ = (
        "done_offset", "last_active", "last_offset", "last_rank", "last_time", "next_seq", "pending",
        "pending_keys", "seen",
    )

    def __init__(self) -> None:
        self.next_seq = 1
        # The highest input offset of a record of this session, and the offset up to
        # which its records were wholly released when it was restored (-1: none).
        self.last_offset = -1
        self.done_offset = -1
        self.last_time = -1
        self.last_rank = -1
        # key -> events of it released; a record read again after a restart
        # re-derives only the events not yet released
        self.seen: OrderedDict[str, int] = OrderedDict()
        # Sorted. Spans mostly arrive in order, so a record's events are appended;
        # only a record that sorts before the newest pending one costs a sort
        # (timsort merges the two runs in linear time).
        self.pending: list[Item] = []
        self.pending_keys: dict[str, int] = {}  # key -> pending items of it
        self.last_active = 0.0


def _settle_key(pending_keys: dict[str, int], seen: OrderedDict[str, int], key: str, released: int) -> None:
    """``released`` events of ``key`` are out: fewer pending, more remembered."""
    left = pending_keys[key] - released
    if left:
        pending_keys[key] = left
    else:
        del pending_keys[key]
    seen[key] = seen.get(key, 0) + released


def _settle_offset(offsets: dict[int, int], offset: int, released: int) -> None:
    """``released`` events of the input record at ``offset`` are out."""
    left = offsets[offset] - released
    if left:
        offsets[offset] = left
    else:
        del offsets[offset]


_SEQ_ENDINGS = tuple(b',"seq":%d}' % seq for seq in range(16_384))
"""The ``,"seq":N}`` ending of each seq below 16,384, made once (about 0.9 MB):
formatting it for each event cost twice what joining two bytes objects costs."""


def with_seq(data: bytes, seq: int) -> bytes:
    """The event's JSON with ``"seq":N`` appended (events are non-empty objects)."""
    return data[:-1] + (_SEQ_ENDINGS[seq] if 0 <= seq < len(_SEQ_ENDINGS) else b',"seq":%d}' % seq)


class ReorderWindow:
    """The sessions of one partition. See the module docstring."""

    def __init__(
        self,
        *,
        window_s: float = 2.0,
        max_pending_per_session: int = 1000,
        max_seen: int = 256,
        max_sessions: int = 100_000,
        session_ttl_s: float = 8 * 24 * 3600.0,
    ) -> None:
        self.window_s = window_s
        self.max_pending = max_pending_per_session
        self.max_seen = max_seen
        self.max_sessions = max_sessions
        self.session_ttl_s = session_ttl_s
        self.sessions: OrderedDict[str, SessionWindow] = OrderedDict()  # by last activity
        # One entry per record, not per event: (deadline, session, its last item).
        # When it falls due, everything of its session up to that item goes.
        self._due: deque[tuple[float, str, Item]] = deque()
        self._offsets: dict[int, int] = {}  # input offset -> pending items from it
        self.changed: set[str] = set()
        self.stats = WindowStats()

    # ------------------------------------------------------------------ input

    def add(
        self,
        session: str,
        key: str,
        items: list[tuple[int, int, bytes]],
        offset: int,
        now: float,
    ) -> list[Released]:
        """Hold one record's events; returns what had to be released early (bounds).

        A duplicate (``key`` pending or remembered for ``session``) is dropped.
        """
        return self.add_entries(session, [(key, items)], offset, now)

    def add_entries(
        self,
        session: str,
        entries: list[tuple[str, list[tuple[int, int, bytes]]]],
        offset: int,
        now: float,
        tick: float | None = None,
    ) -> list[Released]:
        """:meth:`add` for each ``(key, items)`` of one sessions-topic record, in
        order (the same outcome), with the session looked up once.

        ``now`` is the wall clock (a session's last activity, which snapshots carry
        from one process to the next); ``tick``, when given, a monotonic clock the
        record's deadline is counted on, as :meth:`release` must then be called: a
        wall clock stepped back would hold every later deadline behind the earlier
        ones, and the whole partition with them."""
        sessions, stats = self.sessions, self.stats
        state = sessions.get(session)
        if state is None:
            state = sessions[session] = SessionWindow()
            self._bound_sessions(session)
        else:
            sessions.move_to_end(session)
        state.last_active = now
        if offset <= state.done_offset:
            # read again after a restart: every event of it was released before
            stats.duplicates += len(entries)
            return []
        if offset > state.last_offset:
            state.last_offset = offset
        offsets = self._offsets
        deadline = (now if tick is None else tick) + self.window_s
        pending, pending_keys, seen = state.pending, state.pending_keys, state.seen
        out: list[Released] = []
        # One due entry for the record (its entries share the deadline: its latest
        # item bounds them all), and its offset's count added at once.
        due_bound: Item | None = None
        added = 0
        for key, items in entries:
            if key in pending_keys:
                stats.duplicates += 1
                continue
            count = len(items)
            ordered: list[Item]
            if count == 1:
                time_ns, rank, data = items[0]
                ordered = [(time_ns, rank, key, 0, data, offset)]
            elif count == 2:  # a call and its result: two items, sorted without a sort
                (time_a, rank_a, data_a), (time_b, rank_b, data_b) = items
                first: Item = (time_a, rank_a, key, 0, data_a, offset)
                second: Item = (time_b, rank_b, key, 1, data_b, offset)
                ordered = [first, second] if first < second else [second, first]
            else:
                ordered = [
                    (time_ns, rank, key, index, data, offset)
                    for index, (time_ns, rank, data) in enumerate(items)
                ]
                ordered.sort()
            released_before = seen.get(key) if seen else None
            if released_before is not None:
                if released_before >= len(ordered):
                    stats.duplicates += 1
                    continue
                # Part of it was released before a restart: only the rest is new.
                # Events of one record are released in this same order.
                ordered = ordered[released_before:]
            if not ordered:
                continue
            in_order = not pending or pending[-1] < ordered[0]
            pending.extend(ordered)
            if not in_order:
                pending.sort()
            last = ordered[-1]
            if due_bound is None or due_bound < last:
                due_bound = last
            pending_keys[key] = len(ordered)
            added += len(ordered)
            excess = len(pending) - self.max_pending
            if excess > 0:
                offsets[offset] = offsets.get(offset, 0) + added  # before any is released
                added = 0
                stats.forced += excess
                out += self._release_first(session, state, excess)
        if added:
            offsets[offset] = offsets.get(offset, 0) + added
        if due_bound is not None:
            self._due.append((deadline, session, due_bound))
        return out

    # ----------------------------------------------------------------- output

    def release(self, now: float) -> list[Released]:
        """Everything due at ``now`` (on the clock the deadlines were counted on: the
        ``tick`` given to :meth:`add_entries`, else its ``now``), each session's
        events in event-time order."""
        due = self._due
        if not due or due[0][0] > now:
            return []
        bounds: dict[str, Item] = {}
        while due and due[0][0] <= now:
            _, session, item = due.popleft()
            bound = bounds.get(session)
            if bound is None or item > bound:
                bounds[session] = item
        out: list[Released] = []
        sessions = self.sessions
        for session, bound in bounds.items():
            state = sessions.get(session)
            if state is None or not state.pending:
                continue
            count = bisect_right(state.pending, bound)
            if count:
                out += self._release_first(session, state, count)
        return out

    def flush(self) -> list[Released]:
        """Release everything pending (tests, and a bridge told to drain)."""
        out: list[Released] = []
        for session, state in self.sessions.items():
            if state.pending:
                out += self._release_first(session, state, len(state.pending))
        self._due.clear()
        return out

    def _release_first(self, session: str, state: SessionWindow, count: int) -> list[Released]:
        """Release the session's ``count`` earliest pending events, in order, with seq."""
        pending = state.pending
        run = pending[:count]  # never empty: every caller releases at least one event
        del pending[:count]
        seq = state.next_seq
        last_time, last_rank = state.last_time, state.last_rank
        pending_keys, seen, offsets = state.pending_keys, state.seen, self._offsets
        out: list[Released] = []
        append = out.append
        endings, endings_count = _SEQ_ENDINGS, len(_SEQ_ENDINGS)
        late_count = 0
        # A key's and an offset's counts are settled once per run of consecutive events
        # of it (a call and its result, a record's events), not event by event.
        run_key, key_count = run[0][2], 0
        run_offset, offset_count = run[0][5], 0
        for time_ns, rank, key, _, data, offset in run:
            late = time_ns < last_time or (time_ns == last_time and rank < last_rank)
            if late:
                late_count += 1
            else:
                last_time, last_rank = time_ns, rank
            if key == run_key:
                key_count += 1
            else:
                _settle_key(pending_keys, seen, run_key, key_count)
                run_key, key_count = key, 1
            if offset == run_offset:
                offset_count += 1
            else:
                _settle_offset(offsets, run_offset, offset_count)
                run_offset, offset_count = offset, 1
            ending = endings[seq] if 0 <= seq < endings_count else b',"seq":%d}' % seq
            append(Released(session, seq, data[:-1] + ending, offset, late))
            seq += 1
        _settle_key(pending_keys, seen, run_key, key_count)
        _settle_offset(offsets, run_offset, offset_count)
        state.next_seq = seq
        state.last_time, state.last_rank = last_time, last_rank
        while len(seen) > self.max_seen:
            seen.popitem(last=False)
        self.changed.add(session)
        stats = self.stats
        stats.late += late_count
        stats.released += len(out)
        return out

    # ---------------------------------------------------------------- offsets

    def low_offset(self) -> int | None:
        """The lowest input offset with events still pending (None: nothing pending).
        Commit no further: those records must be read again after a restart."""
        return min(self._offsets) if self._offsets else None

    def pending_count(self) -> int:
        return sum(self._offsets.values())

    # -------------------------------------------------------------- lifetime

    def _bound_sessions(self, arriving: str) -> None:
        """Forget the least recently active idle sessions beyond ``max_sessions``,
        never ``arriving``: its events are about to be held (forgetting it would
        lose them, and their offsets would hold back every commit)."""
        sessions = self.sessions
        excess = len(sessions) - self.max_sessions
        if excess <= 0:
            return
        # From the least recently active end, and no further than needed: copying every
        # session's name for each one arriving at a full window made a poll of new
        # sessions cost seconds (the window's bound is 100,000).
        forgotten: list[str] = []
        for session, state in sessions.items():
            if session != arriving and not state.pending:
                forgotten.append(session)
                if len(forgotten) == excess:
                    break
        for session in forgotten:
            del sessions[session]
            self.changed.add(session)
        self.stats.evicted += len(forgotten)

    def sweep(self, now: float, limit: int = 10_000) -> int:
        """Expire sessions idle for ``session_ttl_s`` (oldest first, at most ``limit``)."""
        horizon = now - self.session_ttl_s
        idle: list[str] = []
        # Oldest first, and only as far as the first session still active.
        for session, state in islice(self.sessions.items(), limit):
            if state.last_active > horizon:
                break
            if not state.pending:
                idle.append(session)
        for session in idle:
            del self.sessions[session]
            self.changed.add(session)
        expired = len(idle)
        self.stats.expired += expired
        return expired

    # ------------------------------------------------------------- snapshots

    def snapshot(self, session: str) -> bytes | None:
        """One session's durable state (None: forgotten, write a tombstone)."""
        state = self.sessions.get(session)
        if state is None:
            return None
        # every record before the earliest one still held was wholly released
        done = min(item[5] for item in state.pending) - 1 if state.pending else state.last_offset
        return msgspec.msgpack.encode(
            [
                SNAPSHOT_VERSION,
                state.next_seq,
                state.last_time,
                state.last_rank,
                list(state.seen.items()),
                state.last_active,
                max(done, state.done_offset),
            ]
        )

    def take_changed(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    def restore(self, session: str, value: bytes | None) -> None:
        """Install one changelog value (a tombstone forgets the session).

        Raises :class:`ValueError` (or :class:`msgspec.DecodeError`, one) for a value
        this module did not write: the wrong shape or types, a ``seq`` below 1, a count
        below 1, a time that is not finite. Such a value is skipped, never installed:
        a session restored with ``next_seq`` 0 would write events the processor reads
        as replays of ones it never saw."""
        if value is None:
            self.sessions.pop(session, None)
            return
        try:
            version, next_seq, last_time, last_rank, seen, last_active, done_offset = _decode_snapshot(value)
        except msgspec.ValidationError:
            try:
                version, next_seq, last_time, last_rank, seen, last_active = _decode_snapshot_v1(value)
            except msgspec.ValidationError as exc:
                raise ValueError(f"unknown bridge snapshot for session {session!r}: {exc}") from None
            if version != 1:
                raise ValueError(f"unknown bridge snapshot for session {session!r}: version {version}") from None
            version, done_offset = SNAPSHOT_VERSION, -1
        if (
            version != SNAPSHOT_VERSION
            or done_offset < -1
            or next_seq < 1
            or last_time < -1
            or last_rank < -1
            or not math.isfinite(last_active)
            or any(count < 1 for _, count in seen)
        ):
            raise ValueError(f"unknown bridge snapshot for session {session!r}: a value out of range")
        state = SessionWindow()
        state.next_seq = next_seq
        state.last_time = last_time
        state.last_rank = last_rank
        state.seen = OrderedDict(seen[-self.max_seen :])
        state.last_active = last_active
        state.done_offset = state.last_offset = done_offset
        self.sessions[session] = state
        self.sessions.move_to_end(session)


def rehomed_snapshot(value: bytes) -> tuple[float, bytes]:
    """A session's snapshot to write on its new home partition after the sessions
    topic's partition count changed, with its last activity: the same ``seq``, position
    and remembered keys, without the released-through offset (an offset of the old
    partition). Raises :class:`ValueError` for a value :meth:`ReorderWindow.restore`
    would refuse."""
    window = ReorderWindow(max_seen=sys.maxsize)  # every remembered key kept
    window.restore("", value)
    state = window.sessions[""]
    state.done_offset = state.last_offset = -1
    snapshot = window.snapshot("")
    assert snapshot is not None
    return state.last_active, snapshot


def merged_snapshot(home: bytes, stray: bytes) -> bytes:
    """One snapshot of a session from the one on its home partition and one left on its
    old partition by a partition-count change: a bridge that ran at the new home after
    the change numbered the session from 1 again, so the ``seq`` goes on from the higher
    of the two, the keys of both are remembered (the stray's as the older), the later
    position and activity are kept, and the released-through offset is the home's (an
    offset of that partition). Raises :class:`ValueError` as :func:`rehomed_snapshot`."""
    window = ReorderWindow(max_seen=sys.maxsize)
    window.restore("home", home)
    window.restore("stray", stray)
    at_home, away = window.sessions["home"], window.sessions["stray"]
    at_home.next_seq = max(at_home.next_seq, away.next_seq)
    at_home.last_time, at_home.last_rank = max(
        (at_home.last_time, at_home.last_rank), (away.last_time, away.last_rank)
    )
    at_home.last_active = max(at_home.last_active, away.last_active)
    seen = OrderedDict(away.seen)
    for key, count in at_home.seen.items():
        seen[key] = max(count, seen.pop(key, 0))
    at_home.seen = seen
    snapshot = window.snapshot("home")
    assert snapshot is not None
    return snapshot


_decode_snapshot = msgspec.msgpack.Decoder(tuple[int, int, int, int, list[tuple[str, int]], float, int]).decode
"""A snapshot as :meth:`ReorderWindow.snapshot` writes it, types checked in C."""
_decode_snapshot_v1 = msgspec.msgpack.Decoder(tuple[int, int, int, int, list[tuple[str, int]], float]).decode
"""A snapshot of version 1, without the released-through offset."""
