"""Client library: publish agent events, and subscribe to trips to halt agents.

Three classes:

* :class:`AsyncPublisher`, for asyncio agent runtimes. Events go into a
  bounded in-memory buffer; a background task drains it into an aiokafka
  producer (``acks="all"``, ``enable_idempotence=False``, batching through
  ``linger_ms`` / ``max_batch_size``). Publishing is a plain method call that
  never awaits the network, so a slow or absent broker never stalls the agent.
  When the buffer is full the **oldest** buffered event is dropped and counted
  in ``publisher.stats.dropped``: the newest events describe what the agent is
  doing now, which is what the watchdog needs when the broker comes back, and
  dropping old events leaves the per-session ``seq`` order intact (the
  processor only skips a ``seq`` that is not above the last one applied).
* :class:`Publisher`, the same for synchronous runtimes: an
  :class:`AsyncPublisher` on a background thread with its own event loop.
  Its methods return after a put into the bounded buffer.
* :class:`TripSubscriber`, for halting controllers: consumes the output topic
  in a consumer group, selects records by their ``type`` / ``signal`` /
  ``guardrail`` headers without decoding the others, decodes the selected ones
  into output Structs, drops duplicates by their deterministic ``id``, and
  commits a record's offset only after the code handling it has returned
  (at-least-once).

Each publisher has helpers (``tool_call``, ``tool_result``, ``text``,
``turn_start``, ``turn_end``, ``usage``, ``final_answer``) that fill ``agent``,
``ts`` (wall clock) and ``seq``. ``seq`` is kept per session by the publisher
and increases by one per event; a session's first ``seq`` is the current time
in microseconds (and never below a value already handed out), so a restarted
runtime, or a session whose counter was forgotten, keeps publishing values
above the ones the processor has already applied.

Partitioning: records are keyed by session id and aiokafka's default
partitioner is murmur2, the hash the Java client uses. Every publisher of the
events topic must agree on it, or one session's events could be split over
two partitions and reach two processor instances. Publishers built on
librdkafka (confluent-kafka, rdkafka-based Go and Rust clients) default to a
CRC32-based partitioner: set ``partitioner=murmur2_random`` on them.

See ``docs/client.md`` for examples.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Literal

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError, KafkaTimeoutError

from .events import (
    AgentEvent,
    Alert,
    ControlOnAgentStream,
    FinalAnswer,
    GuardrailTrip,
    Output,
    Text,
    TextRole,
    ToolCall,
    ToolKind,
    ToolResult,
    TurnEnd,
    TurnStart,
    UnknownEventType,
    Usage,
    decode_agent_event,
    encode,
    output_decoder,
)

__all__ = [
    "DEFAULT_ALERTS_TOPIC",
    "DEFAULT_CONTROL_TOPIC",
    "DEFAULT_EVENTS_TOPIC",
    "AsyncPublisher",
    "Filter",
    "InvalidEvent",
    "Publisher",
    "PublisherStats",
    "SubscriberStats",
    "TripSubscriber",
    "encode_event",
    "header_decision",
    "select_record",
]

log = logging.getLogger("streamguard.client")

DEFAULT_EVENTS_TOPIC = "agent.events"
DEFAULT_CONTROL_TOPIC = "streamguard.control"
DEFAULT_ALERTS_TOPIC = "streamguard.alerts"

_json = msgspec.json.Encoder()


def _error_text(exc: BaseException) -> str:
    name, text = type(exc).__name__, str(exc).strip()
    if not text:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


class InvalidEvent(ValueError):
    """An event that does not fit contract v1 (or is not an agent event)."""


def encode_event(event: AgentEvent | Mapping[str, Any], *, validate: bool = True) -> tuple[str, bytes]:
    """Encode one agent event; return ``(session, json_bytes)``.

    ``event`` is an agent-event Struct or a mapping with a ``type`` field.
    With ``validate`` the bytes are decoded again with the processor's own
    decoder, so whatever this accepts the processor accepts; fields a mapping
    adds beyond the contract are kept (the processor ignores them). Raises
    :class:`InvalidEvent`.
    """
    try:
        if isinstance(event, msgspec.Struct):
            data = encode(event)
        elif isinstance(event, Mapping):
            data = _json.encode(event)
        else:
            raise InvalidEvent(f"expected an event Struct or a mapping, not {type(event).__name__}")
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, InvalidEvent):
            raise
        raise InvalidEvent(f"cannot encode the event: {exc}") from None
    if validate:
        try:
            session = decode_agent_event(data).session
        except (UnknownEventType, ControlOnAgentStream, msgspec.DecodeError) as exc:
            raise InvalidEvent(str(exc)) from None
        return session, data
    session = event.get("session") if isinstance(event, Mapping) else getattr(event, "session", None)
    if not isinstance(session, str) or not session:
        raise InvalidEvent("the event has no session")
    return session, data


# --------------------------------------------------------------------------- publisher


class PublisherStats:
    """Live counters of a publisher (read them any time; they only grow).

    * ``accepted``: events taken into the buffer;
    * ``dropped``: events discarded without being handed to Kafka: the oldest
      buffered event when a new one arrived at a full buffer, and whatever was
      still buffered when ``close()`` gave up;
    * ``sent``: events handed to the Kafka producer;
    * ``published``: events the brokers acknowledged;
    * ``failed``: events handed to Kafka whose delivery failed (after the
      producer's own retries, within ``request_timeout_ms``), or that Kafka
      refused (e.g. too large);
    * ``connected``: whether the producer is currently started;
    * ``last_error``: the last connection or delivery error, as text.
    """

    __slots__ = ("accepted", "connected", "dropped", "failed", "last_error", "published", "sent")

    def __init__(self) -> None:
        self.accepted = 0
        self.dropped = 0
        self.sent = 0
        self.published = 0
        self.failed = 0
        self.connected = False
        self.last_error: str | None = None

    @property
    def in_flight(self) -> int:
        """Handed to Kafka, not yet acknowledged nor failed."""
        return self.sent - self.published - self.failed

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "dropped": self.dropped,
            "sent": self.sent,
            "published": self.published,
            "failed": self.failed,
            "in_flight": self.in_flight,
            "connected": self.connected,
            "last_error": self.last_error,
        }

    def __repr__(self) -> str:
        return f"PublisherStats({self.as_dict()})"


class _EventHelpers:
    """``tool_call(...)`` and friends, shared by both publishers.

    Subclasses provide ``agent`` and ``_publish_built(cls, session, fields)``,
    which assigns ``seq`` and buffers the event atomically.
    """

    agent: str | None

    def _publish_built(self, cls: type[Any], session: str, fields: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _common(
        self, agent: str | None, ts: float | None, turn: str | int | None
    ) -> dict[str, Any]:
        return {
            "agent": agent if agent is not None else self.agent,
            "ts": time.time() if ts is None else ts,
            "turn": turn,
        }

    def tool_call(
        self,
        session: str,
        tool: str,
        args: Any = None,
        *,
        call_id: str | None = None,
        kind: ToolKind | None = None,
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> ToolCall:
        """Publish a ``tool_call``; returns the event as sent."""
        fields = self._common(agent, ts, turn)
        fields.update(tool=tool, args=args, call_id=call_id, kind=kind)
        return self._publish_built(ToolCall, session, fields)

    def tool_result(
        self,
        session: str,
        tool: str,
        *,
        result: Any = None,
        error: str | None = None,
        call_id: str | None = None,
        no_op: bool = False,
        result_digest: str | None = None,
        result_bytes: int | None = None,
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> ToolResult:
        """Publish a ``tool_result`` (``error`` non-empty means the call failed)."""
        fields = self._common(agent, ts, turn)
        fields.update(
            tool=tool,
            result=result,
            error=error,
            call_id=call_id,
            no_op=no_op,
            result_digest=result_digest,
            result_bytes=result_bytes,
        )
        return self._publish_built(ToolResult, session, fields)

    def text(
        self,
        session: str,
        text: str | None = None,
        *,
        chars: int | None = None,
        role: TextRole = "assistant",
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> Text:
        """Publish a ``text`` event (or, with ``chars`` only, its length)."""
        fields = self._common(agent, ts, turn)
        fields.update(text=text, chars=chars, role=role)
        return self._publish_built(Text, session, fields)

    def turn_start(
        self,
        session: str,
        *,
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> TurnStart:
        return self._publish_built(TurnStart, session, self._common(agent, ts, turn))

    def turn_end(
        self,
        session: str,
        *,
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> TurnEnd:
        return self._publish_built(TurnEnd, session, self._common(agent, ts, turn))

    def usage(
        self,
        session: str,
        *,
        model: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cost_usd: float | None = None,
        context_window: int | None = None,
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> Usage:
        """Publish a ``usage`` event: one model call's tokens and cost."""
        fields = self._common(agent, ts, turn)
        fields.update(
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
            context_window=context_window,
        )
        return self._publish_built(Usage, session, fields)

    def final_answer(
        self,
        session: str,
        text: str | None = None,
        *,
        turn: str | int | None = None,
        agent: str | None = None,
        ts: float | None = None,
    ) -> FinalAnswer:
        fields = self._common(agent, ts, turn)
        fields["text"] = text
        return self._publish_built(FinalAnswer, session, fields)


class AsyncPublisher(_EventHelpers):
    """Publish agent events to Kafka without ever blocking the agent.

    ::

        async with AsyncPublisher("kafka:9092", agent="triage-bot") as publisher:
            publisher.tool_call("s-42", "read_file", {"path": "main.go"})
            ...
        # leaving the block flushes for up to ``close_timeout`` seconds

    ``publish`` and the helpers are ordinary (non-async) methods: they encode,
    validate and append to the buffer, and return. A background task, started
    by :meth:`start` (or by the first publish made inside a running event
    loop), connects to the brokers, retrying with backoff while they are
    unreachable, and drains the buffer. Invalid events raise
    :class:`InvalidEvent` at once; transport problems never raise into the
    caller, they show in :attr:`stats`.

    Extra keyword arguments go to :class:`aiokafka.AIOKafkaProducer` (security
    settings, ``client_id``, ``request_timeout_ms``, ``compression_type``...);
    they may override the defaults ``acks="all"`` and
    ``enable_idempotence=False``. The partitioner is aiokafka's default
    (murmur2), which is what the processor assumes.
    """

    def __init__(
        self,
        bootstrap_servers: str = "localhost:9092",
        *,
        topic: str = DEFAULT_EVENTS_TOPIC,
        agent: str | None = None,
        buffer_size: int = 10_000,
        linger_ms: int = 10,
        max_batch_size: int = 65_536,
        validate: bool = True,
        max_sessions: int = 100_000,
        retry_backoff: tuple[float, float] = (0.1, 5.0),
        close_timeout: float = 10.0,
        **producer_options: Any,
    ) -> None:
        if buffer_size < 1:
            raise ValueError("buffer_size must be at least 1")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.topic = topic
        self.agent = agent
        self.buffer_size = buffer_size
        self.validate = validate
        self.close_timeout = close_timeout
        self.stats = PublisherStats()
        self._producer_options: dict[str, Any] = {
            "bootstrap_servers": bootstrap_servers,
            "acks": "all",
            "enable_idempotence": False,
            "linger_ms": linger_ms,
            "max_batch_size": max_batch_size,
            **producer_options,
        }
        self._backoff_min, self._backoff_max = retry_backoff
        self._max_sessions = max_sessions
        # Guards the buffer, the counters that callers touch and the seq table,
        # so that seq order and buffer order agree even with several threads.
        self._lock = threading.Lock()
        self._buffer: deque[tuple[bytes, bytes]] = deque()
        self._seqs: OrderedDict[str, int] = OrderedDict()
        self._seq_high = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._sleeping = False
        self._closing = False
        self._closed = False
        self._producer: AIOKafkaProducer | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the background drain task. Returns at once: no network I/O here."""
        if self._closed:
            raise RuntimeError("the publisher is closed")
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._wakeup = asyncio.Event()
        self._task = self._loop.create_task(self._drain(), name="streamguard-publisher")

    async def __aenter__(self) -> AsyncPublisher:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(self.close_timeout)

    @property
    def buffered(self) -> int:
        """Events waiting in the buffer (not yet handed to Kafka)."""
        return len(self._buffer)

    async def close(self, timeout: float | None = None) -> bool:
        """Deliver what can be delivered within ``timeout`` seconds, then stop.

        Returns True when every accepted event was acknowledged. Events still
        buffered at the deadline are counted in ``stats.dropped``; events
        handed to Kafka but not acknowledged are counted in ``stats.failed``.
        Publishing after ``close`` raises ``RuntimeError``.
        """
        timeout = self.close_timeout if timeout is None else timeout
        if self._closed:
            return self._all_delivered()
        self._closing = True
        deadline = time.monotonic() + max(timeout, 0.0)
        task = self._task
        if task is not None:
            self._wake()
            try:
                await asyncio.wait_for(asyncio.shield(task), max(deadline - time.monotonic(), 0))
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            except Exception:  # pragma: no cover - the drain task logs its own errors
                pass
        producer = self._producer
        self._producer = None
        if producer is not None:
            await self._stop_producer(producer, deadline)
        with self._lock:
            left = len(self._buffer)
            self._buffer.clear()
            self.stats.dropped += left
            self._closed = True
        self.stats.connected = False
        return self._all_delivered()

    def _all_delivered(self) -> bool:
        s = self.stats
        return s.dropped == 0 and s.failed == 0 and s.published == s.accepted

    async def _stop_producer(self, producer: AIOKafkaProducer, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            with contextlib.suppress(TimeoutError, KafkaError):
                await asyncio.wait_for(producer.flush(), remaining)
        # Whatever is still in flight now will not be waited for: fail it so
        # that stop() does not sit out the producer's request timeout.
        accumulator = getattr(producer, "_message_accumulator", None)
        if accumulator is not None and hasattr(accumulator, "fail_all"):
            accumulator.fail_all(KafkaError("the publisher was closed before delivery"))
        with contextlib.suppress(TimeoutError, KafkaError, OSError):
            await asyncio.wait_for(producer.stop(), 5.0)

    # ------------------------------------------------------------- publishing

    def publish(self, event: AgentEvent | Mapping[str, Any]) -> None:
        """Buffer one agent event (a Struct, or a mapping validated on the way).

        The event is sent as given: no ``seq`` or ``ts`` is filled in (the
        helpers do that). Raises :class:`InvalidEvent` for an event the
        processor would reject; never waits for the network.
        """
        session, data = encode_event(event, validate=self.validate)
        with self._lock:
            self._append_locked(session.encode(), data)
        self._after_append()

    def next_seq(self, session: str) -> int:
        """Reserve the next ``seq`` of ``session`` (for events built by hand)."""
        with self._lock:
            return self._next_seq_locked(session)

    def forget(self, session: str) -> None:
        """Drop a finished session's ``seq`` counter (it restarts above every value handed out)."""
        with self._lock:
            self._seqs.pop(session, None)

    def _next_seq_locked(self, session: str) -> int:
        seqs = self._seqs
        last = seqs.get(session)
        if last is None:
            value = max(time.time_ns() // 1000, self._seq_high + 1)
            if len(seqs) >= self._max_sessions:
                seqs.popitem(last=False)
        else:
            value = last + 1
            seqs.move_to_end(session)
        seqs[session] = value
        if value > self._seq_high:
            self._seq_high = value
        return value

    def _publish_built(self, cls: type[Any], session: str, fields: dict[str, Any]) -> Any:
        with self._lock:
            fields["seq"] = self._next_seq_locked(session)
            event = cls(session=session, **fields)
            _, data = encode_event(event, validate=self.validate)
            self._append_locked(session.encode(), data)
        self._after_append()
        return event

    def _append_locked(self, key: bytes, value: bytes) -> None:
        if self._closed or self._closing:
            raise RuntimeError("the publisher is closed")
        buffer = self._buffer
        if len(buffer) >= self.buffer_size:
            buffer.popleft()
            self.stats.dropped += 1
        buffer.append((key, value))
        self.stats.accepted += 1

    def _after_append(self) -> None:
        if self._task is None:
            # Started lazily by the first publish made inside a running loop.
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            if self._loop is None:
                self._loop = loop
                self._loop_thread = threading.get_ident()
                self._wakeup = asyncio.Event()
                self._task = loop.create_task(self._drain(), name="streamguard-publisher")
            return
        self._wake()

    def _wake(self) -> None:
        if not self._sleeping:
            return
        self._sleeping = False
        wakeup, loop = self._wakeup, self._loop
        if wakeup is None or loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            wakeup.set()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(wakeup.set)

    # ----------------------------------------------------------------- drain

    async def _drain(self) -> None:
        assert self._wakeup is not None
        wakeup = self._wakeup
        backoff = self._backoff_min
        buffer = self._buffer
        try:
            while True:
                if not buffer:
                    if self._closing:
                        return
                    wakeup.clear()
                    self._sleeping = True
                    if not buffer and not self._closing:
                        await wakeup.wait()
                    self._sleeping = False
                    continue
                producer = self._producer
                if producer is None:
                    producer = await self._connect()
                    if producer is None:
                        await self._pause(backoff)
                        backoff = min(backoff * 2, self._backoff_max)
                        continue
                    backoff = self._backoff_min
                with self._lock:
                    if not buffer:
                        continue
                    key, value = buffer.popleft()
                try:
                    future = await producer.send(self.topic, value=value, key=key)
                except asyncio.CancelledError:
                    self._requeue(key, value)  # close() gave up: counted as dropped there
                    raise
                except Exception as exc:
                    self.stats.last_error = _error_text(exc)
                    if isinstance(exc, KafkaTimeoutError) or getattr(exc, "retriable", False):
                        # No metadata or a full batch: the cluster is slow or away.
                        self._requeue(key, value)
                        await self._pause(backoff)
                        backoff = min(backoff * 2, self._backoff_max)
                    else:
                        self.stats.sent += 1
                        self.stats.failed += 1
                        log.warning("event refused: %s", self.stats.last_error)
                    continue
                self.stats.sent += 1
                future.add_done_callback(self._delivered)
        except Exception:  # pragma: no cover - a bug, not a transport problem
            log.exception("the publisher's drain task failed")
            raise

    async def _connect(self) -> AIOKafkaProducer | None:
        producer = AIOKafkaProducer(**self._producer_options)
        try:
            await producer.start()
        except (KafkaError, OSError) as exc:
            self.stats.last_error = _error_text(exc)
            self.stats.connected = False
            with contextlib.suppress(Exception):
                await producer.stop()
            return None
        except BaseException:
            with contextlib.suppress(Exception):
                await producer.stop()
            raise
        self._producer = producer
        self.stats.connected = True
        return producer

    async def _pause(self, seconds: float) -> None:
        """Back off, but come back at once when ``close`` starts."""
        if self._closing:
            # Closing: keep trying until close's deadline cancels us, but
            # without spinning.
            await asyncio.sleep(min(seconds, 0.05))
            return
        await asyncio.sleep(seconds)

    def _requeue(self, key: bytes, value: bytes) -> None:
        with self._lock:
            if len(self._buffer) >= self.buffer_size:
                self.stats.dropped += 1  # the buffer refilled meanwhile: this one is the oldest
            else:
                self._buffer.appendleft((key, value))

    def _delivered(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            self.stats.failed += 1
            return
        exc = future.exception()
        if exc is None:
            self.stats.published += 1
        else:
            self.stats.failed += 1
            self.stats.last_error = _error_text(exc)


class Publisher(_EventHelpers):
    """The synchronous publisher: an :class:`AsyncPublisher` on its own thread.

    ::

        publisher = Publisher("kafka:9092", agent="triage-bot")
        publisher.tool_call("s-42", "read_file", {"path": "main.go"})
        ...
        publisher.close(timeout=5)

    Every method returns after appending to the bounded buffer (dropping the
    oldest event when it is full); connecting, batching and retries happen on
    the background thread. The thread is a daemon: call :meth:`close` (or use
    ``with``) before the process exits, or buffered events are lost.
    Thread-safe: several threads may publish through one instance.
    """

    def __init__(self, bootstrap_servers: str = "localhost:9092", **options: Any) -> None:
        self._async = AsyncPublisher(bootstrap_servers, **options)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="streamguard-publisher", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        self._closed = False

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._async.start())
            self._ready.set()
            loop.run_forever()
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    @property
    def agent(self) -> str | None:  # type: ignore[override]
        return self._async.agent

    @property
    def topic(self) -> str:
        return self._async.topic

    @property
    def stats(self) -> PublisherStats:
        return self._async.stats

    @property
    def buffered(self) -> int:
        return self._async.buffered

    def publish(self, event: AgentEvent | Mapping[str, Any]) -> None:
        """Buffer one agent event; see :meth:`AsyncPublisher.publish`."""
        self._async.publish(event)

    def next_seq(self, session: str) -> int:
        return self._async.next_seq(session)

    def forget(self, session: str) -> None:
        self._async.forget(session)

    def _publish_built(self, cls: type[Any], session: str, fields: dict[str, Any]) -> Any:
        return self._async._publish_built(cls, session, fields)

    def close(self, timeout: float | None = None) -> bool:
        """Flush for up to ``timeout`` seconds, stop the thread; True if all was delivered."""
        if self._closed:
            return self._async._all_delivered()
        self._closed = True
        timeout = self._async.close_timeout if timeout is None else timeout
        delivered = False
        if self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._async.close(timeout), self._loop)
            try:
                delivered = future.result(timeout + 10.0)
            finally:
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(10.0)
        return delivered

    def __enter__(self) -> Publisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --------------------------------------------------------------------------- subscriber


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
        self.subscriber._assigned = set(assigned)


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
        try:
            await consumer.start()
        except BaseException:
            with contextlib.suppress(Exception):
                await consumer.stop()
            raise
        self._consumer = consumer

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

    async def _revoked(self, revoked: set[TopicPartition]) -> None:
        with contextlib.suppress(KafkaError, OSError):
            await self._commit(only=revoked)
        self._assigned -= revoked
        for tp in revoked:
            self._marks.pop(tp, None)
        if self._pending:
            self._pending = deque((tp, r) for tp, r in self._pending if tp not in revoked)
