"""The session table: which sessions this processor holds, where, and for how long.

The engine holds each session's detector state; this table holds what the
shell needs around it: the partition a session lives on, the last events and
control offsets applied to it, its last activity on the processor's clock, and
per owned partition the sessions in order of activity (halted ones past the
idle TTL *parked* until the longer halted TTL), and the sessions of each origin
(agent and tenant, what a fleet scope is made of) so that a circuit that opens
visits the sessions of its scope rather than every session held. Eviction runs
here, on processing time.

Nothing here touches Kafka. The table tells its owner about every session it
drops through ``on_dropped(session, partition)``, so the checkpointer can write
the tombstone.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Literal

import msgspec

from ..engine import Engine
from .changelog import ChangelogEntry

EvictionKind = Literal["idle", "halted", "capacity", "halted_capacity"]


class PartitionStatus(enum.Enum):
    RESTORING = "restoring"  # assigned, its sessions being read from the changelog
    ACTIVE = "active"  # restored: its records are processed
    SUSPENDED = "suspended"  # revoked, kept in case the next assignment hands it back


class SessionMeta(msgspec.Struct, gc=False):
    """What the shell (not the engine) remembers about one session.

    Scalars only, so the garbage collector need not track one object per held
    session (``gc=False``): full collections stay short with many sessions.
    """

    partition: int
    events_offset: int
    control_offset: int
    last_seen: float  # processing time (the processor's clock) of the last record
    parked: bool = False
    # The origin the session is indexed under (``SessionTable.by_origin``): the
    # engine state's own agent and tenant objects, so a change is seen by identity.
    agent: str | None = None
    tenant: str | None = None


class OwnedPartition:
    """One owned events partition (and its control and changelog twins)."""

    __slots__ = ("active", "changelog_mark", "number", "parked", "status")

    def __init__(self, number: int, status: PartitionStatus) -> None:
        self.number = number
        self.status = status
        # Sessions in (approximate) order of last activity, oldest first; halted
        # sessions past the idle TTL move to ``parked`` and wait for the longer TTL.
        self.active: OrderedDict[str, None] = OrderedDict()
        self.parked: OrderedDict[str, None] = OrderedDict()
        # The changelog's end offset (as ListOffsets reports it) when the partition
        # was suspended; unchanged at re-assignment = nobody else wrote meanwhile.
        self.changelog_mark: int | None = None

    def sessions(self) -> list[str]:
        return [*self.active, *self.parked]


class SessionTable:
    """Every held session's shell-side facts, and the owned partitions they live on."""

    def __init__(
        self,
        engine: Engine,
        on_dropped: Callable[[str, int], None],
        on_evicted: Callable[[EvictionKind], None],
        max_per_partition: int = 0,
    ) -> None:
        self.engine = engine
        self.max_per_partition = max_per_partition  # 0: no bound but the TTLs
        self.partitions: dict[int, OwnedPartition] = {}
        self.meta: dict[str, SessionMeta] = {}
        self.halted: set[str] = set()
        # (agent, tenant) -> the sessions held with that origin, in order of arrival.
        # A fleet scope is a function of the origin, so a circuit's sessions are the
        # members of the origins in its scope: few origins, many sessions each.
        self.by_origin: dict[tuple[str | None, str | None], dict[str, None]] = {}
        self._on_dropped = on_dropped
        self._on_evicted = on_evicted

    # ------------------------------------------------------------- activity

    def touch(
        self, part: OwnedPartition, session: str, meta: SessionMeta | None, now: float
    ) -> SessionMeta | None:
        """Book-keeping after the engine saw a record of ``session`` (``now``: processing time).

        Returns the session's meta (created on its first record), or ``meta`` as
        given when the engine holds no state for it (a refused record).
        """
        state = self.engine.sessions.get(session)
        if state is None:
            return meta
        if meta is None:
            meta = SessionMeta(part.number, -1, -1, now, False, state.agent, state.tenant)
            self.meta[session] = meta
            self._index(session, meta)
            part.active[session] = None
            limit = self.max_per_partition
            if limit and len(part.active) + len(part.parked) > limit:
                self._make_room(part, limit)
        else:
            if meta.parked:
                meta.parked = False
                part.parked.pop(session, None)
                part.active[session] = None
            else:
                part.active.move_to_end(session)
            meta.last_seen = now
            if meta.agent is not state.agent or meta.tenant is not state.tenant:
                self.reorigin(session, meta, state)
        if state.halted_by:
            self.halted.add(session)
        else:
            self.halted.discard(session)
        return meta

    # -------------------------------------------------------------- origins

    def _index(self, session: str, meta: SessionMeta) -> None:
        origin = (meta.agent, meta.tenant)
        members = self.by_origin.get(origin)
        if members is None:
            members = self.by_origin[origin] = {}
        members[session] = None

    def _unindex(self, session: str, meta: SessionMeta) -> None:
        origin = (meta.agent, meta.tenant)
        members = self.by_origin.get(origin)
        if members is not None:
            members.pop(session, None)
            if not members:
                del self.by_origin[origin]

    def _forget_meta(self, session: str) -> SessionMeta | None:
        """Drop the session's meta and its place in the origin index; the meta it had."""
        meta = self.meta.pop(session, None)
        if meta is not None:
            self._unindex(session, meta)
        return meta

    def reorigin(self, session: str, meta: SessionMeta, state: Any) -> None:
        """The session's agent or tenant was named after its first event (see
        ``Engine._session``): index it under its new origin. The processor's own copy of
        :meth:`touch` for held sessions calls this too."""
        self._unindex(session, meta)
        meta.agent, meta.tenant = state.agent, state.tenant
        self._index(session, meta)

    def of_origins(self, wanted: Callable[[str | None, str | None], bool]) -> list[str]:
        """The held sessions whose origin (agent, tenant) is ``wanted``."""
        return [
            session
            for (agent, tenant), members in self.by_origin.items()
            if wanted(agent, tenant)
            for session in members
        ]

    # ------------------------------------------------------------- eviction

    def sweep(self, now: float, idle_ttl: float, halted_ttl: float, budget: int) -> None:
        """Evict sessions idle past their TTL on the active partitions, oldest first,
        examining at most ``budget`` per partition."""
        for part in self.partitions.values():
            if part.status is not PartitionStatus.ACTIVE:
                continue
            left = budget
            active, parked = part.active, part.parked
            while active and left > 0:
                session = next(iter(active))
                meta = self.meta[session]
                if now - meta.last_seen < idle_ttl:
                    break
                left -= 1
                if session in self.halted:
                    del active[session]
                    parked[session] = None
                    meta.parked = True
                else:
                    self._evict(part, session, "idle")
            while parked and left > 0:
                session = next(iter(parked))
                if now - self.meta[session].last_seen < halted_ttl:
                    break
                left -= 1
                self._evict(part, session, "halted")

    def _make_room(self, part: OwnedPartition, limit: int) -> None:
        """Evict the least recently active sessions of ``part`` past ``limit``. Halted
        sessions are evicted for room only when nothing else is left to evict (their
        halt should hold until their own TTL): met at the head of the idle order, they
        are parked, as the sweep would park them, so each is passed over once. The
        newest session is never evicted. A stream of new session ids at line rate is
        then bounded in memory, not just in time (the idle TTL is hours), even when
        every one of them gets itself halted (five identical calls do it): past the
        bound, the least recently active halt goes, counted as ``halted_capacity``."""
        active, parked = part.active, part.parked
        while len(active) + len(parked) > limit and len(active) > 1:
            session = next(iter(active))
            if session in self.halted:
                del active[session]
                parked[session] = None
                self.meta[session].parked = True
            else:
                self._evict(part, session, "capacity")
        while len(active) + len(parked) > limit and parked:
            self._evict(part, next(iter(parked)), "halted_capacity")

    def _evict(self, part: OwnedPartition, session: str, kind: EvictionKind) -> None:
        self.engine.evict(session)
        part.active.pop(session, None)
        part.parked.pop(session, None)
        self._forget_meta(session)
        self.halted.discard(session)
        self._on_dropped(session, part.number)  # a tombstone at the next checkpoint
        self._on_evicted(kind)

    def drop_session(self, session: str) -> None:
        """Forget one session entirely (its state could not be snapshotted)."""
        meta = self._forget_meta(session)
        if meta is not None:
            part = self.partitions.get(meta.partition)
            if part is not None:
                part.active.pop(session, None)
                part.parked.pop(session, None)
        self.engine.evict(session)
        self.halted.discard(session)

    # ----------------------------------------------------------- partitions

    def add_partition(self, number: int, status: PartitionStatus) -> OwnedPartition:
        part = self.partitions[number] = OwnedPartition(number, status)
        return part

    def drop_partition(self, number: int) -> list[str]:
        """Forget an owned partition and its sessions (no tombstones: another
        owner holds them now); the sessions it held."""
        part = self.partitions.pop(number, None)
        if part is None:
            return []
        sessions = part.sessions()
        for session in sessions:
            self.engine.evict(session)
            self._forget_meta(session)
            self.halted.discard(session)
        return sessions

    def install(
        self, part: OwnedPartition, entries: Iterable[tuple[str, ChangelogEntry]], now: float
    ) -> int:
        """Install restored sessions (already in the engine) on ``part``, in order of
        last activity; the number installed. A last activity after ``now`` (or not a
        number) is read as ``now``: a forged changelog entry from the far future would
        otherwise stand at the head of the idle order for good, and the TTL sweep, which
        stops at the first session still active, would evict nothing behind it."""

        def last_seen(entry: ChangelogEntry) -> float:
            seen = entry.last_seen
            return seen if seen <= now else now  # (NaN compares false: now)

        ordered = sorted(((s, e, last_seen(e)) for s, e in entries), key=lambda item: item[2])
        sessions = self.engine.sessions
        for session, entry, seen in ordered:
            state = sessions.get(session)
            meta = SessionMeta(part.number, entry.events_offset, entry.control_offset, seen)
            if state is not None:
                meta.agent, meta.tenant = state.agent, state.tenant
            previous = self.meta.get(session)
            if previous is not None:
                self._unindex(session, previous)
            self.meta[session] = meta
            self._index(session, meta)
            part.active[session] = None
            if state is not None and state.halted_by:
                self.halted.add(session)
        return len(ordered)

    def restoring(self) -> list[int]:
        return sorted(
            n for n, p in self.partitions.items() if p.status is PartitionStatus.RESTORING
        )
