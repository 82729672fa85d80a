"""Subscribing to streamguard's outputs: header filters and :class:`TripSubscriber`.

See the package docstring (:mod:`streamguard.client`) for the delivery rules.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Literal

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from ..events import (
    Alert,
    GuardrailTrip,
    Output,
    output_decoder,
)
from .defaults import DEFAULT_ALERTS_TOPIC

log = logging.getLogger("streamguard.client")


class Filter:
    """Which output records to take, judged from the record headers.

    Every non-None criterion must hold: ``types`` against the ``type`` header,
    ``signals`` against the ``signal`` header (comma-joined on ``feedback``:
    any listed signal matches), ``guardrails`` against the ``guardrail``
    header. A record published without a ``type`` header (not by streamguard)
    is decoded and judged on its fields instead.
    """

    __slots__ = ("guardrails", "signals", "types")

    def __init__(
        self,
        types: Iterable[str] | None = None,
        signals: Iterable[str] | None = None,
        guardrails: Iterable[str] | None = None,
    ) -> None:
        self.types = _frozen(types)
        self.signals = _frozen(signals)
        self.guardrails = _frozen(guardrails)

    def accepts(self, type_: str | None, signals: Iterable[str], guardrail: str | None) -> bool:
        if self.types is not None and type_ not in self.types:
            return False
        if self.signals is not None and not any(s in self.signals for s in signals):
            return False
        return self.guardrails is None or guardrail in self.guardrails

    def __repr__(self) -> str:
        parts = [
            f"{name}={sorted(value)!r}"
            for name in ("types", "signals", "guardrails")
            if (value := getattr(self, name)) is not None
        ]
        return f"Filter({', '.join(parts)})"


def _frozen(values: Iterable[str] | str | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        return frozenset({values})
    return frozenset(values)


def header_fields(headers: Iterable[tuple[str, bytes]] | None) -> tuple[str | None, list[str], str | None]:
    """``(type, signals, guardrail)`` from an output record's headers."""
    type_ = guardrail = None
    signals: list[str] = []
    for name, value in headers or ():
        if name == "type":
            type_ = value.decode("utf-8", "replace")
        elif name == "signal":
            signals = value.decode("utf-8", "replace").split(",")
        elif name == "guardrail":
            guardrail = value.decode("utf-8", "replace")
    return type_, signals, guardrail


def output_fields(output: Output) -> tuple[str, list[str], str | None]:
    """``(type, signals, guardrail)`` of a decoded output, as its headers would say."""
    type_ = output.__struct_config__.tag
    signals: list[str] = []
    if isinstance(output, Alert | GuardrailTrip):
        signals = [output.signal]
    elif hasattr(output, "signals"):
        signals = list(output.signals)
    guardrail = getattr(output, "guardrail", None)
    return str(type_), signals, guardrail


def header_decision(record: Any, filters: tuple[Filter, ...]) -> bool | None:
    """Whether the headers of an output record select it (None: it has no ``type`` header).

    An empty ``filters`` selects everything.
    """
    type_, signals, guardrail = header_fields(record.headers)
    if type_ is None:
        return None
    return not filters or any(f.accepts(type_, signals, guardrail) for f in filters)


def select_record(record: Any, filters: tuple[Filter, ...]) -> tuple[bool, Output | None]:
    """Decide on one output record: ``(selected, decoded output or None)``.

    Records with a ``type`` header are judged on their headers and decoded
    only when selected; records without one are decoded first. Raises
    ``msgspec.DecodeError`` for a selected record that does not decode.
    """
    decision = header_decision(record, filters)
    if decision is False:
        return False, None
    output = output_decoder.decode(record.value)
    if decision is None and filters:
        fields = output_fields(output)
        if not any(f.accepts(*fields) for f in filters):
            return False, None
    return True, output


class SubscriberStats:
    """Counters of a :class:`TripSubscriber`."""

    __slots__ = ("commits", "duplicates", "handled", "malformed", "received", "selected")

    def __init__(self) -> None:
        self.received = 0
        self.selected = 0
        self.duplicates = 0
        self.malformed = 0
        self.handled = 0
        self.commits = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        return f"SubscriberStats({self.as_dict()})"


class _Listener(ConsumerRebalanceListener):
    def __init__(self, subscriber: TripSubscriber) -> None:
        self.subscriber = subscriber

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.subscriber._revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.subscriber._assigned_now(set(assigned))


