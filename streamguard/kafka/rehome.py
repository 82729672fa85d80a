"""Move session snapshots to their home partitions after a partition-count change.

A session lives on the partition its key hashes to (``murmur2(session) % N``),
and its snapshot on the changelog partition of the same number. Raising ``N``
re-maps keys: after the count of the events, control and changelog topics went
from 2 to 4, about half the sessions hash elsewhere, while their snapshots (and
their halts) still sit on the old partitions. Left there, a moved session starts
afresh on its new home's owner, its halt forgotten, or, where one instance owns
both partitions, its events are dead-lettered as ``partition_mismatch`` until
the old state expires.

``streamguard rehome`` (run with the processors stopped) reads the whole
changelog, and for each snapshot away from its home partition:

* **moves** it: the same state written to its home partition, then a tombstone
  where it was. Its ``events_offset`` and ``control_offset`` become -1: they
  were offsets of the old partitions and mean nothing on the new one (left as
  they were, the new partition's records below them would be skipped as
  already applied);
* or, when its home partition already holds a readable snapshot of the session
  (written by a processor that ran after the change), **drops** it with a
  tombstone: the home one is newer, and it is the one the processor would keep
  (``duplicate_snapshot``). An unreadable copy at home is replaced. (The bridge's
  states are merged instead: see :data:`BRIDGE`.)

The moves are written and acknowledged before any tombstone, so a run stopped
half-way leaves at worst both copies, and running it again finishes the job
(the home copy then wins): the command is idempotent. A snapshot this version
cannot read is left where it is and reported (the processor skips it too).

``streamguard rehome --bridge`` does the same for ``streamguard bridge``'s changelog
after the count of its sessions topic and changelog changed (:data:`BRIDGE`), and
``--fleet`` for the fleet stage's state after the count of the fleet facts and state
topics changed (:data:`FLEET`).

:func:`plan_rehome` is the decision, pure; :func:`read_latest` and
:func:`apply_plan` are the reading and the writing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from msgspec import Struct

from .changelog import ChangelogError, read_partitions, rehomed_entry
from .inspect import SnapshotUnreadable, decode_view, home_partition


class SnapshotKind(Struct, frozen=True):
    """How one changelog's snapshots are read for a move. ``rehomed`` returns the
    snapshot's last activity and the value to write at its new home, or raises
    ValueError for a value that job would not restore; ``halted`` says whether it
    holds a halt (shown to the operator); ``merge``, when given, makes one value of a
    copy at home and a stray one (else the copy at home wins)."""

    name: str
    rehomed: Callable[[bytes], tuple[float, bytes]]
    halted: Callable[[bytes], bool]
    merge: Callable[[bytes, bytes], bytes] | None = None


def _processor_halted(value: bytes) -> bool:
    return decode_view(-1, -1, value).halted


def _bridge_rehomed(value: bytes) -> tuple[float, bytes]:
    from ..otel.window import rehomed_snapshot

    return rehomed_snapshot(value)


def _bridge_merged(home: bytes, stray: bytes) -> bytes:
    from ..otel.window import merged_snapshot

    return merged_snapshot(home, stray)


def _fleet_rehomed(value: bytes) -> tuple[float, bytes]:
    from ..fleet_windows import rehomed_scope

    return rehomed_scope(value)


def _fleet_circuit_open(value: bytes) -> bool:
    from ..fleet_windows import decode_scope

    return decode_scope(value).circuit.state == "open"


PROCESSOR = SnapshotKind("processor", rehomed_entry, _processor_halted)
"""``streamguard run``'s changelog: the session snapshots of :mod:`.changelog`. A copy
at home was written by a processor after the change, from the session's events there:
it is the newer state and wins (as the processor's own restore would have it)."""
BRIDGE = SnapshotKind("bridge", _bridge_rehomed, lambda value: False, _bridge_merged)
"""``streamguard bridge``'s changelog: each session's ``seq`` counter and remembered
keys (:mod:`streamguard.otel.window`). Moving them keeps a moved session's ``seq``
going up; left behind, its new owner would number its events from 1 again, and the
processor would skip them as replays until they passed the old numbers. A copy at
home (a bridge ran after the change) did just that: the two are merged, the ``seq``
going on from the higher."""
FLEET = SnapshotKind("fleet", _fleet_rehomed, _fleet_circuit_open)
"""The fleet stage's state topic: each ``[[fleet]]`` scope's windows, session marks and
circuit (:mod:`streamguard.fleet_windows`), keyed by scope like the facts. Left behind,
a moved scope's windows would start empty where its facts now arrive (spend counted
from zero, an open circuit forgotten by the stage). A copy at home started afresh
after the change; it wins, as the stage's own restore would keep it. ``halted`` here
means the scope's circuit is open."""


class Move(Struct, frozen=True, kw_only=True):
    """One snapshot away from its home partition, and what becomes of it."""

    session: str
    source: int
    target: int
    value: bytes | None
    """The snapshot to write on ``target`` (None: the target holds a newer one, or
    another copy is moved there; only the tombstone on ``source`` is written)."""
    halted: bool
    merged: bool = False
    """``value`` merges this copy with others (the one already on ``target``, or other
    strays)."""
    kept: int = -1
    """The partition whose copy the session keeps: ``target`` when the copy there wins,
    else the source of the copy that moves."""


class RehomePlan(Struct, kw_only=True):
    partitions: int
    sessions: int = 0
    """Distinct sessions on the changelog."""
    at_home: int = 0
    """Sessions with a snapshot on their home partition (readable or not)."""
    moves: list[Move] = []
    unreadable: list[tuple[int, str, str]] = []
    """``(partition, session, reason)`` of snapshots left where they are."""

    @property
    def moved(self) -> list[Move]:
        return [m for m in self.moves if m.value is not None]

    @property
    def superseded(self) -> list[Move]:
        return [m for m in self.moves if m.value is None]


def plan_rehome(
    latest: Mapping[int, Mapping[str, bytes]], partitions: int, kind: SnapshotKind = PROCESSOR
) -> RehomePlan:
    """What to write so that every session of ``latest`` (partition -> session -> the
    partition's latest snapshot of it) with a readable snapshot has exactly one, on its
    home partition among ``partitions``. Deterministic: sessions and partitions sorted.

    A session with copies on several partitions (more than one count change, or a run
    interrupted): where ``kind`` merges, every readable copy is folded into one, the
    newest (a readable copy at home, else the stray seen last) as the base; where not,
    a readable copy at home wins, else the stray seen last (the greatest last activity;
    on a tie the lowest partition) moves. The other strays are tombstoned."""
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    copies: dict[str, dict[int, bytes]] = {}
    for source, entries in latest.items():
        for session, snapshot in entries.items():
            copies.setdefault(session, {})[source] = snapshot
    plan = RehomePlan(partitions=partitions, sessions=len(copies))
    for session in sorted(copies):
        held = copies[session]
        target = home_partition(session, partitions)
        if target in held:
            plan.at_home += 1
        strays: list[tuple[int, float, bytes, bool]] = []
        for source in sorted(held):
            if source == target:
                continue
            try:
                last_seen, moved, halted = _read(kind, held[source])
            except (ChangelogError, SnapshotUnreadable, ValueError) as exc:
                plan.unreadable.append((source, session, str(exc)))
                continue
            strays.append((source, last_seen, moved, halted))
        if not strays:
            continue
        at_home = held.get(target)
        if at_home is not None:
            try:
                _read(kind, at_home)
            except (ChangelogError, SnapshotUnreadable, ValueError):
                at_home = None  # a copy at home the job could not restore: a stray replaces it
        newest_first = sorted(strays, key=lambda s: (s[1], -s[0]), reverse=True)
        winner = newest_first[0]
        value: bytes | None = None
        merged = False
        if kind.merge is not None:
            # every copy folded into one, the newest as the base (its keys the newest)
            base = at_home
            for stray in newest_first:
                base = stray[2] if base is None else kind.merge(base, stray[2])
            value, merged = base, at_home is not None or len(strays) > 1
        elif at_home is None:
            value = winner[2]
        kept = target if at_home is not None and kind.merge is None else winner[0]
        for stray in strays:
            source, _, _, halted = stray
            plan.moves.append(
                Move(
                    session=session, source=source, target=target, halted=halted, kept=kept,
                    value=value if stray is winner else None, merged=merged and stray is winner,
                )
            )
    return plan


def _read(kind: SnapshotKind, value: bytes) -> tuple[float, bytes, bool]:
    """A snapshot's last activity, its value for a new home, and whether it is halted;
    raises for a value the job would not restore (the same test at home and away)."""
    last_seen, moved = kind.rehomed(value)
    return last_seen, moved, kind.halted(value)


async def read_latest(consumer: AIOKafkaConsumer, topic: str, partitions: set[int]) -> dict[int, dict[str, bytes]]:
    """The latest snapshot of every session on each partition of the changelog, read
    to its end with a group-less ``consumer`` (tombstones applied)."""
    restored = await read_partitions(consumer, topic, partitions)
    return {number: dict(part.entries) for number, part in restored.items()}


async def apply_plan(producer: AIOKafkaProducer, topic: str, plan: RehomePlan) -> None:
    """Write ``plan``: every moved snapshot, acknowledged, then every tombstone."""
    pending = [
        await producer.send(topic, move.value, key=move.session.encode(), partition=move.target)
        for move in plan.moves
        if move.value is not None
    ]
    for sent in pending:
        await sent
    # Only now: a tombstone acknowledged before its copy would lose the state.
    pending = [
        await producer.send(topic, None, key=move.session.encode(), partition=move.source)
        for move in plan.moves
    ]
    for sent in pending:
        await sent


__all__ = ["BRIDGE", "FLEET", "PROCESSOR", "Move", "RehomePlan", "SnapshotKind", "apply_plan", "plan_rehome", "read_latest"]
