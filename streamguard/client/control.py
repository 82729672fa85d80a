"""Resetting sessions: :class:`AsyncSessionControl` (asyncio) and :class:`SessionControl` (threads).

A halted session stays halted until someone resets it. A halting controller
(or an operator's tool) that clears a halt needs two things the bare producer
does not give it: the reset must go to the control topic keyed by the session,
validated the way the processor validates it, and the caller usually needs to
know whether a processor applied it, and with what verdict, before it lets the
agent run again. The processor answers every reset with a ``guardrail_reset``
output (accepted or refused, and which guardrails still hold the session), so
"reset and wait" is: position a reader at the end of the output topic, send
the reset, and take the first ``guardrail_reset`` that answers *this* reset.

Correlation: the processor echoes the reset's ``session``, ``guardrail``,
``by`` and ``ts`` into its answer (see :func:`confirms`). Every reset sent
from here carries a ``ts`` (the wall clock, to the microsecond, unless the
caller set one), so the answer to an older reset of the same session, or to
someone else's reset, is never taken for ours. The reader is positioned before
the reset is sent, so the answer cannot slip past it.

``streamguard reset`` is a thin command over :class:`AsyncSessionControl`.
See ``docs/client.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ..events import GuardrailReset, Output, Reset, ResetTarget, control_decoder, encode
from .defaults import DEFAULT_ALERTS_TOPIC, DEFAULT_CONTROL_TOPIC
from .subscribe import Filter, select_record

# Only reset receipts are decoded; every other output record is judged on its headers.
_RECEIPTS = (Filter(types=("guardrail_reset",)),)


class InvalidReset(ValueError):
    """A reset the processor would refuse to decode (a session id too long, a negative budget...)."""


class TopicNotFound(LookupError):
    """A topic the control client needs does not exist on the cluster.

    ``role`` says which one: ``"control"`` (where resets go) or ``"alerts"``
    (where the processor confirms them), so a caller can name its own setting.
    """

    def __init__(self, topic: str, role: Literal["control", "alerts"], bootstrap_servers: str) -> None:
        super().__init__(f"topic {topic!r} does not exist on {bootstrap_servers}")
        self.topic = topic
        self.role = role
        self.bootstrap_servers = bootstrap_servers


def make_reset(
    session: str,
    guardrail: ResetTarget = "all",
    *,
    add_budget_usd: float | None = None,
    by: str | None = None,
    ts: float | None = None,
) -> Reset:
    """A validated :class:`~streamguard.events.Reset`, stamped with ``ts`` (default: now).

    The timestamp is what tells this reset's confirmation from an older one's,
    so it is always set. Raises :class:`InvalidReset` for a reset the
    processor's control decoder would reject.
    """
    reset = Reset(
        session=session,
        guardrail=guardrail,
        additional_budget_usd=add_budget_usd,
        by=by,
        ts=_now() if ts is None else ts,
    )
    encode_reset(reset)
    return reset


def encode_reset(reset: Reset) -> bytes:
    """The reset's JSON, checked with the processor's own control decoder."""
    try:
        payload = encode(reset)
        control_decoder.decode(payload)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        raise InvalidReset(str(exc)) from None
    return payload


def confirms(output: Output | None, reset: Reset) -> bool:
    """Whether ``output`` is the processor's answer to ``reset``.

    The processor copies the reset's session, guardrail, ``by`` and ``ts`` into
    the ``guardrail_reset`` it emits; two resets of one session differ at least
    in ``ts``.
    """
    return (
        isinstance(output, GuardrailReset)
        and output.session == reset.session
        and output.guardrail == reset.guardrail
        and output.by == reset.by
        and output.ts == reset.ts
    )


def _now() -> float:
    # Microseconds survive the JSON round trip unchanged, so the echo compares equal.
    return round(time.time(), 6)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ResetSent:
    """A reset the brokers acknowledged on the control topic, and where it landed."""

    reset: Reset
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ResetConfirmed:
    """The processor answered the reset.

    ``confirmation.accepted`` says whether it applied it (a refusal says why in
    ``confirmation.reason``); ``still_halted_by`` lists the guardrails that keep
    the session halted all the same. ``value`` is the answer's record as
    published and ``record_ts`` the record's timestamp in seconds, for callers
    that print or forward it.
    """

    sent: ResetSent
    confirmation: GuardrailReset
    value: bytes
    record_ts: float

    @property
    def confirmed(self) -> Literal[True]:
        return True

    @property
    def accepted(self) -> bool:
        return self.confirmation.accepted

    @property
    def still_halted_by(self) -> tuple[str, ...]:
        return tuple(self.confirmation.still_halted_by)


@dataclass(frozen=True, slots=True)
class ResetTimedOut:
    """No answer within ``timeout`` seconds.

    The reset was sent all the same: a processor applies it when it consumes
    the control topic (none is running, or it is far behind).
    """

    sent: ResetSent
    timeout: float

    @property
    def confirmed(self) -> Literal[False]:
        return False


ResetOutcome = ResetConfirmed | ResetTimedOut
"""What waiting for a reset ends with: ``match`` on it, or test ``outcome.confirmed``."""


class PendingReset:
    """A reset sent and registered for its confirmation: ``await pending.wait(timeout)``.

    Returned by :meth:`AsyncSessionControl.request`. The confirmation is
    caught from the moment the reset was sent, whether or not anyone is
    waiting yet; :meth:`wait` returns the same outcome when called again.
    After a time-out the reset is no longer watched.
    """

    __slots__ = ("_control", "_future", "_outcome", "_sent", "reset")

    def __init__(self, control: AsyncSessionControl, reset: Reset) -> None:
        self.reset = reset
        self._control = control
        self._future: asyncio.Future[tuple[GuardrailReset, bytes, float]] = (
            asyncio.get_running_loop().create_future()
        )
        self._future.add_done_callback(_retrieve)
        self._sent: ResetSent | None = None
        self._outcome: ResetOutcome | None = None

    @property
    def sent(self) -> ResetSent:
        """Where the reset landed on the control topic."""
        if self._sent is None:  # pragma: no cover - request() sets it before returning
            raise RuntimeError("the reset has not been sent")
        return self._sent

    def done(self) -> bool:
        """Whether waiting is over: the confirmation arrived, or the wait can only fail."""
        return self._future.done()

    async def wait(self, timeout: float | None = 30.0) -> ResetOutcome:
        """The confirmation, or :class:`ResetTimedOut` after ``timeout`` seconds (None: no limit).

        Raises the reader's error if following the output topic failed, and
        ``RuntimeError`` if the control client was closed meanwhile.
        """
        if self._outcome is not None:
            return self._outcome
        future = self._future
        if not future.done():
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                pass
            except asyncio.CancelledError:
                # The client closed (it cancels the future): the RuntimeError below, not
                # a CancelledError that reads as this task's own cancellation. Unless
                # this task is being cancelled: that goes on.
                task = asyncio.current_task()
                if not future.cancelled() or (task is not None and task.cancelling()):
                    raise
        if future.cancelled():
            raise RuntimeError("the control client was closed before the reset was confirmed")
        if not future.done():
            self._control._forget(self)
            assert timeout is not None  # only a finite wait ends without the future
            self._outcome = ResetTimedOut(self.sent, timeout)
            return self._outcome
        confirmation, value, record_ts = future.result()
        self._outcome = ResetConfirmed(self.sent, confirmation, value, record_ts)
        return self._outcome

    def _resolve(self, confirmation: GuardrailReset, value: bytes, record_ts: float) -> None:
        if not self._future.done():
            self._future.set_result((confirmation, value, record_ts))

    def _fail(self, exc: BaseException | None) -> None:
        if self._future.done():
            return
        if exc is None:
            self._future.cancel()
        else:
            self._future.set_exception(exc)


def _retrieve(future: asyncio.Future[Any]) -> None:
    # A failure nobody waited for is not worth asyncio's "never retrieved" warning;
    # a waiter still gets it raised.
    if not future.cancelled():
        future.exception()


# --------------------------------------------------------------------------- async client


class AsyncSessionControl:
    """Send resets to the control topic and wait for the processor's confirmations.

    ::

        async with AsyncSessionControl("kafka:9092", by="halting-controller") as control:
            outcome = await control.reset("s-42", "watchdog", timeout=30)
            if outcome.confirmed and outcome.accepted and not outcome.still_halted_by:
                await resume(outcome.sent.reset.session)

    :meth:`start` connects: with ``confirm=True`` (the default) it first
    assigns every partition of ``alerts_topic`` to a consumer that joins no
    group and positions it at the end, then starts the producer. A background
    task then follows the output topic for as long as the client is open,
    looking only at ``guardrail_reset`` records of sessions it waits for (the
    others are skipped on their key and headers, never decoded). With
    ``confirm=False`` no consumer is made and only :meth:`publish` works: a
    fire-and-forget reset needs no output topic.

    Resets are sent with ``acks="all"`` and awaited: a method returns once the
    brokers have the reset (:class:`ResetSent` says where), so a controller
    knows the reset will be applied even if no confirmation comes in time.
    Several resets may wait at once, from several tasks.

    ``by`` is the default ``by`` of every reset built here (echoed in the
    confirmation, shown by ``streamguard tail``). Extra keyword arguments go to
    both Kafka clients (security settings, ``client_id``,
    ``request_timeout_ms``); ``producer_options`` and ``consumer_options`` go
    to one only. Connection failures raise aiokafka's errors; a missing topic
    raises :class:`TopicNotFound`.
    """

    def __init__(
        self,
        bootstrap_servers: str = "localhost:9092",
        *,
        control_topic: str = DEFAULT_CONTROL_TOPIC,
        alerts_topic: str = DEFAULT_ALERTS_TOPIC,
        confirm: bool = True,
        by: str | None = None,
        poll_timeout_ms: int = 200,
        producer_options: Mapping[str, Any] | None = None,
        consumer_options: Mapping[str, Any] | None = None,
        **client_options: Any,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.control_topic = control_topic
        self.alerts_topic = alerts_topic
        self.confirm = confirm
        self.by = by
        self._poll_timeout_ms = poll_timeout_ms
        self._producer_options: dict[str, Any] = {
            "bootstrap_servers": bootstrap_servers,
            **client_options,
            "acks": "all",
            "enable_idempotence": False,
            **(producer_options or {}),
        }
        self._consumer_options: dict[str, Any] = {
            "bootstrap_servers": bootstrap_servers,
            **client_options,
            **(consumer_options or {}),
            # A reader of everyone's outputs, not a member of anyone's group.
            "group_id": None,
            "enable_auto_commit": False,
        }
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._reader_error: BaseException | None = None
        # Waiters by record key (the session, as the processor keys its outputs).
        self._waiting: dict[bytes, list[PendingReset]] = {}
        self._started = False
        self._closed = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect (and, with ``confirm``, position the reader at the end of the output topic)."""
        if self._closed:
            raise RuntimeError("the control client is closed")
        if self._started:
            return
        try:
            if self.confirm:
                # The reader first: a confirmation must not be able to precede it.
                consumer = AIOKafkaConsumer(**self._consumer_options)
                self._consumer = consumer
                await consumer.start()
                topic = self.alerts_topic
                names = await consumer.topics()
                partitions = consumer.partitions_for_topic(topic) if topic in names else None
                if not partitions:
                    raise TopicNotFound(topic, "alerts", self.bootstrap_servers)
                tps = [TopicPartition(topic, p) for p in sorted(partitions)]
                consumer.assign(tps)
                await consumer.seek_to_end(*tps)
                for tp in tps:
                    await consumer.position(tp)  # resolve "the end" now, not at the first fetch
            producer = AIOKafkaProducer(**self._producer_options)
            self._producer = producer
            await producer.start()
            cluster = await producer.client.fetch_all_metadata()
            if not cluster.partitions_for_topic(self.control_topic):
                raise TopicNotFound(self.control_topic, "control", self.bootstrap_servers)
        except BaseException:
            await self._stop_clients()
            raise
        if self._consumer is not None:
            self._reader = asyncio.get_running_loop().create_task(
                self._read(self._consumer), name="streamguard-reset-confirmations"
            )
        self._started = True

    async def __aenter__(self) -> AsyncSessionControl:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop following the output topic and disconnect.

        Resets still waiting for a confirmation make their :meth:`PendingReset.wait`
        raise ``RuntimeError``; the resets themselves were sent and stay sent.
        """
        if self._closed:
            return
        self._closed = True
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        self._fail_waiters(None)
        await self._stop_clients()

    async def _stop_clients(self) -> None:
        producer, self._producer = self._producer, None
        consumer, self._consumer = self._consumer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.stop()
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()

    # -------------------------------------------------------------- resetting

    async def publish(self, reset: Reset) -> ResetSent:
        """Send ``reset`` without watching for its confirmation.

        A reset without ``ts`` is stamped now (the processor would otherwise
        use the record's time, and its answer could not be told apart).
        """
        reset = _stamped(reset)
        payload = encode_reset(reset)
        producer = self._require_producer()
        meta = await producer.send_and_wait(
            self.control_topic, value=payload, key=reset.session.encode()
        )
        return ResetSent(reset, meta.partition, meta.offset)

    async def request(self, reset: Reset) -> PendingReset:
        """Send ``reset`` and watch for its confirmation; ``await`` the result's ``wait()``.

        Use it to do something between the send and the confirmation (log
        where the reset went, send more resets); :meth:`reset` is the one-call
        form. Requires ``confirm=True``.
        """
        if not self.confirm:
            raise RuntimeError("this control client does not follow confirmations (confirm=False)")
        if self._reader_error is not None:
            raise self._reader_error
        reset = _stamped(reset)
        payload = encode_reset(reset)
        producer = self._require_producer()
        pending = PendingReset(self, reset)
        key = reset.session.encode()
        # Registered before the send: the confirmation may be read before the
        # producer's acknowledgement comes back.
        self._waiting.setdefault(key, []).append(pending)
        try:
            meta = await producer.send_and_wait(self.control_topic, value=payload, key=key)
        except BaseException:
            self._forget(pending)
            raise
        pending._sent = ResetSent(reset, meta.partition, meta.offset)
        return pending

    async def reset(
        self,
        session: str,
        guardrail: ResetTarget = "all",
        *,
        add_budget_usd: float | None = None,
        by: str | None = None,
        timeout: float | None = 30.0,
    ) -> ResetOutcome:
        """Reset ``guardrail`` of ``session`` and wait up to ``timeout`` seconds for the answer.

        ``add_budget_usd`` raises the session's cost ceiling (``cost_ceiling``
        or ``all``); ``by`` defaults to the client's ``by``. Raises
        :class:`InvalidReset` before sending anything if the processor would
        refuse to decode the reset.
        """
        reset = make_reset(
            session, guardrail, add_budget_usd=add_budget_usd, by=self.by if by is None else by
        )
        pending = await self.request(reset)
        return await pending.wait(timeout)

    # -------------------------------------------------------------- internals

    def _require_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("the control client is not started (use `async with` or start())")
        return self._producer

    def _forget(self, pending: PendingReset) -> None:
        key = pending.reset.session.encode()
        waiters = self._waiting.get(key)
        if waiters is None:
            return
        with contextlib.suppress(ValueError):
            waiters.remove(pending)
        if not waiters:
            del self._waiting[key]

    def _fail_waiters(self, exc: BaseException | None) -> None:
        waiting, self._waiting = self._waiting, {}
        for waiters in waiting.values():
            for pending in waiters:
                pending._fail(exc)

    async def _read(self, consumer: AIOKafkaConsumer) -> None:
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=self._poll_timeout_ms)
                if not self._waiting:
                    continue
                for records in batch.values():
                    for record in records:
                        self._offer(record)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Nothing more can be confirmed: tell every waiter now rather than at its deadline.
            self._reader_error = exc
            self._fail_waiters(exc)

    def _offer(self, record: Any) -> None:
        waiters = self._waiting.get(record.key)
        if not waiters:
            return
        try:
            selected, output = select_record(record, _RECEIPTS)
        except msgspec.DecodeError:
            return  # not ours to judge: a subscriber of the topic reports undecodable records
        if not selected or not isinstance(output, GuardrailReset):
            return
        for pending in list(waiters):
            if confirms(output, pending.reset):
                pending._resolve(output, record.value, record.timestamp / 1000.0)
                self._forget(pending)


def _stamped(reset: Reset) -> Reset:
    return reset if reset.ts is not None else msgspec.structs.replace(reset, ts=_now())


# --------------------------------------------------------------------------- sync client


class SessionControl:
    """The synchronous control client: an :class:`AsyncSessionControl` on its own thread.

    ::

        with SessionControl("kafka:9092", by="ops-script") as control:
            outcome = control.reset("s-42", "watchdog", timeout=30)

    The constructor connects (raising what :meth:`AsyncSessionControl.start`
    raises); each method blocks until the reset is sent and, for
    :meth:`reset`, answered or timed out. Thread-safe: calls from several
    threads run on the one background loop.
    """

    def __init__(self, bootstrap_servers: str = "localhost:9092", **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="streamguard-control", daemon=True)
        self._thread.start()
        self._closed = False
        try:
            self._async = self._call(_build(bootstrap_servers, options))
        except BaseException:
            self._stop_loop()
            raise

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def publish(self, reset: Reset) -> ResetSent:
        """Send ``reset`` without waiting for its confirmation; see :meth:`AsyncSessionControl.publish`."""
        result: ResetSent = self._call(self._async.publish(reset))
        return result

    def reset(
        self,
        session: str,
        guardrail: ResetTarget = "all",
        *,
        add_budget_usd: float | None = None,
        by: str | None = None,
        timeout: float | None = 30.0,
    ) -> ResetOutcome:
        """Reset and wait for the answer; see :meth:`AsyncSessionControl.reset`."""
        outcome: ResetOutcome = self._call(
            self._async.reset(session, guardrail, add_budget_usd=add_budget_usd, by=by, timeout=timeout)
        )
        return outcome

    def close(self) -> None:
        """Disconnect and stop the thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._async.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> SessionControl:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _build(bootstrap_servers: str, options: dict[str, Any]) -> AsyncSessionControl:
    # Made on the background loop, so its futures and tasks belong to that loop.
    control = AsyncSessionControl(bootstrap_servers, **options)
    await control.start()
    return control