class TripSubscriber:
    """Consume selected output events in a consumer group, at least once.

    ::

        async with TripSubscriber("kafka:9092", group_id="halter") as trips:
            async for trip in trips:
                await halt(trip.session)

    A record counts as handled when the loop asks for the next one (or when
    the ``async with`` block exits without an exception); only then is it
    remembered as seen and its offset committed. If the loop body raises, the
    record is not committed: close the subscriber and let the group deliver
    it again (to this process after a restart, or to another member).
    Records that are not selected, duplicates and undecodable records are
    committed along the way (at most every ``commit_interval`` seconds).

    Duplicates (same ``id``; at-least-once delivery upstream can publish an
    output twice) are dropped within a bounded memory of ``dedup_size`` ids.
    Across a restart or a rebalance, the committed offsets are what prevent
    repeats: a record handled but not yet committed when the process died is
    delivered again, so the handling should tolerate a repeat.

    Selection: ``filters`` (any may match), or one filter built from
    ``types`` / ``signals`` / ``guardrails``. The default takes
    ``guardrail_trip`` records only. ``types=None`` with no other criterion
    takes everything.

    Extra keyword arguments go to :class:`aiokafka.AIOKafkaConsumer`
    (security settings, ``client_id``, group timings). ``auto_offset_reset``
    applies to a group without committed offsets: ``"latest"`` (the default)
    starts a new controller at the present instead of replaying old trips.
    """

    def __init__(
        self,
        bootstrap_servers: str = "localhost:9092",
        *,
        group_id: str,
        topic: str = DEFAULT_ALERTS_TOPIC,
        types: Iterable[str] | str | None = ("guardrail_trip",),
        signals: Iterable[str] | str | None = None,
        guardrails: Iterable[str] | str | None = None,
        filters: Iterable[Filter] | None = None,
        dedup_size: int = 10_000,
        auto_offset_reset: Literal["latest", "earliest"] = "latest",
        commit_interval: float = 1.0,
        poll_timeout_ms: int = 200,
        **consumer_options: Any,
    ) -> None:
        if filters is not None:
            self.filters = tuple(filters)
        elif types is None and signals is None and guardrails is None:
            self.filters = ()
        else:
            self.filters = (Filter(types, signals, guardrails),)
        self.topic = topic
        self.group_id = group_id
        self.dedup_size = max(int(dedup_size), 1)
        self.commit_interval = commit_interval
        self.stats = SubscriberStats()
        self._poll_timeout_ms = poll_timeout_ms
        self._consumer_options: dict[str, Any] = {
            "bootstrap_servers": bootstrap_servers,
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": auto_offset_reset,
            **consumer_options,
        }
        self._consumer: AIOKafkaConsumer | None = None
        self._assigned: set[TopicPartition] = set()
        self._marks: dict[TopicPartition, int] = {}
        self._dirty = False
        self._last_commit = time.monotonic()
        self._pending: deque[tuple[TopicPartition, Any]] = deque()
        self._current: tuple[TopicPartition, int, str] | None = None
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._stopping = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect and subscribe (raises aiokafka's errors if the brokers are unreachable)."""
        if self._consumer is not None:
            return
        consumer = AIOKafkaConsumer(**self._consumer_options)
        consumer.subscribe([self.topic], listener=_Listener(self))
        # set before the group is joined: the assignment callback commits through it
        self._consumer = consumer
        try:
            await consumer.start()
        except BaseException:
            self._consumer = None
            with contextlib.suppress(Exception):
                await consumer.stop()
            raise

    async def __aenter__(self) -> TripSubscriber:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(handled=exc_type is None)

    def stop(self) -> None:
        """Make the iteration end (within one poll timeout). Safe from signal handlers."""
        self._stopping = True

    async def close(self, *, handled: bool = True) -> None:
        """Commit what was handled and leave the group.

        ``handled=False`` leaves the record last returned by the iterator
        uncommitted (its handler failed).
        """
        consumer = self._consumer
        if consumer is None:
            return
        if handled:
            self._finish_current()
        self._current = None
        with contextlib.suppress(KafkaError, OSError):
            await self._commit()
        self._consumer = None
        await consumer.stop()

    # ------------------------------------------------------------ iteration

    def __aiter__(self) -> TripSubscriber:
        return self

    async def __anext__(self) -> Output:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("the subscriber is not started (use `async with` or start())")
        if self._finish_current():
            await self._commit()
        while not self._stopping:
            pending = self._pending
            while pending:
                tp, record = pending.popleft()
                if tp not in self._assigned:
                    continue  # revoked meanwhile: the new owner reads it
                self.stats.received += 1
                output = self._select(record)
                if output is None:
                    self._mark(tp, record.offset)
                    continue
                self._current = (tp, record.offset, output.id)
                return output
            if self._dirty and time.monotonic() - self._last_commit >= self.commit_interval:
                await self._commit()
            batch = await consumer.getmany(timeout_ms=self._poll_timeout_ms)
            for tp, records in batch.items():
                pending.extend((tp, record) for record in records)
        raise StopAsyncIteration

    async def run(self, handler: Callable[[Output], Awaitable[Any]]) -> None:
        """``await handler(output)`` for each selected output until :meth:`stop`."""
        async for output in self:
            await handler(output)

    # -------------------------------------------------------------- internals

    def _select(self, record: Any) -> Output | None:
        try:
            selected, output = select_record(record, self.filters)
        except msgspec.DecodeError as exc:
            self.stats.malformed += 1
            log.warning(
                "skipping undecodable record %s[%d]@%d: %s",
                record.topic,
                record.partition,
                record.offset,
                exc,
            )
            return None
        if not selected or output is None:
            return None
        self.stats.selected += 1
        if output.id in self._seen:
            self._seen.move_to_end(output.id)
            self.stats.duplicates += 1
            return None
        return output

    def _finish_current(self) -> bool:
        current = self._current
        if current is None:
            return False
        self._current = None
        tp, offset, output_id = current
        seen = self._seen
        seen[output_id] = None
        if len(seen) > self.dedup_size:
            seen.popitem(last=False)
        self.stats.handled += 1
        return self._mark(tp, offset)

    def _mark(self, tp: TopicPartition, offset: int) -> bool:
        if tp not in self._assigned:
            return False
        self._marks[tp] = offset + 1
        self._dirty = True
        return True

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        consumer = self._consumer
        if consumer is None or not self._dirty:
            return
        offsets = {
            tp: offset
            for tp, offset in self._marks.items()
            if tp in self._assigned and (only is None or tp in only)
        }
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except CommitFailedError as exc:
            # The group rebalanced under us: the new owners re-read from the last commit.
            log.warning("offset commit failed after a rebalance: %s", exc)
            return
        except KafkaError as exc:
            # Transient (coordinator moving, broker away): the marks stay dirty
            # and the next commit carries them; a crash meanwhile only means
            # redelivery.
            log.warning("offset commit failed, will retry: %s", exc)
            self._last_commit = time.monotonic()
            return
        self.stats.commits += 1
        if only is None:
            self._dirty = False
            self._last_commit = time.monotonic()

    async def _assigned_now(self, assigned: set[TopicPartition]) -> None:
        """Take the partitions; commit where the group has no offset yet the position the
        reset policy gave. Otherwise a partition that carried nothing since the group
        first joined has no commit, and a restart would apply ``latest`` to it again:
        a trip written there while the subscriber was down would be skipped."""
        self._assigned = assigned
        consumer = self._consumer
        if consumer is None or self._consumer_options.get("auto_offset_reset") != "latest":
            return  # (from the earliest, a restart reads everything again: nothing skipped)
        fresh: dict[TopicPartition, int] = {}
        try:
            quiet = [tp for tp in sorted(assigned) if await consumer.committed(tp) is None]
            if quiet:
                fresh = await consumer.end_offsets(quiet)
                await consumer.commit(fresh)
                self.stats.commits += 1
        except (KafkaError, OSError) as exc:  # the next assignment tries again
            log.warning("could not commit the starting offsets of %s: %r", sorted(fresh), exc)

    async def _revoked(self, revoked: set[TopicPartition]) -> None:
        with contextlib.suppress(KafkaError, OSError):
            await self._commit(only=revoked)
        self._assigned -= revoked
        for tp in revoked:
            self._marks.pop(tp, None)
        if self._pending:
            self._pending = deque((tp, r) for tp, r in self._pending if tp not in revoked)
