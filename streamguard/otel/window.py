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
  duplicate: dropped and counted;
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
its last activity), written by the bridge to a compacted changelog after the
events it released are acknowledged and before the input offsets are
committed. Pending events are not snapshotted: their input records are not
committed yet (:meth:`ReorderWindow.low_offset`), so they are read again and
re-derived.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from typing import Any, NamedTuple

import msgspec

SNAPSHOT_VERSION = 1


class Item(NamedTuple):
    """One pending event. Sorted by (time, rank, key, index): deterministic."""

    time_ns: int
    rank: int
    key: str
    index: int
    data: bytes  # the event's JSON, without seq
    offset: int  # the input record it came from


class Released(NamedTuple):
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
    __slots__ = ("last_active", "last_rank", "last_time", "next_seq", "pending", "pending_keys", "seen")

    def __init__(self) -> None:
        self.next_seq = 1
        self.last_time = -1
        self.last_rank = -1
        # key -> events of it released; a record read again after a restart
        # re-derives only the events not yet released
        self.seen: OrderedDict[str, int] = OrderedDict()
        self.pending: list[Item] = []  # a heap
        self.pending_keys: dict[str, int] = {}  # key -> pending items of it
        self.last_active = 0.0


def with_seq(data: bytes, seq: int) -> bytes:
    """The event's JSON with ``"seq":N`` appended (events are non-empty objects)."""
    return b"%s,\"seq\":%d}" % (data[:-1], seq)


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
        self._due: deque[tuple[float, str, Item]] = deque()  # (deadline, session, item)
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
        state = self.sessions.get(session)
        if state is None:
            state = self.sessions[session] = SessionWindow()
            self._bound_sessions()
        else:
            self.sessions.move_to_end(session)
        state.last_active = now
        if key in state.pending_keys:
            self.stats.duplicates += 1
            return []
        ordered = sorted(
            Item(time_ns, rank, key, index, data, offset)
            for index, (time_ns, rank, data) in enumerate(items)
        )
        released_before = state.seen.get(key)
        if released_before is not None:
            if released_before >= len(ordered):
                self.stats.duplicates += 1
                return []
            # Part of it was released before a restart: only the rest is new.
            # Events of one record are released in this same order.
            ordered = ordered[released_before:]
        if not ordered:
            return []
        deadline = now + self.window_s
        offsets = self._offsets
        for item in ordered:
            heapq.heappush(state.pending, item)
            self._due.append((deadline, session, item))
        state.pending_keys[key] = len(ordered)
        offsets[offset] = offsets.get(offset, 0) + len(ordered)
        released: list[Released] = []
        while len(state.pending) > self.max_pending:
            self.stats.forced += 1
            released.append(self._release_one(session, state))
        return released

    # ----------------------------------------------------------------- output

    def release(self, now: float) -> list[Released]:
        """Everything due at ``now``, each session's events in event-time order."""
        due = self._due
        bounds: dict[str, Item] = {}
        while due and due[0][0] <= now:
            _, session, item = due.popleft()
            bound = bounds.get(session)
            if bound is None or item > bound:
                bounds[session] = item
        out: list[Released] = []
        for session, bound in bounds.items():
            state = self.sessions.get(session)
            if state is None:
                continue
            pending = state.pending
            while pending and pending[0] <= bound:
                out.append(self._release_one(session, state))
        return out

    def flush(self) -> list[Released]:
        """Release everything pending (tests, and a bridge told to drain)."""
        out: list[Released] = []
        for session, state in self.sessions.items():
            while state.pending:
                out.append(self._release_one(session, state))
        self._due.clear()
        return out

    def _release_one(self, session: str, state: SessionWindow) -> Released:
        item = heapq.heappop(state.pending)
        late = (item.time_ns, item.rank) < (state.last_time, state.last_rank)
        if late:
            self.stats.late += 1
        else:
            state.last_time, state.last_rank = item.time_ns, item.rank
        seq = state.next_seq
        state.next_seq = seq + 1
        left = state.pending_keys[item.key] - 1
        if left:
            state.pending_keys[item.key] = left
        else:
            del state.pending_keys[item.key]
        seen = state.seen
        seen[item.key] = seen.get(item.key, 0) + 1
        while len(seen) > self.max_seen:
            seen.popitem(last=False)
        count = self._offsets[item.offset] - 1
        if count:
            self._offsets[item.offset] = count
        else:
            del self._offsets[item.offset]
        self.changed.add(session)
        self.stats.released += 1
        return Released(session, seq, with_seq(item.data, seq), item.offset, late)

    # ---------------------------------------------------------------- offsets

    def low_offset(self) -> int | None:
        """The lowest input offset with events still pending (None: nothing pending).
        Commit no further: those records must be read again after a restart."""
        return min(self._offsets) if self._offsets else None

    def pending_count(self) -> int:
        return sum(self._offsets.values())

    # -------------------------------------------------------------- lifetime

    def _bound_sessions(self) -> None:
        """Forget the least recently active idle sessions beyond ``max_sessions``."""
        if len(self.sessions) <= self.max_sessions:
            return
        for session in list(self.sessions):
            if len(self.sessions) <= self.max_sessions:
                break
            if not self.sessions[session].pending:
                del self.sessions[session]
                self.changed.add(session)
                self.stats.evicted += 1

    def sweep(self, now: float, limit: int = 10_000) -> int:
        """Expire sessions idle for ``session_ttl_s`` (oldest first, at most ``limit``)."""
        expired = 0
        horizon = now - self.session_ttl_s
        for session in list(self.sessions)[:limit]:
            state = self.sessions[session]
            if state.last_active > horizon:
                break
            if state.pending:
                continue
            del self.sessions[session]
            self.changed.add(session)
            expired += 1
        self.stats.expired += expired
        return expired

    # ------------------------------------------------------------- snapshots

    def snapshot(self, session: str) -> bytes | None:
        """One session's durable state (None: forgotten, write a tombstone)."""
        state = self.sessions.get(session)
        if state is None:
            return None
        return msgspec.msgpack.encode(
            [
                SNAPSHOT_VERSION,
                state.next_seq,
                state.last_time,
                state.last_rank,
                list(state.seen.items()),
                state.last_active,
            ]
        )

    def take_changed(self) -> set[str]:
        changed, self.changed = self.changed, set()
        return changed

    def restore(self, session: str, value: bytes | None) -> None:
        """Install one changelog value (a tombstone forgets the session)."""
        if value is None:
            self.sessions.pop(session, None)
            return
        decoded: Any = msgspec.msgpack.decode(value)
        if not isinstance(decoded, list) or not decoded or decoded[0] != SNAPSHOT_VERSION:
            raise ValueError(f"unknown bridge snapshot for session {session!r}")
        _, next_seq, last_time, last_rank, seen, last_active = decoded
        state = SessionWindow()
        state.next_seq = int(next_seq)
        state.last_time = int(last_time)
        state.last_rank = int(last_rank)
        state.seen = OrderedDict((str(k), int(n)) for k, n in seen[-self.max_seen :])
        state.last_active = float(last_active)
        self.sessions[session] = state
        self.sessions.move_to_end(session)
