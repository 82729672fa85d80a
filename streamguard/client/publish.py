"""Publishing agent events: :class:`AsyncPublisher` (asyncio) and :class:`Publisher` (threads).

See the package docstring (:mod:`streamguard.client`) for the buffering,
``seq`` and partitioning rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, KafkaTimeoutError

from ..events import (
    AgentEvent,
    ControlOnAgentStream,
    FinalAnswer,
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
)
from .defaults import DEFAULT_EVENTS_TOPIC

log = logging.getLogger("streamguard.client")

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
    named: Any = event.get("session") if isinstance(event, Mapping) else getattr(event, "session", None)
    if not isinstance(named, str) or not named:
        raise InvalidEvent("the event has no session")
    return named, data


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

